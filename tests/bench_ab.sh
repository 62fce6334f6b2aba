#!/bin/sh
# bench/run-ab.sh without a GPU: its --help, a clear error and exit 2 for each
# malformed variable, and, over a stand-in for bench/grid.py drive (a python3
# first in PATH that writes the log a run writes), one summary line a run, the
# variants in reverse order in even rounds, its arguments and the top folder
# whatever the caller's, the lines where umpol said something turned off (not
# those that only say how to turn it off), the pinned copies' rates where the
# run timed them, and a failed run said, exit 1.
. "${top_srcdir:-.}/tests/lib.sh"
ab="$top_srcdir/bench/run-ab.sh"
expect_status 0 "run-ab.sh --help" sh "$ab" --help
grep -q "VARIANTS" "$tmp/out" && grep -q "CELLS" "$tmp/out" && pass || fail "run-ab.sh --help names its variables"
mkdir -p "$tmp/main" "$tmp/branch" "$tmp/bin"
printf '#!/bin/sh\n' > "$tmp/main/umpol" && cp "$tmp/main/umpol" "$tmp/branch/umpol" &&
    chmod +x "$tmp/main/umpol" "$tmp/branch/umpol"
P=policies/optimizer-offload.umpol
ok="$tmp/main:$P $tmp/branch:$P+UMPOL_HOST_UPDATE=1"
for bad in "arg|$ok|16:1|takes no arguments" "novars||16:1|VARIANTS is empty" \
        "cells|$ok|16|CELLS: '16' is not" "cells2|$ok|16:1:2|CELLS: '16:1:2' is not" \
        "build|$tmp/none:$P|16:1|no umpol executable" "policy|$tmp/main:nope.umpol|16:1|no policy nope.umpol" \
        "pair|$tmp/main|16:1|is not BUILD:POLICY"; do
    IFS='|' read -r case vars cells said <<E
$bad
E
    arg=; [ "$case" = arg ] && arg=extra
    expect_status 2 "run-ab.sh: $case" env VARIANTS="$vars" CELLS="$cells" OUT="$tmp/o" sh "$ab" $arg
    grep -q "$said" "$tmp/out" && pass || { fail "run-ab.sh: $case: wanted '$said'"; cat "$tmp/out" >&2; }
done
for bad in "ROUNDS=abc|is not a positive whole number" "WARMUP=0|'0' is not a positive" \
        "CELLS= |CELLS is empty"; do
    setting=${bad%%|*}
    expect_status 2 "run-ab.sh: $setting" env VARIANTS="$ok" "$setting" OUT="$tmp/o" sh "$ab"
    grep -q "${bad#*|}" "$tmp/out" && pass || { fail "run-ab.sh: $setting: wanted '${bad#*|}'"; cat "$tmp/out" >&2; }
done
# The stand-in: the run's log, as bench/grid.py drive names it, saying which
# build and policy it ran, with its arguments and the folder it ran in; none
# for a policy set to fail, and one with no step for a policy set to crash.
cat > "$tmp/bin/python3" <<'PY'
#!/bin/sh
args="$*"
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift ;;
    --umpol) build=$(basename "$(dirname "$2")") ;;
    --policy) policy=$2; shift ;;
    esac
    shift
done
case $policy in *FAIL=1*) exit 1 ;; esac
[ -z "${AB_FAIL:-}" ] || exit 1
mkdir -p "$out"
{
    case $policy in *CRASH=1*) echo "out of memory"; exit 0 ;; esac
    echo "median step 10.0 ms over steps 4..8 ($build $(basename "${policy%%+*}") in $(pwd): $args)"
    echo "GPU time by part of the step (median): forward 1 ms"
    echo "the job's thread by part of the step (median): forward 1 ms"
    echo "umpol: saved to host: on (UMPOL_SAVED_TO_HOST=auto; 0 keeps it off): evicted"
    case $policy in *HOST_UPDATE*) echo "umpol: step in backward: off: the job made another optimizer" ;; esac
} > "$out/L16-umpol-7.16GiB.log"
case $policy in *WEIGHTS_AHEAD*) printf '{\n "bytes": 2147483648,\n "h2d_gbps": 52.24882855286022,\n "d2h_gbps": 53.5,\n "both_ways_gbps_each": 40.504615109279776\n}\n' > "$out/bandwidth.json" ;; esac
PY
chmod +x "$tmp/bin/python3"
three="$ok $tmp/main:$P+UMPOL_WEIGHTS_AHEAD=1"
# From another folder, with OUT relative to it: the runs happen in the top
# folder, their output lands in OUT.
mkdir -p "$tmp/elsewhere"
(cd "$tmp/elsewhere" && env PATH="$tmp/bin:$PATH" VARIANTS="$three" CELLS="16:7690256384" ROUNDS=2 \
    WARMUP=2 STEPS=3 OUT=ab sh "$ab") > "$tmp/out" 2>&1 && pass || { fail "run-ab.sh over the stand-in"; cat "$tmp/out" >&2; }
s="$tmp/elsewhere/ab/ab-summary.txt"
top=$(cd "$top_srcdir" && pwd)
[ "$(grep -c '^L16 ' "$s")" -eq 6 ] && [ "$(grep -c '^# ' "$s")" -eq 1 ] && pass ||
    { fail "run-ab.sh: a header and one line a run"; cat "$s" >&2; }
grep '^L16 ' "$s" | sed 's/:.*//' > "$tmp/order"
printf '%s\n' "L16 r1 v1-main-optimizer-offload.umpol" "L16 r1 v2-branch-optimizer-offload.umpol+UMPOL_HOST_UPDATE=1" \
    "L16 r1 v3-main-optimizer-offload.umpol+UMPOL_WEIGHTS_AHEAD=1" \
    "L16 r2 v3-main-optimizer-offload.umpol+UMPOL_WEIGHTS_AHEAD=1" \
    "L16 r2 v2-branch-optimizer-offload.umpol+UMPOL_HOST_UPDATE=1" "L16 r2 v1-main-optimizer-offload.umpol" |
    cmp -s - "$tmp/order" && pass || { fail "run-ab.sh: the runs' order and names"; cat "$tmp/order" >&2; }
grep -q "^L16 r1 v2-branch-.*: median step 10.0 ms over steps 4..8 (branch optimizer-offload.umpol in $top: bench/grid.py drive --out .* --layers 16 --warmup 2 --steps 3 .*--budgets 7690256384)" "$s" &&
    grep -q "^L16 r1 v1-.*(main optimizer-offload.umpol in $top: .*--policy $top/$P --budgets" "$s" && pass ||
    { fail "run-ab.sh: the arguments and folder of a run"; cat "$s" >&2; }
[ "$(grep -c 'pinned copies before it: 52.2 in, 53.5 out, 40.5 each both ways at once (GB/s)$' "$s")" -eq 2 ] &&
    [ "$(grep -c 'pinned copies' "$s")" -eq 2 ] && pass ||
    { fail "run-ab.sh: the pinned copies' rates timed before a run, where it wrote them"; cat "$s" >&2; }
[ "$(grep -c 'step in backward: off: the job made another optimizer' "$s")" -eq 2 ] &&
    ! grep -q "keeps it off" "$s" && pass || { fail "run-ab.sh: the lines where something turned off"; cat "$s" >&2; }
# Called again into the same OUT, runs that now write nothing are said to
# have failed: the last call's runs of the same names do not stand for them.
(cd "$tmp/elsewhere" && env PATH="$tmp/bin:$PATH" AB_FAIL=1 VARIANTS="$three" CELLS="16:7690256384" \
    OUT=ab sh "$ab") > "$tmp/out" 2>&1
[ $? = 1 ] && [ "$(grep -c '^# ' "$s")" -eq 2 ] && [ "$(grep -c 'failed: no run log' "$s")" -eq 3 ] && pass ||
    { fail "run-ab.sh: a second call into the same OUT"; cat "$s" >&2; }
# A run that wrote no log, and one whose log has no step: each said, exit 1.
expect_status 1 "run-ab.sh with failing runs" env PATH="$tmp/bin:$PATH" \
    VARIANTS="$tmp/main:$P+FAIL=1 $tmp/main:$P+CRASH=1" OUT="$tmp/ab2" sh "$ab"
grep -q "^L16 r1 v1-.*+FAIL=1: failed: no run log" "$tmp/ab2/ab-summary.txt" &&
    grep -q "^L16 r1 v2-.*+CRASH=1: failed (see .*L16-umpol-7.16GiB.log)" "$tmp/ab2/ab-summary.txt" &&
    grep -q "2 runs failed" "$tmp/out" && pass || { fail "run-ab.sh: failed runs"; cat "$tmp/ab2/ab-summary.txt" "$tmp/out" >&2; }
# Two builds of one name in two places: each tag names the build's parent too.
mkdir -p "$tmp/base/build" "$tmp/fix/build" && cp "$tmp/main/umpol" "$tmp/base/build/umpol" &&
    cp "$tmp/main/umpol" "$tmp/fix/build/umpol"
env PATH="$tmp/bin:$PATH" VARIANTS="$tmp/base/build:$P $tmp/fix/build:$P+X=1 $tmp/main:$P" \
    OUT="$tmp/ab3" sh "$ab" > "$tmp/out" 2>&1
grep '^L16 ' "$tmp/ab3/ab-summary.txt" | sed 's/:.*//' > "$tmp/order"
printf '%s\n' "L16 r1 v1-base-build-optimizer-offload.umpol" "L16 r1 v2-fix-build-optimizer-offload.umpol+X=1" \
    "L16 r1 v3-main-optimizer-offload.umpol" | cmp -s - "$tmp/order" && pass ||
    { fail "run-ab.sh: builds of one name in two places"; cat "$tmp/order" "$tmp/out" >&2; }
finish
