#!/usr/bin/env python3
"""The optimizer's step in backward (UMPOL_STEP_IN_BACKWARD=1, umpol-python(7)),
run under `umpol run`: python_step_in_backward.py MODE OUT.json

MODE plain: six steps of fused AdamW on a small MLP; the JSON has a digest of
the weights (the same bit for bit whether the updates ran in backward or
after it), the losses, and whether every gradient was already gone when
backward() returned. MODE clip: the job clips its gradients at step 3, which
the updates in backward cannot follow: the package turns itself off, saying
so on stderr. MODE accumulate: two backward passes before step 3. MODE host:
plain, with the ring that stages the state lying on the host (run it under
tests/gpu/sib-host.umpol) cut to the largest parameter's state and 1 MiB,
so that the regions of a pass wrap around it, and after step 3 the job
resumes from a copy of the optimizer's state on the CPU (load_state_dict);
the JSON says what was staged, and how many calls of the optimizer's step
the updates in backward took. MODE hostw: plain, with the weights on the
host as well (run it under tests/gpu/sib-host-weights.umpol), which the
updates in backward run on copies of, each weight an update of its own, and
the losses read only at the end, so that nothing drains the GPU between
steps; the JSON says how many bytes of weights were copied in for them."""
import json
import sys

import torch
import torch.nn.functional as F
from trained import state_digest, weights_digest

import umpol
import umpol._overlap

mode, out = sys.argv[1], sys.argv[2]
if mode == "host":
    umpol._overlap._RING_SPARE = 1 << 20
if mode == "hostw":  # batches of one 4 MiB weight: several updates, and copies, a pass
    umpol._overlap._BATCH_BYTES = 1 << 20
torch.manual_seed(0)
device = torch.device("cuda", 0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                            torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                            torch.nn.Linear(1024, 16)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=True)
x = torch.randn(256, 1024, device=device)
y = torch.randint(0, 16, (256,), device=device)
losses, gone = [], []
for step in range(6):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    if mode == "accumulate" and step == 3:
        F.cross_entropy(model(x), y).backward()
    gone.append(all(p.grad is None for p in model.parameters()))
    if mode == "clip" and step == 3:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss.detach() if mode == "hostw" else loss.item())
    if mode == "host" and step == 3:  # as a job resumed from its checkpoint would
        saved = opt.state_dict()
        opt.load_state_dict({"param_groups": saved["param_groups"], "state": {
            i: {k: v.cpu() for k, v in s.items()} for i, s in saved["state"].items()}})
losses = [float(x) for x in losses]
torch.cuda.synchronize()
overlap = umpol._auto.overlap if umpol._auto is not None else None
lanes = list(overlap.lanes.values()) if overlap else []
rings = [lane.ring_bytes for lane in lanes if lane.ring_bytes is not None]
json.dump({"losses": losses, "digest": weights_digest(model), "state_digest": state_digest(opt, model),
           "grads_gone": gone,
           "umpol_steps": umpol.steps(), "ring_bytes": rings,
           "staged": sum(lane.staged for lane in lanes), "wraps": sum(lane.wraps for lane in lanes),
           "weights_in": sum(lane.weights_in for lane in lanes),
           "calls": overlap.calls if overlap else 0,
           "steps": len(opt.state[next(model.parameters())]) and
           int(opt.state[next(model.parameters())]["step"].item())}, open(out, "w"))
print(f"{mode}: losses {losses[0]:.6f} .. {losses[-1]:.6f}, gradients gone after backward: {gone}")
