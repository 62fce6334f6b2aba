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
    abbuild)
        # build-base: the build with build/ab-base.patch taken back out of the tree.
        cp -a "$b" "$top/build-base" && patch -R -p1 < "$b/ab-base.patch" > "$r/abbuild.log" 2>&1 &&
            make -C "$top/build-base" -j16 >> "$r/abbuild.log" 2>&1 && cp -a "$top/python" "$top/python-base" &&
            patch -p1 < "$b/ab-base.patch" >> "$r/abbuild.log" 2>&1
        echo "abbuild rc=$?" >> "$r/abbuild.log"; tail -3 "$r/abbuild.log" ;;
    ab)
        # AB_CELLS ("layers:budget ...") under AB_POLICY with the step in backward, by each
        # variant of AB_VARIANTS ("builddir:pythondir ...") in turn, AB_ROUNDS times.
        for cell in ${AB_CELLS:-16:8153726976}; do
            L=${cell%%:*}; Bu=${cell#*:}
            for round in $(seq 1 ${AB_ROUNDS:-2}); do
                for v in ${AB_VARIANTS:-build-base:python build:python}; do
                    bd=${v%%:*}; py=${v#*:}; o=$r/ab/L$L-r$round-$bd-$py
                    PYTHONPATH=$top/$py UMPOL_STEP_IN_BACKWARD=1 timeout 220 python3 bench/grid.py drive --out "$o" \
                        --umpol "$top/$bd/umpol" --layers $L --warmup 4 --steps 5 --cell-timeout-s 180 --variants \
                        --policy ${AB_POLICY:-policies/stream-offload.umpol} --budgets $Bu >> "$r/ab.log" 2>&1
                    echo "L$L r$round $bd $py: $(grep -h 'median step' "$o"/*.log | head -1) | $(grep -h 'GPU time' "$o"/*.log | head -1)" | tee -a "$r/ab-summary.txt"
                done
            done
        done ;;
    trace)
        # TRACE_CELLS ("layers:budget ...") once each with a torch.profiler trace of the last step.
        mkdir -p "$r/trace"
        for cell in ${TRACE_CELLS:-16:8153726976}; do
            L=${cell%%:*}; Bu=${cell#*:}; o=$r/trace/L$L-${TRACE_TAG:-b}
            GRID_TORCH_TRACE=$r/trace/L$L-${TRACE_TAG:-b}.json UMPOL_STEP_IN_BACKWARD=1 timeout 220 python3 bench/grid.py drive --out "$o" \
                --umpol "$b/umpol" --layers $L --warmup 4 --steps 5 --cell-timeout-s 180 --variants \
                --policy ${AB_POLICY:-policies/stream-offload.umpol} --budgets $Bu >> "$r/trace.log" 2>&1
            echo "trace L$L: $(grep -h 'median step' "$o"/*.log | head -1) | $(grep -h 'GPU time' "$o"/*.log | head -1)" | tee -a "$r/ab-summary.txt"
        done ;;
    esac
    echo "$part: $(( $(date +%s) - start )) s" | tee -a "$r/times.txt"
done
tar -C /tmp -czf "$OUT/all.tgz" gpu-r && ls -la "$OUT"
