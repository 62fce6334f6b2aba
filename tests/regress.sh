#!/bin/sh
# Inputs that once crashed, hung or leaked: each must give a clean verdict
# (exit 0 or 1, never a signal) within 10 seconds. Sanitizer builds turn any
# memory error into a failure here.
. "${top_srcdir:-.}/tests/lib.sh"
for input in "$top_srcdir"/tests/policies/regress/* "$top_srcdir"/tests/fuzz/corpus/*; do
    [ -f "$input" ] || continue
    timeout 10 "$UMPOL_BIN" check "$input" >"$tmp/out" 2>&1
    status=$?
    case $status in
    0 | 1) pass ;;
    *) fail "$(basename "$input"): exit $status"; head -5 "$tmp/out" >&2 ;;
    esac
done
finish
