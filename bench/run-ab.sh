#!/bin/sh
# Variants of umpol side by side at chosen cells of the grid (bench/grid.py
# drive, umpol cells only, no anchors): the A/B behind the result folders that
# compare a change with main in one call. See --help.
set -u
usage() {
    cat <<'EOF'
Usage: VARIANTS=... [CELLS=...] sh bench/run-ab.sh

Runs each variant at each cell of the grid's Llama (bench/grid.py drive), one
process each, back to back, and prints one line a run: its median step, the
card's peak and the link's bytes, GPU and job-thread time by part of the step,
every line where umpol said something turned off, and the pinned copies' rates
timed just before the run (one way each, and both ways at once: on a shared
host the latter moves between runs, and a step that moves much both ways
moves with it).

Environment:
  VARIANTS   space-separated BUILD:POLICY (required). BUILD is a directory,
             relative to the top or absolute, holding the umpol executable
             (a build of main beside one of a branch, say); POLICY a .umpol
             file, optionally followed by +VAR=VALUE settings, as in the
             grid's GRID_POLICY: build:policies/optimizer-offload.umpol+UMPOL_WEIGHTS_AHEAD=1
  CELLS      space-separated LAYERS:BUDGET_BYTES (default 16:7690256384)
  ROUNDS     rounds over the cells (default 1); even rounds run the variants
             in reverse order, so that neither always runs first
  WARMUP     warm-up steps (default 4); STEPS timed steps (default 5)
  CELL_TIMEOUT_S  one run's limit (default 170)
  OUT        where the runs and ab-summary.txt go (default
             bench/results/ab-DATE-TIME); a call adds a header line and its
             runs to ab-summary.txt, and replaces runs of the same name
  UMPOL_STEP_IN_BACKWARD (default 1) and GRID_AUTOCAST_CACHE (default 0) as
             in the grid's umpol cells; other variables pass through.
Exit status: 0, 1 when a run failed (said in its line), 2 for a malformed variable.
EOF
}
case ${1:-} in
-h | --help) usage; exit 0 ;;
"") ;;
*) echo "run-ab.sh: takes no arguments, only variables (see --help)" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
set -f  # VARIANTS and CELLS are split on spaces, never globbed
die() { printf 'run-ab.sh: %s\n' "$*" >&2; exit 2; }
rate() {  # rate FILE KEY: KEY's number in the bandwidth.json grid.py drive writes (one key a line)
    sed -n "s/^ *\"$2\": *\([0-9.]*\).*/\1/p" "$1" | head -1
}
rates() {  # rates FILE: the pinned copies' GB/s, or nothing where FILE or a figure is missing
    [ -f "$1" ] || return 0
    h2d=$(rate "$1" h2d_gbps) d2h=$(rate "$1" d2h_gbps) both=$(rate "$1" both_ways_gbps_each)
    [ -n "$h2d" ] && [ -n "$d2h" ] && [ -n "$both" ] || return 0
    printf 'pinned copies before it: %.1f in, %.1f out, %.1f each both ways at once (GB/s)' \
        "$h2d" "$d2h" "$both"
}
count() {  # count NAME VALUE: VALUE must be a positive whole number
    case $2 in '' | *[!0-9]* | 0*) die "$1: '$2' is not a positive whole number" ;; esac
}
count ROUNDS "${ROUNDS:=1}"
count WARMUP "${WARMUP:=4}"
count STEPS "${STEPS:=5}"
count CELL_TIMEOUT_S "${CELL_TIMEOUT_S:=170}"
[ -n "${VARIANTS:-}" ] || die "VARIANTS is empty: give BUILD:POLICY pairs (see --help)"
cells=${CELLS-16:7690256384}
[ -n "$(printf '%s' "$cells" | tr -d ' ')" ] || die "CELLS is empty: give LAYERS:BUDGET_BYTES cells (see --help)"
for cell in $cells; do
    case $cell in
    *[!0-9:]* | :* | *: | *:*:*) die "CELLS: '$cell' is not LAYERS:BUDGET_BYTES" ;;
    *:*) ;;
    *) die "CELLS: '$cell' is not LAYERS:BUDGET_BYTES" ;;
    esac
done
# Each variant as one line, NUMBER BUILD POLICY, its paths made absolute (the
# runs happen in the top directory, whatever the caller's); then with its TAG.
arms= n=0
for v in $VARIANTS; do
    case $v in *:*) ;; *) die "VARIANTS: '$v' is not BUILD:POLICY" ;; esac
    n=$((n + 1))
    build=${v%%:*}
    policy=${v#*:}
    file=${policy%%+*}
    settings=${policy#"$file"}
    case $build in /*) ;; *) build=$(cd "$build" 2>/dev/null && pwd || printf '%s' "$top/$build") ;; esac
    [ -x "$build/umpol" ] || die "VARIANTS: '$v': no umpol executable in $build"
    if [ -f "$file" ]; then
        file=$(cd "$(dirname "$file")" && pwd)/$(basename "$file")
    elif [ -f "$top/$file" ]; then
        file=$top/$file
    else
        die "VARIANTS: '$v': no policy $file"
    fi
    arms="$arms$n $build $file$settings
"
done
# Each run's tag: the variant's number, its build's folder name (with the
# parent's where another variant's build of that name lies elsewhere:
# base-build, main-build), its policy and settings.
label() {
    printf '%s' "$arms" | while read -r _ other _; do
        if [ "$other" != "$1" ] && [ "$(basename "$other")" = "$(basename "$1")" ]; then
            printf '%s-' "$(basename "$(dirname "$1")")"
            break
        fi
    done
    basename "$1"
}
arms=$(printf '%s' "$arms" | while read -r n build policy; do
    file=${policy%%+*}
    printf '%s %s %s %s\n' "$n" "$build" "$policy" \
        "$(printf 'v%s-%s-%s%s' "$n" "$(label "$build")" "$(basename "$file")" "${policy#"$file"}" |
           tr -c 'A-Za-z0-9._=+-' '_')"
done)
out=${OUT:-$top/bench/results/ab-$(date +%Y-%m-%d-%H%M%S)}
mkdir -p "$out" || die "cannot make $out"
out=$(cd "$out" && pwd)
export UMPOL_STEP_IN_BACKWARD=${UMPOL_STEP_IN_BACKWARD:-1} GRID_AUTOCAST_CACHE=${GRID_AUTOCAST_CACHE:-0}
export PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
cd "$top" || exit 2
printf '# %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(printf '%s' "$arms" | cut -d' ' -f4 | tr '\n' ' ')" \
    >> "$out/ab-summary.txt"
failed=0 round=1
while [ "$round" -le "$ROUNDS" ]; do
    for cell in $cells; do
        layers=${cell%%:*}
        budget=${cell#*:}
        order=$arms
        [ $((round % 2)) = 0 ] && order=$(printf '%s' "$arms" | sed -n '1!G;h;$p')
        while read -r n build policy tag; do
            [ -n "$n" ] || continue
            run=$out/L$layers-$budget-r$round-$tag
            rm -rf "$run"  # an earlier call's run of the same name must not stand for this one
            python3 bench/grid.py drive --out "$run" --umpol "$build/umpol" --layers "$layers" \
                --warmup "$WARMUP" --steps "$STEPS" --cell-timeout-s "$CELL_TIMEOUT_S" \
                --variants --policy "$policy" --budgets "$budget" >> "$out/ab.log" 2>&1
            log=$(find "$run" -maxdepth 1 -name 'L*-umpol-*.log' 2>/dev/null | head -1)
            if [ -z "$log" ]; then
                line="failed: no run log (see $out/ab.log)"
                failed=$((failed + 1))
            elif ! grep -q 'median step' "$log"; then
                line="failed (see $log)"
                failed=$((failed + 1))
            else
                line="$(grep -h 'median step' "$log" | head -1) | $(grep -h 'GPU time' "$log" | head -1) |"
                line="$line $(grep -h "job's thread by" "$log" | head -1) | $(grep -h '^umpol: [a-z ]*: off:' "$log" | tr '\n' ' ')"
                pinned=$(rates "$run/bandwidth.json")
                [ -z "$pinned" ] || line="$line| $pinned"
            fi
            printf 'L%s r%s %s: %s\n' "$layers" "$round" "$tag" "$line" | tee -a "$out/ab-summary.txt"
        done <<EOF_ARMS
$order
EOF_ARMS
    done
    round=$((round + 1))
done
[ "$failed" = 0 ] || { printf 'run-ab.sh: %s runs failed\n' "$failed" >&2; exit 1; }
