#!/bin/sh
# Constrained training on one GPU: a 0.95B-parameter decoder whose fp32
# weights, gradients and AdamW state (about 15 GiB) must fit the peak GPU
# memory that FSDP2 with CPUOffloadPolicy reaches. Every contender is held to
# that peak: activations to host (save_on_cpu) through PyTorch's allocator
# limit, umpol through its budget (llm-finetune, which brings the optimizer
# state in for each step; optimizer-offload, which leaves it on the host; and
# weights-offload, which keeps weights and optimizer state in pinned host
# memory). A contender fits when the card's own figure (cudaMemGetInfo) stays
# within the peak; umpol's count is shown beside it.
# Tokens/s and the peak GPU memory in use are measured alike for all
# (cudaMemGetInfo sampled every 5 ms); save_on_cpu and plain PyTorch also run
# unheld, for scale.
# Writes to OUT: constrained-*.json/log, summary.md, latest-constrained.json and
# a plot of umpol's run.
# Environment: OUT (default bench/results/constrained-DATE); UMPOL, the umpol
# command of a build elsewhere (UMPOL=build/umpol); STEPS per run (16);
# BUDGET_MARGIN, bytes the budget stays below the held peak (0: the card also
# holds what no allocator counts, such as the CUDA context's growth and
# library workspaces, and umpol's budget bounds only its own count);
# EXTRA_POLICIES, more policy files (with `budget gpu 80%;`), each run alike as
# umpol-NAME; SKIP_PROFILED=1 leaves out the last run, with CUPTI's counters.
set -u
. "$(dirname "$0")/args.sh" # --help prints the comment above; no arguments
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/bench/results/constrained-$(date +%Y-%m-%d)}
mkdir -p "$out"
cd "$top" || exit 2
umpol=${UMPOL:-$top/umpol}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
steps=${STEPS:-16}
big="--layers 16 --dim 2048 --heads 16 --seq 1024 --batch 2 --steps $steps --seed 3 --track-memory"
run() { # label, command...
    label=$1
    shift
    "$@" >"$out/constrained-$label.log" 2>&1 || { echo "$label failed"; tail -8 "$out/constrained-$label.log"; }
    tail -2 "$out/constrained-$label.log"
}
run fsdp-cpu-offload python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    examples/pytorch/train.py $big --fsdp --cpu-offload --json "$out/constrained-fsdp-cpu-offload.json"
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_gpu_used_bytes"])' \
    "$out/constrained-fsdp-cpu-offload.json" 2>/dev/null || echo $((8 << 30)))
echo "held peak: $peak bytes"
run save-on-cpu python3 examples/pytorch/train.py $big --save-on-cpu --gpu-limit "$peak" \
    --json "$out/constrained-save-on-cpu.json"
run save-on-cpu-unheld python3 examples/pytorch/train.py $big --save-on-cpu \
    --json "$out/constrained-save-on-cpu-unheld.json"
run native-unheld python3 examples/pytorch/train.py $big --json "$out/constrained-native-unheld.json"
# The stock policies and EXTRA_POLICIES, with the budget at that peak less
# BUDGET_MARGIN bytes.
budget=$((peak - ${BUDGET_MARGIN:-0}))
echo "umpol's budget: $budget bytes"
extra=""
for policy in llm-finetune optimizer-offload weights-offload ${EXTRA_POLICIES:-}; do
    src=policies/$policy.umpol
    case $policy in */*)
        src=$policy
        policy=$(basename "$policy" .umpol)
        extra="$extra umpol-$policy" ;;
    esac
    sed "s/^budget gpu 80%;.*/budget gpu ${budget}B;/" "$src" >"$out/constrained-$policy.umpol"
    "$umpol" check -q "$out/constrained-$policy.umpol" || exit 1
    run "umpol-$policy" "$umpol" run -p "$out/constrained-$policy.umpol" \
        -r "$out/constrained-umpol-$policy-report.json" -- \
        python3 examples/pytorch/train.py $big --json "$out/constrained-umpol-$policy.json"
    python3 bench/plot_timeline.py "$out/constrained-umpol-$policy-report.json" \
        "$out/constrained-umpol-$policy.json" "$out/constrained-umpol-$policy.png" \
        "umpol ($policy), 0.95B parameters on one GPU, budget = FSDP2 offload's peak" || echo "no plot"
done
# Once more with CUPTI's counters, to see where the time goes (not timed).
[ -n "${SKIP_PROFILED:-}" ] || UMPOL_PROFILE=1 run umpol-optimizer-offload-profiled "$umpol" run -p "$out/constrained-optimizer-offload.umpol" \
    -r "$out/constrained-umpol-optimizer-offload-profiled-report.json" -- \
    python3 examples/pytorch/train.py $big --json "$out/constrained-umpol-optimizer-offload-profiled.json"
[ -n "${SKIP_PROFILED:-}" ] || "$umpol" report "$out/constrained-umpol-optimizer-offload-profiled-report.json" \
    >"$out/constrained-umpol-optimizer-offload-profiled-report.txt" 2>&1
python3 - "$out" "$peak" "$budget" $extra <<'PY' | tee "$out/summary.md"
import json, os, sys
out, held, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
labels = ("fsdp-cpu-offload", "save-on-cpu", "umpol-llm-finetune", "umpol-optimizer-offload",
          "umpol-weights-offload", *sys.argv[4:], "save-on-cpu-unheld",
          "native-unheld")  # the profiled run is left out: CUPTI slows it
rows, latest = {}, {"constrained.held_peak_bytes": held, "constrained.umpol_budget_bytes": budget}
for label in labels:
    p = os.path.join(out, f"constrained-{label}.json")
    rows[label] = json.load(open(p)) if os.path.exists(p) else None
print(f"Every contender held to {held / 2**30:.2f} GiB (FSDP2 offload's peak; \"within\" allows 2% for sampling), "
      "except the -unheld runs (for scale: native is the whole model on the GPU); "
      f"umpol's budget {budget / 2**30:.2f} GiB.\n")
def umpol_resident(label):
    """The most umpol held on the GPU at once, from its report's timeline: the
    figure its budget bounds. cudaMemGetInfo cannot show it for managed
    memory: the driver keeps the memory of pages that left the GPU."""
    p = os.path.join(out, f"constrained-{label}-report.json")
    if not os.path.exists(p):
        return None
    tl = json.load(open(p)).get("timeline") or {}
    events = tl.get("events", []) if isinstance(tl, dict) else tl
    return max((e.get("resident_bytes", 0) for e in events), default=0)
print(f"| contender (0.95B params, 2 x 1024 tokens, {len(next(r for r in rows.values() if r)['losses'])} steps) | tokens/s | peak GPU memory in use above start, cudaMemGetInfo (GiB) | peak held by umpol, its count (GiB) | within the held peak, as the card sees it | loss first -> last |")
print("|---|---|---|---|---|---|")
fits = {}
for label in labels:
    r = rows[label]
    if r is None:
        print(f"| {label} | failed (see constrained-{label}.log) | | | no | |")
        continue
    peak = r["peak_gpu_used_bytes"]
    held_by_umpol = umpol_resident(label) if label.startswith("umpol") else None
    # The card's own figure decides for every contender: the budget bounds
    # umpol's count, and the card may hold more (managed pages that left).
    fits[label] = peak <= held * 1.02 or label == "fsdp-cpu-offload"
    print(f"| {label} | {r['tokens_per_s']:.0f} | {peak / 2**30:.2f} | "
          f"{'' if held_by_umpol is None else f'{held_by_umpol / 2**30:.2f}'} | "
          f"{'yes' if fits[label] else 'no'} | {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f} |")
    key = label.replace("-", "_")
    latest[f"constrained.{key}_tokens_per_s"] = round(r["tokens_per_s"], 1)
    latest[f"constrained.{key}_peak_gpu_bytes"] = peak
    if held_by_umpol is not None:
        latest[f"constrained.{key}_peak_resident_bytes"] = held_by_umpol
umpols = [l for l in labels if l.startswith("umpol") and fits.get(l)]
others = [l for l in labels if not l.startswith("umpol") and not l.endswith("-unheld") and fits.get(l)]
if umpols and others:
    best_u = max(umpols, key=lambda l: rows[l]["tokens_per_s"])
    best_o = max(others, key=lambda l: rows[l]["tokens_per_s"])
    ratio = rows[best_u]["tokens_per_s"] / rows[best_o]["tokens_per_s"]
    latest["constrained.umpol_tokens_per_s"] = round(rows[best_u]["tokens_per_s"], 1)
    latest["constrained.umpol_peak_resident_bytes"] = umpol_resident(best_u)
    latest["constrained.umpol_peak_gpu_bytes"] = rows[best_u]["peak_gpu_used_bytes"]
    latest["constrained.umpol_policy"] = best_u[len("umpol-"):]
    latest["constrained.best_other"] = best_o
    latest["constrained.umpol_over_best_other"] = round(ratio, 3)
    print(f"\numpol ({best_u}) / best other within the peak ({best_o}): {ratio:.2f} (goal >= 1.5)")
else:
    print("\nno umpol run stayed within the held peak: no ratio")
json.dump(latest, open(os.path.join(out, "latest-constrained.json"), "w"), indent=1)
print(json.dumps(latest))
PY
