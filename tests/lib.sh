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

# fake_job NAME: tests/preload/NAME (the program, not libtool's wrapper script)
# run against the fake CUDA runtime. Sets job to its path, LD_LIBRARY_PATH to
# find the fake runtime, and san to the sanitizer runtime it links, if any,
# which must be preloaded before libumpol.so. Fails when the program or
# libumpol.so is not built.
fake_job() {
    job="$top_builddir/tests/preload/.libs/$1"
    [ -x "$job" ] || job="$top_builddir/tests/preload/$1"
    [ -f "$top_builddir/.libs/libumpol.so" ] && [ -x "$job" ] || return 1
    LD_LIBRARY_PATH="$top_builddir/tests/fake/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    san=$(ldd "$job" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*lib[at]san[^ ]*\).*/\1/p' | head -1)
}

finish() {
    echo "$checks passed, $failures failed"
    [ "$failures" -eq 0 ]
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
