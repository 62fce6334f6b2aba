#!/usr/bin/env python3
"""Each automatic phase rule of the umpol package, checked on the GPU under
`umpol run -p tests/gpu/phases.umpol` (one class per phase): allocations made
in each situation must land in that phase's class. Prints one line per check
and 'N passed, N failed'; writes the figures to the JSON file given."""
import json
import sys

import torch
import torch.nn as nn
import torch.utils.checkpoint as ckpt

import umpol

results, failed = {}, []


def counts():
    return {name: s["allocations"] for name, s in umpol.memory_stats().items()}


def delta(before):
    now = counts()
    return {k: now[k] - before.get(k, 0) for k in now if now[k] - before.get(k, 0)}


def check(name, ok, detail):
    results[name] = {"ok": bool(ok), "detail": detail}
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        failed.append(name)


assert umpol.active(), "run under umpol run -p tests/gpu/phases.umpol"


class Net(nn.Module):
    def __init__(self, dim=1024, layers=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))

    def forward(self, x, checkpoint=None):
        for layer in self.layers:
            if checkpoint is None:
                x = torch.relu(layer(x))
            else:
                x = ckpt.checkpoint(lambda t, l=layer: torch.relu(l(t)), x,
                                    use_reentrant=checkpoint)
        return x


# model.init: a CPU model moved with .to(), and a model built on the GPU.
b = counts()
model = Net().to("cuda")
d = delta(b)
check("model.init .to(cuda)", set(d) == {"init"} and d["init"] == 8, d)
b = counts()
with torch.device("cuda"):
    other = Net(layers=1)
d = delta(b)
check("model.init built on the GPU", set(d) == {"init"} and d["init"] == 2, d)

opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 1024, device="cuda")

# forward (the loss after the model counts too), backward, optimizer.step, zero_grad.
b = counts()
loss = model(x).square().mean()
d = delta(b)
check("forward, loss included", set(d) == {"fwd"}, d)
saved = umpol.memory_stats()["fwd"]["saved"]
check("saved tensors reported", saved > 0, f"{saved} saved blocks in class fwd")
b = counts()
loss.backward()
d = delta(b)
check("backward (autograd threads)", set(d) == {"bwd"} and d["bwd"] >= 8, d)
b = counts()
opt.step()
d = delta(b)
check("optimizer.step", set(d) == {"opt"} and d["opt"] >= 16, d)
check("step mark counted", umpol.steps() == 1, umpol.steps())
b = counts()
opt.zero_grad()
d = delta(b)
check("zero_grad", not d, d)

# Gradient accumulation: two forward/backward pairs, one step.
b = counts()
for _ in range(2):
    model(x).square().mean().backward()
opt.step()
opt.zero_grad()
d = delta(b)
check("gradient accumulation", set(d) <= {"fwd", "bwd", "opt"} and d.get("fwd") and d.get("bwd"),
      d)

# A closure (LBFGS, Lightning's automatic optimization): its forward and
# backward run with optimizer.step closed, so they are not optimizer state.
def closure():
    torch.empty(1 << 20, device="cuda")  # no phase open here: class rest
    loss = model(x).square().mean()
    loss.backward()
    return loss


b = counts()
opt.step(closure)
opt.zero_grad()
d = delta(b)
check("optimizer.step with a closure", d.get("rest") == 1 and d.get("fwd") and d.get("bwd")
      and set(d) <= {"rest", "fwd", "bwd", "opt"}, d)

# Resuming: the state a checkpoint holds (on the CPU, as torch.load with
# map_location="cpu" gives it), loaded into a new optimizer, is optimizer state.
saved_state = opt.state_dict()
saved_state = {"param_groups": saved_state["param_groups"],
               "state": {i: {k: v.cpu() if torch.is_tensor(v) else v for k, v in s.items()}
                         for i, s in saved_state["state"].items()}}
resumed = torch.optim.AdamW(model.parameters(), lr=1e-3)
b = counts()
resumed.load_state_dict(saved_state)
d = delta(b)
check("optimizer.load_state_dict", set(d) == {"opt"} and d["opt"] >= 16, d)
check("loading is not a step", umpol.steps() == 3, umpol.steps())
del resumed, saved_state

# Evaluation under no_grad and inference_mode.
b = counts()
with torch.no_grad():
    model(x).sum()
with torch.inference_mode():
    model(x).sum()
d = delta(b)
check("forward.eval", set(d) == {"eval"}, d)

# Gradient checkpointing: recomputation inside backward, both kinds.
for reentrant in (False, True):
    loss = model(x.requires_grad_(), checkpoint=reentrant).square().mean()
    b = counts()
    loss.backward()
    d = delta(b)
    check(f"forward.recompute (use_reentrant={reentrant})",
          d.get("recompute", 0) > 0 and set(d) <= {"recompute", "bwd"}, d)
    opt.zero_grad()
x = x.detach()

# torch.compile'd module: same phases, same numbers.
compiled = torch.compile(model)
with torch.no_grad():
    want = model(x)
loss = compiled(x).square().mean()
b = counts()
loss.backward()
d = delta(b)
with torch.no_grad():
    got = compiled(x)
check("torch.compile: backward phase, same output",
      set(d) <= {"bwd"} and torch.allclose(want, got, atol=1e-4), d)
b = counts()
compiled(x).square().mean().backward()
d = delta(b)
check("torch.compile: forward and backward", set(d) <= {"fwd", "bwd"} and d.get("fwd"), d)
opt.zero_grad()

# The explicit API.
b = counts()
with umpol.tag("kv"):
    kv = torch.empty(1 << 20, device="cuda")


@umpol.phase("mine")
def mine():
    return torch.empty(1 << 20, device="cuda")


keep = mine()
d = delta(b)
check("umpol.tag and @umpol.phase", d == {"tagged": 1, "mine": 1}, d)

# PyTorch's own counters under the cudaMallocAsync backend.
live = sum(s["live_bytes"] for s in umpol.memory_stats().values())
results["torch_memory_allocated"] = torch.cuda.memory_allocated()
results["torch_max_memory_allocated"] = torch.cuda.max_memory_allocated()
results["umpol_live_bytes"] = live
print(f"torch.cuda.memory_allocated() {torch.cuda.memory_allocated()}, max "
      f"{torch.cuda.max_memory_allocated()}; umpol live bytes {live}")
print(f"{len(results) - 3 - len(failed)} passed, {len(failed)} failed")
if len(sys.argv) > 1:
    json.dump(results, open(sys.argv[1], "w"), indent=1, default=str)
sys.exit(1 if failed else 0)
