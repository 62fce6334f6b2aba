#!/bin/sh
# Every stock policy is valid, warning-free, and explains without error.
. "${top_srcdir:-.}/tests/lib.sh"
for policy in "$top_srcdir"/policies/*.umpol; do
    expect_status 0 "check $(basename "$policy")" "$UMPOL_BIN" check "$policy"
    if grep -q 'warning\[' "$tmp/out"; then
        fail "$(basename "$policy") has warnings"
        cat "$tmp/out" >&2
    fi
    expect_status 0 "explain $(basename "$policy")" "$UMPOL_BIN" explain "$policy"
    grep -q '^  1  ' "$tmp/out" || fail "explain $(basename "$policy") lists no class"
done
finish
