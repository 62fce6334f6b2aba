set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -20 /tmp/mk.log; exit 1; }
top=$(pwd); r=/tmp/gpu-r; rm -rf $r; mkdir -p $r/python
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$r/device.txt"
export PYTHONPATH=$top/python UMPOL_COMMIT=$(cat build/.commit)
for m in cpu; do
    env UMPOL_STEP_IN_BACKWARD=1 UMPOL_HOST_UPDATE=1 timeout 60 ./build/umpol run -p tests/gpu/sib-host.umpol -- \
        python3 tests/gpu/python_host_update.py $m $r/python/hu-$m.pt > $r/python/hu-$m.log 2>&1
    echo "$m rc=$?"; grep -v "^umpol: step in backward" $r/python/hu-$m.log | tail -3
done
export VARIANTS="build:policies/optimizer-offload.umpol: build:policies/optimizer-offload.umpol:UMPOL_HOST_UPDATE=1"
export CELLS="16:12116400537 16:7690256384" ROUNDS=1 WARMUP=8
OUT=$r timeout 230 sh build/exp4.sh; echo "ab rc=$?"
find $r -name "*hostmap*" -delete; find $r -name "*.json" -size +1M -delete; tar -C /tmp -czf "$OUT/all.tgz" gpu-r
cut -c1-250 $r/ab-summary.txt; grep -h "host update: [0-9]" $r/ab/*/L*.log
