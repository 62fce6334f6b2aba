#!/bin/sh
# Device-side driver (not part of the project): sh build/gpu-run.sh PART...
# Parts: dswheel tests grid ab. Results under $OUT (tarred).
set -u
top=$(pwd); b=$top/build; r=/tmp/gpu-r; s0=$(date +%s)
rm -rf "$r"; mkdir -p "$r"
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -30 /tmp/mk.log; exit 1; }
export PYTHONPATH=$top/python UMPOL=$b/umpol UMPOL_COMMIT=$(cat "$b/.commit")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$r/device.txt"
cp "$b/.commit" "$r/commit.txt"
site() {
    ls $b/wheels/deepspeed-*.whl > /dev/null 2>&1 || (cd $b/wheels && pip wheel -q --no-deps --no-build-isolation -w . deepspeed-0.19.8.tar.gz > "$r/dswheel.log" 2>&1)
    mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
    export PYTHONPATH=$PYTHONPATH:/tmp/site
}
for part in "$@"; do
    start=$(date +%s)
    case $part in
    dswheel)
        site; cp $b/wheels/deepspeed-*.whl "$OUT/" ; ls -la "$OUT" ;;
    tests)
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol timeout 150 sh tests/gpu.sh > "$r/gpu.log" 2>&1
        echo "gpu.sh rc=$?" >> "$r/gpu.log"
        mkdir -p "$r/python"
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol PYTHON_GPU_OUT=$r/python timeout ${PYTEST_S:-330} sh tests/gpu_python.sh > "$r/gpu_python.log" 2>&1
        echo "gpu_python.sh rc=$?" >> "$r/gpu_python.log"
        tail -2 "$r/gpu.log"; grep -E "saved to host:|passed|failed|rc=" "$r/gpu_python.log" | tail -6 ;;
    gpuonly)
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol timeout 150 sh tests/gpu.sh > "$r/gpu.log" 2>&1
        echo "gpu.sh rc=$?" >> "$r/gpu.log"; tail -2 "$r/gpu.log" ;;
    pytests)
        mkdir -p "$r/python"
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol PYTHON_GPU_OUT=$r/python timeout ${PYTEST_S:-330} sh tests/gpu_python.sh > "$r/gpu_python.log" 2>&1
        echo "gpu_python.sh rc=$?" >> "$r/gpu_python.log"
        grep -E "saved to host|weights ahead|passed|failed|rc=" "$r/gpu_python.log" | tail -8 ;;
    grid)
        site
        L=${GRID_LAYERS:-16}
        UMPOL_STEP_IN_BACKWARD=1 GRID_AUTOCAST_CACHE=0 GRID_VARIANTS="ckpt fsdp-offload deepspeed" GRID_LAYERS=$L \
            GRID_DEADLINE_S=${GRID_DEADLINE_S:-500} GRID_CELL_TIMEOUT_S=150 GRID_POLICY="$GRID_POLICY" \
            OUT=$r/grid-l$L timeout ${GRID_TIMEOUT_S:-560} sh bench/run-grid.sh > "$r/grid-l$L.txt" 2>&1
        echo "rc=$?" >> "$r/grid-l$L.txt"; tail -16 "$r/grid-l$L.txt" ;;
    ab)
        OUT=$r sh build/exp4.sh; cat "$r/ab-summary.txt" ;;
    esac
    echo "$part: $(( $(date +%s) - start )) s" | tee -a "$r/times.txt"
done
echo "total $(( $(date +%s) - s0 )) s"
tar -C /tmp -czf "$OUT/all.tgz" gpu-r && ls -la "$OUT"
