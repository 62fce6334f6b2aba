#!/usr/bin/env python3
"""Long-context generation with the KV cache in umpol class `kv_cache`.

A transformers Llama (random initialisation from a config: no download)
generates greedily from a long prompt, with one of three KV caches:

    --cache none        transformers' DynamicCache on the GPU (no offload)
    --cache offloaded   transformers' own offloading (cache_implementation="offloaded")
    --cache umpol       a DynamicCache whose tensors are allocated under
                        umpol.tag("kv"): with policies/inference-kv-offload.umpol
                        they live in host memory, read by the GPU over the link

    PYTHONPATH=python python3 examples/pytorch/generate_kv.py --cache none --out none.json
    PYTHONPATH=python python3 examples/pytorch/generate_kv.py --cache offloaded --out offloaded.json
    umpol run -p policies/inference-kv-offload.umpol -- \\
        python3 examples/pytorch/generate_kv.py --cache umpol --out umpol.json

Each run prints tokens/s, the peak GPU memory in use above the start (the
driver's figure, sampled), umpol.memory_stats() per class under umpol, and
writes the generated tokens so the three can be compared.
"""
import argparse
import json
import threading
import time

import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

import umpol


class TaggedCache(DynamicCache):
    """A DynamicCache whose tensors are allocated under tag "kv"."""

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        with umpol.tag("kv"):
            return super().update(key_states, value_states, layer_idx, cache_kwargs)


class PeakMemory:
    """Peak of total minus free GPU memory above its value at start, sampled."""

    def __init__(self):
        free, total = torch.cuda.mem_get_info()
        self.base = self.peak = total - free
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(0.002):
            free, total = torch.cuda.mem_get_info()
            self.peak = max(self.peak, total - free)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak - self.base


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cache", choices=("none", "offloaded", "umpol"), required=True)
    p.add_argument("--context", type=int, default=16384, help="prompt tokens")
    p.add_argument("--new", type=int, default=32, help="tokens generated")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--out", help="write tokens and figures to this JSON file")
    args = p.parse_args()
    if args.cache == "umpol" and not umpol.active():
        p.error("--cache umpol needs the runtime: run under umpol run -p "
                "policies/inference-kv-offload.umpol")

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                         num_hidden_layers=args.layers, num_attention_heads=16,
                         num_key_value_heads=8, max_position_embeddings=args.context + args.new,
                         torch_dtype="bfloat16")
    with umpol.phase("load"):  # the policy's weights class matches phase "load*"
        model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
    prompt = torch.randint(0, config.vocab_size, (args.batch, args.context),
                           generator=torch.Generator().manual_seed(1)).to("cuda")
    kwargs = dict(max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False,
                  pad_token_id=0)
    if args.cache == "offloaded":
        kwargs["cache_implementation"] = "offloaded"
    elif args.cache == "umpol":
        try:
            kwargs["past_key_values"] = TaggedCache(config=model.config)
        except TypeError:  # transformers before 4.56
            kwargs["past_key_values"] = TaggedCache()

    torch.cuda.synchronize()
    peak = PeakMemory()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(prompt, **kwargs)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak_bytes = peak.stop()
    tokens = out[:, args.context:].tolist()
    kv_bytes = 2 * args.layers * args.batch * config.num_key_value_heads * \
        (args.context + args.new) * (config.hidden_size // config.num_attention_heads) * 2
    result = {"cache": args.cache, "context": args.context, "new": args.new,
              "batch": args.batch, "seconds": seconds,
              "tokens_per_s": args.batch * args.new / seconds,
              "peak_gpu_used_bytes": peak_bytes, "kv_cache_bytes": kv_bytes,
              "tokens": tokens, "memory_stats": umpol.memory_stats()}
    print(f"cache {args.cache}: {args.batch} x {args.new} tokens after {args.context} in "
          f"{seconds:.2f} s, {result['tokens_per_s']:.1f} tokens/s, peak GPU memory in use "
          f"{peak_bytes / 2**30:.2f} GiB above the start (KV cache {kv_bytes / 2**30:.2f} GiB)")
    for name, s in umpol.memory_stats().items():
        print(f"  class {name}: {s['allocations']} allocations, peak {s['peak_bytes'] / 2**30:.2f} "
              f"GiB, resident now {s['resident_bytes'] / 2**30:.2f} GiB")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
