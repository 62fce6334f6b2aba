#!/bin/sh
# Golden diagnostics: each tests/policies/bad/NAME_N.umpol must make `umpol
# check` exit N and print exactly NAME_N.expected. UMPOL_REGEN=1 rewrites the
# expected files (then read every diff before committing it).
. "${top_srcdir:-.}/tests/lib.sh"
cd "$top_srcdir/tests/policies/bad" || exit 99
for policy in *.umpol; do
    name=${policy%.umpol}
    want=${name##*_}
    NO_COLOR=1 "$UMPOL_BIN" check "$policy" >"$tmp/got" 2>&1
    status=$?
    if [ "$status" -ne "$want" ]; then
        fail "$policy: exit $status, expected $want"
        continue
    fi
    if [ "${UMPOL_REGEN:-0}" = 1 ]; then
        cp "$tmp/got" "$name.expected"
    fi
    if ! diff -u "$name.expected" "$tmp/got" >"$tmp/diff" 2>&1; then
        fail "$policy: diagnostics differ from $name.expected"
        cat "$tmp/diff" >&2
        continue
    fi
    pass
done
finish
