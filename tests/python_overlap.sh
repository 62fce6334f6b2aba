#!/bin/sh
# The optimizer's step in backward (python/umpol/_overlap.py) over a fake
# torch, without PyTorch or a GPU: tests/python_overlap.py.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
expect_status 0 "the step in backward over a fake torch" \
    env PYTHONPATH="$top_srcdir/python" python3 "$top_srcdir/tests/python_overlap.py"
cat "$tmp/out"
finish
