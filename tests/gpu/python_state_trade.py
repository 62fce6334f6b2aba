"""The optimizer state's trade after the first pass in backward (_overlap's
_host_state_first), on a GPU with real torch optimizers: a six-layer model
trained seven steps, with a state_dict round trip through the CPU at step 3,
run three ways: "ref" (no umpol), "notrade" and "trade" (the step in
backward over a stand-in runtime that says the state of the first half of
the parameters, updated last, lies on the host, so that it is staged through
the ring and traded to the half updated first). Prints one JSON line: the
digest of the weights and the optimizer's state, which must be the same in
the three. Usage: python_state_trade.py '["AdamW", {"fused": true}]' MODE"""
import json
import sys

import torch
import torch.nn.functional as F
from trained import state_digest, weights_digest

name, options = json.loads(sys.argv[1])
mode = sys.argv[2]
said = []
if mode != "ref":
    import umpol._overlap as overlap
    import umpol._torch as auto_torch
    from umpol._runtime import Runtime

    class HostSays(Runtime):
        """No runtime loaded; on_host says what the test chose."""
        host = set()

        def __init__(self):
            super().__init__(lib=object())

        def on_host(self, ptr):
            return ptr in self.host

    rt = HostSays()
    say = overlap._say
    overlap._say = lambda text: (said.append(text), say(text))
    auto_torch.install(torch, rt, step_in_backward=True)
    trade = overlap.StepInBackward._host_state_first

    def first_half_on_host(self):
        ps = [p for g in self.optimizer.param_groups for p in g["params"]]
        rt.host.clear()
        for p in ps[:len(ps) // 2]:
            for t in self.optimizer.state.get(p, {}).values():
                if torch.is_tensor(t) and t.is_cuda:
                    rt.host.add(t.untyped_storage().data_ptr())
        if mode == "trade":
            trade(self)
        else:
            self.arranged = True
    overlap.StepInBackward._host_state_first = first_half_on_host

torch.manual_seed(0)
device = torch.device("cuda", 0)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(256, 256) for _ in range(6))
        self.scales = torch.nn.ParameterList(torch.nn.Parameter(torch.tensor(1.0 + 0.01 * i))
                                             for i in range(6))
        self.head = torch.nn.Linear(256, 16)

    def forward(self, x):
        for layer, scale in zip(self.layers, self.scales):
            x = F.gelu(layer(x)) * scale
        return self.head(x)


model = Model().to(device)
opt = getattr(torch.optim, name)(model.parameters(), **options)
x = torch.randn(64, 256, device=device)
y = torch.randint(0, 16, (64,), device=device)
losses = []
for step in range(7):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss.item())
    if step == 3:
        sd = opt.state_dict()
        opt.load_state_dict({"param_groups": sd["param_groups"], "state": {
            i: {k: (v.cpu() if torch.is_tensor(v) else v) for k, v in s.items()}
            for i, s in sd["state"].items()}})
torch.cuda.synchronize()
print(json.dumps({"optimizer": name + json.dumps(options), "mode": mode,
                  "digest": weights_digest(model)[:16] + state_digest(opt, model)[:16], "loss": losses[-1],
                  "traded": [t for t in said if "went to" in t]}))
