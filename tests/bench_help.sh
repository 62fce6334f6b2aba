#!/bin/sh
# Every script under bench/ answers --help with its usage and exit 0, before
# it makes an output folder or needs a GPU, PyTorch or umpol built; a shell
# driver refuses an argument it does not take (exit 2), the positional Python
# scripts a missing argument (a usage line, exit 1, no traceback).
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
b=$top_srcdir/bench
for f in "$b"/run-*.sh; do
    name=$(basename "$f")
    if OUT="$tmp/out-$name" sh "$f" --help >"$tmp/help" 2>&1 && [ -s "$tmp/help" ] &&
        ! grep -q 'set -u' "$tmp/help"; then pass; else fail "$name --help"; sed 's/^/    /' "$tmp/help" | head -5 >&2; fi
    [ -e "$tmp/out-$name" ] && fail "$name --help made its output folder"
    OUT="$tmp/out-$name" sh "$f" --frobnicate >"$tmp/out" 2>&1
    [ $? -eq 2 ] && grep -q 'see --help' "$tmp/out" && [ ! -e "$tmp/out-$name" ] && pass ||
        fail "$name --frobnicate: not refused with exit 2 before it began"
done
for f in "$b"/*.py; do
    name=$(basename "$f")
    if python3 "$f" --help >"$tmp/help" 2>&1 && [ -s "$tmp/help" ] && ! grep -q Traceback "$tmp/help"; then
        pass
    else
        fail "$name --help"; sed 's/^/    /' "$tmp/help" | head -5 >&2
    fi
done
for name in grid_summary.py summarize.py trace_timeline.py plot_timeline.py; do
    python3 "$b/$name" >"$tmp/out" 2>&1
    [ $? -eq 1 ] && grep -q "^usage: $name" "$tmp/out" && ! grep -q Traceback "$tmp/out" && pass ||
        fail "$name without arguments: no usage line with exit 1"
done
finish
