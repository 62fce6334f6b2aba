#!/usr/bin/env python3
"""An ordinary torchrun training script: a random-init Llama wrapped in DDP
(default) or sharded with FSDP2 (--fsdp, torch.distributed.fsdp.fully_shard),
AdamW, a few steps. Nothing in it knows about umpol. Prints one line
`losses RANK x x x` per rank."""
import argparse

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--fsdp", action="store_true", help="shard with FSDP2 instead of DDP")
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

import os  # noqa: E402  (after argument parsing: --help needs no torch)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
config = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1536,
                     num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4)
model = LlamaForCausalLM(config).to("cuda")
if args.fsdp:
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # PyTorch 2.4/2.5
        from torch.distributed._composable.fsdp import fully_shard
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
else:
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
gen = torch.Generator().manual_seed(1 + rank)
losses = []
for step in range(args.steps):
    batch = torch.randint(0, config.vocab_size, (4, 256), generator=gen).to("cuda")
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
print("losses", rank, " ".join(f"{x:.4f}" for x in losses), flush=True)
dist.destroy_process_group()
