# Variants side by side at DeepSpeed's peaks, one build, step in backward. Results under $OUT.
# VARIANTS: "policy:ENVVAR=V" ("policy:" for none); CELLS "layers:budget".
r=${OUT:-/tmp/gpu-r}; mkdir -p $r/pol; top=$(pwd)
for round in $(seq 1 ${ROUNDS:-2}); do
  for cell in ${CELLS:-32:10515120128 16:8153726976}; do
    L=${cell%%:*}; Bu=${cell#*:}
    for v in ${VARIANTS:-stream-offload: stream-offload:UMPOL_STREAM_LAST_USE=1 optimizer-offload:}; do
      pol=${v%%:*}; ev=${v#*:}; tag=$pol${ev:+-${ev%%=*}}
      o=$r/pol/L$L-r$round-$tag
      env $ev PYTHONPATH=$top/python UMPOL_STEP_IN_BACKWARD=1 timeout 200 python3 bench/grid.py drive --out "$o" \
        --umpol "$top/build/umpol" --layers $L --warmup 4 --steps 5 --cell-timeout-s 170 --variants \
        --policy policies/$pol.umpol --budgets $Bu >> "$r/pol.log" 2>&1
      echo "L$L r$round $tag: $(grep -h 'median step' "$o"/L*.log | head -1) | $(grep -h 'GPU time' "$o"/L*.log | head -1) | $(grep -h "job's thread by" "$o"/L*.log | head -1)" | tee -a "$r/pol-summary.txt"
    done
  done
done
