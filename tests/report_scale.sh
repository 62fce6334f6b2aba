#!/bin/sh
# `umpol report` is linear in its input: two reports of 100,000 classes (and
# 10,000 phases), summed, in seconds of CPU even under sanitizers (1.4 s in a
# plain build, 4-5 s under ASan + UBSan, 10-12 s under ThreadSanitizer on the
# 2-core build machine; the quadratic reader took minutes in a plain build).
# The bound is 5 s of CPU, 60 s in sanitizer builds (Makefile.am sets
# REPORT_SCALE_LIMIT there), far from both.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; exit 77; }
limit=${REPORT_SCALE_LIMIT:-5}
python3 - "$tmp" <<'PY'
import json, sys
n = 100000
for rank in (0, 1):
    classes = [{"name": "class%06d" % i, "allocations": i + rank, "peak_bytes": 4096 * i,
                "um": {"gpu_faults": i % 7, "htod_bytes": i}} for i in range(n)]
    phases = [{"name": "phase%06d" % i, "entries": 1, "total_ns": i} for i in range(n // 10)]
    with open("%s/r%d.json" % (sys.argv[1], rank), "w") as f:
        json.dump({"umpol_report": 1, "rank": rank, "classes": classes, "phases": phases}, f)
PY
# CPU time, not wall time: the bound must hold on a loaded machine too.
for mode in "" --json; do
    took=$(python3 - "$UMPOL_BIN" "$tmp" $mode <<'PY'
import resource, subprocess, sys
umpol, tmp, args = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(tmp + "/out", "w") as out:
    rc = subprocess.call([umpol, "report"] + args + [tmp + "/r0.json", tmp + "/r1.json"],
                         stdout=out, stderr=subprocess.STDOUT)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.2f" % (ru.ru_utime + ru.ru_stime) if rc == 0 else "failed")
PY
)
    echo "umpol report ${mode:-(text)}, 2 reports x 100,000 classes: $took s of CPU (limit $limit s)"
    case $took in
    failed) fail "report $mode failed" ;;
    *) if python3 -c "import sys; sys.exit(0 if $took < $limit else 1)"; then pass; else
        fail "report $mode took $took s, over $limit s"; fi ;;
    esac
done
grep -q '"name": "class099999", "allocations": 199999' "$tmp/out" || fail "report --json: last class not summed"
finish
