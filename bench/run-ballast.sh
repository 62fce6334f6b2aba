#!/bin/sh
# Does umpol run as fast on a card really that small as under its own budget?
# Its budget bounds only what it counts, and where a class of managed memory
# is evicted or its freed space taken back the driver keeps the GPU memory of
# the pages that left. Here a ballast process (bench/ballast.py, device
# memory, never managed) leaves the job only FSDP2 CPUOffloadPolicy's peak
# (2% more for sampling) beyond a CUDA context, and the same training runs
# under it: FSDP2 offload (the ballast is fair if it fits), umpol's
# optimizer-offload.umpol and weights-offload.umpol, each with its budget at
# that peak and its managed-memory cap there too, so no run ever asks for
# more managed memory than the card has free. optimizer-offload also runs
# without the ballast, with the stock policy's cap, for its speed there. The
# 0.95B model of bench/run-constrained.sh.
# Environment: OUT, UMPOL (the umpol command), STEPS (16), RUN_TIMEOUT_S
# (seconds each run may take before it is stopped and counted failed; 300).
# Writes to OUT: ballast-*.json/log, summary.md.
set -u
. "$(dirname "$0")/args.sh" # --help prints the comment above; no arguments
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/bench/results/ballast-$(date +%Y-%m-%d)}
mkdir -p "$out"
cd "$top" || exit 2
umpol=${UMPOL:-$top/umpol}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
steps=${STEPS:-16}
big="--layers 16 --dim 2048 --heads 16 --seq 1024 --batch 2 --steps $steps --seed 3 --track-memory"
ballast_pid=
stop_ballast() {
    [ -n "$ballast_pid" ] && kill "$ballast_pid" 2>/dev/null && wait "$ballast_pid" 2>/dev/null
    ballast_pid=
}
trap stop_ballast EXIT
run() { # label, ballasted (0/1), command...
    label=$1 ballasted=$2
    shift 2
    if [ "$ballasted" = 1 ]; then
        rm -f "$out/ready"
        python3 bench/ballast.py --free "$room" --ready "$out/ready" >"$out/ballast-$label-ballast.log" 2>&1 &
        ballast_pid=$!
        while [ ! -s "$out/ready" ] && kill -0 "$ballast_pid" 2>/dev/null; do sleep 0.2; done
        [ -s "$out/ready" ] || { echo "$label: no ballast"; cat "$out/ballast-$label-ballast.log"; return; }
        cp "$out/ready" "$out/ballast-$label-ballast.txt"
    fi
    timeout "${RUN_TIMEOUT_S:-300}" "$@" >"$out/ballast-$label.log" 2>&1 || { echo "$label failed"; tail -4 "$out/ballast-$label.log"; }
    tail -1 "$out/ballast-$label.log"
    stop_ballast
}
run fsdp-cpu-offload-unheld 0 python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    examples/pytorch/train.py $big --fsdp --cpu-offload --json "$out/ballast-fsdp-cpu-offload-unheld.json"
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_gpu_used_bytes"])' \
    "$out/ballast-fsdp-cpu-offload-unheld.json") || exit 1
room=$((peak + peak / 50))
echo "FSDP2 offload's peak: $peak bytes; the ballast leaves $room beyond a context"
for policy in optimizer-offload weights-offload; do
    sed -e "s/^budget gpu 80%;.*/budget gpu ${peak}B;/" -e "s/^cap managed .*/cap managed ${peak}B;/" \
        "policies/$policy.umpol" >"$out/ballast-$policy.umpol"
    "$umpol" check -q "$out/ballast-$policy.umpol" || exit 1
done
run fsdp-cpu-offload 1 python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    examples/pytorch/train.py $big --fsdp --cpu-offload --json "$out/ballast-fsdp-cpu-offload.json"
for policy in optimizer-offload weights-offload; do
    run "umpol-$policy" 1 "$umpol" run -p "$out/ballast-$policy.umpol" -r "$out/ballast-umpol-$policy-report.json" \
        -- python3 examples/pytorch/train.py $big --json "$out/ballast-umpol-$policy.json"
done
# Unheld, its cap as the stock policy has it (the job's managed memory can
# pass the budget: slabs, and free space kept for reuse).
sed "s/^budget gpu 80%;.*/budget gpu ${peak}B;/" policies/optimizer-offload.umpol \
    >"$out/ballast-optimizer-offload-unheld.umpol"
run umpol-optimizer-offload-unheld 0 "$umpol" run -p "$out/ballast-optimizer-offload-unheld.umpol" \
    -r "$out/ballast-umpol-optimizer-offload-unheld-report.json" \
    -- python3 examples/pytorch/train.py $big --json "$out/ballast-umpol-optimizer-offload-unheld.json"
python3 - "$out" "$peak" <<'PY' | tee "$out/summary.md"
import json, os, sys
out, peak = sys.argv[1], int(sys.argv[2])
labels = ("fsdp-cpu-offload-unheld", "fsdp-cpu-offload", "umpol-optimizer-offload", "umpol-weights-offload",
          "umpol-optimizer-offload-unheld")
print(f"The card made small: a ballast leaves {peak * 1.02 / 2**30:.2f} GiB beyond a CUDA context "
      f"(FSDP2 offload's unheld peak, {peak / 2**30:.2f} GiB, and 2%). umpol: budget and managed cap at that peak.\n")
print("| run | ballast | tokens/s | card's peak above start (GiB) | loss first -> last |")
print("|---|---|---|---|---|")
for label in labels:
    p = os.path.join(out, f"ballast-{label}.json")
    held = "no" if label.endswith("-unheld") else "yes"
    if not os.path.exists(p):
        print(f"| {label} | {held} | failed (ballast-{label}.log) | | |")
        continue
    r = json.load(open(p))
    print(f"| {label} | {held} | {r['tokens_per_s']:.0f} | {r['peak_gpu_used_bytes'] / 2**30:.2f} | "
          f"{r['losses'][0]:.4f} -> {r['losses'][-1]:.4f} |")
PY
