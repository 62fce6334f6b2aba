#!/bin/sh
# The benchmark grid on one GPU (bench/grid.py): Hugging Face LlamaForCausalLM
# at 0.94B (16 layers) and 1.75B (32 layers) parameters, 8 x 1024 tokens,
# gradient checkpointing on. Per model, at their own peaks: checkpointing
# alone, + save_on_cpu, + FSDP2 CPUOffloadPolicy, DeepSpeed ZeRO-2 with CPUAdam
# (and SuperOffload), TRL's activation offloading; then umpol under POLICY at
# three budgets read from those peaks: DeepSpeed's, one between, and one just
# below checkpointing alone; and a fourth at the lowest peak of any anchor
# where one peaked below DeepSpeed's (FSDP2's offload, on the H100). Needs umpol built in the top directory (or UMPOL
# set), PyTorch and transformers; DeepSpeed and TRL where installed (a missing
# one shows as a failed cell).
#
# Environment: OUT (default bench/results/grid-DATE), GRID_POLICY (default
# policies/optimizer-offload.umpol; its `budget gpu` line is changed; several,
# space-separated: one per budget, highest first, the last serving the rest,
# "A|B" running each at that budget, the summary keeping the faster; a policy
# followed by "+VAR=VALUE" runs with that variable set, as
# "policies/optimizer-offload.umpol+UMPOL_WEIGHTS_AHEAD=1"; or
# `suggest`: per model one short recorded run, then at each budget the policy
# `umpol suggest --budget` drafts from it, as a user would run umpol),
# GRID_LAYERS ("16 32"), GRID_VARIANTS (all anchors), WARMUP (3), STEPS (5
# timed), GRID_DEADLINE_S (cells that would start later are skipped),
# GRID_CELL_TIMEOUT_S (one run's limit, 240), GRID_AUTOCAST_CACHE (0: every
# variant's autocast region keeps no casts of the weights, cache_enabled=False;
# unset: torch's default), UMPOL, UMPOL_COMMIT (the commit recorded; default
# git's HEAD, else the file .commit), and grid.py's GRID_SEGMENTS,
# GRID_LINK_BY_PART, GRID_TORCH_TRACE, GRID_TORCH_STACK and GRID_HOST_MAP
# (python3 bench/grid.py --help).
# Writes OUT/cells.jsonl, per-cell logs, JSON and umpol reports, OUT/summary.md
# and OUT/latest-grid.json (the grid.* keys to merge into latest.json).
set -u
. "$(dirname "$0")/args.sh" # --help prints the comment above; no arguments
top=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$top/bench/results/grid-$(date +%Y-%m-%d)}
mkdir -p "$out"
cd "$top" || exit 2
umpol=${UMPOL:-$top/umpol}
[ -x "$umpol" ] || { echo "build umpol first (./configure && make), or set UMPOL"; exit 2; }
policy=${GRID_POLICY:-policies/optimizer-offload.umpol}
if [ "$policy" != suggest ]; then
    for p in $(echo "$policy" | tr '|' ' '); do "$umpol" check -q "${p%%+*}" || exit 1; done
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 DS_ACCELERATOR=cuda
device=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
commit=${UMPOL_COMMIT:-}
[ -n "$commit" ] || commit=$(git rev-parse --short HEAD 2>/dev/null || cat "$top/.commit" 2>/dev/null || echo unknown)
echo "device: $device; commit $commit; policy $policy; $(date -u +%Y-%m-%dT%H:%MZ)"
variants=${GRID_VARIANTS:-}
python3 bench/grid.py drive --out "$out" --umpol "$umpol" --policy $policy \
    --layers ${GRID_LAYERS:-16 32} ${variants:+--variants $variants} \
    --warmup "${WARMUP:-3}" --steps "${STEPS:-5}" --deadline-s "${GRID_DEADLINE_S:-3600}" \
    --cell-timeout-s "${GRID_CELL_TIMEOUT_S:-240}"
python3 bench/grid_summary.py "$device" "$commit" "$out/latest-grid.json" "$out" | tee "$out/summary.md"
