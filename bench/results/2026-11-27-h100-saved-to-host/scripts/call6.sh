# call 6: build; A/B saved to host where the weights fit (the grid's second budgets); gpu.sh and gpu_python.sh.
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -30 /tmp/mk.log; exit 1; }
r=/tmp/gpu-r; rm -rf $r; mkdir -p $r/python
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $r/device.txt; cp build/.commit $r/commit.txt
top=$(pwd); s=$(date +%s)
OUT=$r VARIANTS="build:policies/optimizer-offload.umpol:UMPOL_WEIGHTS_AHEAD=1 build:policies/optimizer-offload.umpol:UMPOL_WEIGHTS_AHEAD=1,UMPOL_SAVED_TO_HOST=1" CELLS="16:12116400537 32:18943364300" ROUNDS=1 sh build/exp4.sh
echo "A/B $(( $(date +%s) - s )) s"
top_srcdir=$top top_builddir=$top/build UMPOL_BIN=$top/build/umpol timeout 150 sh tests/gpu.sh > $r/gpu.log 2>&1
echo "gpu.sh rc=$?" >> $r/gpu.log; tail -2 $r/gpu.log
top_srcdir=$top top_builddir=$top/build UMPOL_BIN=$top/build/umpol PYTHON_GPU_OUT=$r/python timeout $(( 575 - ($(date +%s) - s) )) sh tests/gpu_python.sh > $r/gpu_python.log 2>&1
echo "gpu_python.sh rc=$?" >> $r/gpu_python.log; grep -E "saved to host:|passed|failed|rc=" $r/gpu_python.log | tail -6
echo "total $(( $(date +%s) - s )) s"
tar -C /tmp -czf "$OUT/all.tgz" gpu-r
