#!/bin/sh
# The allocation trace: bench/pool_replay against traces written by hand (a
# large free block on the GPU split by a small request, so that the next large
# request needs a slab of its own; empty slabs given back before a pool on the
# card grows), its errors, and end to end: a job run under the fake CUDA
# runtime with UMPOL_TRACE, whose replay must give the report's own peak,
# slabs, slab bytes, slab peak and releases for every class; and under
# `learn step`, the allocations the step's plan served, counted apart.
. "${top_srcdir:-.}/tests/lib.sh"
replay="$top_builddir/bench/pool_replay"
[ -x "$replay" ] || { echo "SKIP: bench/pool_replay not built (no CUDA Toolkit headers)"; exit 77; }

cat >"$tmp/split.trace" <<'T'
# umpol allocation trace 2
slab 67108864
class 0 managed acts
dropped 0
a 0 1 0 0 1 0 1048576000 1 2
f 10 1 0 0 1 0 1
a 20 2 0 0 1 0 33554432 1 0
a 30 3 0 0 1 0 1048576000 1 2
T
expect_status 0 "replay of a hand-written trace" "$replay" --json "$tmp/split.trace"
python3 - "$tmp/out" <<'PY' && pass || fail "replay: the split of a free large block"
import json, sys
c = json.load(open(sys.argv[1]))["classes"][0]
M = 1 << 20
# 32 MiB took the front of the free 1000 MiB block on the GPU; 1000 MiB more needed a new slab.
assert (c["peak_bytes"], c["slabs"], c["slab_bytes"], c["slab_peak_bytes"], c["slab_releases"],
        c["dedicated_slabs"]) == (1032 * M, 2, 2000 * M, 2000 * M, 0, 2), c
PY
expect_status 0 "replay table" "$replay" "$tmp/split.trace"
grep -Eq '^acts +managed +3 +1\.01 +1\.95 +2 +0 +2 +48% +0$' "$tmp/out" || fail "replay: table row"

# A pool on the card that must grow first gives back its empty slabs: two 86 MiB slabs,
# both free, go before a 1000 MiB one comes, so the card never holds all three; a pool of
# pinned host memory keeps them.
for mem in managed:1000:2 host:1172:0; do
    m=${mem%%:*} rest=${mem#*:}
    printf '# umpol allocation trace 2\nslab 67108864\nclass 0 %s acts\n%s' "$m" \
        'a 0 1 0 0 1 0 90177536 1 2
a 1 2 0 0 1 0 90177536 1 2
f 2 1 0 0 1 0 1
f 3 2 0 0 1 0 1
a 4 3 0 0 1 0 1048576000 1 2
' >"$tmp/trim.trace"
    expect_status 0 "replay: trim ($m)" "$replay" --json "$tmp/trim.trace"
    python3 - "$tmp/out" "${rest%:*}" "${rest#*:}" <<'PY' && pass || fail "replay: empty slabs before growing ($m)"
import json, sys
c = json.load(open(sys.argv[1]))["classes"][0]
M = 1 << 20
assert (c["slab_peak_bytes"], c["slab_releases"]) == (int(sys.argv[2]) * M, int(sys.argv[3])), c
PY
done

# Version 3 gives each new slab's address, and the replay takes the lowest address first as
# the pools do: the 1 MiB block goes into the 48 MiB slab, recorded below the 40 MiB one, and
# the 40 MiB slab, empty, is given back for the 100 MiB one (148 MiB held). Version 2 has no
# addresses: slabs are laid out in order, the 40 MiB slab comes first (140 MiB held).
for v in 3:148 2:140; do
    printf '# umpol allocation trace %s\nslab 67108864\nclass 0 managed acts\ndropped 0\n' "${v%:*}" >"$tmp/addr.trace"
    while read -r line; do
        case "${v%:*} $line" in 2\ a\ *) line=${line% *} ;; esac # version 2: no address
        echo "$line" >>"$tmp/addr.trace"
    done <<'T'
a 0 1 0 0 1 0 41943040 0 1 2147483648
a 1 2 0 0 1 0 50331648 0 1 268435456
f 2 1 0 0 1 0 0
f 3 2 0 0 1 0 0
a 4 3 0 0 1 0 1048576 0 0 0
a 5 4 0 0 1 0 104857600 0 1 4294967296
T
    expect_status 0 "replay: slab addresses (version ${v%:*})" "$replay" --json "$tmp/addr.trace"
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["classes"][0]; sys.exit((c["slab_bytes"], c["slab_releases"]) != (int(sys.argv[2]) << 20, 1))' \
        "$tmp/out" "${v#*:}" && pass || fail "replay: version ${v%:*}: not ${v#*:} MiB held with one slab given back"
done

# Where the runtime put things decides what the pool reuses: a new slab placed whole on the
# GPU lends its rest to the next request, whatever its size (1 slab, none given back); a
# block that left the GPU before it was freed is free space off the GPU, which a smaller
# large request does not take: its slab, empty, is given back for a new one (1 given back).
head='# umpol allocation trace 2\nslab 67108864\nclass 0 managed acts\n'
printf "${head}a 0 1 0 0 1 0 4194304 1 2\na 1 2 0 0 1 0 41943040 1 0\n" >"$tmp/placed.trace"
printf "${head}a 0 1 0 0 1 0 41943040 1 2\nf 1 1 0 0 1 0 0\na 2 2 0 0 1 0 35651584 1 0\n" >"$tmp/left.trace"
for t in placed:0 left:1; do
    expect_status 0 "replay: ${t%:*}" "$replay" --json "$tmp/${t%:*}.trace"
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["classes"][0]; sys.exit((c["slabs"], c["slab_releases"]) != (1, int(sys.argv[2])))' \
        "$tmp/out" "${t#*:}" && pass || fail "replay: ${t%:*}: not 1 slab with ${t#*:} given back"
done

printf '# umpol allocation trace 2\nslab 67108864\nclass 0 managed acts\nz 1 2\n' >"$tmp/bad.trace"
expect_status 1 "replay of a bad line" "$replay" "$tmp/bad.trace"
grep -q "bad.trace:4: not a trace line" "$tmp/out" || fail "replay: no line number for a bad line"
printf '{"umpol_report": 3}\n' >"$tmp/report.trace"
expect_status 1 "replay of a report" "$replay" "$tmp/report.trace"
grep -q "report.trace:1: not an umpol allocation trace" "$tmp/out" || fail "replay: a report taken for a trace"
expect_status 2 "replay without a trace" "$replay"
expect_status 0 "replay --help" "$replay" --help

# End to end: the runtime's trace replays to the runtime's own figures.
if fake_job train_like; then
    export FAKE_GPU_BYTES=2147483648
    expect_status 0 "a job with UMPOL_TRACE" env ${san:+LD_PRELOAD="$san"} UMPOL_TRACE="$tmp/job-%p.trace" \
        "$UMPOL_BIN" run -p "$top_srcdir/policies/llm-finetune.umpol" -r "$tmp/job.json" -- "$job" 4
    set -- "$tmp"/job-*.trace
    [ -f "$1" ] || fail "no trace written"
    expect_status 0 "replay of the job's trace" "$replay" --json "$1"
    python3 - "$tmp/out" "$tmp/job.json" <<'PY' && pass || fail "replay differs from the report"
import json, sys
replay = {c["name"]: c for c in json.load(open(sys.argv[1]))["classes"]}
report = {c["name"]: c for c in json.load(open(sys.argv[2]))["classes"]}
checked = 0
for name, r in report.items():
    if r["evictions"] or r["reclaims"] or not r["slabs"]:
        continue
    p = replay[name]
    keys = ("allocations", "peak_bytes", "slabs", "slab_bytes", "slab_peak_bytes", "slab_releases")
    got = tuple(p[k] for k in keys)
    want = tuple(r[k] for k in keys)
    print(f"{name}: replay {got}, report {want}")
    assert got == want, name
    checked += 1
assert checked >= 2, f"only {checked} classes without evictions had slabs"
PY
    # Under `learn step` the step's plan serves the activations from its arena from the
    # third step on (trace version 4, growth 3): the replay counts them apart, as the
    # report's plan does, and keeps them out of the pools; live and peak bytes count them.
    printf 'umpol 1;\nlearn step "forward";\nclass weights { match phase "model.init*"; memory device; }\n%s\n%s\n' \
        'class acts { match phase "forward*" or phase "backward*"; memory device; }' \
        'class rest { match any; memory device; }' >"$tmp/plan.umpol"
    expect_status 0 "a job with UMPOL_TRACE under learn step" env ${san:+LD_PRELOAD="$san"} \
        UMPOL_TRACE="$tmp/plan-%p.trace" "$UMPOL_BIN" run -p "$tmp/plan.umpol" -r "$tmp/plan.json" -- "$job" 8
    set -- "$tmp"/plan-*.trace
    head -1 "$1" | grep -q '^# umpol allocation trace 4$' || fail "the trace is not version 4"
    expect_status 0 "replay of a planned run's trace" "$replay" --json "$1"
    python3 - "$tmp/out" "$tmp/plan.json" <<'PY' && pass || fail "replay of a planned run differs from the report"
import json, sys
replay = {c["name"]: c for c in json.load(open(sys.argv[1]))["classes"]}
report = {c["name"]: c for c in json.load(open(sys.argv[2]))["classes"]}
acts = report["acts"]["plan"]
assert acts["planned_allocations"] > 0, acts
for name, r in report.items():
    p = replay[name]
    got = (p["allocations"], p["peak_bytes"], p["planned_allocations"])
    want = (r["allocations"], r["peak_bytes"], r["plan"]["planned_allocations"])
    print(f"{name}: replay {got}, report {want}")
    assert got == want, name
PY
    printf '# umpol allocation trace 3\nslab 67108864\nclass 0 device acts\na 0 1 0 0 1 0 4194304 1 3 0\n' >"$tmp/old.trace"
    expect_status 1 "replay: growth 3 in a version 3 trace" "$replay" "$tmp/old.trace"
else
    echo "libumpol.so or the fake job not built: the runtime's trace not tested"
fi
finish
