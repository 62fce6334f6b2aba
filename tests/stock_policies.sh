#!/bin/sh
# Every stock policy is valid, warning-free, and explains without error; every
# policy the benchmarks run is valid and explains (bench/migrate-*.umpol leave
# the benchmark's other allocations to CUDA on purpose: W102); auto-offload is
# optimizer-offload with the step learned.
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
# auto-offload.umpol is optimizer-offload.umpol with the step learned, line for
# line apart from comments: what its notes and the GPU tests say of one holds
# for the other.
body() { sed -e 's/[[:space:]]*#.*//' -e '/^[[:space:]]*$/d' "$1"; }
body "$top_srcdir/policies/optimizer-offload.umpol" |
    sed 's/^slab 64MiB;$/slab 64MiB;\
learn step "forward";/' > "$tmp/expected"
body "$top_srcdir/policies/auto-offload.umpol" > "$tmp/auto"
if cmp -s "$tmp/expected" "$tmp/auto"; then
    pass
else
    fail "auto-offload.umpol is not optimizer-offload.umpol with 'learn step \"forward\";'"
    diff "$tmp/expected" "$tmp/auto" >&2
fi
finish
