#!/bin/sh
# GPU measurements of umpol on the machine it runs on; umpol must be built
# in the top directory (./configure && make). Writes to OUT (default
# bench/results/run-<date>):
#   gpu-tests.log           tests/gpu.sh (integrity, advice, cap, PyTorch losses)
#   alloc-pair.jsonl        cudaMallocAsync+cudaFreeAsync pair: native vs umpol, interleaved
#   train-*.json            examples/pytorch/train.py step times: allocators side by side
#   summary.md              the table of the above, with the ratios
# Every run keeps umpol's managed-memory cap on (see the policies used).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/bench/results/run-$(date +%Y-%m-%d)}
mkdir -p "$out"
cd "$top" || exit 2
lib="$top/.libs/libumpol.so"
umpol="$top/umpol"
[ -x "$umpol" ] && [ -f "$lib" ] || { echo "build umpol first (./configure && make)"; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
device=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || cat "$top/.commit" 2>/dev/null || echo unknown)
echo "device: $device; commit $commit; $(date -u +%Y-%m-%dT%H:%MZ)" | tee "$out/summary.md"

echo "== GPU tests"
top_srcdir=$top top_builddir=$top UMPOL_BIN=$umpol UMPOL_GPU_RESULTS=$out \
    sh tests/gpu.sh >"$out/gpu-tests.log" 2>&1
echo "tests/gpu.sh exit $?: $(tail -1 "$out/gpu-tests.log")" | tee -a "$out/summary.md"

echo "== C example, shared and static CUDA runtime"
"$nvcc" -O2 -cudart shared -o "$out/um_example" examples/c/um_example.cu &&
    "$umpol" run -v -p examples/c/um_example.umpol -r "$out/example-report.json" -- "$out/um_example" \
        >"$out/example.log" 2>&1
echo "shared cudart: exit $?" | tee -a "$out/summary.md"
"$nvcc" -O2 -o "$out/um_example_static" examples/c/um_example.cu &&
    "$umpol" run -p examples/c/um_example.umpol -- "$out/um_example_static" >>"$out/example.log" 2>&1
echo "static cudart: exit $?; $(grep -c 'saw no CUDA allocation' "$out/example.log") zero-allocation notice" |
    tee -a "$out/summary.md"
rm -f "$out/um_example" "$out/um_example_static"

echo "== allocation pair"
"$nvcc" -O2 -cudart shared -o "$out/alloc_pair" bench/alloc_pair.cu || exit 1
: >"$out/alloc-pair.jsonl"
for round in 1 2 3; do
    "$out/alloc_pair" native >>"$out/alloc-pair.jsonl"
    LD_PRELOAD=$lib UMPOL_POLICY=bench/alloc_pair.umpol "$out/alloc_pair" umpol-device >>"$out/alloc-pair.jsonl"
    LD_PRELOAD=$lib UMPOL_POLICY=bench/alloc_pair_managed.umpol "$out/alloc_pair" umpol-managed >>"$out/alloc-pair.jsonl"
done
rm -f "$out/alloc_pair"
cat "$out/alloc-pair.jsonl"

echo "== training step time"
args="--layers 8 --dim 1024 --heads 16 --seq 1024 --batch 4 --steps 25 --seed 3"
train() { # label, then the command prefix
    label=$1
    shift
    "$@" python3 examples/pytorch/train.py $args --json "$out/train-$label.json" \
        >"$out/train-$label.log" 2>&1 || { echo "train $label failed"; tail -5 "$out/train-$label.log"; }
    tail -1 "$out/train-$label.log"
}
for round in 1 2; do
    train native-$round env
    train async-$round env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
    train umpol-passthrough-$round "$umpol" run -p policies/passthrough.umpol --
    train umpol-finetune-$round "$umpol" run -p policies/llm-finetune.umpol -r "$out/train-report-$round.json" --
done

python3 - "$out" <<'PY' | tee -a "$out/summary.md"
import json, statistics, sys, os
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "alloc-pair.jsonl"))]
print("\n| allocation pair (ns, best of 5 x 200k; median over 3 interleaved rounds) | native | umpol device class | umpol managed class | umpol/native (device) |")
print("|---|---|---|---|---|")
for key in ("pair_ns_4096", "pair_ns_1048576", "pair_ns_67108864"):
    med = {lab: statistics.median(r[key] for r in rows if r["label"] == lab)
           for lab in ("native", "umpol-device", "umpol-managed")}
    print(f"| {key[8:]} bytes | {med['native']:.0f} | {med['umpol-device']:.0f} | "
          f"{med['umpol-managed']:.0f} | {med['umpol-device'] / med['native']:.2f} |")
def load(label):
    runs = [json.load(open(os.path.join(out, f"train-{label}-{r}.json"))) for r in (1, 2)
            if os.path.exists(os.path.join(out, f"train-{label}-{r}.json"))]
    return runs
print("\n| training (8 layers, dim 1024, 4 x 1024 tokens, bf16, fused AdamW) | median step ms (2 runs) | losses equal to native |")
print("|---|---|---|")
base = load("native")
for label in ("native", "async", "umpol-passthrough", "umpol-finetune"):
    runs = load(label)
    if not runs:
        print(f"| {label} | failed | - |")
        continue
    ms = statistics.median(r["median_step_ms"] for r in runs)
    same = all(max(abs(a - b) / abs(a) for a, b in zip(base[0]["losses"], r["losses"])) <= 1e-2 for r in runs)
    print(f"| {label} | {ms:.1f} | {'yes' if same else 'NO'} |")
nat = statistics.median(r["median_step_ms"] for r in base)
for label in ("async", "umpol-passthrough", "umpol-finetune"):
    runs = load(label)
    if runs:
        print(f"\n{label} / native step time: {statistics.median(r['median_step_ms'] for r in runs) / nat:.3f}")
PY
