"""A training step captured in a CUDA graph under `umpol run` (tests/gpu_python.sh).

The optimizer's state is movable memory (tests/gpu/graph.umpol): the eager
warm-up steps move it with the optimizer step's phase; during the capture the
same rules fire and must not move it (a move waits for the whole GPU, which
would invalidate the capture); the replays then train with the state where
the capture left it. Writes the losses to the JSON file named by argv[1]."""
import json
import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                            torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
static_x = torch.randn(64, 1024, device="cuda")
static_y = torch.randn(64, 1024, device="cuda")

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):  # warm-up, eager: the state is made and moved
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(static_x), static_y).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    static_loss = torch.nn.functional.mse_loss(model(static_x), static_y)
    static_loss.backward()
    opt.step()

losses = []
for _ in range(30):
    graph.replay()
    losses.append(static_loss.item())
json.dump({"losses": losses}, open(sys.argv[1], "w"))
print(f"graph replays: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
assert all(l == l for l in losses), "a loss is NaN"
assert losses[-1] < losses[0], "the replayed step does not train"
