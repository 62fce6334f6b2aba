#!/usr/bin/env python3
"""The automatic phases with a CPU-only PyTorch, under `umpol run` (no GPU:
phases reach the runtime, which records them; nothing is allocated through
CUDA). The job below is unmodified PyTorch; the checks read the runtime's
report afterwards (see tests/python.sh) and, here, the package's own state."""
import os
import sys

import umpol

assert "torch" not in sys.modules
import torch  # noqa: E402  the automatic phases are installed now
import torch.nn as nn  # noqa: E402
import torch.utils.checkpoint as ckpt  # noqa: E402

assert getattr(torch, "_umpol_auto", None) is not None, "automatic phases not installed"
auto = torch._umpol_auto
rt = umpol._rt

# UMPOL_SAVED_TO_HOST and UMPOL_WEIGHTS_AHEAD as the environment sets them:
# at auto (unset) each waits for the runtime's first eviction, at 1 for
# nothing, at 0 it is not there.
for name, mechanism in (("UMPOL_SAVED_TO_HOST", auto.offload), ("UMPOL_WEIGHTS_AHEAD", auto.ahead)):
    value = os.environ.get(name, "auto")
    assert (mechanism is None) == (value == "0"), (name, value, mechanism)
    assert mechanism is None or (mechanism.when is not None) == (value == "auto"), (name, value)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 1)

    def forward(self, x, checkpoint=False):
        if checkpoint:
            return self.b(ckpt.checkpoint(self.a, x))
        return self.b(torch.relu(self.a(x)))


model = Net()                       # model.init (1)
model.to(torch.float32)             # model.init (2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 16)
for step in range(3):               # 3 steps of 2 micro-batches
    for micro in range(2):
        loss = model(x).square().mean()     # forward x6
        loss.backward()                     # backward x6
    opt.step()                              # optimizer.step x3, mark step
    opt.zero_grad()                         # zero_grad x3
assert umpol.steps() == 3, umpol.steps()
with torch.no_grad():
    model(x)                        # forward.eval x1
loss = model(x.requires_grad_(), checkpoint=True).sum()  # forward x7
loss.backward()                     # backward x7, forward.recompute x1

# The job's own range opened inside an automatic phase and still open when
# that phase closes: it stays open, and the automatic one closes.
model(x).sum()                      # forward x8 (left open for the loss)
rt.enter("job.range")
model.zero_grad()                   # closes forward x8 by name; zero_grad x4
rt.exit()                           # the job closes its own range


# A closure (LBFGS, Lightning): its forward and backward run with
# optimizer.step closed, which reopens after it.
def closure():
    assert not auto.t.bounded.get("optimizer.step"), "optimizer.step open in the closure"
    loss = model(x).square().mean()     # forward x9
    loss.backward()                     # backward x8
    return loss


opt.step(closure)                   # optimizer.step x4, and x5 after the closure
assert not auto.t.bounded.get("optimizer.step")

# An exception inside forward closes the phase too (where PyTorch can say so).
try:
    model(torch.randn(8, 3))       # forward x10, raises
except RuntimeError:
    pass
print("torch phases ok")
