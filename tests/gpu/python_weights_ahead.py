#!/usr/bin/env python3
"""Weights ahead (UMPOL_WEIGHTS_AHEAD=1, umpol-python(7)), run under `umpol run`
with tests/gpu/weights-host.umpol (the weights in pinned host memory):
python_weights_ahead.py MODE OUT.json

Six steps of fused AdamW on a small MLP under bf16 autocast, its middle
layers checkpointed (reentrant), with an eval pass after step 2; MODE sib:
with the optimizer's step in backward as well; sibnr: that, with
non-reentrant checkpointing. The JSON has a digest of the
weights and the losses (the same bit for bit with weights ahead on or off),
the bytes copied ahead, the bytes the recomputation copied for the updates
in backward (MODE sib), and whether each weight's own storage was back after
every pass."""
import json
import sys

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt
from trained import weights_digest

import umpol

mode, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
device = torch.device("cuda", 0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(1024, 1024)
        self.b = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                                     torch.nn.Linear(1024, 1024))
        self.head = torch.nn.Linear(1024, 16)

    def forward(self, x):
        h = F.gelu(self.a(x))
        h = ckpt.checkpoint(self.b, h, use_reentrant=mode != "sibnr") if torch.is_grad_enabled() \
            else self.b(h)
        return self.head(F.gelu(h))


model = Net().to(device)
own = {name: p.untyped_storage().data_ptr() for name, p in model.named_parameters()}
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=True)
x = torch.randn(256, 1024, device=device, requires_grad=True)
y = torch.randint(0, 16, (256,), device=device)
losses, kept = [], []
for step in range(6):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss.item())
    kept.append(all(p.untyped_storage().data_ptr() == own[n] for n, p in model.named_parameters()))
    if step == 2:
        with torch.no_grad():
            losses.append(F.cross_entropy(model(x), y).item())
torch.cuda.synchronize()
ahead = umpol._auto.ahead if umpol._auto is not None else None
json.dump({"losses": losses, "digest": weights_digest(model), "own_storage": kept,
           "copied": ahead.copied if ahead else 0,
           "recompute_kept": ahead.kept_bytes if ahead else 0,
           "recompute_taken": ahead.taken_bytes if ahead else 0}, open(out, "w"))
print(f"{mode}: losses {losses[0]:.6f} .. {losses[-1]:.6f}, copied ahead "
      f"{(ahead.copied if ahead else 0) >> 20} MiB")
