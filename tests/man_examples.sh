#!/bin/sh
# The examples in umpol(5) are real policies: every .EX/.EE block that starts
# with the version header is extracted and must check clean, so the manual
# cannot drift from the language. The error-code table must list every code
# that the checker can emit.
. "${top_srcdir:-.}/tests/lib.sh"
man5="${top_builddir:-.}/man/umpol.5"
awk -v dir="$tmp" '
    /^\.EX/ { inblock = 1; n++; file = dir "/example" n ".umpol"; first = 1; next }
    /^\.EE/ { inblock = 0; next }
    inblock {
        line = $0
        gsub(/\\e/, "\\", line); gsub(/\\-/, "-", line); gsub(/\\&/, "", line)
        gsub(/\\\(dq/, "\"", line)
        if (first && line !~ /^umpol 1;/) { inblock = 0; next }
        first = 0
        print line > file
    }
' "$man5"
count=0
for example in "$tmp"/example*.umpol; do
    [ -f "$example" ] || continue
    count=$((count + 1))
    expect_status 0 "umpol(5) example $(basename "$example")" "$UMPOL_BIN" check "$example"
done
[ "$count" -ge 3 ] || fail "found only $count complete policy examples in umpol(5)"
# Every code in the diagnostics enum appears in the manual's table.
codes=$(sed -n 's/^ *[EW]_[A-Z_]* = \([0-9]*\),.*/\1/p' "$top_srcdir/src/lang/diag.h")
for n in $codes; do
    if [ "$n" -ge 100 ]; then code=$(printf 'W%03d' "$n"); else code=$(printf 'E%03d' "$n"); fi
    if grep -q "^$code	" "$man5"; then pass; else fail "umpol(5) does not document $code"; fi
done
finish
