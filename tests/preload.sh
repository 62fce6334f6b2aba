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
assert names == ["kept", "tagged", "small", "medium", "big_device"], names
for c in r["classes"]:
    assert c["live_bytes"] == 0 and c["allocations"] == c["frees"], c
    assert c["allocations"] > 0, c
assert r["totals"]["allocations"] == sum(c["allocations"] for c in r["classes"])
assert r["totals"]["passthrough"] > 0
assert r["classes"][2]["prefetches"] > 0, "prefetch on alloc never ran"
assert r["classes"][1]["prefetches"] > 0, "prefetch on phase enter never ran"
# Every block of kept came in when reported saved; none of the others did.
assert r["classes"][0]["reclassified"] == r["classes"][0]["allocations"], r["classes"][0]
assert all(c["reclassified"] == 0 for c in r["classes"][1:]), r["classes"]
assert any(p["name"] == "step.forward" and p["entries"] > 0 for p in r["phases"]), r["phases"]
assert r["devices"][0]["managed_bytes"] <= r["devices"][0]["cap_bytes"]
# The threads' time in the runtime's entry points holds the new slabs' (made only there).
t = r["totals"]
assert t["held_ns"] > 0 and 0 < t["slab_grow_ns"] <= t["held_ns"], t
PY
    biggest=$(python3 - "$tmp"/report-*.json <<'PY'
import json, sys
print(max(sys.argv[1:], key=lambda p: json.load(open(p))["totals"]["allocations"]))
PY
)
    "$UMPOL_BIN" report "$biggest" > "$tmp/stress-report.txt" || fail "umpol report of the stress run"
    grep -q "the job's threads spent [0-9.]* ms in the runtime, of it [0-9.]* ms making new slabs" \
        "$tmp/stress-report.txt" || fail "umpol report: no time in the runtime"
fi

# A fork under load: the child counts only its own work, a child that does
# nothing writes no report, and the summed reports count each allocation once.
mkdir "$tmp/fork"
expect_status 0 "stress with forked children that exit" env $foreign LD_PRELOAD="$preload" \
    UMPOL_POLICY="$policy" UMPOL_REPORT="$tmp/fork/r-%p.json" "$stress" 4 20000 exit
grep -q 'fork child ok' "$tmp/out" || fail "fork: a child failed"
parent=$(sed -n 's/^umpol: \([0-9]*\) allocations.*/\1/p' "$tmp/out")
n=$(ls "$tmp/fork" | wc -l)
[ "$n" -eq 2 ] || fail "fork: $n reports, expected 2 (parent and the child that allocated)"
if command -v python3 >/dev/null 2>&1 && [ -n "$parent" ]; then
    "$UMPOL_BIN" report --json "$tmp/fork"/*.json >"$tmp/fork.json" || fail "fork: umpol report"
    python3 - "$tmp/fork.json" "$parent" "$tmp/fork" <<'PY' || fail "fork: summed allocations"
import glob, json, sys
r = json.load(open(sys.argv[1]))
total = sum(c["allocations"] for c in r["classes"])
assert total == int(sys.argv[2]) + 1000, (total, sys.argv[2])
assert sum(c["frees"] for c in r["classes"]) == total
# The allocation sites start again in the child too: each allocation counted once.
reports = [json.load(open(f)) for f in glob.glob(sys.argv[3] + "/*.json")]
assert all(d["sites_dropped"] == 0 for d in reports)
sites = sum(s["allocations"] for d in reports for s in d["sites"])
assert sites == total, (sites, total)
PY
fi

# A process that cannot load its policy runs without umpol, unless
# UMPOL_ON_ERROR=abort stops it before it starts.
printf 'umpol 1;\nclass a { match anything; }\n' >"$tmp/bad.umpol"
expect_status 0 "bad policy: the job runs without umpol" run UMPOL_POLICY="$tmp/bad.umpol" "$stress" 1 10 nofork
grep -q "cannot load the policy.*running without umpol" "$tmp/out" || fail "bad policy: no message"
grep -q "bad.umpol:2:17: error" "$tmp/out" || fail "bad policy: no diagnostic"
grep -q "umpol: not active" "$tmp/out" || fail "bad policy: runtime should be inactive"
expect_status 0 "missing policy: the job runs" run UMPOL_POLICY="$tmp/none.umpol" "$stress" 1 10 nofork
expect_status 0 "unset policy: the job runs" run "$stress" 1 10 nofork
grep -q "UMPOL_POLICY is not set" "$tmp/out" || fail "unset policy: no message"
# '-' is the checker's standard input; in a job, the job's own: not read.
echo "the job's input" | expect_status 0 "UMPOL_POLICY=-: the job runs" \
    run UMPOL_POLICY=- sh -c 'read -r line && [ "$line" = "the job'"'"'s input" ]'
grep -q "UMPOL_POLICY is '-': the runtime does not read the job's standard input" "$tmp/out" ||
    fail "UMPOL_POLICY=-: no message"
expect_status 1 "UMPOL_ON_ERROR=abort stops the job" \
    run UMPOL_ON_ERROR=abort UMPOL_POLICY="$tmp/bad.umpol" "$stress" 1 10
grep -q "stopping before the job starts" "$tmp/out" || fail "abort: no message"
expect_status 1 "UMPOL_ON_ERROR is case-insensitive" \
    run UMPOL_ON_ERROR=ABORT UMPOL_POLICY="$tmp/none.umpol" "$stress" 1 10
expect_status 0 "UMPOL_ON_ERROR=passthrough" \
    run UMPOL_ON_ERROR=passthrough UMPOL_POLICY="$tmp/bad.umpol" "$stress" 2 1000 nofork
grep -q "umpol: not active" "$tmp/out" || fail "passthrough: runtime should be inactive"

# Unrecognised values are warnings that name the accepted ones.
expect_status 0 "unrecognised UMPOL_* values" env $foreign LD_PRELOAD="$preload" \
    UMPOL_POLICY="$policy" UMPOL_ON_ERROR=xyz UMPOL_LOG=abc UMPOL_DISCARD=yes UMPOL_PROFILE=true \
    /bin/true
for w in "UMPOL_ON_ERROR=xyz is not passthrough or abort" "UMPOL_LOG=abc is not 0, 1, 2 or 3" \
    "UMPOL_DISCARD=yes is not 0 or 1" "UMPOL_PROFILE=true is not 0 or 1"; do
    grep -q "$w" "$tmp/out" || fail "no warning '$w'"
done

# The log names a missing budget plainly.
printf 'umpol 1;\nclass all { match any; }\n' >"$tmp/nobudget.umpol"
expect_status 0 "log without a budget" run UMPOL_LOG=2 UMPOL_POLICY="$tmp/nobudget.umpol" "$stress" 1 10 nofork
grep -q "GPU 0: [0-9]* MiB, budget none, managed cap" "$tmp/out" || fail "log: budget none"
expect_status 0 "log with a budget" run UMPOL_LOG=2 UMPOL_POLICY="$policy" "$stress" 1 10 nofork
grep -q "budget [0-9]* MiB, managed cap" "$tmp/out" || fail "log: budget in MiB"

# A relative UMPOL_POLICY survives a child that changes directory.
mkdir "$tmp/rel" && cp "$policy" "$tmp/rel/p.umpol"
expect_status 0 "relative policy, child changes directory" sh -c "cd '$tmp/rel' && env $foreign \
    LD_PRELOAD='$preload' UMPOL_POLICY=p.umpol UMPOL_ON_ERROR=abort sh -c 'cd / && /bin/true'"

# Loaded with dlopen (PyTorch's pluggable allocator), the runtime never ends
# the process: without a policy it passes allocations through, or refuses
# them under UMPOL_ON_ERROR=abort.
loader="$top_builddir/tests/preload/.libs/loader"
[ -x "$loader" ] || loader="$top_builddir/tests/preload/loader"
fake="$top_builddir/tests/fake/.libs/libfake_cudart.so"
expect_status 0 "dlopen, missing policy" env LD_PRELOAD="${san:+$san }$fake" \
    UMPOL_POLICY="$tmp/none.umpol" "$loader" "$lib"
grep -q "alloc ok" "$tmp/out" || fail "dlopen, missing policy: allocation not passed through"
expect_status 0 "dlopen, missing policy, abort" env LD_PRELOAD="${san:+$san }$fake" \
    UMPOL_ON_ERROR=abort UMPOL_POLICY="$tmp/none.umpol" "$loader" "$lib"
grep -q "alloc refused" "$tmp/out" || fail "dlopen, abort: allocation not refused"
grep -q "refusing allocations" "$tmp/out" || fail "dlopen, abort: no message"
expect_status 0 "dlopen, valid policy" env LD_PRELOAD="${san:+$san }$fake" \
    UMPOL_POLICY="$policy" "$loader" "$lib"
grep -q "alloc ok" "$tmp/out" || fail "dlopen, valid policy: no allocation"

# A setuid process runs without umpol and says so (needs root and a
# filesystem that honours setuid; skipped otherwise). The process runs as
# nobody, so it loads a copy of the library from a directory nobody can
# reach: the build tree may sit in a private directory (mktemp -d).
if [ "$(id -u)" -eq 0 ] && [ -z "$san" ] && id nobody >/dev/null 2>&1 &&
    suid_dir=$(mktemp -d "${TMPDIR:-/tmp}/umpol-suid.XXXXXX"); then
    chmod 755 "$suid_dir" && cp "$lib" "$suid_dir/libumpol.so" && chmod 644 "$suid_dir/libumpol.so"
    cp "$loader" "$tmp/suid-loader" && chown nobody "$tmp/suid-loader" && chmod 4755 "$tmp/suid-loader"
    expect_status 0 "setuid process" env UMPOL_POLICY="$policy" UMPOL_ON_ERROR=abort \
        "$tmp/suid-loader" "$suid_dir/libumpol.so"
    if grep -q "secure 1" "$tmp/out"; then
        grep -q "dlopen ok" "$tmp/out" || fail "setuid: dlopen failed"
        [ "$(grep -c "runs setuid or setgid: running without umpol" "$tmp/out")" -eq 1 ] ||
            fail "setuid: not said exactly once"
    fi
    rm -rf "$suid_dir"
fi

# umpol run: checks the policy, preloads, reports, returns the job's status.
expect_status 0 "umpol run" env ${san:+LD_PRELOAD="$san"} "$UMPOL_BIN" run -p "$policy" \
    -r "$tmp/run.json" -- "$stress" 2 1000
[ -s "$tmp/run.json" ] || fail "umpol run: no report"
grep -q "saw no CUDA allocation\|made no CUDA call" "$tmp/out" && fail "umpol run: wrong notice"
expect_status 1 "umpol run with a bad policy" "$UMPOL_BIN" run -p "$tmp/bad.umpol" -- true
run_job() {
    env $foreign ${san:+LD_PRELOAD="$san"} "$UMPOL_BIN" run "$@"
}
expect_status 3 "umpol run returns the job's status" run_job -p "$policy" -- sh -c 'exit 3'
# (where no CUDA driver is installed, the notice says so, since a program
# with the static CUDA runtime would then load no CUDA library either)
grep -q "the job made no CUDA call.*exited with status 3\|the job loaded no CUDA library; it exited with status 3; no CUDA driver" \
    "$tmp/out" || fail "umpol run, failing job: no plain notice"
grep -q "nvcc -cudart shared" "$tmp/out" && fail "umpol run, failing job: static-linking hint given"
expect_status 0 "umpol run, job without CUDA" run_job -p "$policy" -- /bin/true
grep -q "the job made no CUDA call (no process loaded" "$tmp/out" ||
    fail "umpol run, true: no 'made no CUDA call'"
grep -q "static" "$tmp/out" && fail "umpol run, true: static-linking hint given"
expect_status 2 "umpol run, job with the CUDA runtime that fails first" run_job -p "$policy" -- \
    "$stress" 0
grep -q "loaded the CUDA runtime but made no CUDA call; it exited with status 2" "$tmp/out" ||
    fail "umpol run, failing CUDA job: no plain notice"
grep -q "static" "$tmp/out" && fail "umpol run, failing CUDA job: static-linking hint given"
# The static-linking hint needs evidence: the CUDA driver loaded in a process
# that has no shared CUDA runtime (what the static runtime does). A library
# loaded under the driver's name stands in for it.
mkdir "$tmp/drv" && cp "$fake" "$tmp/drv/libcuda.so.1"
expect_status 1 "umpol run, driver without the shared runtime" run_job -p "$policy" -- \
    "$loader" "$tmp/drv/libcuda.so.1"
grep -q "1 process used the CUDA driver without the shared CUDA runtime.*nvcc -cudart shared" \
    "$tmp/out" || fail "umpol run: no static-linking hint with the evidence"
expect_status 137 "umpol run, job killed before it exits" run_job -p "$policy" -- sh -c 'kill -9 $$'
grep -q "ended without a normal exit.*killed by signal 9" "$tmp/out" ||
    fail "umpol run, killed job: evidence missing not said"
if command -v python3 >/dev/null 2>&1; then
    expect_status 0 "umpol run, Python without CUDA" run_job -p "$policy" -- python3 -c pass
    grep -q "the job made no CUDA call" "$tmp/out" || fail "umpol run, Python: no plain notice"
fi
expect_status 2 "umpol run without a command" "$UMPOL_BIN" run -p "$policy"

# The job loads a snapshot: deleting the policy or changing directory during
# the run changes nothing for its processes.
cp "$policy" "$tmp/rel/q.umpol"
expect_status 0 "umpol run, policy deleted during the run" sh -c "cd '$tmp/rel' && env $foreign \
    ${san:+LD_PRELOAD=$san} UMPOL_ON_ERROR=abort '$UMPOL_BIN' run -p q.umpol -- \
    sh -c 'rm q.umpol && cd / && /bin/true && /bin/true'"
grep -q "ran without umpol\|cannot load" "$tmp/out" && fail "umpol run: a child lost the policy"
[ -e "$tmp/rel/q.umpol" ] && fail "snapshot test: the policy was not deleted"

# The handshake: a library that is not the runtime, or that the loader
# refuses, stops `umpol run` before the job runs.
san_env() {
    env $foreign ${san:+LD_PRELOAD="$san"} "$@"
}
mkdir "$tmp/with space" && cp "$lib" "$tmp/with space/libumpol.so"
expect_status 2 "umpol run, library path with a space" env UMPOL_LIBRARY="$tmp/with space/libumpol.so" \
    "$UMPOL_BIN" run -p "$policy" -- touch "$tmp/ran"
grep -q "splits LD_PRELOAD at spaces" "$tmp/out" || fail "space: no reason given"
expect_status 2 "umpol run, UMPOL_LIBRARY not a library" san_env UMPOL_LIBRARY="$policy" \
    "$UMPOL_BIN" run -p "$policy" -- touch "$tmp/ran"
grep -q "cannot be preloaded" "$tmp/out" || fail "not a library: the loader's words not shown"
libm=$(ldd "$UMPOL_BIN" | sed -n 's/.*=> \(\/[^ ]*libm\.so[^ ]*\).*/\1/p' | head -1)
if [ -n "$libm" ]; then
    expect_status 2 "umpol run, UMPOL_LIBRARY another library" san_env UMPOL_LIBRARY="$libm" \
        "$UMPOL_BIN" run -p "$policy" -- touch "$tmp/ran"
    grep -q "not the umpol runtime" "$tmp/out" || fail "another library: no message"
fi
[ -e "$tmp/ran" ] && fail "the job ran although the runtime did not load"

# A job whose processes load no preloaded library (a static program) ran
# without umpol: said, and exit 2 although the job succeeded.
static_prog=$(command -v ldconfig || echo /sbin/ldconfig)
if [ -x "$static_prog" ] && ldd "$static_prog" 2>&1 | grep -q "statically linked\|not a dynamic"; then
    expect_status 2 "umpol run, static program" san_env "$UMPOL_BIN" run -p "$policy" -- \
        "$static_prog" --version
    grep -q "no process of the job loaded the runtime" "$tmp/out" || fail "static program: not said"
fi

# A kept PyTorch allocator setting that hides tensors is a warning, without -v.
expect_status 0 "kept expandable segments" san_env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    "$UMPOL_BIN" run -p "$policy" -- /bin/true
grep -q "warning: keeping PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: .*cannot see" \
    "$tmp/out" || fail "expandable segments: no warning"
expect_status 0 "kept native allocator" san_env PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 \
    "$UMPOL_BIN" run -p "$policy" -- /bin/true
grep -q "whole segments, not tensors" "$tmp/out" || fail "native allocator: no warning"
expect_status 0 "kept cudaMallocAsync backend" san_env \
    PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync,expandable_segments:True" \
    "$UMPOL_BIN" run -p "$policy" -- /bin/true
grep -q "keeping PYTORCH_CUDA_ALLOC_CONF" "$tmp/out" && fail "cudaMallocAsync backend: warned"
expect_status 0 "kept PYTORCH_ALLOC_CONF" san_env PYTORCH_ALLOC_CONF=expandable_segments:True \
    "$UMPOL_BIN" run -p "$policy" -- /bin/true
grep -q "warning: keeping PYTORCH_ALLOC_CONF=expandable_segments:True" "$tmp/out" ||
    fail "PYTORCH_ALLOC_CONF: no warning"

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
# A report to a name that is not a regular file is written into, never
# replaced (through a link, as in tests/suggest.sh); a pipe nobody reads is an
# error at once, not a job stuck at its exit.
ln -s /dev/null "$tmp/null.json"
expect_status 0 "report to a link to /dev/null" run UMPOL_POLICY="$policy" \
    UMPOL_REPORT="$tmp/null.json" "$phases" step
[ -L "$tmp/null.json" ] && [ -c /dev/null ] || fail "the report replaced /dev/null's name"
grep -q "cannot write the report" "$tmp/out" && fail "report to /dev/null: an error said"
# A report into a pipe whose reader has gone: the job ends as it would have.
{ sleep 1; env LD_PRELOAD="$preload" UMPOL_POLICY="$policy" UMPOL_REPORT=/proc/self/fd/1 \
    "$phases" step 2>"$tmp/epipe"; echo $? >"$tmp/epipe.rc"; } | true
[ "$(cat "$tmp/epipe.rc")" = 0 ] || fail "report into a closed pipe: the job exited $(cat "$tmp/epipe.rc")"
grep -q "cannot write the report to /proc/self/fd/1: Broken pipe" "$tmp/epipe" ||
    fail "report into a closed pipe: no reason"
if mkfifo "$tmp/report.fifo" 2>/dev/null; then
    expect_status 0 "report to a pipe nobody reads" run UMPOL_POLICY="$policy" \
        UMPOL_REPORT="$tmp/report.fifo" timeout 60 "$phases" step
    grep -q "cannot write the report to $tmp/report.fifo: No such device or address" "$tmp/out" ||
        fail "report to an unread pipe: no reason"
    [ -p "$tmp/report.fifo" ] || fail "the report replaced the pipe"
fi
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
# Movable memory does not move while a stream capture is in progress (a move waits for
# the whole GPU, which would invalidate the capture): the interposed capture calls count
# captures, the rule that fires meanwhile is skipped and counted, the next one moves.
printf 'umpol 1;\nclass moved { match any; memory movable;\n  prefetch host on enter "away"; prefetch gpu on exit "away"; }\n' >"$tmp/movable.umpol"
expect_status 0 "movable memory and a capture" run UMPOL_POLICY="$tmp/movable.umpol" \
    UMPOL_REPORT="$tmp/movable.json" "$phases" +capture away -capture away
grep -q "class 'moved': not moved while a stream capture is in progress" "$tmp/out" ||
    fail "movable during a capture: no warning"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/movable.json" <<'PY' || fail "movable during a capture: moved, or not after it"
import json, sys
r = json.load(open(sys.argv[1]))
m = next(c for c in r["classes"] if c["name"] == "moved")["movable"]
assert m["skipped_in_capture"] == 2, m  # both rules of the phase inside the capture
assert m["to_host_bytes"] == m["to_gpu_bytes"] > 0, m  # the phase after it moved
card = r["devices"][0]["card"]  # the card's own figure, sampled as phases opened
assert card["samples"] >= 1 and card["peak_used_bytes"] >= card["base_used_bytes"], card
PY
fi
# umpol_on_host and umpol_host_bytes: a block of a `memory host` class, one of
# another class, an address that is no block of the runtime's (the block is
# the 4096 bytes asked for).
for memory in host device; do
    printf 'umpol 1;\nclass all { match any; memory %s; }\n' $memory >"$tmp/$memory.umpol"
    expect_status 0 "umpol_on_host, memory $memory" run UMPOL_POLICY="$tmp/$memory.umpol" \
        UMPOL_REPORT="$tmp/$memory.json" "$phases" '?host'
    want=$([ $memory = host ] && echo 1 || echo 0)
    grep -q "on host: the allocation $want, another address -1" "$tmp/out" ||
        fail "umpol_on_host, memory $memory: $(cat "$tmp/out")"
    bytes=$([ $memory = host ] && echo 4096 || echo 0)
    grep -q "host bytes: the allocation $bytes, another address -1" "$tmp/out" ||
        fail "umpol_host_bytes, memory $memory: $(cat "$tmp/out")"
done
# A movable block: none of it on the host until its piece leaves the GPU
# (">away" opens the phase whose entry sends the class to the host).
expect_status 0 "umpol_host_bytes, movable on the GPU" run UMPOL_POLICY="$tmp/movable.umpol" \
    UMPOL_REPORT="$tmp/movable.json" "$phases" '?host'
grep -q "host bytes: the allocation 0, another address -1" "$tmp/out" ||
    fail "umpol_host_bytes, movable on the GPU: $(cat "$tmp/out")"
expect_status 0 "umpol_host_bytes, movable moved to the host" run UMPOL_POLICY="$tmp/movable.umpol" \
    UMPOL_REPORT="$tmp/movable.json" "$phases" '>away' '?host'
grep -q "host bytes: the allocation 4096, another address -1" "$tmp/out" ||
    fail "umpol_host_bytes, movable moved to the host: $(cat "$tmp/out")"
# umpol_step_changed: accepted under a policy, and the phases after it run as
# before (nothing is given back at the call; tests/test_runtime.c checks what
# the next return gives back and what comes back after it).
expect_status 0 "umpol_step_changed" run UMPOL_POLICY="$tmp/device.umpol" \
    UMPOL_REPORT="$tmp/changed.json" "$phases" forward '!changed' forward
grep -q "step changed: 0" "$tmp/out" || fail "umpol_step_changed: $(cat "$tmp/out")"
python3 - "$tmp/changed.json" <<'PY' || fail "umpol_step_changed: the report"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["classes"][0]
assert c["slabs"] == 1 and c["slab_releases"] == 0, c  # the live allocation's slab stays
assert next(p for p in r["phases"] if p["name"] == "forward")["entries"] == 2, r["phases"]
PY
finish
