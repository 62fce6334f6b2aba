# call 1: build, A/B build (base = 1f921ea), GPU tests on base, one A/B round at L32.
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -30 /tmp/mk.log; exit 1; }
rm -rf build-base python-base
GPU_KEEP= sh build/gpu-run.sh abbuild
echo 1f921ea > build-base/.commit
GPU_KEEP=1 GPU_BUILD=build-base sh build/gpu-run.sh tests
OUT=/tmp/gpu-r VARIANTS="build-base:UMPOL_WEIGHTS_AHEAD=1 build:UMPOL_WEIGHTS_AHEAD=1" CELLS="32:10515120128" ROUNDS=1 sh build/exp4.sh
tar -C /tmp -czf "$OUT/all.tgz" gpu-r; cat /tmp/gpu-r/times.txt
