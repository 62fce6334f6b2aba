#!/usr/bin/env python3
"""A torch.profiler trace of one step (bench/grid.py's GRID_TORCH_TRACE), as a
timeline: for each stream that did work, how busy it was in each slice of the
step, and for the job's stream (the one with the most items) the time it
waited with its next kernel already launched against the time its thread was
late. Read it to see whether the link, the job's kernels or the job's thread
set the pace of each part of a step. With START_MS and END_MS (from the
step's first GPU item), it then lists every GPU item that overlaps that
window, in order of start: what the job's stream waited for there.
    trace_timeline.py TRACE.json[.gz] [SLICE_MS [START_MS END_MS]]"""
import collections
import gzip
import json
import sys


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    if len(sys.argv) < 2:
        sys.exit("usage: trace_timeline.py TRACE.json[.gz] [SLICE_MS] (--help says more)")
    path = sys.argv[1]
    width = float(sys.argv[2]) if len(sys.argv) > 2 else 25.0
    window = (float(sys.argv[3]), float(sys.argv[4])) if len(sys.argv) > 4 else None
    t = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    t0 = min(e["ts"] for e in gpu)
    end = max(e["ts"] + e["dur"] for e in gpu)
    streams = collections.defaultdict(list)
    for e in gpu:
        streams[e["tid"]].append(e)
    slices = int((end - t0) / 1e3 / width) + 1
    order = sorted(streams.items(), key=lambda kv: -len(kv[1]))
    job = order[0][1]
    launch = {e["args"].get("correlation"): e for e in ev
              if e.get("cat") == "cuda_runtime" and "args" in e}
    waited, late = [0.0] * slices, [0.0] * slices
    job.sort(key=lambda e: e["ts"])
    for a, b in zip(job, job[1:]):
        gap = b["ts"] - (a["ts"] + a["dur"])
        if gap <= 50:
            continue
        r = launch.get(b["args"].get("correlation"))
        bucket = late if r is not None and r["ts"] + r["dur"] > a["ts"] + a["dur"] else waited
        bucket[min(slices - 1, int((a["ts"] + a["dur"] - t0) / 1e3 / width))] += gap / 1e3
    print(f"{(end - t0) / 1e3:.1f} ms of GPU work; busy % of each {width:g} ms slice by stream")
    head = "slice(ms)  " + " ".join(f"{'s' + str(tid):>6}" for tid, _ in order) + "   job waited / late (ms)"
    print(head)
    busy = {tid: [0.0] * slices for tid, _ in order}
    for tid, v in order:
        for e in v:
            s, f = (e["ts"] - t0) / 1e3, (e["ts"] + e["dur"] - t0) / 1e3
            k = int(s / width)
            while s < f and k < slices:
                cut = min(f, (k + 1) * width)
                busy[tid][k] += cut - s
                s, k = cut, k + 1
    for k in range(slices):
        print(f"{k * width:7.0f}    " + " ".join(f"{100 * busy[tid][k] / width:6.0f}" for tid, _ in order)
              + f"   {waited[k]:6.1f} / {late[k]:5.1f}")
    for tid, v in order:
        names = collections.Counter(e["name"][:48] for e in v).most_common(2)
        print(f"s{tid}: {len(v)} items, busy {sum(e['dur'] for e in v) / 1e3:.1f} ms, {names}")
    if window is not None:
        print(f"GPU items from {window[0]:g} to {window[1]:g} ms (start, duration in ms; stream; "
              "bytes for copies)")
        for e in sorted(gpu, key=lambda e: e["ts"]):
            s, f = (e["ts"] - t0) / 1e3, (e["ts"] + e["dur"] - t0) / 1e3
            if f < window[0] or s > window[1]:
                continue
            size = e.get("args", {}).get("bytes")
            what = f"{size} B" if size is not None else e["name"][:60]
            print(f"{s:9.3f} {e['dur'] / 1e3:8.3f}  s{e['tid']}  {e['cat']:10s} {what}")


if __name__ == "__main__":
    main()
