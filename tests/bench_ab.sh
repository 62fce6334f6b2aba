#!/bin/sh
# bench/run-ab.sh without a GPU: its --help, a clear error and exit 2 for each
# malformed variable, and, over a stand-in for bench/grid.py drive (a python3
# first in PATH that writes the log a run writes), one summary line a run, the
# variants in reverse order in even rounds, and the lines where umpol said
# something turned off, not those that only say how to turn it off.
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
# The stand-in: the run's log, as bench/grid.py drive names it, saying which
# build and policy it ran.
cat > "$tmp/bin/python3" <<'PY'
#!/bin/sh
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift ;;
    --umpol) build=$(basename "$(dirname "$2")") ;;
    --policy) policy=$2; shift ;;
    esac
    shift
done
mkdir -p "$out"
{
    echo "median step 10.0 ms over steps 4..8 ($build $policy)"
    echo "GPU time by part of the step (median): forward 1 ms"
    echo "the job's thread by part of the step (median): forward 1 ms"
    echo "umpol: saved to host: on (UMPOL_SAVED_TO_HOST=auto; 0 keeps it off): evicted"
    case $policy in *HOST_UPDATE*) echo "umpol: step in backward: off: the job made another optimizer" ;; esac
} > "$out/L16-umpol-7.16GiB.log"
PY
chmod +x "$tmp/bin/python3"
expect_status 0 "run-ab.sh over the stand-in" env PATH="$tmp/bin:$PATH" VARIANTS="$ok" \
    CELLS="16:7690256384" ROUNDS=2 OUT="$tmp/ab" sh "$ab"
s="$tmp/ab/ab-summary.txt"
[ "$(wc -l < "$s")" -eq 4 ] && pass || { fail "run-ab.sh: one line a run"; cat "$s" >&2; }
sed -n 1p "$s" | grep -q "^L16 r1 main-optimizer-offload.umpol: median step 10.0 ms .*(main $P)" &&
    sed -n 2p "$s" | grep -q "^L16 r1 branch-optimizer-offload.umpol+UMPOL_HOST_UPDATE=1: .*(branch $P+UMPOL_HOST_UPDATE=1)" &&
    sed -n 3p "$s" | grep -q "^L16 r2 branch-" && sed -n 4p "$s" | grep -q "^L16 r2 main-" && pass ||
    { fail "run-ab.sh: the runs' order and names"; cat "$s" >&2; }
[ "$(grep -c 'step in backward: off: the job made another optimizer' "$s")" -eq 2 ] &&
    ! grep -q "keeps it off" "$s" && pass || { fail "run-ab.sh: the lines where something turned off"; cat "$s" >&2; }
finish
