#!/bin/sh
# Device-side driver (not part of the project): sh build/gpu-run.sh PART...
# Parts: tests constrained train gridfit suggest tight card overlap ballast. Results under $OUT/r.
set -u
top=$(pwd)
b=$top/build
r=/tmp/gpu-r
rm -rf "$r"
mkdir -p "$r"
export PYTHONPATH=$top/python UMPOL=$b/umpol UMPOL_COMMIT=$(cat "$b/.commit")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$r/device.txt"
cp "$b/.commit" "$r/commit.txt"
for part in "$@"; do
    start=$(date +%s)
    date -u +%Y-%m-%dT%H:%M:%SZ > "$r/$part-date.txt"
    case $part in
    tests)
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol timeout 200 sh tests/gpu.sh > "$r/gpu.log" 2>&1
        echo "gpu.sh rc=$?" >> "$r/gpu.log"
        mkdir -p "$r/python"
        top_srcdir=$top top_builddir=$b UMPOL_BIN=$b/umpol PYTHON_GPU_OUT=$r/python timeout 240 sh tests/gpu_python.sh > "$r/gpu_python.log" 2>&1
        echo "gpu_python.sh rc=$?" >> "$r/gpu_python.log"
        tail -2 "$r/gpu.log" "$r/gpu_python.log" ;;
    constrained)
        SKIP_PROFILED=1 OUT=$r/constrained timeout 420 sh bench/run-constrained.sh > "$r/constrained.log" 2>&1
        echo "rc=$?" >> "$r/constrained.log"; rm -f "$r"/constrained/*.png; tail -20 "$r/constrained.log" ;;
    train)
        UMPOL_TOP=$b TRAIN_ONLY=1 SKIP_CONSTRAINED=1 OUT=$r/train timeout 560 sh bench/run-gpu.sh > "$r/train.log" 2>&1
        echo "rc=$?" >> "$r/train.log"; tail -20 "$r/train.log" ;;
    gridfit)
        for v in stock devacts; do
            pol=policies/optimizer-offload.umpol; [ $v = devacts ] && pol=$b/optimizer-offload-devacts.umpol
            UMPOL_TRACE=$r/gridfit-$v/trace-%p.txt timeout 280 python3 bench/grid.py drive --out "$r/gridfit-$v" --umpol "$b/umpol" \
                --variants --policy "$pol" --layers ${GRIDFIT_LAYERS:-16} --budgets ${GRIDFIT_BUDGETS:-16964281958} --warmup 3 --steps 5 \
                --cell-timeout-s 200 --deadline-s 250 > "$r/gridfit-$v.log" 2>&1
            echo "$v rc=$?" >> "$r/gridfit-$v.log"; tail -3 "$r/gridfit-$v.log"
        done
        gzip -f "$r"/gridfit-*/trace-*.txt 2>/dev/null ;;
    suggest)
        timeout 400 python3 bench/grid.py suggest --out "$r/suggest" --umpol "$b/umpol" --layers ${SUGGEST_LAYERS:-16} \
            --budgets ${SUGGEST_BUDGETS:-16964281958 12559004467 8147435520} --stock ${SUGGEST_STOCK:-optimizer-offload weights-offload} \
            --warmup 3 --steps 5 --deadline-s ${SUGGEST_DEADLINE:-330} > "$r/suggest.log" 2>&1
        echo "rc=$?" >> "$r/suggest.log"; tail -25 "$r/suggest.log" ;;
    tight)
        # At DeepSpeed's card peak B: DeepSpeed and checkpointing, then weights-offload at B,
        # optimizer-offload at B and at B less the card's own overhead, the suggested draft at B.
        L=${TIGHT_LAYERS:-16}; B=${TIGHT_BUDGET:-8147435520}; M=${TIGHT_MARGIN:-343932928}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/tight-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 3 --steps 5 --cell-timeout-s 150 "$@" >> "$r/tight-L$L.log" 2>&1; }
        g anchors --variants ckpt deepspeed --policy policies/weights-offload.umpol --budgets $B
        g oo --variants --policy policies/optimizer-offload.umpol --budgets $B $((B - M))
        g sug --variants --policy $b/sug-L$L.umpol --budgets $B
        tail -30 "$r/tight-L$L.log" ;;
    card)
        # At DeepSpeed's card peak B: checkpointing and DeepSpeed, optimizer-offload under
        # `budget card B`, and under `budget gpu` B less the card's own overhead.
        L=${TIGHT_LAYERS:-16}; B=${TIGHT_BUDGET:-8147435520}; M=${TIGHT_MARGIN:-343932928}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/card-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 3 --steps 5 --cell-timeout-s 150 "$@" >> "$r/card-L$L.log" 2>&1; }
        g anchors --variants ckpt deepspeed --policy $b/oo-card.umpol --budgets $B
        g oo --variants --policy policies/optimizer-offload.umpol --budgets $((B - M))
        tail -30 "$r/card-L$L.log" ;;
    grid)
        # The grid for one model (GRID_LAYERS): its anchors, then optimizer-offload at the two
        # upper budgets and stream-offload at DeepSpeed's peak.
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        L=${GRID_LAYERS:-16}
        GRID_VARIANTS="ckpt fsdp-offload deepspeed" GRID_LAYERS=$L GRID_DEADLINE_S=${GRID_DEADLINE_S:-420} GRID_CELL_TIMEOUT_S=150 \
            GRID_POLICY="policies/optimizer-offload.umpol policies/optimizer-offload.umpol policies/stream-offload.umpol" \
            OUT=$r/grid-l$L timeout 480 sh bench/run-grid.sh > "$r/grid-l$L.log" 2>&1
        echo "rc=$?" >> "$r/grid-l$L.log"; tail -14 "$r/grid-l$L.log" ;;
    devall)
        # Everything in device memory, no budget pressure: PyTorch's own allocator, umpol's pool,
        # umpol's pool with the step's plan.
        L=${TIGHT_LAYERS:-32}
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/devall-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup ${WARMUP:-3} --steps 5 --cell-timeout-s 150 "$@" >> "$r/devall-L$L.log" 2>&1; }
        g ckpt --variants ckpt --policy $b/dev-all.umpol --budgets 60000000000
        g pool --variants --policy $b/dev-all.umpol --budgets 60000000000
        g plan --variants --policy $b/dev-all-learn.umpol --budgets 60000000000
        g pool2 --variants --policy $b/dev-all.umpol --budgets 60000000000
        g plan2 --variants --policy $b/dev-all-learn.umpol --budgets 60000000000
        grep -h "ms/step" "$r/devall-L$L.log" ;;
    plan)
        # At B less the card's own overhead: DeepSpeed, then stream-offload without and with
        # `learn step` (the step's plan for device memory), alternating.
        L=${TIGHT_LAYERS:-16}; B=${TIGHT_BUDGET:-8147435520}; M=${TIGHT_MARGIN:-343932928}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/plan-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 3 --steps 5 --cell-timeout-s 150 "$@" >> "$r/plan-L$L.log" 2>&1; }
        g anchors --variants ckpt deepspeed --policy $b/so-learn.umpol --budgets $((B - M))
        g so --variants --policy policies/stream-offload.umpol --budgets $((B - M))
        g so-learn2 --variants --policy $b/so-learn.umpol --budgets $((B - M))
        g so2 --variants --policy policies/stream-offload.umpol --budgets $((B - M))
        grep -h "ms/step" "$r/plan-L$L.log" ;;
    stream)
        # At B less the card's own overhead: checkpointing and DeepSpeed at their peaks,
        # optimizer-offload with its weights streamed ahead, and without.
        L=${TIGHT_LAYERS:-16}; B=${TIGHT_BUDGET:-8147435520}; M=${TIGHT_MARGIN:-343932928}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/stream-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 3 --steps 5 --cell-timeout-s 150 "$@" >> "$r/stream-L$L.log" 2>&1; }
        g anchors --variants ckpt deepspeed --policy $b/oo-stream.umpol --budgets $((B - M))
        g oo --variants --policy policies/optimizer-offload.umpol --budgets $((B - M))
        tail -30 "$r/stream-L$L.log" ;;
    sib)
        # The optimizer's step in backward (UMPOL_STEP_IN_BACKWARD=1) against the same policy
        # without it, checkpointing and DeepSpeed, at B less the card's own overhead.
        L=${TIGHT_LAYERS:-16}; B=${TIGHT_BUDGET:-8147435520}; M=${TIGHT_MARGIN:-343932928}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/sib-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 4 --steps 5 --cell-timeout-s 150 "$@" >> "$r/sib-L$L.log" 2>&1; }
        [ "${SIB_ANCHORS:-ckpt deepspeed}" != none ] &&
            g anchors --variants ${SIB_ANCHORS:-ckpt deepspeed} --policy policies/optimizer-offload.umpol --budgets $((B - M))
        for pol in ${SIB_POLICIES:-optimizer-offload}; do
            g $pol-off --variants --policy policies/$pol.umpol --budgets $((B - M))
            export UMPOL_STEP_IN_BACKWARD=1
            g $pol-on --variants --policy policies/$pol.umpol --budgets $((B - M))
            unset UMPOL_STEP_IN_BACKWARD
        done
        grep -h "step in backward" "$r"/sib-L$L/*/*.log | sort | uniq -c
        tail -30 "$r/sib-L$L.log" ;;
    grads)
        # At DeepSpeed's card peak B (and B less the card's own overhead): DeepSpeed and
        # checkpointing, optimizer-offload with its gradients on the host (build/oo-grads.umpol),
        # optimizer-offload and weights-offload as they are.
        L=${TIGHT_LAYERS:-16}; B=${TIGHT_BUDGET:-8153726976}; M=${TIGHT_MARGIN:-343932928}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/grads-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 3 --steps 5 --cell-timeout-s 150 "$@" >> "$r/grads-L$L.log" 2>&1; }
        g anchors --variants ckpt deepspeed --policy $b/oo-grads.umpol --budgets $((B - M)) $B
        g oo --variants --policy policies/optimizer-offload.umpol --budgets $((B - M))
        g wo --variants --policy policies/weights-offload.umpol --budgets $((B - M))
        tail -40 "$r/grads-L$L.log" ;;
    streamcard)
        # Each model at DeepSpeed's card peak B under `budget card B`: checkpointing and DeepSpeed,
        # stream-offload.umpol, then optimizer-offload.umpol, in one call.
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        for lb in "16 8147435520" "32 10515120128"; do
            set -- $lb; L=$1; B=$2
            g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/card-L$L/$o" --umpol "$b/umpol" --layers $L \
                    --warmup 3 --steps 5 --cell-timeout-s 150 "$@" >> "$r/card-L$L.log" 2>&1; }
            g anchors --variants ckpt deepspeed --policy $b/so-card.umpol --budgets $B
            g oo --variants --policy $b/oo-card2.umpol --budgets $B
            grep "^L" "$r/card-L$L.log"
        done ;;
    cardvsgpu)
        # 0.94B, no anchors: stream-offload and optimizer-offload under `budget gpu 7.20GiB` and `budget card 7.59GiB`, alternating.
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/cvg/$o" --umpol "$b/umpol" --layers 16 \
                --warmup 3 --steps 5 --cell-timeout-s 150 --variants "$@" >> "$r/cvg.log" 2>&1; }
        g so-gpu --policy policies/stream-offload.umpol --budgets 7730941132
        g so-card --policy $b/so-card.umpol --budgets 8147435520
        g oo-gpu --policy policies/optimizer-offload.umpol --budgets 7730941132
        g oo-card --policy $b/oo-card2.umpol --budgets 8147435520
        g so-gpu2 --policy policies/stream-offload.umpol --budgets 7730941132
        grep "^L" "$r/cvg.log" ;;
    alt32)
        # 1.75B, no anchors: stream-offload and optimizer-offload under `budget gpu 9.40GiB`, alternating.
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/alt32/$o" --umpol "$b/umpol" --layers 32 \
                --warmup 3 --steps 5 --cell-timeout-s 150 --variants "$@" >> "$r/alt32.log" 2>&1; }
        g so1 --policy policies/stream-offload.umpol --budgets 10093173145
        g oo1 --policy policies/optimizer-offload.umpol --budgets 10093173145
        g so2 --policy policies/stream-offload.umpol --budgets 10093173145
        g oo2 --policy policies/optimizer-offload.umpol --budgets 10093173145
        grep "^L" "$r/alt32.log" ;;
    calls)
        # What each remap call costs, per piece and over a range (bench/vmm_calls.cu).
        nvcc -O2 -o $b/vmm_calls bench/vmm_calls.cu -lcuda > "$r/calls.log" 2>&1 &&
            for a in "16 64 5" "16 2 5" "64 2 5"; do echo "== vmm_calls $a" >> "$r/calls.log"; timeout 120 $b/vmm_calls $a >> "$r/calls.log" 2>&1; echo "rc=$?" >> "$r/calls.log"; done
        cat "$r/calls.log" ;;
    contend)
        # Does a remap on one thread hold up launches on another (bench/vmm_contend.cu)?
        nvcc -O2 -o $b/vmm_contend bench/vmm_contend.cu -lcuda -lpthread > "$r/contend.log" 2>&1 &&
            for a in "2000 64" "2000 2"; do echo "== vmm_contend $a" >> "$r/contend.log"; timeout 120 $b/vmm_contend $a >> "$r/contend.log" 2>&1; echo "rc=$?" >> "$r/contend.log"; done
        cat "$r/contend.log" ;;
    sweep)
        # Streamed or not at several budgets, DeepSpeed and checkpointing at their peaks, one call.
        L=${TIGHT_LAYERS:-16}; BUDGETS=${SWEEP_BUDGETS:-7803502592 10737418240 12559004467}
        mkdir -p /tmp/site && pip install -q --no-index --no-deps --target /tmp/site $b/wheels/*.whl > "$r/pip.log" 2>&1
        export PYTHONPATH=$PYTHONPATH:/tmp/site
        g() { o=$1; shift; timeout 300 python3 bench/grid.py drive --out "$r/sweep-L$L/$o" --umpol "$b/umpol" --layers $L \
                --warmup 3 --steps 5 --cell-timeout-s 150 "$@" >> "$r/sweep-L$L.log" 2>&1; }
        g anchors --variants ckpt deepspeed --policy $b/oo-stream.umpol --budgets ${BUDGETS%% *}
        g stream --variants --policy $b/oo-stream.umpol --budgets ${BUDGETS#* }
        g oo --variants --policy policies/optimizer-offload.umpol --budgets $BUDGETS
        tail -30 "$r/sweep-L$L.log" ;;
    overlap)
        # Can movable memory move beside running kernels (bench/vmm_overlap.cu)?
        nvcc -O2 -o $b/vmm_overlap bench/vmm_overlap.cu -lcuda > "$r/overlap.log" 2>&1 &&
            for mib in 1024 2048; do timeout 120 $b/vmm_overlap $mib 400 >> "$r/overlap.log" 2>&1; echo "rc=$?" >> "$r/overlap.log"; done
        tail -6 "$r/overlap.log" ;;
    ballast)
        OUT=$r/ballast timeout 560 sh bench/run-ballast.sh > "$r/ballast.log" 2>&1
        echo "rc=$?" >> "$r/ballast.log"; tail -20 "$r/ballast.log" ;;
    esac
    echo "$part: $(( $(date +%s) - start )) s" | tee -a "$r/times.txt"
done
tar -C /tmp -czf "$OUT/all.tgz" gpu-r && ls -la "$OUT"
