set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -20 /tmp/mk.log; exit 1; }
r=/tmp/gpu-r; rm -rf $r; mkdir -p $r/python
top_srcdir=$(pwd) top_builddir=$(pwd)/build UMPOL_BIN=$(pwd)/build/umpol PYTHON_GPU_OUT=$r/python timeout 280 sh tests/gpu_python.sh > $r/gpu_python.log 2>&1
echo "gpu_python.sh rc=$?" >> $r/gpu_python.log; tail -3 $r/gpu_python.log
GRID_AUTOCAST_CACHE=0 UMPOL_STEP_IN_BACKWARD=1 timeout 150 python3 bench/grid.py drive --out $r/mid --umpol build/umpol --layers 32 --warmup 4 --steps 5 --cell-timeout-s 140 --variants --policy policies/optimizer-offload.umpol --budgets 18943364300 > $r/mid.log 2>&1
grep -h "step in backward\|median step\|GPU time\|job's thread" $r/mid/L32-umpol-*.log
cp $r/gpu_python.log $OUT/; cp $r/mid/L32-umpol-*.log $OUT/mid-run.txt; python3 -c "
import json
for k in ('plain-1','host-1'):
    d=json.load(open('$r/python/sib-%s.json'%k)); print(k, d['calls'], d['staged'], d['wraps'])"
