#!/usr/bin/env python3
"""The step's plan (`learn step "forward";`, umpol(5)) under `umpol run`:
python_step_plan.py OUT.json

Ten steps of fused AdamW on eight checkpointed 1024-wide layers, batch 4096
(each layer's input and activations 16 MiB, blocks the plan lays out), no
evaluation pass, so that from the fourth step on the plan may serve them.
The JSON has a digest of the weights and the losses, the same bit for bit
with the plan or without: it only says where blocks go."""
import json
import sys

import torch
import torch.nn.functional as F
from trained import CheckpointedNet, weights_digest

out = sys.argv[1]
torch.manual_seed(0)
device = torch.device("cuda", 0)


model = CheckpointedNet().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=True)
x = torch.randn(4096, 1024, device=device)
y = torch.randint(0, 16, (4096,), device=device)
losses = []
for step in range(10):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss.item())
torch.cuda.synchronize()
json.dump({"losses": losses, "digest": weights_digest(model)}, open(out, "w"))
print(f"step plan: losses {losses[0]:.6f} .. {losses[-1]:.6f}")
