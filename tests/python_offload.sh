#!/bin/sh
# Saved activations in host memory until backward (python/umpol/_offload.py)
# over a fake torch, without PyTorch or a GPU: tests/python_offload.py.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
expect_status 0 "saved to host over a fake torch" \
    env PYTHONPATH="$top_srcdir/python" python3 "$top_srcdir/tests/python_offload.py"
cat "$tmp/out"
finish
