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
assert opt["place"] == "host near" and opt["access"] == ["gpu"], opt
assert opt["prefetch"][0] == {"to": "gpu", "on": "enter", "pattern": "optimizer*"}, opt
assert doc["budget_gpu"] == {"percent": 80}, doc
PY
fi
expect_status 1 "explain an invalid policy" "$UMPOL_BIN" explain "$bad"

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
