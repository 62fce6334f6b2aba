#!/usr/bin/env python3
"""An ordinary PyTorch Lightning script: a LightningModule around a
random-init Llama, AdamW, automatic optimization, a few steps on --devices
GPUs (DDP when more than one; Lightning starts the other ranks itself).
Nothing in it knows about umpol. Prints one line `losses RANK x x x` per rank."""
import argparse

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--devices", type=int, default=1)
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

import tempfile  # noqa: E402  (after argument parsing: --help needs no torch)

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl


class Llama(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1536,
                             num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4)
        self.model = LlamaForCausalLM(config)
        self.losses = []

    def training_step(self, batch, batch_idx):
        (tokens,) = batch
        loss = self.model(input_ids=tokens, labels=tokens).loss
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)

    def on_train_end(self):
        print("losses", self.global_rank, " ".join(f"{x:.4f}" for x in self.losses), flush=True)


tokens = torch.randint(0, 8000, (64, 256), generator=torch.Generator().manual_seed(1))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=4)
with tempfile.TemporaryDirectory() as root:
    trainer = pl.Trainer(accelerator="gpu", devices=args.devices,
                         strategy="ddp" if args.devices > 1 else "auto",
                         max_steps=args.steps, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=root)
    trainer.fit(Llama(), loader)
