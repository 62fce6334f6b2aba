#!/usr/bin/env python3
"""An ordinary transformers training loop: a random-init Llama, AdamW, a few
steps. Unmodified by default; --annotate adds the NVTX ranges a user would
add by hand for umpol's phases (model.init, forward, backward,
optimizer.step), to compare the classes umpol gives both."""
import argparse
import json

import torch
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--annotate", action="store_true")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--accumulate", type=int, default=1)
p.add_argument("--json")
args = p.parse_args()
nvtx = torch.cuda.nvtx
push = nvtx.range_push if args.annotate else (lambda name: None)
pop = nvtx.range_pop if args.annotate else (lambda: None)

torch.manual_seed(0)
config = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1536,
                     num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                     max_position_embeddings=2048)
push("model.init")
model = LlamaForCausalLM(config).to("cuda")
pop()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
gen = torch.Generator().manual_seed(1)
losses = []
for step in range(args.steps):
    for micro in range(args.accumulate):
        batch = torch.randint(0, config.vocab_size, (4, 512), generator=gen).to("cuda")
        push("forward")
        loss = model(input_ids=batch, labels=batch).loss / args.accumulate
        pop()
        push("backward")
        loss.backward()
        pop()
    push("optimizer.step")
    opt.step()
    opt.zero_grad()
    pop()
    losses.append(loss.item())
print("losses", " ".join(f"{x:.4f}" for x in losses))
if args.json:
    import umpol
    json.dump({"losses": losses, "classes": umpol.memory_stats(), "steps": umpol.steps(),
               "memory_allocated": torch.cuda.memory_allocated(),
               "max_memory_allocated": torch.cuda.max_memory_allocated()},
              open(args.json, "w"), indent=1)
