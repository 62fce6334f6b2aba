#!/bin/sh
# Weights ahead of the forward pass's layers (python/umpol/_ahead.py) over a
# fake torch, without PyTorch or a GPU: tests/python_ahead.py.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
expect_status 0 "weights ahead over a fake torch" \
    env PYTHONPATH="$top_srcdir/python" python3 "$top_srcdir/tests/python_ahead.py"
cat "$tmp/out"
finish
