#!/bin/sh
# `umpol report` and `umpol topo` against recorded inputs: the text summary,
# the merged JSON of several ranks, and a trace Perfetto can open.
. "${top_srcdir:-.}/tests/lib.sh"
r0="$top_srcdir/tests/reports/rank0.json"
r1="$top_srcdir/tests/reports/rank1.json"

# variant OUT EDIT...: rank 0's report with each Python statement EDIT applied (c: its
# classes by name), written to OUT.
variant() {
    out=$1
    shift
    python3 - "$r0" "$out" "$@" <<'PY' || fail "report: could not write the variant $out"
import json, sys
r = json.load(open(sys.argv[1]))
c = {k["name"]: k for k in r["classes"]}
for edit in sys.argv[3:]:
    exec(edit)
json.dump(r, open(sys.argv[2], "w"))
PY
}

expect_status 0 "report of one rank" "$UMPOL_BIN" report "$r0"
grep -q "class 'optimizer' takes the most GPU page faults: 12000 of 12300 (98%), most of all in phase 'optimizer.step'" "$tmp/out" ||
    fail "report: no fault hint"
grep -q "never prefetched to the GPU: add 'prefetch gpu on enter \"optimizer.step\";'" "$tmp/out" ||
    fail "report: no prefetch suggestion"
grep -q "class 'activations' was evicted 150 times" "$tmp/out" || fail "report: no eviction hint"
# A class kept on the host whose faults moved nothing only had its pages mapped:
# no advice to prefetch it to the GPU.
sed 's/"htod_bytes": 3221225472/"htod_bytes": 0/' "$r0" >"$tmp/mapped.json"
expect_status 0 "report of host-mapped faults" "$UMPOL_BIN" report "$tmp/mapped.json"
grep -q "Its pages stay on the host, where its policy places them" "$tmp/out" ||
    fail "report: host-mapped faults taken for migrations"
! grep -q "never prefetched" "$tmp/out" || fail "report: suggests prefetching a host class"
# Costliest first: optimizer, then activations, then weights.
sed -n '/^Classes/,/^$/p' "$tmp/out" | awk 'NR > 2 { print $1 }' | tr "\n" " " | sed "s/ *$//" >"$tmp/order"
[ "$(cat "$tmp/order")" = "optimizer activations weights" ] || fail "report: class order $(cat "$tmp/order")"
# Host state in managed memory that never moves may sit on the card: the report says so,
# and not for a class of pinned host memory; blocks moved in by 'match saved' are counted.
grep -q "class 'optimizer' (1.0 GiB at its peak) lives on the host in managed memory and never moves" "$tmp/out" ||
    fail "report: no hint about managed host state"
if command -v python3 >/dev/null 2>&1; then
    variant "$tmp/host.json" 'c["optimizer"]["memory"] = "host"' 'c["activations"]["reclassified"] = 7'
    expect_status 0 "report with a memory-host class" "$UMPOL_BIN" report "$tmp/host.json"
    ! grep -q "gave back .* of freed space" "$tmp/out" || fail "report: reclaim hint without reclaims"
    ! grep -q "lives on the host in managed memory" "$tmp/out" || fail "report: hint for memory host"
    grep -q "class 'activations': 7 of its blocks came from another class when reported saved" "$tmp/out" ||
        fail "report: reclassified blocks not shown"
fi

# A movable class, and a run under `budget card` whose card still grew past it: read, and the
# hint says what umpol learned outside its count rather than that it counts none of it.
if command -v python3 >/dev/null 2>&1; then
    variant "$tmp/card.json" 'c["weights"]["memory"] = "movable"' \
        'r["devices"][0].update(budget_bytes=8 << 30, card={"base_used_bytes": 1 << 30, "peak_used_bytes": 11 << 30, "resident_at_peak_bytes": 7 << 30, "samples": 40, "outside_bytes": 300 << 20, "budget_counts_card": True})'
    expect_status 0 "report with a movable class under budget card" "$UMPOL_BIN" report "$tmp/card.json"
    grep -q "2.0 GiB beyond 'budget card 8.0 GiB'. umpol held itself to the budget less the 300.0 MiB" \
        "$tmp/out" || fail "report: no budget card hint"
    ! grep -q "memory outside the policy is not counted" "$tmp/out" || fail "report: budget card taken for budget gpu"
fi

# Freed space given back beyond what the class ever held (one class per phase): the report
# says what it costs and how to avoid it.
if command -v python3 >/dev/null 2>&1; then
    activations='c["activations"].update(reclaims=368, reclaim_bytes=27138719744)'
    variant "$tmp/reclaim.json.one" "$activations"
    variant "$tmp/reclaim.json" "$activations" 'c["weights"].update(reclaims=314, reclaim_bytes=39769341952)'
    expect_status 0 "report with one class reclaiming" "$UMPOL_BIN" report "$tmp/reclaim.json.one"
    ! grep -q "gave back .* of freed space" "$tmp/out" || fail "report: reclaim hint for one class alone"
    expect_status 0 "report with reclaims" "$UMPOL_BIN" report "$tmp/reclaim.json"
    grep -q "class 'activations' gave back 25.3 GiB of freed space 368 times" "$tmp/out" &&
        grep -q "class 'weights' gave back 37.0 GiB of freed space 314 times" "$tmp/out" ||
        fail "report: no hint about freed space given back"
    # Slabs well beyond a class's live peak: free space its pools could not reuse, on the
    # card all the same; not for a class of pinned host memory, nor for a small excess. The
    # slabs' peak counts (slabs given back before the end), or in older reports the slabs
    # held at the end.
    for v in peak:'c["activations"].update(slab_bytes=1073741824, slab_peak_bytes=2899102924)' \
        old:'c["activations"].pop("slab_peak_bytes", None); c["activations"]["slab_bytes"] = 2899102924'; do
        variant "$tmp/spare.json" "${v#*:}" \
            'c["optimizer"].update(memory="host", slab_bytes=4294967296, slab_peak_bytes=4294967296)' \
            'c["weights"].update(slab_bytes=1006632960, slab_peak_bytes=1006632960)'
        expect_status 0 "report with spare slabs (${v%%:*})" "$UMPOL_BIN" report "$tmp/spare.json"
        grep -q "class 'activations' held up to 2.7 GiB of slabs for 2.0 GiB live at its peak: 716.8 MiB (26%) was free space" "$tmp/out" ||
            fail "report: no hint about slabs beyond the live peak (${v%%:*})"
        ! grep -Eq "class '(optimizer|weights)' held" "$tmp/out" || fail "report: spare-slab hint for host memory or under 512 MiB"
    done

    # The driver's time servicing a class's GPU faults (CUPTI's fault records, start to end):
    # in the hint, the class table and the merged JSON; absent in older reports, read as 0.
    variant "$tmp/faulttime.json" 'c["optimizer"]["um"]["gpu_fault_ns"] = 84250000'
    expect_status 0 "report with fault time" "$UMPOL_BIN" report "$tmp/faulttime.json"
    grep -q "(98%), 84.2 ms of the driver's time servicing them, most of all in phase" "$tmp/out" ||
        fail "report: the fault hint has no fault time"
    grep -Eq "^  optimizer .* 84\.2 ms " "$tmp/out" || fail "report: no fault time in the class table"
    "$UMPOL_BIN" report --json "$tmp/faulttime.json" "$r1" >"$tmp/ft-merged.json" || fail "report --json with fault time"
    python3 -c 'import json, sys; c = {k["name"]: k for k in json.load(open(sys.argv[1]))["classes"]}; sys.exit(0 if c["optimizer"]["um"]["gpu_fault_ns"] == 84250000 else 1)' \
        "$tmp/ft-merged.json" || fail "report --json: fault time not summed"
fi

expect_status 0 "report of two ranks" "$UMPOL_BIN" report "$r0" "$r1"
grep -q "umpol report: 2 reports (ranks 0, 1): 900 allocations" "$tmp/out" || fail "report: ranks not summed"
grep -q "^Per rank" "$tmp/out" || fail "report: no side-by-side table"
grep -q "7.5 ms in runtime-issued CUDA work (placing on allocation 1.0 ms, taking back freed space 0.5 ms, evicting 0.2 ms)" "$tmp/out" ||
    fail "report: runtime time not split"
grep -q "allocations refused at the managed-memory cap" "$tmp/out" || fail "report: no cap hint"

if command -v python3 >/dev/null 2>&1; then
    "$UMPOL_BIN" report --json "$r0" "$r1" >"$tmp/merged.json" || fail "report --json exit"
    python3 - "$tmp/merged.json" <<'PY' || fail "report --json content"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["umpol_report_summary"] == 1 and m["reports"] == 2
opt = next(c for c in m["classes"] if c["name"] == "optimizer")
assert opt["allocations"] == 40 + 80, opt
assert opt["um"]["gpu_faults"] == 12000 + 24000, opt
assert opt["um"]["dtoh_bytes"] == (2 << 30) + (4 << 30), opt
fwd = next(p for p in m["phases"] if p["name"] == "forward")
assert fwd["entries"] == 20 and fwd["um"]["gpu_faults"] == 600, fwd
PY
    # The pools' slab peak and releases are summed too.
    for r in 0 1; do
        python3 - "$top_srcdir/tests/reports/rank$r.json" "$tmp/slabs$r.json" $r <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
k = int(sys.argv[3])
for c in r["classes"]:
    if c["name"] == "optimizer":
        c["slab_peak_bytes"] = c["slab_bytes"] + (1 << 20) * (k + 1)
        c["slab_releases"] = 3 + k
json.dump(r, open(sys.argv[2], "w"))
PY
    done
    "$UMPOL_BIN" report --json "$tmp/slabs0.json" "$tmp/slabs1.json" >"$tmp/slabs.json" ||
        fail "report --json of slab counters: exit"
    python3 - "$tmp/slabs.json" "$r0" "$r1" <<'PY' || fail "report --json: slab peak or releases not summed"
import json, sys
m = json.load(open(sys.argv[1]))
opt = next(c for c in m["classes"] if c["name"] == "optimizer")
slabs = sum(next(c for c in json.load(open(f))["classes"] if c["name"] == "optimizer")["slab_bytes"]
            for f in sys.argv[2:])
assert opt["slab_peak_bytes"] == slabs + (3 << 20) and opt["slab_releases"] == 7, opt
PY
    expect_status 0 "report --trace" "$UMPOL_BIN" report --trace "$tmp/trace.json" "$r0" "$r1"
    python3 - "$tmp/trace.json" <<'PY' || fail "trace is not what Perfetto reads"
import json, sys
t = json.load(open(sys.argv[1]))
events = t["traceEvents"]
assert isinstance(events, list) and events
pids = set()
for e in events:
    assert e["ph"] in ("M", "X", "i", "C"), e
    assert isinstance(e["pid"], int)
    pids.add(e["pid"])
    if e["ph"] != "M":
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        assert isinstance(e["name"], str)
    if e["ph"] == "X":
        assert e["dur"] >= 0 and e["tid"] == 1
    if e["ph"] == "C":
        assert isinstance(e["args"]["bytes"], (int, float))
    if e["ph"] == "i":
        assert e["s"] == "t" and e["tid"] >= 10
assert pids == {0, 1}, pids
names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
assert {"phases", "optimizer", "activations", "weights"} <= names, names
assert sum(1 for e in events if e["ph"] == "X") == 6
PY
fi

printf '{"umpol_report": 1, "classes": [' >"$tmp/broken.json"
expect_status 1 "truncated report" "$UMPOL_BIN" report "$tmp/broken.json"
grep -q "invalid JSON" "$tmp/out" || fail "truncated report: message"
printf '{"something": "else"}' >"$tmp/other.json"
expect_status 1 "not a report" "$UMPOL_BIN" report "$tmp/other.json"
expect_status 2 "missing report" "$UMPOL_BIN" report "$tmp/none.json"
grep -q "none.json: cannot open: No such file or directory" "$tmp/out" || fail "missing report: message"
expect_status 2 "report without a file" "$UMPOL_BIN" report

# Only regular files are read, at once: a directory, an endless device, a FIFO
# with no writer, a file over the size limit (sparse) are I/O errors (exit 2).
expect_status 2 "report of a directory" "$UMPOL_BIN" report "$tmp"
grep -q "not a regular file (a directory)" "$tmp/out" || fail "directory: message"
expect_status 2 "report of /dev/zero" timeout 10 "$UMPOL_BIN" report /dev/zero
grep -q "/dev/zero: not a regular file (a device)" "$tmp/out" || fail "/dev/zero: message"
mkfifo "$tmp/fifo"
expect_status 2 "report of a FIFO" timeout 10 "$UMPOL_BIN" report "$tmp/fifo"
grep -q "not a regular file (a FIFO)" "$tmp/out" || fail "FIFO: message"
truncate -s 300M "$tmp/huge.json"
expect_status 2 "report over the size limit" "$UMPOL_BIN" report "$tmp/huge.json"
grep -q "too large: 314572800 bytes (reports are read up to 256 MiB)" "$tmp/out" || fail "oversize: message"

# Another version of the schema is named as such; numbers JSON cannot hold,
# and integers out of range, are refused with the field named (exit 1).
printf '{"umpol_report": 2, "classes": []}' >"$tmp/v2.json"
expect_status 1 "report of a newer version" "$UMPOL_BIN" report "$tmp/v2.json"
grep -q "v2.json: unsupported report version 2 (this umpol reads 1)" "$tmp/out" || fail "version: message"
bad_number() { # NAME JSON EXPECTED-MESSAGE
    printf '%s' "$2" >"$tmp/$1.json"
    expect_status 1 "report with $1" "$UMPOL_BIN" report --json "$tmp/$1.json"
    grep -qF "$3" "$tmp/out" || { fail "$1: message"; cat "$tmp/out" >&2; }
}
bad_number nan '{"umpol_report": 1, "classes": [{"name": "a", "allocations": NaN}]}' "NaN and Infinity are not JSON numbers"
bad_number inf '{"umpol_report": 1, "classes": [{"name": "a", "peak_bytes": inf}]}' "NaN and Infinity are not JSON numbers"
bad_number 1e400 '{"umpol_report": 1, "totals": {"allocations": 1e400}}' "number out of range"
bad_number rank '{"umpol_report": 1, "rank": 1e300}' "rank: expected an integer from 0 to 2147483647"
bad_number phase '{"umpol_report": 1, "phases": [{"name": "a"}], "timeline": {"spans": [{"phase": 1e30, "start_ns": 0}]}}' \
    "timeline.spans[0].phase: expected an integer from 0 to 2147483647"
bad_number negative '{"umpol_report": 1, "classes": [{"name": "a", "frees": -3}]}' "classes[0].frees: expected an integer"

# The report fuzzer's corpus (recorded reports, the schema's variants, inputs
# that once leaked): each a clean verdict, exit 0 or 1, within 10 seconds.
for input in "$top_srcdir"/tests/fuzz/report-corpus/*; do
    timeout 10 "$UMPOL_BIN" report --json "$input" >"$tmp/out" 2>&1
    status=$?
    case $status in
    0 | 1) pass ;;
    *) fail "report corpus $(basename "$input"): exit $status"; head -5 "$tmp/out" >&2 ;;
    esac
done

# topo always answers: without a GPU it says so and shows the host.
expect_status 0 "topo" "$UMPOL_BIN" topo
grep -q "^GPUs: " "$tmp/out" || fail "topo: no GPU line"
# A report of `learn step`: the step's repetitions and each class's predictions.
sed 's/^ "devices": \[/ "step": {"phase": "forward*", "steps": 12, "matched": 10, "differed": 1, "departures": 1, "resyncs": 5, "events_per_step": 40, "fallback": "steps that departed"},\n "devices": [/; s/"name": "weights",/"name": "weights", "next_use": {"predictions": 10, "hits": 9, "error_events": 3, "ahead_bytes": 4294967296, "demand_bytes": 1073741824},/' \
    "$r0" >"$tmp/step.json"
expect_status 0 "report of a learned step" "$UMPOL_BIN" report "$tmp/step.json"
grep -q 'learned step (phase "forward\*"): 12 steps, 10 repeated the one before, 1 differed, 1 departed part way, 5 resyncs; steps that departed' "$tmp/out" ||
    fail "report: no step line"
grep -q "class 'weights': 10 uses predicted, 9 at the predicted event (mean error 0.3 events); to the GPU ahead of use 4.0 GiB, on demand 1.0 GiB" "$tmp/out" ||
    fail "report: no next-use line"
# A report of `stream written`: the announced uses and how their pieces reached the GPU;
# a counter that is no number is refused.
sed 's/"name": "weights",/"name": "weights", "stream": {"uses": 226, "ready_bytes": 3221225472, "late_bytes": 1073741824, "fetched_bytes": 2147483648, "dropped_bytes": 1073741824, "saved_bytes": 67108864, "unlearned_uses": 2},/' \
    "$r0" >"$tmp/stream.json"
expect_status 0 "report of streaming ahead" "$UMPOL_BIN" report "$tmp/stream.json"
grep -q "class 'weights': 226 uses announced; of the pieces they read, 3.0 GiB on the GPU by then (75%), 1.0 GiB still on the host, read over the link; 2.0 GiB brought ahead, 1.0 GiB left with no copy, 64.0 MiB copied back after write phases; 2 uses not in the learned cycle" "$tmp/out" ||
    fail "report: no streaming line"
sed 's/"name": "weights",/"name": "weights", "stream": {"uses": "many"},/' "$r0" >"$tmp/stream-bad.json"
expect_status 1 "report with a stream counter that is no number" "$UMPOL_BIN" report "$tmp/stream-bad.json"
# A step found by repetition (`learn step;`): no phase, the events a step took.
sed 's/^ "devices": \[/ "step": {"phase": null, "period_events": 41, "steps": 7, "matched": 6, "differed": 0, "departures": 0, "resyncs": 0, "events_per_step": 41, "fallback": null},\n "devices": [/' \
    "$r0" >"$tmp/rep.json"
expect_status 0 "report of a step found by repetition" "$UMPOL_BIN" report "$tmp/rep.json"
grep -q 'learned step (found by repetition, 41 events a step): 7 steps, 6 repeated the one before' "$tmp/out" ||
    fail "report: no repetition step line"
printf 'umpol 1;\nclass a { match any; place host numa 999; }\n' >"$tmp/numa.umpol"
expect_status 0 "check --topology" "$UMPOL_BIN" check --topology "$tmp/numa.umpol"
grep -q "warning\[W104\]: class 'a': this machine has no NUMA node 999" "$tmp/out" || fail "check --topology: no W104"
# `spare`: a job whose peak rose past what `spare` judged by, beyond the budget, and blocks
# the card refused: each gets a word; a peak that rose within the budget gets none.
if command -v python3 >/dev/null 2>&1; then
    variant "$tmp/spare-over.json" \
        'r["devices"][0]["spare"] = dict(held_bytes=5 << 30, others_peak_bytes=21 << 30, judged_by_peak_bytes=20 << 30, room_bytes=0, misses=2)'
    expect_status 0 "report with spare over the budget" "$UMPOL_BIN" report "$tmp/spare-over.json"
    grep -q "GPU 0: 'spare' classes hold 5.0 GiB, judged beside a peak of 20.0 GiB; the job later held 21.0 GiB without them, 2.0 GiB more than the budget allows" "$tmp/out" ||
        fail "report: no hint about spare's misjudged peak"
    grep -q "GPU 0: the card refused 2 blocks that 'spare' had room for" "$tmp/out" ||
        fail "report: no hint about spare's misses"
    variant "$tmp/spare-within.json" \
        'r["devices"][0]["spare"] = dict(held_bytes=3 << 30, others_peak_bytes=21 << 30, judged_by_peak_bytes=20 << 30, room_bytes=0, misses=0)'
    expect_status 0 "report with spare within the budget" "$UMPOL_BIN" report "$tmp/spare-within.json"
    ! grep -q "'spare'" "$tmp/out" || fail "report: spare hint within the budget"
    variant "$tmp/spare-bad.json" 'r["devices"][0]["spare"] = 3'
    expect_status 1 "report with a bad spare" "$UMPOL_BIN" report "$tmp/spare-bad.json"
    grep -q "devices\[0\].spare: expected an object" "$tmp/out" || fail "report: bad spare not named"
fi
# The card held more than the budget and a stated 1 GiB beside it: the report says how much
# and what usually holds it; within that, nothing.
if command -v python3 >/dev/null 2>&1; then
    variant "$tmp/card-over.json" \
        'r["devices"][0]["card"] = dict(base_used_bytes=1 << 30, peak_used_bytes=31 << 30, resident_at_peak_bytes=24 << 30, samples=40)'
    expect_status 0 "report with the card over the budget" "$UMPOL_BIN" report "$tmp/card-over.json"
    grep -q "GPU 0: the card held up to 30.0 GiB more than when umpol started, 6.0 GiB beyond the budget of 24.0 GiB (umpol counted 24.0 GiB then)" "$tmp/out" ||
        fail "report: no hint about the card beyond the budget"
    variant "$tmp/card-within.json" \
        'r["devices"][0]["card"] = dict(base_used_bytes=1 << 30, peak_used_bytes=25 << 30, resident_at_peak_bytes=24 << 30, samples=40)'
    expect_status 0 "report with the card within the budget" "$UMPOL_BIN" report "$tmp/card-within.json"
    ! grep -q "the card held up to" "$tmp/out" || fail "report: card hint within the budget and 1 GiB"
fi
finish
