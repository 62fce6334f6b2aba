#!/usr/bin/env python3
"""The forward pass of a torch.profiler trace (bench/grid.py's GRID_TORCH_TRACE):
each stream's GPU work, and the gaps on the job's stream, split by whether the
kernel after a gap was launched before the one before it ended (the stream
waited for something) or after (the job's thread was late).
    trace_gaps.py TRACE.json[.gz] FORWARD_MS"""
import collections
import gzip
import json
import sys

path, forward_ms = sys.argv[1], float(sys.argv[2])
t = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
t0 = min(e["ts"] for e in gpu)
streams = collections.defaultdict(list)
for e in gpu:
    streams[e["tid"]].append(e)
for tid, v in sorted(streams.items(), key=lambda kv: -len(kv[1])):
    v.sort(key=lambda e: e["ts"])
    names = collections.Counter(e["name"][:40] for e in v).most_common(1)
    print(f"stream {tid}: {len(v)} items, busy {sum(e['dur'] for e in v) / 1e3:.1f} ms, "
          f"{(v[0]['ts'] - t0) / 1e3:.1f}-{(v[-1]['ts'] + v[-1]['dur'] - t0) / 1e3:.1f} ms, most {names}")
job = max(streams.values(), key=len)
fw = [e for e in job if (e["ts"] - t0) / 1e3 < forward_ms]
launch = {e["args"].get("correlation"): e for e in ev if e.get("cat") == "cuda_runtime" and "args" in e}
late = waited = 0.0
for a, b in zip(fw, fw[1:]):
    gap = (b["ts"] - (a["ts"] + a["dur"])) / 1e3
    if gap > 0.3:
        r = launch.get(b["args"].get("correlation"))
        if r is not None and r["ts"] + r["dur"] > a["ts"] + a["dur"]:
            late += gap
        else:
            waited += gap
print(f"forward ({forward_ms} ms): job's stream busy {sum(e['dur'] for e in fw) / 1e3:.1f} ms; "
      f"gaps over 0.3 ms: {late:.1f} ms with the next kernel launched late, {waited:.1f} ms with it "
      "launched already (the stream waited)")
