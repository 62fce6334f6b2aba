#!/bin/sh
set -u
top=$(pwd); out=$OUT
lib=$top/.libs/libumpol.so; umpol=$top/umpol
nvcc -O2 -cudart shared -o /tmp/alloc_pair bench/alloc_pair.cu || exit 1
for r in 1 2; do
/tmp/alloc_pair native async; LD_PRELOAD=$lib UMPOL_POLICY=bench/alloc_pair_managed.umpol /tmp/alloc_pair umpol-managed async
LD_PRELOAD=$lib UMPOL_POLICY=bench/alloc_pair.umpol /tmp/alloc_pair umpol-device async
done
/tmp/alloc_pair native managed
args="--layers 8 --dim 1024 --heads 16 --seq 1024 --batch 4 --steps 25 --seed 3"
tr() { l=$1; shift; "$@" python3 examples/pytorch/train.py $args --json /tmp/t-$l.json > /tmp/t-$l.log 2>&1; python3 -c "import json,sys; r=json.load(open(sys.argv[1])); s=sorted(r['step_s'][3:]); print(sys.argv[2], round(r['median_step_ms'],1), 'p10', round(s[len(s)//10]*1e3,1))" /tmp/t-$l.json $l; }
for r in 1 2 3; do
tr native env
tr native-async env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
tr passthrough $umpol run -p policies/passthrough.umpol --
tr finetune $umpol run -p policies/llm-finetune.umpol -r /tmp/rep.json --
done
