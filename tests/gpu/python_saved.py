#!/usr/bin/env python3
"""`match saved` on the GPU, under `umpol run -p tests/gpu/saved.umpol`: the
tensors autograd saves in a training forward move to class saved_acts, the
forward's temporaries stay in class fwd, the weights (saved too) stay in
class init, and the saved blocks are freed by backward. Prints one line per
check and 'N passed, N failed'; writes the figures to the JSON file given."""
import json
import sys

import torch
import torch.nn as nn

import umpol

results, failed = {}, []


def stats(name, key):
    return umpol.memory_stats()[name][key]


def check(name, ok, detail):
    results[name] = {"ok": bool(ok), "detail": detail}
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        failed.append(name)


assert umpol.active(), "run under umpol run -p tests/gpu/saved.umpol"

torch.manual_seed(0)
layers = 4
model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(1024, 1024), nn.ReLU())])
model = model.to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 1024, device="cuda")
init_allocations = stats("init", "allocations")
check("weights in class init", init_allocations == 2 * layers, init_allocations)

loss = model(x).square().mean()
moved = stats("saved_acts", "allocations")
# Each ReLU saves its output: at least one block per layer came in.
check("saved activations moved to saved_acts", moved >= layers, f"{moved} blocks")
# Among them the 4 ReLU outputs, 64 x 1024 floats each.
check("they are live there", stats("saved_acts", "live_bytes") >= layers * 64 * 1024 * 4,
      stats("saved_acts", "live_bytes"))
check("saved counted in saved_acts", stats("saved_acts", "saved") == moved,
      stats("saved_acts", "saved"))
check("temporaries stay in fwd", stats("fwd", "allocations") > 0, stats("fwd", "allocations"))
check("weights stay in init (saved, but allocated in model.init)",
      stats("init", "allocations") == init_allocations and stats("init", "saved") > 0,
      {"allocations": stats("init", "allocations"), "saved": stats("init", "saved")})

loss.backward()
# The gradients, computed from the moved blocks, match a CPU run of the same model.
ref = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(1024, 1024), nn.ReLU())])
ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
ref(x.cpu()).square().mean().backward()
worst = max(((p.grad.cpu() - q.grad).abs().max() / q.grad.abs().max().clamp_min(1e-12)).item()
            for p, q in zip(model.parameters(), ref.parameters()))
check("gradients from moved blocks match the CPU's", worst < 1e-2,
      f"worst relative error {worst:.2e}")
opt.step()
opt.zero_grad()
del loss
torch.cuda.synchronize()
check("backward frees the saved blocks", stats("saved_acts", "live_bytes") == 0
      and stats("saved_acts", "frees") == moved,
      {"live_bytes": stats("saved_acts", "live_bytes"), "frees": stats("saved_acts", "frees")})

results["saved_acts_blocks"] = moved
print(f"{len(results) - 1 - len(failed)} passed, {len(failed)} failed")
if len(sys.argv) > 1:
    json.dump(results, open(sys.argv[1], "w"), indent=1, default=str)
sys.exit(1 if failed else 0)
