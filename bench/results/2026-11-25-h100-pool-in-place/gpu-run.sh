#!/bin/sh
# Device-side driver (not part of the project): sh build/gpu-run.sh PART...
# Parts: tests constrained train ballast. Results under $OUT/r.
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
    constrained)
        SKIP_PROFILED=1 OUT=$r/constrained timeout 420 sh bench/run-constrained.sh > "$r/constrained.log" 2>&1
        echo "rc=$?" >> "$r/constrained.log"; rm -f "$r"/constrained/*.png; tail -20 "$r/constrained.log" ;;
    train)
        UMPOL_TOP=$b TRAIN_ONLY=1 SKIP_CONSTRAINED=1 OUT=$r/train timeout 560 sh bench/run-gpu.sh > "$r/train.log" 2>&1
        echo "rc=$?" >> "$r/train.log"; tail -20 "$r/train.log" ;;
    gridfit)
        for v in stock devacts; do
            pol=policies/optimizer-offload.umpol; [ $v = devacts ] && pol=$b/optimizer-offload-devacts.umpol
            UMPOL_TRACE=$r/gridfit-$v/trace-%p.txt timeout 280 python3 bench/grid.py drive --out "$r/gridfit-$v" --umpol "$b/umpol" \
                --variants --policy "$pol" --layers ${GRIDFIT_LAYERS:-16} --budgets ${GRIDFIT_BUDGETS:-16964281958} --warmup 3 --steps 5 \
                --cell-timeout-s 200 --deadline-s 250 > "$r/gridfit-$v.log" 2>&1
            echo "$v rc=$?" >> "$r/gridfit-$v.log"; tail -3 "$r/gridfit-$v.log"
        done
        gzip -f "$r"/gridfit-*/trace-*.txt 2>/dev/null ;;
    ballast)
        OUT=$r/ballast timeout 560 sh bench/run-ballast.sh > "$r/ballast.log" 2>&1
        echo "rc=$?" >> "$r/ballast.log"; tail -20 "$r/ballast.log" ;;
    esac
    echo "$part: $(( $(date +%s) - start )) s" | tee -a "$r/times.txt"
done
tar -C /tmp -czf "$OUT/all.tgz" gpu-r && ls -la "$OUT"
