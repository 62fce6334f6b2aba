set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -20 /tmp/mk.log; exit 1; }
top=$(pwd); r=/tmp/gpu-r; rm -rf $r; mkdir -p $r
export PYTHONPATH=$top/python UMPOL_COMMIT=$(cat build/.commit)
P=policies/optimizer-offload.umpol
export VARIANTS="build:$P: build:$P:UMPOL_HOST_UPDATE=1 build:$P:UMPOL_HOST_UPDATE=1,OMP_WAIT_POLICY=PASSIVE build:$P:UMPOL_HOST_UPDATE=1,UMPOL_HOST_UPDATE_THREADS=1"
export CELLS="16:12116400537" ROUNDS=1 WARMUP=8
OUT=$r timeout 230 sh build/exp4.sh; echo "ab rc=$?"
cut -c1-330 $r/ab-summary.txt; grep -h "host update: [0-9]" $r/ab/*/L*.log
