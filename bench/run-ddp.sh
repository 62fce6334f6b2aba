#!/bin/sh
# Two-GPU measurements of umpol under torchrun (umpol built in the top
# directory). Writes to OUT: DDP losses and step times with and without umpol,
# interleaved; the `torchrun --no-python umpol run` form; FSDP2 with an offload
# policy under a 6 GiB emulated GPU; per-rank reports; summary.md, latest-ddp.json.
set -u
. "$(dirname "$0")/args.sh" # --help prints the comment above; no arguments
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/bench/results/ddp-$(date +%Y-%m-%d)}
mkdir -p "$out"
cd "$top" || exit 2
umpol="$top/umpol"
# NVLink multicast stays off: it can take a shared host's GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
run="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
args="--layers 8 --dim 1024 --heads 16 --seq 1024 --batch 4 --steps 25 --seed 3"
step() { # label, command...
    label=$1
    shift
    "$@" >"$out/$label.log" 2>&1 || { echo "$label failed"; tail -15 "$out/$label.log"; }
    grep "median step" "$out/$label.log" | tail -1 | sed "s/^/$label: /"
}
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
for round in 1 2; do
    step ddp-native-$round $run examples/pytorch/train.py $args --ddp --json "$out/ddp-native-$round.json"
    step ddp-umpol-$round "$umpol" run -p policies/llm-finetune.umpol -r "$out/ddp-$round-rank%r.json" -- \
        $run examples/pytorch/train.py $args --ddp --json "$out/ddp-umpol-$round.json"
done
step ddp-nopython $run --no-python "$umpol" run -p policies/llm-finetune.umpol \
    -r "$out/ddp-nopython-rank%r.json" -- python3 examples/pytorch/train.py $args --steps 6 --ddp \
    --json "$out/ddp-nopython.json"
step fsdp-offload "$umpol" run -p bench/fsdp-offload.umpol -r "$out/fsdp-rank%r.json" -- \
    $run examples/pytorch/train.py --layers 16 --dim 2048 --heads 16 --seq 1024 --batch 2 \
    --steps 8 --seed 3 --fsdp --track-memory --json "$out/fsdp.json"
python3 bench/plot_timeline.py "$out/fsdp-rank0.json" "$out/fsdp.json" "$out/fsdp-rank0-timeline.png" \
    "FSDP2, rank 0 of 2, GPU budget 6 GiB (bench/fsdp-offload.umpol)" || echo "no plot"
"$umpol" report "$out"/ddp-1-rank*.json >"$out/ddp-report.txt" 2>&1
"$umpol" report "$out"/fsdp-rank*.json >"$out/fsdp-report.txt" 2>&1
head -30 "$out/fsdp-report.txt"
python3 - "$out" <<'PY' | tee "$out/summary.md"
import glob, json, os, statistics, sys
out = sys.argv[1]
def load(n):
    p = os.path.join(out, n)
    return json.load(open(p)) if os.path.exists(p) else None
nat = [load(f"ddp-native-{r}.json") for r in (1, 2)]
um = [load(f"ddp-umpol-{r}.json") for r in (1, 2)]
latest = {}
if all(nat) and all(um):
    n = statistics.median(r["median_step_ms"] for r in nat)
    u = statistics.median(r["median_step_ms"] for r in um)
    diff = max(abs(a - b) / abs(a) for r in um for a, b in zip(nat[0]["losses"], r["losses"]))
    print(f"DDP, 2 ranks, 8 layers dim 1024: native {n:.1f} ms/step, umpol llm-finetune {u:.1f} ms/step, "
          f"ratio {u / n:.3f}; losses max rel. diff {diff:.1e}")
    latest.update({"ddp2.native_step_ms": round(n, 2), "ddp2.umpol_step_ms": round(u, 2),
                   "ddp2.umpol_over_native": round(u / n, 3), "ddp2.loss_match": diff <= 1e-2})
np_ = load("ddp-nopython.json")
print("torchrun --no-python umpol run: " + ("ran, losses " + " ".join(f"{x:.4f}" for x in np_["losses"]) if np_ else "FAILED"))
reports = sorted(glob.glob(os.path.join(out, "ddp-1-rank*.json")))
print(f"per-rank reports of DDP round 1: {[os.path.basename(p) for p in reports]}")
f = load("fsdp.json")
ranks = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "fsdp-rank*.json")))]
if f:
    params = f["params"]
    state = params * (4 + 4 + 8) / 2  # fp32 params, grads, two AdamW moments; sharded over 2
    ev = sum(c["evictions"] for r in ranks for c in r["classes"])
    resid = max((d["resident_bytes"] for r in ranks for d in r["devices"]), default=0)
    print(f"FSDP2, 2 ranks, {params / 1e9:.2f}B parameters: model state {state / 2**30:.1f} GiB per rank "
          f"against a 6 GiB budget; {len(f['losses'])} steps, loss {f['losses'][0]:.4f} -> {f['losses'][-1]:.4f}, "
          f"median step {f['median_step_ms']:.0f} ms; {ev} evictions over both ranks")
    latest.update({"fsdp2.params": params, "fsdp2.state_gib_per_rank": round(state / 2**30, 2),
                   "fsdp2.budget_gib": 6, "fsdp2.steps": len(f["losses"]),
                   "fsdp2.first_loss": round(f["losses"][0], 4), "fsdp2.last_loss": round(f["losses"][-1], 4),
                   "fsdp2.median_step_ms": round(f["median_step_ms"], 1), "fsdp2.evictions": ev})
else:
    print("FSDP2 offload run FAILED")
json.dump(latest, open(os.path.join(out, "latest-ddp.json"), "w"), indent=1)
print(json.dumps(latest))
PY
