"""What the GPU tests of the Python package share: the checkpointed model
several of them train, and digests of the weights and the optimizer's state
that a run with a feature on must match, bit for bit, with it off."""
import hashlib

import torch
import torch.utils.checkpoint as ckpt


class CheckpointedNet(torch.nn.Module):
    """Eight 1024-wide Linear+GELU layers with residuals, each checkpointed
    (REENTRANT or not) where autograd records, and a 16-way head. A batch of
    4096 makes each layer's input and activations 16 MiB."""

    def __init__(self, reentrant=False):
        super().__init__()
        self.reentrant = reentrant
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU()) for _ in range(8))
        self.head = torch.nn.Linear(1024, 16)

    def forward(self, x):
        for layer in self.layers:
            if torch.is_grad_enabled():
                x = x + ckpt.checkpoint(layer, x, use_reentrant=self.reentrant)
            else:
                x = x + layer(x)
        return self.head(x)


def _raw(t):
    """T's bytes as they lie, whatever its dtype."""
    return t.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()


def weights_digest(model):
    """The SHA-256 (hex) of MODEL's parameters, in order."""
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(_raw(p))
    return digest.hexdigest()


def state_digest(optimizer, model):
    """The SHA-256 (hex) of OPTIMIZER's state for MODEL's parameters, in
    order, each entry's key with it: a lost copy back changes only this."""
    digest = hashlib.sha256()
    for p in model.parameters():
        for key, value in sorted(optimizer.state[p].items()):
            digest.update(key.encode())
            digest.update(_raw(value) if torch.is_tensor(value) else repr(value).encode())
    return digest.hexdigest()
