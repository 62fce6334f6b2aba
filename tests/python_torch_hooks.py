#!/usr/bin/env python3
"""The package's saved-tensor hooks beside the job's own, with a CPU-only
PyTorch under `umpol run` (tests/python.sh): pushed and popped around each
training forward, so that hooks the job pushes after it (save_on_cpu,
non-reentrant checkpoints) and torch.func's transforms (which refuse hooks;
inside a forward ours step aside for them) work as without umpol, and an
in-place change to a saved tensor still fails backward. A PyTorch without
default saved-tensor hooks gets none of ours: nothing to check there."""
import gc
import sys
import weakref

import umpol  # noqa: F401  (installed by `umpol run` already)
import torch
import torch.nn as nn
import torch.utils.checkpoint as ckpt

auto = torch._umpol_auto
assert auto is not None, "automatic phases not installed"
C = torch._C._autograd
if not hasattr(C, "_top_saved_tensors_default_hooks"):
    print(f"hooks: nothing to check: PyTorch {torch.__version__} has no default saved-tensor hooks")
    sys.exit(0)
ours = (auto._pack, auto._unpack)


def top():
    return C._top_saved_tensors_default_hooks(False)


m = nn.Linear(4, 4)
head = nn.Linear(4, 4)
x = torch.randn(2, 4)
inside = []
m.register_forward_pre_hook(lambda *a: inside.append(top() == ours))  # after ours

# Pushed around a training forward, popped as it returns.
out = m(x)
assert inside == [True], inside
assert top() is None, top()

# The job's hooks, pushed after a forward whose phase is still open: they see
# every tensor saved in their region, and are the job's to pop.
packed = []
with torch.autograd.graph.saved_tensors_hooks(lambda t: (packed.append(1), t)[1], lambda t: t):
    loss = (head(out) ** 2).sum()
assert len(packed) >= 2, packed
assert top() is None, top()
loss.backward()

# A non-reentrant checkpoint after a forward still recomputes its block.
calls = []
blk = nn.Linear(4, 4)
blk.register_forward_pre_hook(lambda *a: calls.append(1))
out = m(x)
ckpt.checkpoint(blk, out, use_reentrant=False).sum().backward()
assert len(calls) == 2, f"the checkpointed block ran {len(calls)} times"


# A tensor saved under our hooks and changed in place: backward fails.
class ChangesSaved(nn.Module):
    def forward(self, t):
        z = t.exp()     # exp saves its output
        z.add_(1)
        return z


try:
    ChangesSaved()(x.clone().requires_grad_()).sum().backward()
except RuntimeError as e:
    assert "modified by an inplace operation" in str(e), e
else:
    raise AssertionError("an in-place change to a saved tensor went unnoticed")
assert top() is None, top()

# A saved output held by the hooks does not keep its graph alive: a forward
# whose output no backward reads frees it, as without umpol.
class SavesOutput(nn.Module):
    def forward(self, t):
        return t.sigmoid()  # sigmoid saves its output


refs = []
for _ in range(5):
    y = SavesOutput()(x.clone().requires_grad_())
    refs.append(weakref.ref(y))
    del y
gc.collect()
assert all(r() is None for r in refs), f"{sum(r() is not None for r in refs)} of 5 outputs kept alive"

# torch.func's transforms, inside a forward and after one: inside, our hooks
# step aside for the transform and are back on top after it.
func = getattr(torch, "func", None)
if func is not None:
    params = {k: v.detach() for k, v in m.named_parameters()}
    g = func.grad(lambda p: func.functional_call(m, p, (x,)).sum())(params)
    assert sorted(g) == ["bias", "weight"], sorted(g)
    m(x)
    assert func.grad(lambda t: (t * t).sum())(x).shape == x.shape

    class UsesFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.seen = []

        def forward(self, t):
            y = self.lin(t)
            self.seen.append(top() == ours)
            g = func.grad(lambda u: (u * u.sin()).sum())(y.detach())
            _, vjp = func.vjp(torch.tanh, y.detach())
            self.seen.append(top() == ours)
            return (y * g).sum() + vjp(torch.ones_like(y))[0].sum()

    uf = UsesFunc()
    uf(x).backward()
    assert uf.seen == [True, True], uf.seen
    assert uf.lin.weight.grad is not None and top() is None, top()

    # The transform's own backward pass, inside the forward, is not the
    # step's: the saved tensors in host memory are not fetched back for it.
    calls = []

    class Recorder:
        def backward_begin(self):
            calls.append("begin")

        def backward_end(self):
            calls.append("end")

    auto.offload, kept = Recorder(), auto.offload
    try:
        uf(x).backward()
    finally:
        auto.offload = kept
    assert calls == ["begin", "end"], calls


# A Module subclass defined after the install is wrapped, and not kept alive by it.
def later(i):
    return type(f"Later{i}", (nn.Module,), {"__init__": lambda self: nn.Module.__init__(self)})


assert getattr(later(0).__init__, "__umpol_wrapped__", False), "a later Module is not wrapped"
made = [weakref.ref(later(i)) for i in range(100)]
gc.collect()
assert all(r() is None for r in made), f"{sum(r() is not None for r in made)} of 100 classes kept alive"
print("hooks ok")
