# call 2: build; gpu_python.sh on the batched updates; A/B build-base (python of 1f921ea) vs build.
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -30 /tmp/mk.log; exit 1; }
rm -rf build-base && cp -a build build-base && rm build-base/python && cp -a build/pybase-base build-base/python
echo 1f921ea > build-base/.commit
r=/tmp/gpu-r; rm -rf $r; mkdir -p $r/python
if [ "${SKIP_TESTS:-}" != 1 ]; then
top_srcdir=$(pwd) top_builddir=$(pwd)/build UMPOL_BIN=$(pwd)/build/umpol PYTHON_GPU_OUT=$r/python timeout 280 sh tests/gpu_python.sh > $r/gpu_python.log 2>&1
echo "gpu_python.sh rc=$?" >> $r/gpu_python.log; tail -3 $r/gpu_python.log
fi
OUT=$r VARIANTS="build-base:UMPOL_WEIGHTS_AHEAD=1 build:UMPOL_WEIGHTS_AHEAD=1" CELLS="${CELLS:-32:18943364300 32:10515120128}" ROUNDS=${ROUNDS:-1} sh build/exp4.sh
grep -h "step in backward:" $r/ab/*/L*.log | sort | uniq -c
tar -C /tmp -czf "$OUT/all.tgz" gpu-r
