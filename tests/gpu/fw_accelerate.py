#!/usr/bin/env python3
"""An ordinary Hugging Face accelerate script, for `accelerate launch`: a
random-init Llama, AdamW, a DataLoader of random tokens, prepared by
Accelerator, a few steps. Nothing in it knows about umpol. Prints one line
`losses RANK x x x` per process."""
import argparse

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

import torch  # noqa: E402  (after argument parsing: --help needs no torch)
from accelerate import Accelerator  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

accelerator = Accelerator()
torch.manual_seed(0)
config = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1536,
                     num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4)
model = LlamaForCausalLM(config)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
tokens = torch.randint(0, config.vocab_size, (64, 256), generator=torch.Generator().manual_seed(1))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=4)
model, opt, loader = accelerator.prepare(model, opt, loader)
losses = []
for step, (batch,) in enumerate(loader):
    if step == args.steps:
        break
    loss = model(input_ids=batch, labels=batch).loss
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
print("losses", accelerator.process_index, " ".join(f"{x:.4f}" for x in losses), flush=True)
accelerator.end_training()
