#!/bin/sh
# experiment: gpu tests at HEAD + constrained variants
set -u
top=$(pwd); final=$OUT; out=$OUT/raw; mkdir -p $out
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee $out/device.txt
t0=$(date +%s); if [ -z "${SKIP_TESTS:-}" ]; then
top_srcdir=$top top_builddir=$top UMPOL_BIN=$top/umpol UMPOL_GPU_RESULTS=$out sh tests/gpu.sh >$out/gpu-tests.log 2>&1
echo "gpu.sh rc $? $(tail -1 $out/gpu-tests.log) $(( $(date +%s)-t0 ))s"
fi
steps=${STEPS:-12}
big="--layers 16 --dim 2048 --heads 16 --seq 1024 --batch 2 --steps $steps --seed 3"
peak=8902410240
python3 -m torch.distributed.run --standalone --nproc-per-node 1 examples/pytorch/train.py $big --fsdp --cpu-offload --json $out/fsdp.json >$out/fsdp.log 2>&1; tail -1 $out/fsdp.log
for v in $VARIANTS; do
  sed "s/^budget gpu 80%;.*/budget gpu ${peak}B;/" bench/exp/$v.umpol >$out/$v.umpol
  ./umpol check -q $out/$v.umpol || continue
  t1=$(date +%s)
  ./umpol run -p $out/$v.umpol -r $out/$v-report.json -- python3 examples/pytorch/train.py $big --json $out/$v.json >$out/$v.log 2>&1
  echo "$v rc $? $(tail -1 $out/$v.log) $(( $(date +%s)-t1 ))s"
  ./umpol report $out/$v-report.json > $out/$v-report.txt 2>&1; head -3 $out/$v-report.txt
done
for v in $VARIANTS; do cp $out/$v-report.txt $final/ 2>/dev/null; python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], [round(t*1e3) for t in r['step_s']], r['losses'][-1])" $out/$v.json $v; done > $final/steps.txt
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('fsdp', [round(t*1e3) for t in r['step_s']], r['losses'][-1])" $out/fsdp.json >> $final/steps.txt
cat $final/steps.txt
tar czf $final/raw.tgz -C $out . && rm -rf $out
