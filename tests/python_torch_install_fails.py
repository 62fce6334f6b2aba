#!/usr/bin/env python3
"""Installing the automatic phases fails inside the job's `import torch`
(a PyTorch the package does not know, a bug), here at its last part, after
everything else is in: the import still succeeds, umpol says why its phases
are off, and torch is left as umpol found it (tests/python.sh)."""
import os
import sys
import warnings

import umpol._torch

real = umpol._torch.for_subclasses


def fails_at_module(base, fn, changes):
    real(base, fn, changes)  # every Module subclass's __init__ wrapped, then the failure
    if base.__name__ == "Module":
        raise AttributeError("no such thing in this PyTorch")


umpol._torch.for_subclasses = fails_at_module
os.environ["UMPOL_STEP_IN_BACKWARD"] = "1"  # its wrappers too
os.environ["UMPOL_AUTOCAST_CACHE"] = "0"   # and the autocast default
assert "torch" not in sys.modules
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

assert getattr(torch, "_umpol_auto", None) is None


def wrapped(fn):
    """FN is one of the package's functions (a wrapper, a hook)."""
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__umpol_wrapped__", False) or \
        "/umpol/_" in getattr(getattr(fn, "__code__", None), "co_filename", "")


Module, Optimizer = nn.Module, torch.optim.Optimizer
left = [name for name, fn in (
    ("torch.autograd.backward", torch.autograd.backward),
    ("torch.autograd.grad", torch.autograd.grad),
    ("Module.zero_grad", Module.zero_grad),
    ("Module.to", Module.to),
    ("Module.cuda", Module.cuda),
    ("Optimizer.__init__", Optimizer.__init__),
    ("Optimizer.zero_grad", Optimizer.zero_grad),
    ("Optimizer.load_state_dict", Optimizer.load_state_dict),
    ("nn.Linear.__init__", nn.Linear.__init__),
    ("torch.optim.AdamW.step", vars(torch.optim.AdamW).get("step")),
    ("clip_grad_norm_", torch.nn.utils.clip_grad_norm_),
) if fn is not None and wrapped(fn)]
graph = getattr(torch.autograd, "graph", None)
disable = getattr(graph, "disable_saved_tensors_hooks", None)
if wrapped(disable):
    left.append("disable_saved_tensors_hooks")
if wrapped(vars(Module).get("__init_subclass__")):
    left.append("Module.__init_subclass__")
hooks = torch.nn.modules.module
for name in ("_global_forward_pre_hooks", "_global_forward_hooks"):
    if getattr(hooks, name, None):
        left.append(name)
optim_module = sys.modules[Optimizer.__module__]
for name in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"):
    if getattr(optim_module, name, None):
        left.append(name)
if any(f[1] is not None and "torch.compile" in f[1].pattern for f in warnings.filters):
    left.append("the warnings filter")
if hasattr(torch, "is_autocast_cache_enabled") and not torch.is_autocast_cache_enabled():
    left.append("the autocast cache default")
assert not left, f"left in torch after the failed install: {left}"


class Later(nn.Module):  # defined after the failure: no phase wraps it
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)


assert not wrapped(Later.__init__), "a Module defined later is still wrapped"
t = Later().lin(torch.ones(1, 2)).sum() * 0 + torch.ones(2).sum() * 3
assert t.item() == 6.0
print("import torch ok")
