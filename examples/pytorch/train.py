#!/usr/bin/env python3
"""A Llama-style decoder trained from random initialisation, for umpol.

No downloads: the model is plain PyTorch (RMSNorm, rotary attention, SwiGLU),
the data random tokens from a fixed seed. bf16 autocast and AdamW, with NVTX
ranges around the phases that umpol policies match on:

    model.init      building the model (parameters are allocated here)
    forward         the forward pass
    backward        the backward pass (allocations on autograd threads too)
    optimizer.step  the optimizer step (AdamW state is created at the first)

It needs PyTorch built for CUDA (examples/pytorch/requirements.txt) and a
GPU; --check says whether both are there. Run it plain, or under umpol:

    python3 examples/pytorch/train.py --steps 20
    umpol run -p policies/llm-finetune.umpol -- python3 examples/pytorch/train.py --steps 20

It prints one line per step and, with --json FILE, writes the losses, step
times and peak GPU memory for comparisons.

On several GPUs, under torchrun (every rank preloads the same policy; `gpu`
in it means that rank's GPU):

    umpol run -p policies/llm-finetune.umpol -r report-%r.json -- \
        torchrun --nproc-per-node 2 examples/pytorch/train.py --ddp
    torchrun --nproc-per-node 2 examples/pytorch/train.py --fsdp     # FSDP2 sharding

Every rank draws the same batch sequence from --seed; the loss printed is
the mean over ranks.
"""
import argparse
import json
from contextlib import nullcontext
import math
import time

import os
import sys
import threading

# Needs PyTorch built for CUDA and a GPU: pip install -r examples/pytorch/requirements.txt
try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"train.py needs PyTorch ({e}); install it with "
             "'pip install -r examples/pytorch/requirements.txt'")


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = x.float().pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return (x.float() * norm).type_as(x) * self.weight


def rotary(seq, dim, device, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, device=device).float() / dim))
    t = torch.arange(seq, device=device).float()
    freqs = torch.outer(t, inv)
    return torch.cos(freqs), torch.sin(freqs)


def apply_rotary(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2).type_as(x)


class Block(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, ffn, bias=False)
        self.up = nn.Linear(dim, ffn, bias=False)
        self.down = nn.Linear(ffn, dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        h = self.attn_norm(x)
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, vocab, dim, layers, heads, ffn):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head_dim = dim // heads

    def forward(self, tokens):
        cos, sin = rotary(tokens.shape[1], self.head_dim, tokens.device)
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))


class MemoryTracker:
    """Peak GPU memory in use (total minus free, as the driver sees it, so every
    allocator and offload scheme is measured alike), above its value at start."""

    def __init__(self, device, period_s=0.005):
        self.device, self.period_s = device, period_s
        free, total = torch.cuda.mem_get_info(device)
        self.base = total - free
        self.peak = self.base
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(self.period_s):
            free, total = torch.cuda.mem_get_info(self.device)
            self.peak = max(self.peak, total - free)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak - self.base


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=0, help="default: 8/3 of dim, rounded to 256")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write losses and timings to this file (rank 0)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--ddp", action="store_true", help="DistributedDataParallel under torchrun")
    mode.add_argument("--fsdp", action="store_true", help="FSDP2 (fully_shard) under torchrun")
    p.add_argument("--cpu-offload", action="store_true",
                   help="with --fsdp: FSDP2's CPUOffloadPolicy (parameters, gradients, optimizer on the CPU)")
    p.add_argument("--save-on-cpu", action="store_true",
                   help="keep saved activations in pinned host memory (torch.autograd.graph.save_on_cpu)")
    p.add_argument("--track-memory", action="store_true",
                   help="sample the GPU memory in use (cudaMemGetInfo) and report its peak above the start")
    p.add_argument("--gpu-limit", type=int, metavar="BYTES",
                   help="hold PyTorch's allocator to this many bytes of the GPU "
                        "(torch.cuda.set_per_process_memory_fraction); past it the step fails with out-of-memory")
    p.add_argument("--check", action="store_true",
                   help="only say whether PyTorch and a CUDA GPU are there (exit 0) or not (exit 1)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit(f"train.py needs a CUDA GPU: PyTorch {torch.__version__} sees none "
                 f"(built for CUDA {torch.version.cuda or 'no CUDA'})")
    if args.check:
        print(f"train.py: PyTorch {torch.__version__}, {torch.cuda.device_count()} GPU(s): "
              f"{torch.cuda.get_device_name(0)}")
        return
    if args.cpu_offload and not args.fsdp:
        p.error("--cpu-offload needs --fsdp")
    ffn = args.ffn or int(math.ceil(args.dim * 8 / 3 / 256) * 256)

    distributed = args.ddp or args.fsdp
    rank, world = 0, 1
    if distributed:
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda", torch.cuda.current_device())
    nvtx = torch.cuda.nvtx
    tracker = MemoryTracker(device) if args.track_memory else None
    if args.gpu_limit:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.gpu_limit / total), device)

    nvtx.range_push("model.init")
    model = Decoder(args.vocab, args.dim, args.layers, args.heads, ffn).to(device)
    params = sum(p.numel() for p in model.parameters())
    if args.ddp:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    elif args.fsdp:
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        extra = {"offload_policy": CPUOffloadPolicy()} if args.cpu_offload else {}
        for block in model.blocks:
            fully_shard(block, **extra)
        fully_shard(model, **extra)
    nvtx.range_pop()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"model: {params / 1e6:.1f}M parameters, {args.layers} layers, dim {args.dim}, "
        f"batch {args.batch} x {args.seq} tokens" + (f", {world} ranks" if distributed else ""),
        flush=True)

    losses, times = [], []
    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
        tokens = tokens.to(device, non_blocking=False)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        nvtx.range_push("forward")
        offload = torch.autograd.graph.save_on_cpu(pin_memory=True) if args.save_on_cpu else nullcontext()
        with torch.autocast("cuda", dtype=torch.bfloat16), offload:
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, args.vocab), tokens[:, 1:].reshape(-1))
        nvtx.range_pop()
        nvtx.range_push("backward")
        loss.backward()
        nvtx.range_pop()
        nvtx.range_push("optimizer.step")
        opt.step()
        opt.zero_grad(set_to_none=True)
        nvtx.range_pop()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        reported = loss.detach()
        if distributed:
            dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        losses.append(reported.item())
        say(f"step {step:3d}  loss {losses[-1]:.4f}  {times[-1] * 1e3:8.1f} ms", flush=True)

    steady = sorted(times[min(3, len(times) - 1):])
    median_ms = steady[len(steady) // 2] * 1e3
    peak = torch.cuda.max_memory_allocated() if "cudaMallocAsync" not in str(
        torch.cuda.get_allocator_backend()) else None
    say(f"median step {median_ms:.1f} ms over steps {min(3, len(times) - 1)}..{len(times) - 1}")
    peak_used = tracker.stop() if tracker else None
    tokens_per_s = args.batch * args.seq * world / (median_ms / 1e3)
    say(f"{tokens_per_s:.0f} tokens/s" + (f", peak GPU memory in use {peak_used / 2**30:.2f} GiB above the start"
                                          if peak_used is not None else ""))
    # Under umpol run, torch.cuda.memory_allocated() reads 0 (umpol-python(7));
    # the runtime's own per-class figures replace it.
    try:
        import umpol
    except ImportError:
        umpol = None
    classes = umpol.memory_stats() if umpol is not None else {}
    for name, s in classes.items():
        say(f"  umpol class {name}: {s['allocations']} allocations, peak {s['peak_bytes'] / 2**30:.2f} GiB, "
            f"on the GPU now {s['resident_bytes'] / 2**30:.2f} GiB, evicted {s['evict_bytes'] / 2**30:.2f} GiB")
    if distributed:
        dist.destroy_process_group()
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump({"losses": losses, "step_s": times, "median_step_ms": median_ms,
                       "params": params, "world": world, "tokens_per_s": tokens_per_s,
                       "peak_gpu_used_bytes": peak_used,
                       "allocator": torch.cuda.get_allocator_backend(),
                       "peak_allocated_bytes": peak, "umpol_classes": classes,
                       "args": vars(args)}, f, indent=1)


if __name__ == "__main__":
    main()
