#!/bin/sh
# Every stock policy is valid, warning-free, and explains without error; every
# policy the benchmarks run is valid and explains (bench/migrate-*.umpol leave
# the benchmark's other allocations to CUDA on purpose: W102).
. "${top_srcdir:-.}/tests/lib.sh"
for policy in "$top_srcdir"/policies/*.umpol "$top_srcdir"/bench/*.umpol; do
    expect_status 0 "check $(basename "$policy")" "$UMPOL_BIN" check "$policy"
    case $policy in
    */policies/*)
        if grep -q 'warning\[' "$tmp/out"; then
            fail "$(basename "$policy") has warnings"
            cat "$tmp/out" >&2
        fi ;;
    esac
    expect_status 0 "explain $(basename "$policy")" "$UMPOL_BIN" explain "$policy"
    grep -q '^  1  ' "$tmp/out" || fail "explain $(basename "$policy") lists no class"
done
finish
