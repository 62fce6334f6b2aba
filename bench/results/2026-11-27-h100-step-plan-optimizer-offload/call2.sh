# call 2: weights brought back at each forward pass, with and without the step's plan, at both DeepSpeed peaks.
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -30 /tmp/mk.log; exit 1; }
r=/tmp/gpu-r; rm -rf $r; mkdir -p $r
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $r/device.txt; cp build/.commit $r/commit.txt
s=$(date +%s)
OUT=$r VARIANTS="build:policies/optimizer-offload.umpol:UMPOL_WEIGHTS_AHEAD=1 build:build/oo-learn-back.umpol:UMPOL_WEIGHTS_AHEAD=1 build:build/oo-back.umpol:UMPOL_WEIGHTS_AHEAD=1" CELLS="${CELLS:-16:8153726976 32:10515120128}" ROUNDS=${ROUNDS:-2} sh build/exp4.sh
echo "total $(( $(date +%s) - s )) s"
tar -C /tmp -czf "$OUT/all.tgz" gpu-r
