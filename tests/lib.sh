# Shared helpers for the shell tests (sourced). Automake passes UMPOL_BIN,
# top_srcdir and top_builddir in the environment.
set -u
: "${UMPOL_BIN:=${top_builddir:-.}/umpol}"
: "${top_srcdir:=.}"
failures=0
checks=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

pass() {
    checks=$((checks + 1))
}

# expect_status WANT DESCRIPTION CMD...: run CMD, compare its exit status.
expect_status() {
    want=$1
    what=$2
    shift 2
    "$@" >"$tmp/out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$what: exit $got, expected $want"
        sed 's/^/    /' "$tmp/out" | head -20 >&2
    else
        pass
    fi
}

finish() {
    echo "$checks passed, $failures failed"
    [ "$failures" -eq 0 ]
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
