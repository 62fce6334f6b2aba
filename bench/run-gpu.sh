#!/bin/sh
# GPU measurements of umpol on the machine it runs on; umpol must be built
# in the top directory (./configure && make). Writes to OUT (default
# bench/results/run-<date>):
#   gpu-tests.log           tests/gpu.sh (integrity, advice, cap, PyTorch losses)
#   alloc-pair.jsonl        allocation+free pairs, mixed sizes, one stream and cross-stream:
#                           native vs umpol, interleaved; native cudaMallocManaged
#   migrate.jsonl           4 GiB host->GPU and GPU->host: faults vs umpol prefetch vs memcpy
#   faults-*.json           CUPTI-profiled reports of the migration runs
#   train-*.json            examples/pytorch/train.py step times: allocators side by side
#   constrained/            bench/run-constrained.sh (SKIP_CONSTRAINED=1 leaves it out)
#   summary.md, latest.json the tables of the above, with the ratios side by side
# TRAIN_ONLY=1 / SKIP_TRAIN=1 split the run in two; UMPOL_TOP=DIR takes umpol
# from a build in DIR (libumpol.so in DIR/.libs) instead of the top directory;
# TRAIN_ROUNDS (3) interleaved rounds of the training step times; UMPOL_COMMIT
# names the commit recorded (default git's HEAD, else the file .commit).
# Every run keeps umpol's managed-memory cap on (see the policies used).
set -u
. "$(dirname "$0")/args.sh" # --help prints the comment above; no arguments
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/bench/results/run-$(date +%Y-%m-%d)}
mkdir -p "$out"
cd "$top" || exit 2
build=${UMPOL_TOP:-$top}
lib="$build/.libs/libumpol.so"
umpol="$build/umpol"
[ -x "$umpol" ] && [ -f "$lib" ] || { echo "build umpol first (./configure && make)"; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
device=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
commit=${UMPOL_COMMIT:-}
[ -n "$commit" ] || commit=$(git rev-parse --short HEAD 2>/dev/null || cat "$top/.commit" 2>/dev/null || echo unknown)
echo "device: $device; commit $commit; $(date -u +%Y-%m-%dT%H:%MZ)" | tee "$out/summary.md"

# TRAIN_ONLY=1 runs only the training step times, SKIP_TRAIN=1 all but them
# (two calls where one would run past a time limit).
if [ -z "${TRAIN_ONLY:-}" ]; then
    echo "== GPU tests"
    top_srcdir=$top top_builddir=$build UMPOL_BIN=$umpol UMPOL_GPU_RESULTS=$out \
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
        "$out/alloc_pair" native async >>"$out/alloc-pair.jsonl"
        LD_PRELOAD=$lib UMPOL_POLICY=bench/alloc_pair_managed.umpol "$out/alloc_pair" umpol-managed async >>"$out/alloc-pair.jsonl"
        LD_PRELOAD=$lib UMPOL_POLICY=bench/alloc_pair.umpol "$out/alloc_pair" umpol-device async >>"$out/alloc-pair.jsonl"
    done
    "$out/alloc_pair" native managed >>"$out/alloc-pair.jsonl"
    rm -f "$out/alloc_pair"
    cat "$out/alloc-pair.jsonl"

    echo "== migration: 4 GiB, fault-driven vs umpol prefetch on a phase vs pinned cudaMemcpy"
    "$nvcc" -O2 -cudart shared -I"$top/src" -o "$out/migrate" bench/migrate.cu -L"$build/.libs" -lumpol \
        -Xlinker -rpath -Xlinker "$build/.libs" || exit 1
    : >"$out/migrate.jsonl"
    for round in 1 2; do
        for dir in h2d d2h; do
            LD_PRELOAD=$lib UMPOL_POLICY=bench/migrate-naive.umpol "$out/migrate" $dir 4 fault >>"$out/migrate.jsonl"
            LD_PRELOAD=$lib UMPOL_POLICY=bench/migrate-prefetch.umpol "$out/migrate" $dir 4 umpol >>"$out/migrate.jsonl"
            LD_PRELOAD=$lib UMPOL_POLICY=bench/migrate-movable.umpol "$out/migrate" $dir 4 movable movable >>"$out/migrate.jsonl"
        done
    done
    cat "$out/migrate.jsonl"
    echo "== GPU page faults with CUPTI (UMPOL_PROFILE=1)"
    for pol in naive prefetch; do
        UMPOL_PROFILE=1 UMPOL_REPORT="$out/faults-$pol.json" LD_PRELOAD=$lib \
            UMPOL_POLICY=bench/migrate-$pol.umpol "$out/migrate" h2d 4 profiled-$pol >/dev/null
    done
    rm -f "$out/migrate"
fi

if [ -z "${SKIP_TRAIN:-}" ]; then
    echo "== training step time"
    # Batch 16: a step the GPU bounds, as in real training, so the host's load
    # (shared machines) moves it less; the allocation pair measures the CPU side.
    args="--layers 8 --dim 1024 --heads 16 --seq 1024 --batch 16 --steps 25 --seed 3"
    train() { # label, then the command prefix
        label=$1
        shift
        "$@" python3 examples/pytorch/train.py $args --json "$out/train-$label.json" \
            >"$out/train-$label.log" 2>&1 || { echo "train $label failed"; tail -5 "$out/train-$label.log"; }
        tail -1 "$out/train-$label.log"
    }
    # Interleaved rounds: each round runs every contender back to back, so a
    # ratio taken within a round compares runs under the same machine load.
    rounds=${TRAIN_ROUNDS:-3}
    for round in $(seq "$rounds"); do
        train native-$round env
        train native-async-$round env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
        train naive-$round "$umpol" run -p policies/naive-managed.umpol --
        train umpol-passthrough-$round "$umpol" run -p policies/passthrough.umpol --
        train umpol-finetune-$round "$umpol" run -p policies/llm-finetune.umpol -r "$out/train-report-$round.json" --
    done
    train umpol-finetune-profiled-1 env UMPOL_PROFILE=1 "$umpol" run \
        -p policies/llm-finetune.umpol -r "$out/train-profile-finetune-1.json" --
    train naive-profiled-1 env UMPOL_PROFILE=1 "$umpol" run -p policies/naive-managed.umpol \
        -r "$out/train-profile-naive-1.json" --
fi

if [ -z "${SKIP_CONSTRAINED:-}" ]; then
    echo "== constrained training (bench/run-constrained.sh, into $out/constrained)"
    OUT="$out/constrained" sh bench/run-constrained.sh >"$out/constrained.log" 2>&1
    echo "run-constrained.sh exit $?: $(tail -1 "$out/constrained/summary.md" 2>/dev/null)"
fi

# Two-GPU keys (bench/run-ddp.sh) are carried over from the last latest.json.
python3 bench/summarize.py "$out" "$device" "$commit" "$top/bench/results/latest.json" |
    tee -a "$out/summary.md"
# The dated summary and the latest keys, where bench/README.md says they live.
slug=$(printf '%s' "$device" | cut -d, -f1 | tr ' ' '-' | tr -cd 'A-Za-z0-9-')
cp "$out/summary.md" "$top/bench/results/$(date -u +%Y-%m-%d)-$slug.md"
cp "$out/latest.json" "$top/bench/results/latest.json"
