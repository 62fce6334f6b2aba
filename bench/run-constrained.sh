#!/bin/sh
# Constrained training on one GPU: a 0.95B-parameter decoder whose fp32
# weights, gradients and AdamW state (about 15 GiB) are offloaded three ways —
# activations to host (save_on_cpu), FSDP2's CPUOffloadPolicy, and umpol with
# llm-finetune under a budget set to the smaller peak the other two reached —
# with tokens/s and the peak GPU memory in use measured alike for all three.
# Writes to OUT: constrained-*.json/log, summary.md, latest-constrained.json and
# a plot of umpol's run.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/bench/results/constrained-$(date +%Y-%m-%d)}
mkdir -p "$out"
cd "$top" || exit 2
umpol="$top/umpol"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
big="--layers 16 --dim 2048 --heads 16 --seq 1024 --batch 2 --steps 8 --seed 3 --track-memory"
run() { # label, command...
    label=$1
    shift
    "$@" >"$out/constrained-$label.log" 2>&1 || { echo "$label failed"; tail -8 "$out/constrained-$label.log"; }
    tail -2 "$out/constrained-$label.log"
}
run save-on-cpu python3 examples/pytorch/train.py $big --save-on-cpu --json "$out/constrained-save-on-cpu.json"
run fsdp-cpu-offload python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    examples/pytorch/train.py $big --fsdp --cpu-offload --json "$out/constrained-fsdp-cpu-offload.json"
peak=$(python3 - "$out" <<'PY'
import json, os, sys
peaks = [json.load(open(os.path.join(sys.argv[1], f"constrained-{l}.json")))["peak_gpu_used_bytes"]
         for l in ("save-on-cpu", "fsdp-cpu-offload")
         if os.path.exists(os.path.join(sys.argv[1], f"constrained-{l}.json"))]
print(min(peaks) if peaks else 8 << 30)
PY
)
# The same policy as the stock full fine-tune, with the budget at that peak.
sed "s/^budget gpu 80%;.*/budget gpu ${peak}B;/" policies/llm-finetune.umpol >"$out/constrained.umpol"
"$umpol" check -q "$out/constrained.umpol" || exit 1
run umpol "$umpol" run -p "$out/constrained.umpol" -r "$out/constrained-umpol-report.json" -- \
    python3 examples/pytorch/train.py $big --json "$out/constrained-umpol.json"
python3 bench/plot_timeline.py "$out/constrained-umpol-report.json" "$out/constrained-umpol.json" \
    "$out/constrained-umpol.png" "umpol, 0.95B parameters on one GPU, budget = the smaller peak of the others" ||
    echo "no plot"
python3 - "$out" <<'PY' | tee "$out/summary.md"
import json, os, sys
out = sys.argv[1]
rows, latest = {}, {}
for label in ("save-on-cpu", "fsdp-cpu-offload", "umpol"):
    p = os.path.join(out, f"constrained-{label}.json")
    if os.path.exists(p):
        rows[label] = json.load(open(p))
print("| contender (0.95B params, 2 x 1024 tokens, 8 steps) | tokens/s | peak GPU memory in use above start (GiB) | loss first -> last |")
print("|---|---|---|---|")
for label, r in rows.items():
    print(f"| {label} | {r['tokens_per_s']:.0f} | {r['peak_gpu_used_bytes'] / 2**30:.2f} | "
          f"{r['losses'][0]:.4f} -> {r['losses'][-1]:.4f} |")
    key = label.replace("-", "_")
    latest[f"constrained.{key}_tokens_per_s"] = round(r["tokens_per_s"], 1)
    latest[f"constrained.{key}_peak_gpu_bytes"] = r["peak_gpu_used_bytes"]
others = [r["tokens_per_s"] for l, r in rows.items() if l != "umpol"]
if "umpol" in rows and others:
    ratio = rows["umpol"]["tokens_per_s"] / max(others)
    latest["constrained.umpol_over_best_other"] = round(ratio, 3)
    print(f"\numpol / best other: {ratio:.2f} (goal >= 1.5)")
json.dump(latest, open(os.path.join(out, "latest-constrained.json"), "w"), indent=1)
print(json.dumps(latest))
PY
