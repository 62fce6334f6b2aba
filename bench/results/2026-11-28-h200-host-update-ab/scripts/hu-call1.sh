# Device: build; the host-update GPU test; A/B main vs UMPOL_HOST_UPDATE=1 at the tight cells
set -u
make -C build -j16 > /tmp/mk.log 2>&1 || { tail -20 /tmp/mk.log; exit 1; }
top=$(pwd); r=/tmp/gpu-r; rm -rf $r; mkdir -p $r/python
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$r/device.txt"
export PYTHONPATH=$top/python UMPOL_COMMIT=$(cat build/.commit)
s=$(date +%s)
for m in gpu cpu fail; do
    on=1; [ $m = gpu ] && on=0
    env UMPOL_STEP_IN_BACKWARD=1 UMPOL_HOST_UPDATE=$on timeout 60 ./build/umpol run -p tests/gpu/sib-host.umpol -- \
        python3 tests/gpu/python_host_update.py $m $r/python/hu-$m.pt > $r/python/hu-$m.log 2>&1
    echo "$m rc=$?"; grep -v "^umpol: step in backward" $r/python/hu-$m.log | tail -5
done
python3 - $r/python <<'PY'
import sys, torch
r = {m: torch.load(f"{sys.argv[1]}/hu-{m}.pt") for m in ("gpu", "cpu", "fail")}
for m in ("cpu", "fail"):
    d = max((x - y).abs().max().item() for x, y in zip(r[m]["weights"], r["gpu"]["weights"]))
    print(m, "max weight diff", d, "bitwise", all(torch.equal(x, y) for x, y in zip(r[m]["weights"], r["gpu"]["weights"])),
          "losses", r[m]["losses"][-1], r["gpu"]["losses"][-1], "shares", r[m]["shares"], r[m]["passes"], r[m]["cpu_state"])
PY
echo "test: $(( $(date +%s) - s )) s"
export VARIANTS="build:policies/optimizer-offload.umpol: build:policies/optimizer-offload.umpol:UMPOL_HOST_UPDATE=1"
export CELLS="${CELLS:-16:7690256384 16:8153726976 16:12116400537 32:10515120128}" ROUNDS=1
OUT=$r timeout ${AB_S:-400} sh build/exp4.sh; echo "ab rc=$?"; cut -c1-400 $r/ab-summary.txt
find $r -name "*hostmap*" -delete; tar -C /tmp -czf "$OUT/all.tgz" gpu-r; ls -la $OUT
