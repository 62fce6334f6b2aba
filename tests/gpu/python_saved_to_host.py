#!/usr/bin/env python3
"""Saved activations in host memory until backward (UMPOL_SAVED_TO_HOST=1,
umpol-python(7)), run under `umpol run`: python_saved_to_host.py MODE OUT.json

Six steps of fused AdamW on eight checkpointed 1024-wide layers, batch 4096
(each layer's input 16 MiB), with an eval pass after step 2; MODE plain
(non-reentrant checkpointing), reentrant, or sib (non-reentrant, with the
optimizer's step in backward as well). The sizes at which a saved tensor
leaves, stays among the newest and comes back ahead are set small here so
that this model exercises all three. The JSON has a digest of the weights
and the losses (the same bit for bit with it on or off) and its counts."""
import json
import sys

import torch
import torch.nn.functional as F
from trained import CheckpointedNet, weights_digest

import umpol
import umpol._offload as offload

offload._MIN_BYTES, offload._KEEP_BYTES, offload._AHEAD_BYTES = 1 << 20, 16 << 20, 32 << 20
mode, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
device = torch.device("cuda", 0)


model = CheckpointedNet(reentrant=mode == "reentrant").to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=True)
x = torch.randn(4096, 1024, device=device, requires_grad=True)
y = torch.randint(0, 16, (4096,), device=device)
losses = []
for step in range(6):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    x.grad = None
    losses.append(loss.item())
    if step == 2:
        with torch.no_grad():
            losses.append(F.cross_entropy(model(x), y).item())
torch.cuda.synchronize()
off = umpol._auto.offload if umpol._auto is not None else None
json.dump({"losses": losses, "digest": weights_digest(model),
           "sent": off.sent_bytes if off else 0, "back": off.back_bytes if off else 0,
           "late": off.late if off else 0}, open(out, "w"))
print(f"{mode}: losses {losses[0]:.6f} .. {losses[-1]:.6f}; "
      + (off.summary() if off else "saved to host off"))
