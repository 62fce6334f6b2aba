#!/bin/sh
# Variants of umpol side by side at chosen cells of the grid (bench/grid.py
# drive, umpol cells only, no anchors): the A/B behind the result folders that
# compare a change with main in one call. See --help.
set -u
usage() {
    cat <<'EOF'
Usage: [VARIANTS=...] [CELLS=...] sh bench/run-ab.sh

Runs each variant at each cell of the grid's Llama (bench/grid.py drive), one
process each, back to back, and prints one line a run: its median step, the
card's peak and the link's bytes, GPU and job-thread time by part of the step,
and every line where umpol said something turned off.

Environment:
  VARIANTS   space-separated BUILD:POLICY (required). BUILD is a directory,
             relative to the top or absolute, holding the umpol executable
             (a build of main beside one of a branch, say); POLICY a .umpol
             file, optionally followed by +VAR=VALUE settings, as in the
             grid's GRID_POLICY: build:policies/optimizer-offload.umpol+UMPOL_HOST_UPDATE=1
  CELLS      space-separated LAYERS:BUDGET_BYTES (default 16:7690256384)
  ROUNDS     rounds over the cells (default 1); even rounds run the variants
             in reverse order, so that neither always runs first
  WARMUP     warm-up steps (default 4); STEPS timed steps (default 5)
  CELL_TIMEOUT_S  one run's limit (default 170)
  OUT        where the runs and ab-summary.txt go (default bench/results/ab-DATE)
  UMPOL_STEP_IN_BACKWARD (default 1) and GRID_AUTOCAST_CACHE (default 0) as
             in the grid's umpol cells; other variables pass through.
EOF
}
case ${1:-} in
-h | --help) usage; exit 0 ;;
"") ;;
*) echo "run-ab.sh: takes no arguments, only variables (see --help)" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "run-ab.sh: $*" >&2; exit 2; }
[ -n "${VARIANTS:-}" ] || die "VARIANTS is empty: give BUILD:POLICY pairs (see --help)"
cells=${CELLS:-16:7690256384}
for cell in $cells; do
    case $cell in
    *[!0-9:]* | :* | *: | *:*:*) die "CELLS: '$cell' is not LAYERS:BUDGET_BYTES" ;;
    *:*) ;;
    *) die "CELLS: '$cell' is not LAYERS:BUDGET_BYTES" ;;
    esac
done
for v in $VARIANTS; do
    case $v in *:*) ;; *) die "VARIANTS: '$v' is not BUILD:POLICY" ;; esac
    build=${v%%:*}
    policy=${v#*:}
    case $build in /*) ;; *) build=$top/$build ;; esac
    [ -x "$build/umpol" ] || die "VARIANTS: '$v': no umpol executable in $build"
    [ -f "$top/${policy%%+*}" ] || [ -f "${policy%%+*}" ] || die "VARIANTS: '$v': no policy ${policy%%+*}"
done
out=${OUT:-$top/bench/results/ab-$(date +%Y-%m-%d)}
mkdir -p "$out" || die "cannot make $out"
export UMPOL_STEP_IN_BACKWARD=${UMPOL_STEP_IN_BACKWARD:-1} GRID_AUTOCAST_CACHE=${GRID_AUTOCAST_CACHE:-0}
export PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
cd "$top" || exit 2
round=1
while [ "$round" -le "${ROUNDS:-1}" ]; do
    for cell in $cells; do
        layers=${cell%%:*}
        budget=${cell#*:}
        order=$VARIANTS
        [ $((round % 2)) = 0 ] && order=$(printf '%s\n' $VARIANTS | sed -n '1!G;h;$p')
        for v in $order; do
            build=${v%%:*}
            policy=${v#*:}
            case $build in /*) ;; *) build=$top/$build ;; esac
            tag=$(printf '%s' "$(basename "$build")-$(basename "$policy")" | tr -c 'A-Za-z0-9._=+-' '_')
            run=$out/L$layers-$budget-r$round-$tag
            python3 bench/grid.py drive --out "$run" --umpol "$build/umpol" --layers "$layers" \
                --warmup "${WARMUP:-4}" --steps "${STEPS:-5}" --cell-timeout-s "${CELL_TIMEOUT_S:-170}" \
                --variants --policy "$policy" --budgets "$budget" >> "$out/ab.log" 2>&1
            log=$(ls "$run"/L*-umpol-*.log 2>/dev/null | head -1)
            if [ -z "$log" ]; then
                line="no run log (see $out/ab.log)"
            else
                line="$(grep -h 'median step' "$log" | head -1) | $(grep -h 'GPU time' "$log" | head -1) |"
                line="$line $(grep -h "job's thread by" "$log" | head -1) | $(grep -h '^umpol: [a-z ]*: off:' "$log" | tr '\n' ' ')"
            fi
            echo "L$layers r$round $tag: $line" | tee -a "$out/ab-summary.txt"
        done
    done
    round=$((round + 1))
done
