# call 1: build; gpu.sh on HEAD (mover_device_enter refactor); A/B optimizer-offload with and without `learn step "forward"` at both DeepSpeed peaks.
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -30 /tmp/mk.log; exit 1; }
r=/tmp/gpu-r; rm -rf $r; mkdir -p $r
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $r/device.txt; cp build/.commit $r/commit.txt
top=$(pwd)
s=$(date +%s)
top_srcdir=$top top_builddir=$top/build UMPOL_BIN=$top/build/umpol timeout 200 sh tests/gpu.sh > $r/gpu.log 2>&1
echo "gpu.sh rc=$?" >> $r/gpu.log; tail -3 $r/gpu.log; echo "gpu.sh $(( $(date +%s) - s )) s"
OUT=$r VARIANTS="build:policies/optimizer-offload.umpol:UMPOL_WEIGHTS_AHEAD=1 build:build/oo-learn.umpol:UMPOL_WEIGHTS_AHEAD=1" CELLS="16:8153726976 32:10515120128" ROUNDS=2 sh build/exp4.sh
echo "total $(( $(date +%s) - s )) s"
tar -C /tmp -czf "$OUT/all.tgz" gpu-r
