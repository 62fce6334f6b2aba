#!/usr/bin/env python3
"""Plot step time and GPU residency over time for one run.

usage: plot_timeline.py REPORT.json TRAIN.json OUT.png [TITLE]

REPORT is a umpol runtime report (UMPOL_REPORT) of one rank, TRAIN the --json
output of examples/pytorch/train.py for the same run. The upper panel shows
each step's time; the lower the bytes umpol held placed on the GPU (budgeted
live blocks) after every prefetch and eviction, with the budget as a line and
optimizer steps shaded."""
import json
import sys

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)
if len(sys.argv) < 4:
    sys.exit("usage: plot_timeline.py REPORT.json TRAIN.json OUT.png [TITLE] (--help says more)")

import matplotlib  # noqa: E402 (after --help, which needs no plotting)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

report, train, out = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3])
title = sys.argv[4] if len(sys.argv) > 4 else "umpol run"
tl = report["timeline"]
phases = [p["name"] for p in report["phases"]]
events = tl["events"]
fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), gridspec_kw={"height_ratios": [1, 2]})

steps = train["step_s"]
top.bar(range(len(steps)), [s * 1e3 for s in steps], color="#4477aa")
top.set_xlabel("step")
top.set_ylabel("step time (ms)")
top.set_title(title)

if events:
    device = events[0]["device"]
    ts = [e["t_ns"] / 1e9 for e in events if e["device"] == device]
    resident = [e["resident_bytes"] / 2**30 for e in events if e["device"] == device]
    bottom.step(ts, resident, where="post", color="#228833", label=f"placed on GPU {device} (GiB)")
    evict_t = [e["t_ns"] / 1e9 for e in events if e["kind"] == "evict" and e["device"] == device]
    if evict_t:
        bottom.plot(evict_t, [0] * len(evict_t), "|", color="#ee6677", markersize=8, label="eviction")
    budget = next((d["budget_bytes"] for d in report["devices"] if d["device"] == device), None)
    if budget:
        bottom.axhline(budget / 2**30, color="#aa3377", linestyle="--", label="budget")
for span in tl["spans"]:
    if phases[span["phase"]].startswith("optimizer") and span["end_ns"] is not None:
        bottom.axvspan(span["start_ns"] / 1e9, span["end_ns"] / 1e9, color="#ccbb44", alpha=0.3, lw=0)
bottom.set_xlabel("time since the first phase (s); optimizer steps shaded")
bottom.set_ylabel("GiB")
bottom.legend(loc="upper right")
fig.tight_layout()
fig.savefig(out, dpi=110)
print(f"wrote {out}")
