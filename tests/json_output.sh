#!/bin/sh
# Every JSON umpol writes is RFC 8259 UTF-8 whatever the input: hostile names
# (quotes, control characters, invalid UTF-8, escapes, long names) through
# `report --json`, `report --trace`, `check --json` and `explain --json`,
# checked by a strict parser; text for the terminal carries no control
# character; and output that cannot be written is an error (exit 2).
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; exit 77; }

# strict FILE: parse FILE as JSON, refusing NaN/Infinity and invalid UTF-8.
strict() {
    python3 - "$1" <<'PY'
import json, sys
def no_constant(name):
    raise ValueError("non-finite number " + name)
data = open(sys.argv[1], "rb").read()
json.loads(data.decode("utf-8", errors="strict"), parse_constant=no_constant)
PY
}

# A report whose names hold everything a name should not.
long=$(python3 -c 'print("L" * 4096)')
cat >"$tmp/hostile.json" <<EOF2
{"umpol_report": 1, "pid": 1, "rank": 0,
 "classes": [{"name": "evi\"ct\\\\ \u0001\u001b[2J\u007f \ud800 \u0000 \u00e9", "allocations": 1,
              "um": {"gpu_faults": 5}},
             {"name": "$long", "allocations": 2}],
 "phases": [{"name": "ph\"ase\n\u009b31m", "entries": 1, "total_ns": 5}],
 "timeline": {"spans": [{"phase": 0, "start_ns": 0, "end_ns": 10, "depth": 0}],
              "events": [{"t_ns": 1, "kind": "evict", "class": 0, "device": 0, "bytes": 1,
                          "resident_bytes": 0}]}}
EOF2
expect_status 0 "report --json of hostile names" "$UMPOL_BIN" report --json "$tmp/hostile.json"
strict "$tmp/out" || fail "report --json: not strict JSON"
python3 - "$tmp/out" <<'PY' || fail "report --json: names not kept"
import json, sys
m = json.load(open(sys.argv[1], encoding="utf-8"))
names = [c["name"] for c in m["classes"]]
assert names[0] == 'evi"ct\\ \x01\x1b[2J\x7f \ufffd \ufffd \xe9', names[0]
assert names[1] == "L" * 4096
assert m["phases"][0]["name"] == 'ph"ase\n\x9b31m'
PY
expect_status 0 "report --trace of hostile names" "$UMPOL_BIN" report --trace "$tmp/trace.json" "$tmp/hostile.json"
strict "$tmp/trace.json" || fail "report --trace: not strict JSON"
expect_status 0 "report text of hostile names" "$UMPOL_BIN" report "$tmp/hostile.json"
# No escape, bell or other control byte reaches the terminal (tab and newline aside).
if LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$tmp/out"; then
    fail "report text: control characters reach the terminal"
fi
grep -q 'evi"ct\\ \\x01\\x1b\[2J\\x7f' "$tmp/out" || fail "report text: name not shown escaped"

# A name over the limit is refused with the limit named.
over=$(python3 -c 'print("L" * 4097)')
printf '{"umpol_report": 1, "classes": [{"name": "%s"}]}' "$over" >"$tmp/over.json"
expect_status 1 "report with a name over the limit" "$UMPOL_BIN" report "$tmp/over.json"
grep -q "classes\[0\].name: longer than 4096 bytes" "$tmp/out" || fail "long name: message"

# check --json and explain --json: a file name that is not UTF-8, a policy
# whose strings hold quotes and control characters.
bad_name=$(printf '%s/p\377\376"q\033.umpol' "$tmp")
printf 'umpol 1;\nclass a { match phase "q\\"x\\\\y\001\033[31m"; }\nclass rest { match any; }\n' >"$bad_name"
"$UMPOL_BIN" check --json "$bad_name" >"$tmp/check.json" 2>"$tmp/err"
[ $? -eq 0 ] || fail "check --json of a hostile file name: exit status"
strict "$tmp/check.json" || fail "check --json: not strict JSON"
"$UMPOL_BIN" explain --json "$bad_name" >"$tmp/explain.json" 2>"$tmp/err"
[ $? -eq 0 ] || fail "explain --json: exit status"
strict "$tmp/explain.json" || fail "explain --json: not strict JSON"
"$UMPOL_BIN" check "$bad_name" >"$tmp/out" 2>&1
"$UMPOL_BIN" explain "$bad_name" >>"$tmp/out" 2>&1
if LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$tmp/out"; then
    fail "check/explain text: control characters reach the terminal"
fi
grep -q 'p\\xff\\xfe"q\\x1b.umpol: valid' "$tmp/out" || fail "check: file name not shown escaped"

# Output that cannot be written is an error with its reason (exit 2).
if [ -w /dev/full ]; then
    r0="$top_srcdir/tests/reports/rank0.json"
    good="$top_srcdir/policies/llm-finetune.umpol"
    for cmd in "report $r0" "report --json $r0" "explain $good" "explain --json $good" \
        "check --json $good" "version" "help" "help check" "check --help" "topo"; do
        # shellcheck disable=SC2086
        "$UMPOL_BIN" $cmd >/dev/full 2>"$tmp/err"
        got=$?
        if [ "$got" -ne 2 ]; then
            fail "umpol $cmd >/dev/full: exit $got, expected 2"
        elif ! grep -q "cannot write the output: No space left on device" "$tmp/err"; then
            fail "umpol $cmd >/dev/full: no reason given"
            cat "$tmp/err" >&2
        else
            pass
        fi
    done
    expect_status 2 "report --trace to /dev/full" "$UMPOL_BIN" report --trace /dev/full "$r0"
    grep -q "cannot write /dev/full: No space left on device" "$tmp/out" || fail "--trace /dev/full: message"
fi
finish
