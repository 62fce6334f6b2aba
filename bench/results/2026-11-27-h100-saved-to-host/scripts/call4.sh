# call 4: build; A/B saved to host (copies out no longer make the job's stream wait) at both DeepSpeed peaks, two rounds; its GPU test.
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -30 /tmp/mk.log; exit 1; }
r=/tmp/gpu-r; rm -rf $r; mkdir -p $r/python
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $r/device.txt; cp build/.commit $r/commit.txt
top=$(pwd); s=$(date +%s)
for m in plain reentrant sib; do for on in 0 1; do
  env UMPOL_SAVED_TO_HOST=$on UMPOL_STEP_IN_BACKWARD=$([ $m = sib ] && echo 1 || echo 0) build/umpol run -p policies/optimizer-offload.umpol -- python3 tests/gpu/python_saved_to_host.py $m $r/python/sth-$m-$on.json > $r/python/sth-$m-$on.log 2>&1
  tail -1 $r/python/sth-$m-$on.log
done; done
python3 - $r/python <<'PY'
import json, sys
r = {f"{m}-{on}": json.load(open(f"{sys.argv[1]}/sth-{m}-{on}.json")) for m in ("plain", "reentrant", "sib") for on in (0, 1)}
for m in ("plain", "reentrant", "sib"):
    on, off = r[f"{m}-1"], r[f"{m}-0"]
    print(m, "same weights" if on["digest"] == off["digest"] else "DIFFERENT WEIGHTS",
          "same losses" if on["losses"] == off["losses"] else "DIFFERENT LOSSES", on["sent"] >> 20, on["back"] >> 20, on["late"])
PY
echo "test $(( $(date +%s) - s )) s"
OUT=$r VARIANTS="build:policies/optimizer-offload.umpol:UMPOL_WEIGHTS_AHEAD=1 build:policies/optimizer-offload.umpol:UMPOL_WEIGHTS_AHEAD=1,UMPOL_SAVED_TO_HOST=1" CELLS="32:10515120128 16:8153726976" ROUNDS=${ROUNDS:-2} sh build/exp4.sh
echo "total $(( $(date +%s) - s )) s"
tar -C /tmp -czf "$OUT/all.tgz" gpu-r
