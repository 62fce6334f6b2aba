#!/bin/sh
# The CLI's contract: exit codes, --json, stdin, hostile inputs.
. "${top_srcdir:-.}/tests/lib.sh"
good="$top_srcdir/policies/llm-finetune.umpol"
bad="$top_srcdir/tests/policies/bad/duplicate_class_1.umpol"

expect_status 0 "check a valid policy" "$UMPOL_BIN" check "$good"
expect_status 1 "check an invalid policy" "$UMPOL_BIN" check "$bad"
expect_status 1 "invalid wins over valid" "$UMPOL_BIN" check "$good" "$bad"
expect_status 2 "missing file" "$UMPOL_BIN" check /nonexistent/policy.umpol
grep -q 'error\[E027\]: cannot open: No such file or directory' "$tmp/out" || fail "missing file message"
expect_status 2 "I/O error wins over invalid" "$UMPOL_BIN" check "$bad" /nonexistent
expect_status 2 "directory instead of a file" "$UMPOL_BIN" check "$top_srcdir"
expect_status 2 "no file given" "$UMPOL_BIN" check
expect_status 2 "unknown command" "$UMPOL_BIN" frobnicate
expect_status 2 "no command" "$UMPOL_BIN"
expect_status 0 "help" "$UMPOL_BIN" help
expect_status 0 "version" "$UMPOL_BIN" --version
grep -q '^umpol [0-9]' "$tmp/out" || fail "version output"

expect_status 0 "quiet valid prints nothing" "$UMPOL_BIN" check -q "$good"
[ -s "$tmp/out" ] && fail "check -q printed output for a valid policy"

expect_status 0 "policy on stdin" sh -c "\"$UMPOL_BIN\" check - < \"$good\""

# --json is one parseable object with the documented fields.
"$UMPOL_BIN" check --json "$good" "$bad" >"$tmp/json"
[ $? -eq 1 ] || fail "check --json exit status"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/json" <<'PY' || fail "check --json output"
import json, sys
doc = json.load(open(sys.argv[1]))
files = doc["files"]
assert len(files) == 2 and files[0]["valid"] and not files[1]["valid"], files
d = files[1]["diagnostics"][0]
assert d["code"] == "E010" and d["line"] == 3 and d["column"] == 7, d
assert d["note"]["line"] == 2, d
PY
    "$UMPOL_BIN" explain --json "$good" >"$tmp/explain.json" || fail "explain --json exit"
    python3 - "$tmp/explain.json" <<'PY' || fail "explain --json output"
import json, sys
doc = json.load(open(sys.argv[1]))
names = [c["name"] for c in doc["classes"]]
assert names == ["weights", "optimizer", "activations", "rest"], names
opt = doc["classes"][1]
assert opt["place"] == "host near" and opt["memory"] == "movable" and opt["access"] == [], opt
assert opt["prefetch"][0] == {"to": "gpu", "on": "enter", "pattern": "optimizer*"}, opt
assert doc["budget_gpu"] == {"percent": 80}, doc
assert doc["classes"][0]["doc"] == "Parameters are allocated while the model is built.", doc
PY
fi
# explain shows each class's doc comment, the comment lines directly above it.
expect_status 0 "explain with doc comments" "$UMPOL_BIN" explain "$good"
grep -A3 "^  1  weights" "$tmp/out" | grep -q "^     doc:      Parameters are allocated while the model is built.$" ||
    fail "explain: no doc comment under the class" 
expect_status 1 "explain an invalid policy" "$UMPOL_BIN" explain "$bad"

# explain tells what the runtime applies: without `cap managed`, the default cap, per GPU.
expect_status 0 "explain without a cap" "$UMPOL_BIN" explain "$top_srcdir/policies/passthrough.umpol"
grep -q "^cap managed:  90% of each GPU's memory (default)$" "$tmp/out" || fail "explain: default cap"
grep -q "^budget gpu:   none$" "$tmp/out" || fail "explain: no budget"
# explain --json is JSON on stdout whatever the policy, diagnostics included.
"$UMPOL_BIN" explain --json "$bad" >"$tmp/explain_bad.json" 2>"$tmp/explain_bad.err"
[ $? -eq 1 ] || fail "explain --json of an invalid policy: exit status"
[ -s "$tmp/explain_bad.err" ] && fail "explain --json of an invalid policy wrote to stderr"
"$UMPOL_BIN" explain --json /nonexistent/policy.umpol >"$tmp/explain_missing.json" 2>/dev/null
[ $? -eq 2 ] || fail "explain --json of a missing file: exit status"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/explain_bad.json" "$tmp/explain_missing.json" <<'PY' || fail "explain --json of an invalid policy"
import json, sys
bad = json.load(open(sys.argv[1]))
assert bad["valid"] is False and bad["errors"] == 1 and "classes" not in bad, bad
assert bad["diagnostics"][0]["code"] == "E010", bad
missing = json.load(open(sys.argv[2]))
assert missing["diagnostics"][0]["code"] == "E027", missing
PY
fi

# 65,000 copies of one class name: the checker stops at the error cap.
{ echo 'umpol 1;'; i=0; while [ $i -lt 65000 ]; do echo 'class a { match any; }'; i=$((i+1)); done; } >"$tmp/dups.umpol"
expect_status 1 "65,000 duplicate class names" timeout 20 "$UMPOL_BIN" check "$tmp/dups.umpol"
[ "$(grep -c 'error\[' "$tmp/out")" -le 21 ] || fail "65,000 duplicates: more than 21 errors printed"
grep -q 'error\[E023\]: too many errors (20); stopped checking here' "$tmp/out" || fail "65,000 duplicates: no E023"

# check --topology says what it could not check, and W104 points at the location.
printf 'umpol 1;\nclass a {\n    match any;\n    place gpu 99;\n}\n' >"$tmp/gpu99.umpol"
expect_status 0 "check --topology, GPU 99" "$UMPOL_BIN" check --topology "$tmp/gpu99.umpol"
grep -Eq 'gpu99.umpol:4:11: (note\[W104\]: no GPU visible \(.*\): GPU numbers not checked \(place gpu 99\)|warning\[W104\]: class .a.: this machine has no GPU 99)' "$tmp/out" ||
    fail "check --topology: GPU 99 neither checked nor noted at 4:11"
# A number out of range is an error only: --topology checks no number that is not there.
printf 'umpol 1;\nclass a { match any; place gpu 1024; }\nclass b { match any; place host numa 4000; }\n' >"$tmp/gpu1024.umpol"
expect_status 1 "check --topology, GPU 1024" "$UMPOL_BIN" check --topology "$tmp/gpu1024.umpol"
[ "$(grep -c 'E022' "$tmp/out")" -eq 2 ] || fail "GPU 1024, node 4000: not two E022"
! grep -q 'W104' "$tmp/out" || fail "GPU 1024, node 4000: W104 about a number the policy does not have"

# Hostile inputs: each a clear error, never a crash or a hang.
head -c 52428800 /dev/zero | tr '\0' '#' >"$tmp/big.umpol"
expect_status 1 "50 MB file" timeout 20 "$UMPOL_BIN" check "$tmp/big.umpol"
grep -q 'E006' "$tmp/out" || fail "50 MB file: no E006"
head -c 65536 /dev/urandom >"$tmp/random.bin"
expect_status 1 "random binary" timeout 20 "$UMPOL_BIN" check "$tmp/random.bin"
grep -q 'E005' "$tmp/out" || fail "random binary: no E005"
{ printf 'umpol 1;\nclass a { match '; i=0; while [ $i -lt 10000 ]; do printf '('; i=$((i+1)); done; printf 'any'; i=0; while [ $i -lt 10000 ]; do printf ')'; i=$((i+1)); done; printf '; }\n'; } >"$tmp/deep.umpol"
expect_status 1 "10,000 nested parentheses" timeout 20 "$UMPOL_BIN" check "$tmp/deep.umpol"
grep -q 'E007' "$tmp/out" || fail "deep nesting: no E007"
{ printf 'umpol 1;\nclass a { match '; i=0; while [ $i -lt 10000 ]; do printf 'not '; i=$((i+1)); done; printf 'any; }\n'; } >"$tmp/nots.umpol"
expect_status 1 "10,000 nots" timeout 20 "$UMPOL_BIN" check "$tmp/nots.umpol"
printf 'umpol 1;\nclass a { match phase "abc' >"$tmp/unterminated.umpol"
expect_status 1 "unterminated string at EOF" "$UMPOL_BIN" check "$tmp/unterminated.umpol"
grep -q 'E004' "$tmp/out" || fail "unterminated string: no E004"
printf 'umpol 1;\nclass a { match any; } # comment without newline' >"$tmp/comment.umpol"
expect_status 0 "comment at EOF" "$UMPOL_BIN" check "$tmp/comment.umpol"
# Every command answers --help and -h with its own usage, and 'umpol help
# COMMAND' prints the same; an unknown option names the command's --help.
commands=$("$UMPOL_BIN" help | sed -n 's/^  umpol \([a-z]*\).*/\1/p')
[ -n "$commands" ] || fail "umpol help lists no command"
for cmd in $commands; do
    for flag in --help -h; do
        expect_status 0 "$cmd $flag" "$UMPOL_BIN" "$cmd" "$flag"
        head -1 "$tmp/out" | grep -q "^usage: umpol $cmd" || fail "$cmd $flag: no usage line"
        grep -q '^example: umpol ' "$tmp/out" || fail "$cmd $flag: no example"
    done
    "$UMPOL_BIN" help "$cmd" >"$tmp/help_cmd" 2>&1 || fail "help $cmd: exit status"
    cmp -s "$tmp/out" "$tmp/help_cmd" || fail "'umpol help $cmd' differs from 'umpol $cmd -h'"
    expect_status 2 "$cmd --no-such-option" "$UMPOL_BIN" "$cmd" --no-such-option
    grep -q "umpol $cmd: unknown option '--no-such-option'" "$tmp/out" || fail "$cmd: unknown option message"
    grep -q "umpol $cmd --help" "$tmp/out" || fail "$cmd: usage error does not name --help"
done
expect_status 2 "help for an unknown command" "$UMPOL_BIN" help frobnicate
expect_status 2 "run -p without its argument" "$UMPOL_BIN" run -p
grep -q 'needs an argument (POLICY)' "$tmp/out" || fail "run -p: missing-argument message"
for v in --version -V version; do
    expect_status 0 "$v" "$UMPOL_BIN" $v
    grep -q '^umpol [0-9]' "$tmp/out" || fail "$v output"
done
# Options go anywhere among the operands, except in run (and suggest), where
# they end at COMMAND; `--` ends them anywhere.
good="$top_srcdir/policies/passthrough.umpol"
expect_status 0 "check FILE --json" "$UMPOL_BIN" check "$good" --json
grep -q '^{"files":' "$tmp/out" || fail "check FILE --json: not JSON"
expect_status 0 "explain FILE --json" "$UMPOL_BIN" explain "$good" --json
grep -q '^{"file":' "$tmp/out" || fail "explain FILE --json: not JSON"
expect_status 2 "check -- -json" "$UMPOL_BIN" check -- --json
grep -q -- "--json: error\[E027\]" "$tmp/out" || fail "check -- --json: not read as a file"
# (a library that does not load stops run after its options were read: no
# runtime, GPU or sanitizer needed for the check)
expect_status 2 "run's COMMAND keeps its options" env UMPOL_LIBRARY="$good" \
    "$UMPOL_BIN" run -p "$good" true --json
grep -q "did not load in a test process" "$tmp/out" || fail "run: COMMAND's option read as run's"
# topo without a GPU says why in plain words, and that --measure measured nothing.
expect_status 0 "topo --measure" "$UMPOL_BIN" topo --measure
if grep -q '^GPUs: none' "$tmp/out"; then
    grep -q 'insufficient' "$tmp/out" && fail "topo: cudart's 'insufficient driver' wording instead of the cause"
    grep -Eq '^  (no CUDA driver found|no GPU|no CUDA runtime library found|the CUDA driver is older)' "$tmp/out" ||
        fail "topo: no plain reason for finding no GPU"
    grep -q 'nothing measured' "$tmp/out" || fail "topo --measure without a GPU: does not say nothing was measured"
fi
# umpol run checks that the runtime loads before it runs the job.
printf 'umpol 1;\nclass a { match any; }\n' >"$tmp/run.umpol"
expect_status 2 "run: UMPOL_LIBRARY is not a library" env UMPOL_LIBRARY="$tmp/run.umpol" \
    "$UMPOL_BIN" run -p "$tmp/run.umpol" -- touch "$tmp/job-ran"
grep -q "did not load in a test process" "$tmp/out" || fail "run, not a library: no error"
mkdir "$tmp/a b" && cp "$tmp/run.umpol" "$tmp/a b/libumpol.so"
expect_status 2 "run: library path with a space" env UMPOL_LIBRARY="$tmp/a b/libumpol.so" \
    "$UMPOL_BIN" run -p "$tmp/run.umpol" -- touch "$tmp/job-ran"
grep -q "splits LD_PRELOAD at spaces" "$tmp/out" || fail "run, space: no reason"
[ -e "$tmp/job-ran" ] && fail "run: the job ran without the runtime"
finish
