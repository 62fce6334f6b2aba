#!/bin/sh
# GPU test: unmodified training scripts under `umpol run -- LAUNCHER ...` on
# every visible GPU, skipped (exit 77) without a GPU or PyTorch:
#   torchrun + DDP, torchrun + FSDP2, accelerate launch, PyTorch Lightning.
# For each: exit 0 within 90 s; one report per rank; in each rank's report the
# policy's weights, optimizer and activations classes got allocations and the
# automatic phases forward, backward and optimizer.step were entered; every
# rank printed finite losses. A framework that is not installed is SKIP.
# Writes $PYTHON_GPU_OUT/frameworks.json (and keeps the reports and logs there).
. "${top_srcdir:-.}/tests/lib.sh"
[ -f "$top_builddir/.libs/libumpol.so" ] || { echo "SKIP: libumpol.so not built"; exit 77; }
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: no GPU or no PyTorch"; exit 77; }
out=${PYTHON_GPU_OUT:-$tmp}
mkdir -p "$out/frameworks"
# NVLink multicast stays off: it can take a shared host's GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1
n=$(python3 -c 'import torch; print(max(1, torch.cuda.device_count()))')
policy="$top_srcdir/policies/ddp-finetune.umpol"
gpu="$top_srcdir/tests/gpu"
if command -v torchrun >/dev/null; then torchrun="torchrun"; else torchrun="python3 -m torch.distributed.run"; fi
if command -v accelerate >/dev/null; then accelerate="accelerate launch"; else accelerate="python3 -m accelerate.commands.launch"; fi
multi=
[ "$n" -gt 1 ] && multi=--multi_gpu
echo "$n GPU(s)"
: >"$out/frameworks/results.jsonl"

# framework NAME NEEDS CMD...: run CMD under umpol, judge it (NEEDS: modules it imports).
framework() {
    name=$1
    needs=$2
    shift 2
    dir="$out/frameworks/$name"
    rm -rf "$dir"
    mkdir -p "$dir"
    missing=
    for m in $needs; do
        python3 -c "import $m" 2>/dev/null || missing="$missing $m"
    done
    if [ -n "$missing" ]; then
        echo "$name SKIP: not installed:$missing"
        printf '{"framework": "%s", "ok": null, "ranks": %s, "classes": {}, "note": "not installed:%s"}\n' \
            "$name" "$n" "$missing" \
            >>"$out/frameworks/results.jsonl"
        return
    fi
    timeout -k 10 90 "$UMPOL_BIN" run -p "$policy" -r "$dir/rep-%r-%p.json" -- "$@" >"$dir/log" 2>&1
    status=$?
    if python3 - "$name" "$dir" "$n" "$status" >>"$out/frameworks/results.jsonl" <<'PY'; then
import glob, json, math, os, re, sys
name, dir, n, status = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
classes = ("weights", "optimizer", "activations")  # ddp-finetune.umpol's, besides comm and rest
phases = ("forward", "backward", "optimizer.step")
problems, counts = [], {}
if status:
    problems.append("timed out after 90 s" if status in (124, 137) else f"exit {status}")
losses = {}
for line in open(os.path.join(dir, "log"), errors="replace"):
    m = re.match(r"losses (\d+) (.*)$", line.strip())
    if m:
        losses[int(m.group(1))] = [float(x) for x in m.group(2).split()]
for r in range(n):
    reports = []
    for p in glob.glob(os.path.join(dir, f"rep-{r}-*.json")):
        try:
            reports.append(json.load(open(p)))
        except ValueError as e:
            problems.append(f"rank {r}: unreadable report {os.path.basename(p)}: {e}")
    if not reports:
        problems.append(f"rank {r}: no report")
        continue
    # A launcher that allocated on the GPU writes a report too: judge the worker's.
    rep = max(reports, key=lambda x: sum(c["allocations"] for c in x["classes"]))
    got = {c["name"]: c["allocations"] for c in rep["classes"]}
    counts[str(r)] = got
    for c in classes:
        if got.get(c, 0) <= 0:
            problems.append(f"rank {r}: class {c} got no allocation")
    seen = {p["name"]: p["entries"] for p in rep.get("phases", [])}
    for ph in phases:
        if seen.get(ph, 0) <= 0:
            problems.append(f"rank {r}: phase {ph} never entered")
    if not losses.get(r):
        problems.append(f"rank {r}: printed no losses")
    elif not all(math.isfinite(x) for x in losses[r]):
        problems.append(f"rank {r}: losses not finite: {losses[r]}")
note = "; ".join(problems) if problems else \
    f"losses rank 0: {' '.join(f'{x:.4f}' for x in losses.get(0, []))}"
print(json.dumps({"framework": name, "ok": not problems, "ranks": n, "classes": counts, "note": note}))
print(f"{name} {'ok' if not problems else 'FAIL'}: {note}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
        pass
    else
        fail "$name under umpol run (log: $dir/log)"
        tail -15 "$dir/log" | sed 's/^/    /' >&2
    fi
}

framework ddp "transformers" $torchrun --standalone --nproc-per-node "$n" "$gpu/fw_torchrun.py"
framework fsdp2 "transformers" $torchrun --standalone --nproc-per-node "$n" "$gpu/fw_torchrun.py" --fsdp
framework accelerate "transformers accelerate" $accelerate --num_processes "$n" --num_machines 1 \
    $multi --mixed_precision no --dynamo_backend no --main_process_port 29517 "$gpu/fw_accelerate.py"
# Either package name will do; with neither, the SKIP note names both.
lightning=lightning/pytorch_lightning
for m in lightning.pytorch pytorch_lightning; do
    python3 -c "import $m" 2>/dev/null && { lightning=$m; break; }
done
framework lightning "transformers $lightning" python3 "$gpu/fw_lightning.py" --devices "$n"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/frameworks/results.jsonl") if l.strip()]
result = {r.pop("framework"): r for r in rows}
json.dump(result, open(f"{out}/frameworks.json", "w"), indent=1)
PY
finish
