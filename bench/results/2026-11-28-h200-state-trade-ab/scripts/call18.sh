# Device, tree = branch: the last test of gpu_python.sh (cut by the limit in call17), alone; then one more round
# of main (build-main) against the branch (build) at the two 0.94B cells, the branch first this time
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -20 /tmp/mk.log; exit 1; }
make -C build-main -j16 > /tmp/mk3.log 2>&1 || { tail -20 /tmp/mk3.log; exit 1; }
top=$(pwd); r=/tmp/gpu-r; rm -rf $r; mkdir -p $r
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$r/device.txt"
s=$(date +%s)
timeout 120 ./build/umpol run -p policies/llm-finetune.umpol -r "$r/trainer.json" -- python3 tests/gpu/hf_trainer.py > $r/trainer.log 2>&1
echo "trainer rc=$? in $(( $(date +%s) - s )) s" | tee -a $r/trainer.log; tail -3 $r/trainer.log
export PYTHONPATH=$top/python UMPOL_COMMIT=$(cat build/.commit)
export VARIANTS="build:policies/optimizer-offload.umpol: build-main:policies/optimizer-offload.umpol:"
export CELLS="16:16079074099 16:12116400537" ROUNDS=1
OUT=$r timeout 170 sh build/exp4.sh; echo "ab rc=$?"; cat $r/ab-summary.txt | cut -c1-120
tar -C /tmp -czf "$OUT/all.tgz" gpu-r
