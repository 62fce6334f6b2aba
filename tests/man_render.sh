#!/bin/sh
# Every man page renders without a single groff warning (what
# `man --warnings` would show), at the usual 80 columns.
. "${top_srcdir:-.}/tests/lib.sh"
if ! command -v groff >/dev/null 2>&1; then
    echo "SKIP: groff is not installed"
    exit 77
fi
for page in "${top_builddir:-.}"/man/umpol.[0-9]; do
    [ -f "$page" ] || { fail "no man page built under ${top_builddir:-.}/man"; break; }
    # -t: umpol(5) has a table; -ww: every warning; -z: no output, warnings only.
    LC_ALL=C.UTF-8 groff -t -man -Tutf8 -ww -z "$page" >"$tmp/warnings" 2>&1
    if [ -s "$tmp/warnings" ]; then
        fail "$(basename "$page") renders with warnings:"
        sed 's/^/    /' "$tmp/warnings" >&2
    else
        pass
    fi
done
finish
