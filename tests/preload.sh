#!/bin/sh
# The preloaded runtime against the fake CUDA runtime: a 16-thread stress run
# with cross-stream frees and a fork, a bad and a missing policy, passthrough
# on error, the report, and `umpol run` end to end.
. "${top_srcdir:-.}/tests/lib.sh"
lib="$top_builddir/.libs/libumpol.so"
# The program itself, not libtool's wrapper script, so that only it is preloaded.
stress="$top_builddir/tests/preload/.libs/stress"
[ -x "$stress" ] || stress="$top_builddir/tests/preload/stress"
LD_LIBRARY_PATH="$top_builddir/tests/fake/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
[ -f "$lib" ] || { echo "libumpol.so not built (no CUDA Toolkit headers)"; exit 77; }
policy="$top_srcdir/tests/preload/stress.umpol"
threads=${STRESS_THREADS:-16}
pairs=${STRESS_PAIRS:-100000}

# Sanitizer builds: the sanitizer runtime must be loaded before libumpol.so.
san=$(ldd "$stress" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*lib[at]san[^ ]*\).*/\1/p' | head -1)
# Programs that are not ours (sh, true) may leak as they please.
foreign="ASAN_OPTIONS=detect_leaks=0"
preload="${san:+$san }$lib"

run() {
    env LD_PRELOAD="$preload" "$@"
}

expect_status 0 "stress $threads threads x $pairs pairs" \
    run UMPOL_POLICY="$policy" UMPOL_REPORT="$tmp/report-%p.json" "$stress" "$threads" "$pairs"
cat "$tmp/out"
grep -q ': 0 failures' "$tmp/out" || fail "stress reported failures"
grep -q 'fork child ok' "$tmp/out" || fail "fork child failed"
grep -q ' 0 live bytes' "$tmp/out" || fail "blocks left live after every free"
grep -q 'umpol: [1-9][0-9]* allocations, [1-9][0-9]* passed through' "$tmp/out" ||
    fail "no allocation was served, or none passed through"
reports=$(ls "$tmp"/report-*.json 2>/dev/null | wc -l)
[ "$reports" -ge 1 ] || fail "no report written"
# Every preloaded process writes a report (the libtool wrapper shell too): check
# the stress program's, the one with the most allocations.
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp"/report-*.json <<'PY' || fail "stress report"
import json, sys
reports = [json.load(open(p)) for p in sys.argv[1:]]
r = max(reports, key=lambda r: r["totals"]["allocations"])
names = [c["name"] for c in r["classes"]]
assert names == ["tagged", "small", "medium", "big_device"], names
for c in r["classes"]:
    assert c["live_bytes"] == 0 and c["allocations"] == c["frees"], c
    assert c["allocations"] > 0, c
assert r["totals"]["allocations"] == sum(c["allocations"] for c in r["classes"])
assert r["totals"]["passthrough"] > 0
assert r["classes"][1]["prefetches"] > 0, "prefetch on alloc never ran"
assert r["classes"][0]["prefetches"] > 0, "prefetch on phase enter never ran"
assert any(p["name"] == "step.forward" and p["entries"] > 0 for p in r["phases"]), r["phases"]
assert r["devices"][0]["managed_bytes"] <= r["devices"][0]["cap_bytes"]
PY
fi

printf 'umpol 1;\nclass a { match anything; }\n' >"$tmp/bad.umpol"
expect_status 1 "bad policy stops the job" run UMPOL_POLICY="$tmp/bad.umpol" "$stress" 1 10
grep -q "cannot load the policy" "$tmp/out" || fail "bad policy: no message"
grep -q "bad.umpol:2:17: error" "$tmp/out" || fail "bad policy: no diagnostic"
expect_status 1 "missing policy stops the job" run UMPOL_POLICY="$tmp/none.umpol" "$stress" 1 10
expect_status 1 "unset policy stops the job" run "$stress" 1 10
grep -q "UMPOL_POLICY is not set" "$tmp/out" || fail "unset policy: no message"
expect_status 0 "passthrough on error" \
    run UMPOL_ON_ERROR=passthrough UMPOL_POLICY="$tmp/bad.umpol" "$stress" 2 1000
grep -q "umpol: not active" "$tmp/out" || fail "passthrough: runtime should be inactive"

# umpol run: checks the policy, preloads, reports, returns the job's status.
expect_status 0 "umpol run" env ${san:+LD_PRELOAD="$san"} "$UMPOL_BIN" run -p "$policy" \
    -r "$tmp/run.json" -- "$stress" 2 1000
[ -s "$tmp/run.json" ] || fail "umpol run: no report"
expect_status 1 "umpol run with a bad policy" "$UMPOL_BIN" run -p "$tmp/bad.umpol" -- true
expect_status 3 "umpol run returns the job's status" env $foreign ${san:+LD_PRELOAD="$san"} \
    "$UMPOL_BIN" run -p "$policy" -- sh -c 'exit 3'
expect_status 0 "umpol run, job without allocations" env $foreign ${san:+LD_PRELOAD="$san"} \
    "$UMPOL_BIN" run -p "$policy" -- /bin/true
grep -q "saw no CUDA allocation" "$tmp/out" || fail "umpol run: no zero-allocation notice"
expect_status 2 "umpol run without a command" "$UMPOL_BIN" run -p "$policy"

# The report is never written through a symlink: links planted at the report's
# name and at its first temporary name (the pid is the shell's, kept by exec)
# leave the files they point to untouched; the report replaces the link.
phases="$top_builddir/tests/preload/.libs/phases"
[ -x "$phases" ] || phases="$top_builddir/tests/preload/phases"
echo precious >"$tmp/victim"
expect_status 0 "report beside planted symlinks" env REPORT="$tmp/linked.json" VICTIM="$tmp/victim" \
    LIB="$preload" POLICY="$policy" PHASES="$phases" sh -c 'ln -s "$VICTIM" "$REPORT.tmp.$$" &&
    ln -s "$VICTIM" "$REPORT" && exec env LD_PRELOAD="$LIB" UMPOL_POLICY="$POLICY" \
    UMPOL_REPORT="$REPORT" "$PHASES" step'
[ "$(cat "$tmp/victim")" = precious ] || fail "the report was written through a symlink"
[ -f "$tmp/linked.json" ] && [ ! -L "$tmp/linked.json" ] || fail "the report did not replace the link"
# An unwritable report says why.
expect_status 0 "report to a missing directory" run UMPOL_POLICY="$policy" \
    UMPOL_REPORT="$tmp/no/such/dir/r.json" "$phases" step
grep -q "cannot write the report to $tmp/no/such/dir/r.json: No such file or directory" "$tmp/out" ||
    fail "report write error: no reason"

# Phase names of any bytes, and of any length, give a report any strict JSON
# parser reads: escaped, invalid UTF-8 replaced, cut at 4096 bytes.
if command -v python3 >/dev/null 2>&1; then
    huge=$(python3 -c 'print("n" * 100000)')
    expect_status 0 "hostile phase names" run UMPOL_POLICY="$policy" UMPOL_REPORT="$tmp/names.json" \
        "$phases" 'q"uo\te' "$(printf 'ctl\001\033[31m\tend')" "$(printf 'bad\377\300utf8')" "$huge"
    python3 - "$tmp/names.json" <<'PY' || fail "hostile phase names: report is not strict JSON"
import json, sys
def no_constant(name):
    raise ValueError(name)
r = json.loads(open(sys.argv[1], "rb").read().decode("utf-8", errors="strict"),
               parse_constant=no_constant)
names = [p["name"] for p in r["phases"]]
assert names[0] == 'q"uo\\te', names[0]
assert names[1] == "ctl\x01\x1b[31m\tend", names[1]
assert names[2] == "bad\ufffd\ufffdutf8", names[2]
assert names[3] == "n" * 4096, len(names[3])
PY
fi
finish
