# Variants side by side at DeepSpeed's peaks, step in backward. Results under $OUT/ab.
# VARIANTS: "builddir:policy:ENVVAR=V" (policy a path; ENV part may be empty); CELLS "layers:budget".
r=${OUT:-/tmp/gpu-r}; mkdir -p $r/ab; top=$(pwd)
export GRID_AUTOCAST_CACHE=0
for round in $(seq 1 ${ROUNDS:-1}); do
  for cell in ${CELLS:-32:10515120128}; do
    L=${cell%%:*}; Bu=${cell#*:}
    vs="$VARIANTS"
    [ $((round % 2)) = 0 ] && vs=$(echo $vs | tr ' ' '\n' | tac | tr '\n' ' ')
    for v in $vs; do
      bd=${v%%:*}; rest=${v#*:}; pol=${rest%%:*}; ev=$(echo "${rest#*:}" | tr ',' ' ')
      tag=$bd-$(basename $pol .umpol)-$(echo $ev | sed 's/UMPOL_//g; s/HOST_UPDATE_THREADS/T/; s/OMP_WAIT_POLICY=PASSIVE/passive/; s/ /+/g')
      o=$r/ab/L$L-$Bu-r$round-$tag
      env $ev GRID_HOST_MAP=$o-hostmap.json PYTHONPATH=$top/python UMPOL_STEP_IN_BACKWARD=1 timeout 200 python3 bench/grid.py drive --out "$o" \
        --umpol "$top/$bd/umpol" --layers $L --warmup ${WARMUP:-4} --steps 5 --cell-timeout-s 170 --variants \
        --policy $pol --budgets $Bu >> "$r/ab.log" 2>&1
      echo "L$L r$round $tag: $(grep -h 'median step' "$o"/L*.log | head -1) | $(grep -h 'GPU time' "$o"/L*.log | head -1) | $(grep -h "job's thread by" "$o"/L*.log | head -1) | $(grep -h "saved to host:\|weights ahead:\|host update:" "$o"/L*.log | tr "\n" " ")" | tee -a "$r/ab-summary.txt"
    done
  done
done
