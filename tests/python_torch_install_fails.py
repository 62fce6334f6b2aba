#!/usr/bin/env python3
"""Installing the automatic phases fails inside the job's `import torch`
(a PyTorch the package does not know, a bug): the import still succeeds,
and umpol says why its phases are off (tests/python.sh)."""
import sys

import umpol._torch


def failing_install(*args, **kwargs):
    raise AttributeError("no such thing in this PyTorch")


umpol._torch.install = failing_install
assert "torch" not in sys.modules
import torch  # noqa: E402

assert getattr(torch, "_umpol_auto", None) is None
t = torch.ones(2) * 3
assert t.sum().item() == 6.0
print("import torch ok")
