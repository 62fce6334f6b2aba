#!/bin/sh
# The bash completion loads, is bound to umpol, and completes commands,
# options and policy files from umpol's own help.
. "${top_srcdir:-.}/tests/lib.sh"
if ! command -v bash >/dev/null 2>&1; then
    echo "SKIP: bash is not installed"
    exit 77
fi
mkdir "$tmp/dir" && touch "$tmp/dir/a.umpol" "$tmp/dir/b.json"
complete_words() { # complete_words WORD... : what bash offers for the last word
    bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _umpol; echo "${COMPREPLY[*]}"' \
        sh "$top_srcdir/completions/umpol.bash" "$@"
}
bound=$(bash -c '. "$1"; complete -p umpol' sh "$top_srcdir/completions/umpol.bash")
[ "$bound" = "complete -F _umpol umpol" ] && pass || fail "complete -p umpol: '$bound'"
got=$(complete_words "$UMPOL_BIN" ch)
[ "$got" = check ] && pass || fail "'umpol ch': '$got', expected 'check'"
got=$(complete_words "$UMPOL_BIN" check --to)
[ "$got" = --topology ] && pass || fail "'umpol check --to': '$got', expected '--topology'"
got=$(cd "$tmp/dir" && complete_words "$UMPOL_BIN" check "")
[ "$got" = a.umpol ] && pass || fail "'umpol check ': '$got', expected 'a.umpol'"
got=$(cd "$tmp/dir" && complete_words "$UMPOL_BIN" run -p "")
[ "$got" = a.umpol ] && pass || fail "'umpol run -p ': '$got', expected 'a.umpol'"
finish
