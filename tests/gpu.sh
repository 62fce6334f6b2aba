#!/bin/sh
# GPU tests of the preloaded runtime: skipped (exit 77) without a GPU.
#   - data integrity under forced evictions and prefetches
#   - every advice really applied
#   - the managed-memory cap refusing with an out-of-memory error, in C and in PyTorch
#   - under a budget, nothing reaching the GPU but what the runtime placed (CUPTI)
#   - examples/pytorch/train.py under `umpol run` with the full-fine-tune policy
#     giving the same losses as without umpol
# Every check keeps a managed-memory cap far below the card's memory.
. "${top_srcdir:-.}/tests/lib.sh"
lib="$top_builddir/.libs/libumpol.so"
[ -f "$lib" ] || { echo "SKIP: libumpol.so not built"; exit 77; }
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 ||
    { echo "SKIP: no GPU"; exit 77; }
nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null 2>&1 || nvcc=/usr/local/cuda/bin/nvcc
[ -x "$(command -v "$nvcc")" ] || { echo "SKIP: no nvcc"; exit 77; }
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader

# The checks, and once more built with per-thread default streams, whose
# stream-ordered calls go through the _ptsz entry points.
for variant in "" "-default-stream per-thread"; do
    out="$tmp/gpu_checks${variant:+_ptsz}"
    if ! "$nvcc" -O2 -cudart shared $variant -I"$top_srcdir/src" -o "$out" \
        "$top_srcdir/tests/gpu/gpu_checks.cu" -L"$top_builddir/.libs" -lumpol \
        -Xlinker -rpath -Xlinker "$(cd "$top_builddir/.libs" && pwd)" >"$tmp/build.log" 2>&1; then
        cat "$tmp/build.log"
        fail "nvcc build of gpu_checks $variant"
        finish
        exit 1
    fi
done
expect_status 0 "gpu integrity, per-thread default streams (_ptsz)" env LD_PRELOAD="$lib" \
    UMPOL_POLICY="$top_srcdir/tests/gpu/integrity.umpol" "$tmp/gpu_checks_ptsz" integrity
cat "$tmp/out"
for check in integrity advice cap residency pinned faults movable; do
    expect_status 0 "gpu $check" env LD_PRELOAD="$lib" UMPOL_PROFILE=1 \
        UMPOL_REPORT="$tmp/$check-report.json" \
        UMPOL_POLICY="$top_srcdir/tests/gpu/$check.umpol" "$tmp/gpu_checks" "$check"
    cat "$tmp/out"
done
# Under the budget the runtime alone moves pages to the GPU: kernels touching
# evicted blocks read them over the link, so the blocks see no GPU page fault
# and no more bytes reach the GPU than the runtime prefetched.
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/residency-report.json" <<'PY' || fail "gpu residency: pages reached the GPU unplaced"
import json, sys
r = json.load(open(sys.argv[1]))
c = next(c for c in r["classes"] if c["name"] == "data")
um = c.get("um")
if um is None:
    print("no CUPTI counters (profiling unavailable): not checked")
    sys.exit(0)
print(f"residency: class data: {um['gpu_faults']} GPU faults, {um['htod_bytes'] >> 20} MiB to the GPU "
      f"by the driver, {c['prefetch_bytes'] >> 20} MiB placed by the runtime, {c['evictions']} evictions")
assert um["gpu_faults"] == 0 and um["htod_bytes"] <= c["prefetch_bytes"]
PY
    # The faults check's kernel reads a managed block on the host that nothing
    # prefetched or mapped, so it faults: each class that took GPU faults has
    # the driver's time servicing them, and none has time without faults.
    python3 - "$tmp"/*-report.json <<'PY' || fail "gpu: fault service time (um.gpu_fault_ns) wrong"
import json, sys
faulted = profiled = 0
for path in sys.argv[1:]:
    for c in json.load(open(path))["classes"]:
        um = c.get("um")
        if um is None:
            continue
        profiled += 1
        print(f"{path.rsplit('/', 1)[-1]}: class {c['name']}: {um['gpu_faults']} GPU faults, "
              f"{um['gpu_fault_ns'] / 1e6:.3f} ms servicing them")
        assert (um["gpu_faults"] > 0) == (um["gpu_fault_ns"] > 0), "faults and their time disagree"
        faulted += path.endswith("/faults-report.json") and c["name"] == "faulting" and um["gpu_faults"] > 0
if not profiled:
    print("no CUPTI counters (profiling unavailable): not checked")
    sys.exit(0)
assert faulted, "class faulting of the faults check took no GPU fault"
PY
fi

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    # OutOfMemoryError from PyTorch when the cap refuses.
    printf 'umpol 1;\ncap managed 512MiB;\nclass all { match any; }\n' >"$tmp/cap.umpol"
    expect_status 0 "PyTorch raises OutOfMemoryError at the cap" "$UMPOL_BIN" run -p "$tmp/cap.umpol" -- \
        python3 -c '
import torch
a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
try:
    b = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print("OutOfMemoryError:", str(e).splitlines()[0])
else:
    raise SystemExit("no OutOfMemoryError over the cap")
c = torch.ones(1 << 20, device="cuda")
assert c.sum().item() == 1 << 20
'
    cat "$tmp/out"

    train="$top_srcdir/examples/pytorch/train.py"
    args="--layers 4 --dim 512 --heads 8 --seq 512 --batch 4 --steps 12 --seed 1"
    expect_status 0 "train.py natively" python3 "$train" $args --json "$tmp/native.json"
    expect_status 0 "train.py under umpol (llm-finetune)" "$UMPOL_BIN" run -v \
        -p "$top_srcdir/policies/llm-finetune.umpol" -r "$tmp/train-report.json" -- \
        python3 "$train" $args --json "$tmp/umpol.json"
    tail -4 "$tmp/out"
    python3 - "$tmp/native.json" "$tmp/umpol.json" "$tmp/train-report.json" <<'PY' || fail "losses differ"
import json, sys
native, um = (json.load(open(p))["losses"] for p in sys.argv[1:3])
report = json.load(open(sys.argv[3]))
worst = max(abs(a - b) / abs(a) for a, b in zip(native, um))
print("losses native: " + " ".join(f"{x:.4f}" for x in native))
print("losses umpol:  " + " ".join(f"{x:.4f}" for x in um))
print(f"largest relative difference {worst:.2e} (tolerance 1e-2, bf16)")
for c in report["classes"]:
    print(f"  class {c['name']:12s} allocations {c['allocations']:7d}  peak {c['peak_bytes'] >> 20:6d} MiB"
          f"  prefetches {c['prefetches']:6d}")
assert len(native) == len(um) and worst <= 1e-2
assert report["totals"]["allocations"] > 0
PY
    # Discarding dead blocks must never touch live data: same losses again.
    expect_status 0 "train.py under umpol with UMPOL_DISCARD=1" env UMPOL_DISCARD=1 "$UMPOL_BIN" run \
        -p "$top_srcdir/policies/llm-finetune.umpol" -r "$tmp/discard-report.json" -- \
        python3 "$train" $args --json "$tmp/discard.json"
    python3 - "$tmp/native.json" "$tmp/discard.json" "$tmp/discard-report.json" <<'PY' || fail "discard changed the losses"
import json, sys
native, disc = (json.load(open(p))["losses"] for p in sys.argv[1:3])
report = json.load(open(sys.argv[3]))
worst = max(abs(a - b) / abs(a) for a, b in zip(native, disc))
discarded = sum(c["discard_bytes"] for c in report["classes"])
print(f"UMPOL_DISCARD=1: largest relative loss difference {worst:.2e}, {discarded / 2**30:.2f} GiB discarded")
assert worst <= 1e-2 and discarded > 0
PY
    cat "$tmp/out" | tail -1
    if [ -n "${UMPOL_GPU_RESULTS:-}" ]; then
        cp "$tmp/native.json" "$UMPOL_GPU_RESULTS/train-native.json"
        cp "$tmp/umpol.json" "$UMPOL_GPU_RESULTS/train-umpol.json"
        cp "$tmp/train-report.json" "$UMPOL_GPU_RESULTS/train-report.json"
    fi
else
    echo "PyTorch with CUDA not available: PyTorch checks not run"
fi
finish
