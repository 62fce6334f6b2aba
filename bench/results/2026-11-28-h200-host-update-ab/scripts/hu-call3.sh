set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -20 /tmp/mk.log; exit 1; }
top=$(pwd); r=/tmp/gpu-r; rm -rf $r; mkdir -p $r
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$r/device.txt"
export PYTHONPATH=$top/python UMPOL_COMMIT=$(cat build/.commit)
export VARIANTS="build:policies/optimizer-offload.umpol: build:policies/optimizer-offload.umpol:UMPOL_HOST_UPDATE=1,UMPOL_HOST_UPDATE_THREADS=8 build:policies/optimizer-offload.umpol:UMPOL_HOST_UPDATE=1,UMPOL_HOST_UPDATE_THREADS=4"
export CELLS="${CELLS:-16:7690256384 32:10515120128}" ROUNDS=1
OUT=$r timeout ${AB_S:-300} sh build/exp4.sh; echo "ab rc=$?"
find $r -name "*hostmap*" -delete; find $r -name "*.json" -size +1M -delete; tar -C /tmp -czf "$OUT/all.tgz" gpu-r; ls -la $OUT
