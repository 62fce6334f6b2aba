#!/bin/sh
# Device-side driver (not part of the project): sh build/gpu-run.sh PART...
# The two parts this results directory ran: tests and sib. Results in $OUT/all.tgz.
set -u
top=$(pwd)
b=$top/build
r=/tmp/gpu-r
rm -rf "$r"
mkdir -p "$r"
export PYTHONPATH=$top/python UMPOL=$b/umpol UMPOL_COMMIT=$(cat "$b/.commit")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$r/device.txt"
cp "$b/.commit" "$r/commit.txt"
for part in "$@"; do
    start=$(date +%s)
    date -u +%Y-%m-%dT%H:%M:%SZ > "$r/$part-date.txt"
    case $part in
    tests)
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol timeout 200 sh tests/gpu.sh > "$r/gpu.log" 2>&1
        echo "gpu.sh rc=$?" >> "$r/gpu.log"
        mkdir -p "$r/python"
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol PYTHON_GPU_OUT=$r/python timeout 240 sh tests/gpu_python.sh > "$r/gpu_python.log" 2>&1
        echo "gpu_python.sh rc=$?" >> "$r/gpu_python.log"
        tail -2 "$r/gpu.log" "$r/gpu_python.log" ;;
    sib)
        # The optimizer's step in backward (UMPOL_STEP_IN_BACKWARD=1) against the same policy
        # without it, checkpointing and DeepSpeed, at B less the card's own overhead.
        L=${TIGHT_LAYERS:-16}; B=${TIGHT_BUDGET:-8147435520}; M=${TIGHT_MARGIN:-343932928}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/sib-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 4 --steps 5 --cell-timeout-s 150 "$@" >> "$r/sib-L$L.log" 2>&1; }
        [ "${SIB_ANCHORS:-ckpt deepspeed}" != none ] &&
            g anchors --variants ${SIB_ANCHORS:-ckpt deepspeed} --policy policies/optimizer-offload.umpol --budgets $((B - M))
        for pol in ${SIB_POLICIES:-optimizer-offload}; do
            g $pol-off --variants --policy policies/$pol.umpol --budgets $((B - M))
            export UMPOL_STEP_IN_BACKWARD=1
            g $pol-on --variants --policy policies/$pol.umpol --budgets $((B - M))
            unset UMPOL_STEP_IN_BACKWARD
        done
        grep -h "step in backward" "$r"/sib-L$L/*/*.log | sort | uniq -c
        tail -30 "$r/sib-L$L.log" ;;
    esac
    echo "$part: $(( $(date +%s) - start )) s" | tee -a "$r/times.txt"
done
tar -C /tmp -czf "$OUT/all.tgz" gpu-r && ls -la "$OUT"
