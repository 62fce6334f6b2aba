#!/bin/sh
# bench/grid_summary.py against a recorded grid (bench/results/2026-11-23-h100-grid-8ef32ed,
# two models from two calls): it must make the committed grid.* keys and summary again,
# byte for byte, each model's bound must use its own call's pinned-copy bandwidth, and the
# bound in the job's order must add the AdamW step's reads the card cannot hold, and the
# bound both ways at once must use the rate its call measured for that.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
r="$top_srcdir/bench/results/2026-11-23-h100-grid-8ef32ed"
(cd "$r" && python3 "$top_srcdir/bench/grid_summary.py" "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04" \
    "34af722 (L16), 8ef32ed (L32)" "$tmp/latest-grid.json" l16 l32) >"$tmp/summary.md" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; fail "grid_summary.py failed"; }
cmp -s "$tmp/latest-grid.json" "$r/latest-grid.json" && pass || fail "grid_summary.py: grid.* keys differ from the recorded ones"
cmp -s "$tmp/summary.md" "$r/summary.md" && pass || fail "grid_summary.py: summary differs from the recorded one"
python3 - "$tmp/latest-grid.json" <<'PY' && pass || fail "grid_summary.py: a bound not from its own call's bandwidth"
import json, sys
cells = {(c["model_layers"], c["budget_bytes"]): c for c in json.load(open(sys.argv[1]))["grid.cells"]}
# 1.75B at 9.79 GiB: 38.60 GiB in a step over the 49.8 GB/s host->GPU of its own call (l32/),
# not the 54.9 of the 0.94B model's call.
c = cells[(32, 10515120128)]
assert abs(c["bound_ms"] - 831.5) < 0.5, c["bound_ms"]
# 1.75B at 18.38 GiB, in the job's order: checkpointing's 399.7 ms, then the AdamW step's
# 16 x 1.75e9 bytes less the card's 18.00 GB peak over that call's 49.8 GB/s: 200.6 ms more.
c = cells[(32, 19735144038)]
assert abs(c["bound_in_order_ms"] - (399.7 + (16 * 1750206464 - 18004049920) / 49.843e6)) < 0.5, c
# Where the link bound is above it, the in-order bound is the link bound.
c = cells[(32, 10515120128)]
assert c["bound_in_order_ms"] == c["bound_ms"], c
# Both ways at once: the 34.14 GB both directions share at the 40.13 GB/s each way its call
# measured for that, the 7.31 GB more in at the 49.84 one way, above the full-duplex bound.
assert abs(c["bound_two_way_ms"] - (34136164988 / 40.127e6 + (41442115458 - 34136164988) / 49.843e6)) < 0.5, c
assert c["bound_two_way_ms"] > c["bound_ms"]
PY
# A bandwidth.json that also counted each one-way copy's other direction (its read
# requests): the summary says so beside the counts in the copy's own direction.
mkdir -p "$tmp/rev" && cp -r "$r/l16" "$tmp/rev/" && chmod -R u+w "$tmp/rev" &&
python3 - "$tmp/rev/l16/bandwidth.json" <<'PY' || fail "grid_summary.py: the reverse counts could not be added"
import json, sys
bw = json.load(open(sys.argv[1]))
bw.update(nvml_reverse_per_byte_h2d=0.0981, nvml_reverse_per_byte_d2h=0.0124)
json.dump(bw, open(sys.argv[1], "w"))
PY
(cd "$tmp/rev" && python3 "$top_srcdir/bench/grid_summary.py" "a card" "a commit" "$tmp/rev/latest.json" l16) \
    >"$tmp/rev/summary.md" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "grid_summary.py failed on reverse counts"; }
grep -q "1.078 / 1.094 bytes per byte copied (0.098 / 0.012 in the other direction)" "$tmp/rev/summary.md" && pass ||
    fail "grid_summary.py: the other direction's counts not printed"
# And each cell's bytes are its counts less what the other direction's copies
# counted there: in = 1.078 H + 0.0124 D, out = 1.094 D + 0.0981 H, solved
# (the counts per byte read from the call's bandwidth.json).
python3 - "$tmp/rev/latest.json" "$r/l16/latest-grid.json" "$r/l16/bandwidth.json" <<'PY' && pass || fail "grid_summary.py: the read requests not taken out"
import json, sys
new = {c["budget_bytes"]: c for c in json.load(open(sys.argv[1]))["grid.cells"]}
old = {c["budget_bytes"]: c for c in json.load(open(sys.argv[2]))["grid.cells"]}
bw = json.load(open(sys.argv[3]))
c_in, c_out = bw["nvml_counted_per_byte_h2d"], bw["nvml_counted_per_byte_d2h"]
checked = 0
for budget, c in new.items():
    raw = c.get("nvml_link")
    if not raw:
        continue
    i, o = raw["h2d_bytes_per_step"], raw["d2h_bytes_per_step"]
    h, d = c["link_h2d_bytes_per_step"], c["link_d2h_bytes_per_step"]
    # Put back into both counts, the bytes each way make them again.
    assert abs(c_in * h + 0.0124 * d - i) < 1e3 and abs(c_out * d + 0.0981 * h - o) < 1e3, (c, h, d)
    assert c["link_d2h_bytes_per_step"] < old[budget]["link_d2h_bytes_per_step"], budget
    assert "less what each direction's copies counted in the other" in c["link_bytes_source"]
    checked += 1
assert checked, "no cell with NVML's counts"
PY
# Two policies at one budget (grid.py drive's 'A|B'): the faster stands for the budget, the
# other rides along under "alternatives", and the table names each row's policy. The runs are
# bench/results/2026-11-26-h100-stream-vs-in-place/policies/L32-r1-* (one call, side by side).
p="$top_srcdir/bench/results/2026-11-26-h100-stream-vs-in-place/policies"
mkdir -p "$tmp/alt" && cp "$p/L32-r1-stream-offload/bandwidth.json" "$p"/L32-r1-*/*-report.json "$tmp/alt/" &&
python3 - "$p" "$tmp/alt/cells.jsonl" <<'PY' || fail "grid_summary.py: the two policies' cells could not be put together"
import json, sys
with open(sys.argv[2], "w") as out:
    for name, tag in (("stream-offload", "umpol-9.79GiB"), ("optimizer-offload", "umpol-9.79GiB-optimizer-offload")):
        row = json.loads(open(f"{sys.argv[1]}/L32-r1-{name}/cells.jsonl").readline())
        row["tag"] = tag
        out.write(json.dumps(row) + "\n")
PY
(cd "$tmp/alt" && python3 "$top_srcdir/bench/grid_summary.py" dev c "$tmp/alt/keys.json" .) >"$tmp/alt/summary.md" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; fail "grid_summary.py failed on two policies at one budget"; }
python3 - "$tmp/alt/keys.json" <<'PY' && pass || fail "grid_summary.py: two policies at one budget not kept as one cell"
import json, sys
cells = json.load(open(sys.argv[1]))["grid.cells"]
assert len(cells) == 1, cells
c = cells[0]
assert c["policy"] == "policies/optimizer-offload.umpol" and c["umpol_ms"] == 890.0, c
alt = c["alternatives"]
assert len(alt) == 1 and alt[0]["policy"] == "policies/stream-offload.umpol" and alt[0]["umpol_ms"] == 1000.1, alt
PY
grep -q "| umpol, budget 9.79 (stream-offload) | 1000.1 |" "$tmp/alt/summary.md" &&
    grep -q "| umpol, budget 9.79 (optimizer-offload) | 890.0 |" "$tmp/alt/summary.md" && pass ||
    fail "grid_summary.py: the table does not name each policy at a budget run under two"
# A whole grid that ran both stock policies at DeepSpeed's peaks (5fcd4aa, two calls): it must
# make its committed keys and summary again, byte for byte. optimizer-offload was the faster
# there and moved more bytes, so its own bound is the higher: the kept run is also measured
# against the bound of the policy that moved fewest, and a key takes the largest of those.
r="$top_srcdir/bench/results/2026-11-27-h100-grid-alternatives-5fcd4aa"
(cd "$r" && python3 "$top_srcdir/bench/grid_summary.py" "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04" \
    5fcd4aa "$tmp/alt2.json" l16-repeat l32-repeat) >"$tmp/alt2.md" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; fail "grid_summary.py failed on the 5fcd4aa grid"; }
cmp -s "$tmp/alt2.json" "$r/latest-grid.json" && cmp -s "$tmp/alt2.md" "$r/summary.md" && pass ||
    fail "grid_summary.py: the 5fcd4aa grid's keys or summary differ from the recorded ones"
python3 - "$tmp/alt2.json" <<'PY' && pass || fail "grid_summary.py: no bound of the policy that moved fewest bytes"
import json, sys
keys = json.load(open(sys.argv[1]))
cells = {(c["model_layers"], c["budget_bytes"]): c for c in keys["grid.cells"]}
c = cells[(32, 10515120128)]
alt = c["alternatives"][0]
assert c["policy"] == "policies/optimizer-offload.umpol" and c["umpol_ms"] == 893.2, c
assert alt["policy"] == "policies/stream-offload.umpol" and alt["bound_ms"] < c["bound_ms"], (alt, c)
assert c["bound_fewest_bytes_ms"] == alt["bound_ms"], c
assert c["umpol_over_bound_fewest_bytes"] == round(893.2 / alt["bound_ms"], 3) > c["umpol_over_bound"], c
# Where one policy ran, the key takes the cell's own umpol / bound.
assert "umpol_over_bound_fewest_bytes" not in cells[(32, 19735144038)]
fewest = max(x.get("umpol_over_bound_fewest_bytes", x["umpol_over_bound"]) for x in keys["grid.cells"])
assert keys["grid.max_umpol_over_bound_fewest_bytes"] == fewest > keys["grid.max_umpol_over_bound"], keys
PY
# Thread pace: where a run has the job's thread's time by part, a part whose
# thread time reached 0.97 of its GPU time is named in the cell, in its summary
# line and in grid.cells_paced_by_thread; a run without them (every recorded
# grid above) gets neither (their summaries above are unchanged, byte for byte).
mkdir -p "$tmp/pace" && cp -r "$top_srcdir/bench/results/2026-11-23-h100-grid-8ef32ed/l16" "$tmp/pace/" &&
    chmod -R u+w "$tmp/pace" &&
python3 - "$tmp/pace/l16/cells.jsonl" <<'PY' || fail "grid_summary.py: the thread times could not be added"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
for row in rows:
    run = row.get("run") or {}
    if row["tag"] == "umpol-7.59GiB":  # forward at the thread's pace, backward not
        run["gpu_part_ms"] = {"forward": 60.0, "backward": 200.0, "optimizer": 0.0}
        run["thread_part_ms"] = {"forward": 59.0, "backward": 150.0, "optimizer": 0.5}
    elif row["tag"] == "umpol-11.70GiB":  # the thread well ahead
        run["gpu_part_ms"] = {"forward": 50.0, "backward": 160.0, "optimizer": 0.0}
        run["thread_part_ms"] = {"forward": 40.0, "backward": 120.0, "optimizer": 0.5}
with open(sys.argv[1], "w") as f:
    for row in rows:
        f.write(json.dumps(row) + "\n")
PY
(cd "$tmp/pace" && python3 "$top_srcdir/bench/grid_summary.py" "a card" "a commit" "$tmp/pace/latest.json" l16) \
    >"$tmp/pace/summary.md" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "grid_summary.py failed on thread times"; }
grep -q "at the job's thread's pace: forward (59.0 ms of thread for 60.0 on the GPU) |" "$tmp/pace/summary.md" &&
    [ "$(grep -c "thread's pace" "$tmp/pace/summary.md")" -eq 1 ] && pass ||
    fail "grid_summary.py: the part run at the thread's pace not named in its line alone"
python3 - "$tmp/pace/latest.json" <<'PY' && pass || fail "grid_summary.py: paced_by_thread keys wrong"
import json, sys
keys = json.load(open(sys.argv[1]))
cells = {c["budget_bytes"]: c for c in keys["grid.cells"]}
assert cells[8153726976]["paced_by_thread"] == ["forward"], cells[8153726976]
assert cells[12559004467]["paced_by_thread"] == [], cells[12559004467]
assert "paced_by_thread" not in cells[16964281958], cells[16964281958]
assert keys["grid.cells_paced_by_thread"] == [
    {"model_layers": 16, "budget_bytes": 8153726976, "parts": ["forward"]}], keys["grid.cells_paced_by_thread"]
PY
# By part of the step: where a run has the package's copies by part and
# checkpointing alone its GPU time by part, each part's bound is its compute or
# its own bytes over the link both ways at once, whichever is longer, and the
# bytes the copies do not account for go to the part where they cost least;
# never below the bound both ways at once; a run without them (every recorded
# grid above) gets no such key. Two made-up cases, each with an exact answer:
#   rest: the forward pass's compute (10 s) has room for all the rest, so the
#         step is that and backward's own copies (60 GB out, more than NVML
#         counted in the whole step);
#   link: the forward pass's copies (5 GB in) take longer than its compute
#         (1 ms), and backward's compute (10 s) has room for the rest.
g="$top_srcdir/bench/results/2026-11-23-h100-grid-8ef32ed"
for case in rest link; do
    mkdir -p "$tmp/part-$case" && cp -r "$g/l16" "$tmp/part-$case/" && chmod -R u+w "$tmp/part-$case" &&
    python3 - "$tmp/part-$case/l16/cells.jsonl" "$case" <<'PY' || fail "grid_summary.py: the copies by part could not be added"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
rest = sys.argv[2] == "rest"
for row in rows:
    run = row.get("run") or {}
    if row["tag"] == "ckpt":
        run["gpu_part_ms"] = ({"forward": 1e4, "backward": 130.0, "optimizer": 8.0} if rest
                              else {"forward": 1.0, "backward": 1e4, "optimizer": 0.0})
    elif row["tag"] == "umpol-7.59GiB":
        run["gpu_part_ms"] = {"forward": 60.0, "backward": 190.0, "optimizer": 10.0}
        run["package_copies"] = (
            {"forward_h2d_bytes": 0, "forward_d2h_bytes": 0,
             "backward_h2d_bytes": 8e9, "backward_d2h_bytes": 6e10} if rest else
            {"forward_h2d_bytes": 5e9, "forward_d2h_bytes": 9e8,
             "backward_h2d_bytes": 1e8, "backward_d2h_bytes": 1e8})
with open(sys.argv[1], "w") as f:
    for row in rows:
        f.write(json.dumps(row) + "\n")
PY
    (cd "$tmp/part-$case" && python3 "$top_srcdir/bench/grid_summary.py" "a card" "a commit" latest.json l16) \
        >"$tmp/part-$case/summary.md" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "grid_summary.py failed on copies by part"; }
    python3 - "$tmp/part-$case/latest.json" "$g/l16/bandwidth.json" "$case" <<'PY' && pass || fail "grid_summary.py: the bound by part is wrong ($case)"
import json, sys
keys = json.load(open(sys.argv[1]))
bw = json.load(open(sys.argv[2]))
cells = {c["budget_bytes"]: c for c in keys["grid.cells"]}
c = cells[8153726976]
h, d = c["link_h2d_bytes_per_step"], c["link_d2h_bytes_per_step"]
one_in, one_out, both = bw["h2d_gbps"] * 1e6, bw["d2h_gbps"] * 1e6, bw["both_ways_gbps_each"] * 1e6
def link(i, o):
    s = min(i, o)
    return s / both + (i - s) / one_in + (o - s) / one_out
if sys.argv[3] == "rest":
    assert h > 8e9 and d < 6e10 and link(h - 8e9, 0) < 1e4, (h, d)
    want = 1e4 + link(8e9, 6e10)
else:
    assert link(5e9, 9e8) > 1.0 and link(h - 5e9, max(d - 9e8, 1e8)) < 1e4, (h, d)
    want = link(5e9, 9e8) + 1e4
assert abs(c["bound_by_part_ms"] - round(want, 1)) <= 0.05, (c["bound_by_part_ms"], want)
parts = (1e4, link(8e9, 6e10)) if sys.argv[3] == "rest" else (link(5e9, 9e8), 1e4)
assert abs(c["bound_by_part_forward_ms"] - round(parts[0], 1)) <= 0.05, (c, parts)
assert abs(c["bound_by_part_backward_ms"] - round(parts[1], 1)) <= 0.05, (c, parts)
assert c["bound_by_part_ms"] >= c["bound_two_way_ms"], c
assert c["umpol_over_bound_by_part"] == round(c["umpol_ms"] / c["bound_by_part_ms"], 3), c
assert keys["grid.max_umpol_over_bound_by_part"] == c["umpol_over_bound_by_part"], keys
assert all("bound_by_part_ms" not in x for b, x in cells.items() if b != 8153726976), cells
PY
done
grep -q "by part of the step [0-9.]* ms (umpol / it [0-9.]*; forward [0-9.]* against umpol's 60.0 GPU ms, backward 10000.0 against 200.0)" \
    "$tmp/part-link/summary.md" && pass ||
    fail "grid_summary.py: the bound by part, and each part against umpol's, not in the summary"
# --help prints the usage; too few arguments get a one-line usage and a non-zero exit.
python3 "$top_srcdir/bench/grid_summary.py" --help >"$tmp/help" 2>&1 &&
    grep -q '^usage: grid_summary.py DEVICE COMMIT' "$tmp/help" && pass || fail "grid_summary.py --help: no usage"
if python3 "$top_srcdir/bench/grid_summary.py" dev c >"$tmp/out" 2>"$tmp/err"; then
    fail "grid_summary.py with two arguments exited 0"
elif grep -q '^usage: grid_summary.py' "$tmp/err" && ! grep -q Traceback "$tmp/err"; then
    pass
else
    fail "grid_summary.py with two arguments: no usage line, or a traceback"
fi
finish
