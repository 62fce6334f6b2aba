#!/usr/bin/env python3
"""The benchmark grid: Hugging Face LlamaForCausalLM trained on one GPU by the
tools users run today and by umpol, each at its own GPU memory.

    grid.py train --variant V --layers N [...]   one training run (one process)
    grid.py bandwidth --json F                   pinned cudaMemcpy both ways
    grid.py drive --out DIR --layers 16 32 ...   the whole grid, cell by cell
    grid.py suggest --out DIR --budgets B ...    umpol suggest's policy against the stock ones

The model: hidden 2048, intermediate 5504, 16 heads, vocabulary 32000, untied
head, random initialisation from a fixed seed (no download); 16 layers are
940.6M parameters, 32 layers 1.75B. Each step trains 8 x 1024 random tokens
(the same tokens for every variant) with bf16 autocast, fp32 weights, AdamW
(fused where the tool allows) and gradient checkpointing, and prints its loss.
GRID_AUTOCAST_CACHE=0 opens the autocast region with cache_enabled=False (no
bf16 copy of every weight held through the loss) in every variant.
GRID_SEGMENTS=1 also prints the forward pass's GPU and thread time by segment
(the embedding, each decoder layer, the head and loss), and the backward
pass's (the head and loss, then each checkpointed layer from its
recomputation on). GRID_LINK_BY_PART=1
prints the link's bytes (NVML's count) in forward and in the rest of the step,
draining the GPU at the forward pass's end to split them.
GRID_TORCH_TRACE=FILE writes the last step's torch.profiler trace there (its
kernels and copies on every stream); GRID_TORCH_STACK=1 adds Python stacks.
GRID_HOST_MAP=FILE writes, under umpol, how many bytes of each parameter lie
on the host after the last step (JSON: [name, bytes, on the host]).

Variants of `train`:
    ckpt          checkpointing alone (plain PyTorch)
    save-on-cpu   + torch.autograd.graph.save_on_cpu(pin_memory=True)
    fsdp-offload  + FSDP2 fully_shard with CPUOffloadPolicy, world size 1
    deepspeed     DeepSpeed ZeRO stage 2, offload_optimizer cpu (CPUAdam), bf16
    superoffload  DeepSpeed ZeRO stage 3, offload_optimizer cpu with super_offload
    trl           + TRL's activation offloading (get_act_offloading_ctx_manager)
umpol runs `ckpt` under `umpol run -p POLICY` with the policy's budget changed.

GPU memory is measured two ways in every run: the tool's own figure
(torch.cuda.max_memory_allocated; for umpol the report's held peak) and what
the card sees: total - free (cudaMemGetInfo) sampled every 5 ms by a thread of
the process, over the timed steps and above its value when the process's CUDA
context had just been made; `drive` also polls NVML's used memory from outside
(above its value before the process started, context included). The bytes
crossing the PCIe link each way during the timed steps are read from NVML's
counters where the driver has them.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from contextlib import nullcontext

VOCAB, HIDDEN, FFN, HEADS, SEQ, BATCH = 32000, 2048, 5504, 16, 1024, 8
ANCHORS = ("ckpt", "save-on-cpu", "fsdp-offload", "deepspeed", "superoffload", "trl")
NVML_PCIE_TX, NVML_PCIE_RX = 197, 198  # NVML_FI_DEV_PCIE_COUNT_{TX,RX}_BYTES: GPU->host, host->GPU


def params_of(layers):
    """Parameters of the model, counted from its shapes (what the run prints too)."""
    per_layer = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * FFN + 2 * HIDDEN
    return layers * per_layer + 2 * VOCAB * HIDDEN + HIDDEN


class Nvml:
    """NVML's used memory and PCIe byte counters for GPU 0, or None where absent."""

    def __init__(self):
        self.ok = False
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nv = pynvml
            index = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0])
            self.h = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.ok = True
        except Exception as e:  # no pynvml or no driver: the other figures stand
            self.why = repr(e)

    def used(self):
        return self.nv.nvmlDeviceGetMemoryInfo(self.h).used if self.ok else None

    def pcie(self):
        """(host->GPU, GPU->host, the value at which both wrap), or None
        without the counters. On an H200 with driver 580 they are 32-bit
        (value type 1) and wrap every 4 GiB: 78 ms of a saturated link."""
        if not self.ok:
            return None
        try:
            vals = self.nv.nvmlDeviceGetFieldValues(self.h, [NVML_PCIE_RX, NVML_PCIE_TX])
            if any(v.nvmlReturn != 0 for v in vals):
                return None
            kind = vals[0].valueType
            field = {1: "uiVal", 2: "ulVal", 3: "ullVal"}.get(kind)
            if field is None:
                return None
            wrap = 1 << (32 if kind == 1 else 64)
            return getattr(vals[0].value, field), getattr(vals[1].value, field), wrap
        except Exception:
            return None


class LinkCounter:
    """Bytes over PCIe each way since reset(), from NVML's counters read often
    enough (sample()) that they wrap at most once between two readings. The
    longest gap between two readings is kept: 32-bit counters wrap every
    4 GiB, 67 ms of a 64 GB/s link, and a longer gap may have missed a wrap."""

    MAX_GAP_S = 0.06

    def __init__(self, nvml):
        self.nvml = nvml
        self.last = nvml.pcie()
        self.ok = self.last is not None
        self.h2d = self.d2h = 0
        self.last_t = time.perf_counter()
        self.max_gap = 0.0

    def sample(self):
        now = self.nvml.pcie() if self.ok else None
        if now is None:
            return
        t = time.perf_counter()
        self.max_gap = max(self.max_gap, t - self.last_t)
        self.last_t = t
        wrap = now[2]
        self.h2d += (now[0] - self.last[0]) % wrap
        self.d2h += (now[1] - self.last[1]) % wrap
        self.last = now

    def reset(self):
        self.sample()
        self.h2d = self.d2h = 0
        self.max_gap = 0.0

    def trusted(self):
        """Could no wrap have been missed since reset()?"""
        return self.max_gap <= self.MAX_GAP_S


def link_sampler(args):
    """The link-sampler process: NVML's PCIe counters read every 2 ms; one
    line in on stdin ("reset" or "read"), one line out: "ok", or the bytes
    each way since the last reset and the longest gap between two readings."""
    import select
    link = LinkCounter(Nvml())
    print("ok" if link.ok else "none", flush=True)
    while link.ok:
        ready, _, _ = select.select([sys.stdin], [], [], 0.002)
        if not ready:
            link.sample()
            continue
        cmd = sys.stdin.readline().strip()
        if cmd == "reset":
            link.reset()
            print("ok", flush=True)
        elif cmd == "read":
            link.sample()
            print(f"{link.h2d} {link.d2h} {link.max_gap}", flush=True)
        else:  # end of input: the run is over
            return


class LinkProcess:
    """NVML's link counters, read by a process of its own (link_sampler). A
    thread of the training process could not keep to 2 ms: it waits for the
    interpreter's lock, which the job's thread holds through long calls, and
    a reading held up 60 ms can miss a 32-bit counter's wrap. The process
    gets neither umpol nor anything else preloaded."""

    def __init__(self):
        env = {k: v for k, v in os.environ.items()
               if k != "LD_PRELOAD" and not k.startswith("UMPOL")}
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "link-sampler"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        self.ok = self.p.stdout.readline().strip() == "ok"
        self.h2d = self.d2h = 0
        self.max_gap = 0.0

    def reset(self):
        if self.ok:
            self.p.stdin.write("reset\n")
            self.p.stdin.flush()
            self.p.stdout.readline()

    def sample(self):
        if self.ok:
            self.p.stdin.write("read\n")
            self.p.stdin.flush()
            h2d, d2h, gap = self.p.stdout.readline().split()
            self.h2d, self.d2h, self.max_gap = int(h2d), int(d2h), float(gap)

    def trusted(self):
        return self.max_gap <= LinkCounter.MAX_GAP_S

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


class CardTracker:
    """Peak of total - free (cudaMemGetInfo) above the first reading, sampled
    every 5 ms; mark() starts a new window (the timed steps), for the card
    and for the link counters (LinkProcess)."""

    def __init__(self, torch, device, link=None):
        self.torch, self.device, self.link = torch, device, link
        free, total = torch.cuda.mem_get_info(device)
        self.base = total - free
        self.peak = self.whole_peak = self.base
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        last = time.perf_counter()
        while not self.done.wait(0.005):
            free, total = self.torch.cuda.mem_get_info(self.device)
            used = total - free
            self.peak = max(self.peak, used)
            self.whole_peak = max(self.whole_peak, used)
            now = time.perf_counter()  # a pause here is a pause of every Python thread
            self.max_pause = max(self.max_pause, now - last)
            last = now

    max_pause = 0.0  # the longest gap between two samples since mark(), seconds

    def mark(self):
        free, total = self.torch.cuda.mem_get_info(self.device)
        self.peak = total - free
        self.max_pause = 0.0
        if self.link:
            self.link.reset()

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak - self.base, self.whole_peak - self.base


def build_model(torch, layers, device, seed):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
                      num_hidden_layers=layers, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                      max_position_embeddings=SEQ, tie_word_embeddings=False, use_cache=False,
                      attn_implementation="sdpa")
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(cfg)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def deepspeed_config(variant, lr):
    offload = {"device": "cpu", "pin_memory": True}
    if variant == "superoffload":
        offload["super_offload"] = True
    return {
        "train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": 1,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3 if variant == "superoffload" else 2,
                              "offload_optimizer": offload, "overlap_comm": True,
                              "contiguous_gradients": True},
        "optimizer": {"type": "AdamW",
                      "params": {"lr": lr, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
        "steps_per_print": 1 << 30, "wall_clock_breakdown": False,
    }


class Segments:
    """GRID_SEGMENTS=1: the forward and backward passes' time in segments, on
    the GPU (events on the job's stream at each segment's forward pre-hook)
    and on the job's thread. Forward: from the step's start to the embedding,
    the embedding, each decoder layer, and the final norm, head and loss.
    Backward, where the decoder layers are checkpointed (each one's pre-hook
    runs again as backward recomputes it): from backward's start to the last
    layer's recomputation (the head and loss), then each layer from its
    recomputation to the next one's (its recomputation and its backward), the
    first layer's running to backward's end (with the embedding's). Each mark
    is the module's first pre-hook; global module hooks (umpol's package) run
    before it, so what they queue on a layer's own module counts in the
    segment before (they wait at the layer's Linear modules, inside its own)."""

    def __init__(self, torch, model):
        self.torch, self.part = torch, None
        parts = [("embed", model.model.embed_tokens)]
        layers = [f"layer {i}" for i in range(len(model.model.layers))]
        parts += list(zip(layers, model.model.layers))
        parts.append(("head+loss", model.model.norm))
        self.names = {"forward": ["start"] + [name for name, _ in parts],
                      "backward": ["head+loss"] + layers[:0:-1] + [f"{layers[0]}+embed"]}
        self.gpu = {part: [] for part in self.names}
        self.cpu = {part: [] for part in self.names}
        self.marks = {}  # part -> this step's (event, time) marks
        for name, module in parts:  # first among the module's hooks (FSDP2's unshard comes after)
            module.register_forward_pre_hook(lambda *_: self._mark(), prepend=True)

    def _mark(self):
        if self.part is not None:
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks[self.part].append((event, time.perf_counter()))

    def begin(self, event, t, part="forward"):
        """PART of the step begins: EVENT, recorded on the job's stream at time T."""
        self.part = part
        self.marks[part] = [(event, t)]

    def end(self, event, t):
        """The part ends: its marks are kept for collect()."""
        self.marks[self.part].append((event, t))
        self.part = None

    def collect(self):
        """After the step has synchronised: its segments' times, kept (None for
        a part that skipped a segment, or did not run: not comparable)."""
        for part, names in self.names.items():
            m = self.marks.pop(part, [])
            if len(m) != len(names) + 1:
                self.gpu[part].append(None)
                self.cpu[part].append(None)
                continue
            self.gpu[part].append([a[0].elapsed_time(b[0]) for a, b in zip(m, m[1:])])
            self.cpu[part].append([(b[1] - a[1]) * 1e3 for a, b in zip(m, m[1:])])

    def report(self, warmup):
        for part, names in self.names.items():
            for what, rows in (("GPU", self.gpu[part]), ("the job's thread", self.cpu[part])):
                rows = [r for r in rows[warmup:] if r is not None]
                if not rows:
                    if part == "forward":  # a backward pass recomputes nothing without checkpoints
                        print(f"{part} by segment ({what}): no complete pass timed", flush=True)
                    continue
                med = [statistics.median(col) for col in zip(*rows)]
                print(f"{part} by segment ({what}, median ms): "
                      + ", ".join(f"{n} {v:.2f}" for n, v in zip(names, med)), flush=True)


def train(args):
    import torch
    import torch.nn.functional as F  # noqa: F401  (the model's own loss is used)
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    nvtx = torch.cuda.nvtx
    link_counter = LinkProcess()
    tracker = CardTracker(torch, device, link_counter if link_counter.ok else None)
    lr = 3e-4
    v = args.variant
    if v in ("fsdp-offload", "deepspeed", "superoffload"):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000),
                          RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    nvtx.range_push("model.init")
    model = build_model(torch, args.layers, device, args.seed)
    nvtx.range_pop()
    params = sum(p.numel() for p in model.parameters())
    engine, ctx, fused = None, nullcontext, True
    if v == "fsdp-offload":
        import torch.distributed as dist
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        dist.init_process_group("nccl", device_id=device)
        for layer in model.model.layers:
            fully_shard(layer, offload_policy=CPUOffloadPolicy())
        fully_shard(model, offload_policy=CPUOffloadPolicy())
    elif v in ("deepspeed", "superoffload"):
        import deepspeed
        deepspeed.init_distributed(dist_backend="nccl")
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                               config=deepspeed_config(v, lr))
        fused = f"{type(engine.optimizer).__name__} over {type(engine.basic_optimizer).__name__}"
        print(f"DeepSpeed {deepspeed.__version__}: {fused}", flush=True)
    elif v == "trl":
        from trl.models import get_act_offloading_ctx_manager
        offload = get_act_offloading_ctx_manager(model)
        ctx = lambda: offload  # noqa: E731
    elif v == "save-on-cpu":
        ctx = lambda: torch.autograd.graph.save_on_cpu(pin_memory=True)  # noqa: E731
    if engine is None:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    # GRID_AUTOCAST_CACHE=0: autocast keeps no casts of the weights (a checkpointed
    # forward pass otherwise holds a bf16 copy of every weight until its region ends);
    # unset: torch's default, which umpol's package may have changed (UMPOL_AUTOCAST_CACHE).
    chosen = os.environ.get("GRID_AUTOCAST_CACHE")
    chosen = None if chosen is None else chosen != "0"
    autocast_cache = torch.is_autocast_cache_enabled() if chosen is None else chosen
    print(f"model: {params / 1e6:.1f}M parameters ({params_of(args.layers) / 1e6:.1f}M by shapes), "
          f"{args.layers} layers, {BATCH} x {SEQ} tokens, variant {v}"
          + ("" if autocast_cache else ", autocast cache off")
          + (f", under umpol ({os.environ.get('UMPOL_POLICY')})" if os.environ.get("UMPOL_POLICY") else ""),
          flush=True)

    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    losses, times = [], []
    # The GPU's own time in each part of the step: events on the job's stream,
    # read once the step has synchronised (the CPU's phase times run ahead).
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    segments = Segments(torch, model) if os.environ.get("GRID_SEGMENTS") == "1" else None
    gpu_parts = {"forward": [], "backward": [], "optimizer": []}
    # GRID_LINK_BY_PART=1: NVML's link counters read at the forward pass's end, after draining
    # the GPU there (which takes away any overlap across that point): bytes in, out by part.
    by_part = os.environ.get("GRID_LINK_BY_PART") == "1" and link_counter.ok
    link_parts = {"forward": [0, 0], "rest": [0, 0]}
    cpu_parts = {"forward": [], "backward": [], "optimizer": []}  # the job's thread issuing each
    cpu_marks = [0.0] * 4
    total = args.warmup + args.steps
    # Python's collector stops every thread of the job (it holds the GIL): time it per step.
    import gc
    gc_step = {"ms": 0.0, "max": 0.0, "full": 0}
    gc_start = [0.0]

    def gc_timer(phase, info):
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            ms = (time.perf_counter() - gc_start[0]) * 1e3
            gc_step["ms"] += ms
            gc_step["max"] = max(gc_step["max"], ms)
            gc_step["full"] += info.get("generation") == 2
    gc.callbacks.append(gc_timer)
    caching = "cudaMallocAsync" not in str(torch.cuda.get_allocator_backend())

    def allocator_counts():  # the caching allocator's retries (all cached blocks freed) and its cudaMallocs
        stats = {}
        if caching:  # none under umpol run, whose backend (cudaMallocAsync) keeps no such counts
            try:
                stats = torch.cuda.memory_stats(device)
            except Exception:
                pass
        return (stats.get("num_alloc_retries"), stats.get("num_device_alloc"))
    def package_copies():
        """The bytes the umpol package has copied across the link so far, by
        the part of the step that runs the copies: weights ahead, the part of
        each weight that lay on the host (forward, in), saved tensors to the
        host (forward, out) and back (backward, in), the optimizer's state
        staged around the step in backward and the recomputation's copies of
        weights on the host, which their updates write back (backward, both
        ways: the job's stream waits for the last copies out when backward
        returns). None without the package."""
        auto = getattr(sys.modules.get("umpol"), "_auto", None)
        if auto is None:
            return None
        ahead, offload = getattr(auto, "ahead", None), getattr(auto, "offload", None)
        overlap = getattr(auto, "overlap", None)
        staged = overlap.staged_bytes() if hasattr(overlap, "staged_bytes") else (0, 0)
        return {"forward_h2d_bytes": getattr(ahead, "link_bytes", 0),
                "forward_d2h_bytes": getattr(offload, "sent_bytes", 0),
                "backward_h2d_bytes": (getattr(offload, "back_bytes", 0)
                                       + getattr(offload, "late_bytes", 0) + staged[0]
                                       + getattr(ahead, "kept_bytes", 0)),
                "backward_d2h_bytes": staged[1]}
    def pinned_counts():  # pinned host memory PyTorch's host allocator asked CUDA for: (times, µs)
        try:
            stats = torch.cuda.host_memory_stats()
        except Exception:  # an older PyTorch
            return None
        return (stats.get("num_host_alloc"), stats.get("host_alloc_time.total"))
    copies0 = None
    for step in range(total):
        gc_step.update(ms=0.0, max=0.0, full=0)
        counts0 = allocator_counts()
        pinned0 = pinned_counts()
        if step == args.warmup:  # the timed window starts: memory and link counters from here
            torch.cuda.synchronize()
            tracker.mark()
            copies0 = package_copies()
            try:
                torch.cuda.reset_peak_memory_stats()
            except Exception:
                pass
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen).to(device)
        torch.cuda.synchronize()
        trace = os.environ.get("GRID_TORCH_TRACE") if step == total - 1 else None
        if trace:  # the last step's kernels and copies on every stream, for a timeline
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                          torch.profiler.ProfilerActivity.CUDA],
                                              with_stack=bool(os.environ.get("GRID_TORCH_STACK")))
            profiler.__enter__()
        if by_part and step >= args.warmup:  # the link's counters at the step's start
            link_counter.sample()
            at_start = (link_counter.h2d, link_counter.d2h)
        t0 = cpu_marks[0] = time.perf_counter()
        marks[0].record()
        if segments is not None:
            segments.begin(marks[0], t0)
        nvtx.range_push("forward")
        if engine is not None:
            loss = engine(input_ids=tokens, labels=tokens).loss
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=chosen), ctx():
                loss = model(input_ids=tokens, labels=tokens).loss
        nvtx.range_pop()
        marks[1].record()
        cpu_marks[1] = time.perf_counter()
        if segments is not None:
            segments.end(marks[1], cpu_marks[1])
        if by_part and step >= args.warmup:  # forward's bytes: the GPU drained, then the counters
            torch.cuda.synchronize()
            link_counter.sample()
            at_forward = (link_counter.h2d, link_counter.d2h)
        nvtx.range_push("backward")
        if segments is not None:
            segments.begin(marks[1], cpu_marks[1], "backward")
        if engine is not None:
            engine.backward(loss)
        else:
            loss.backward()
        nvtx.range_pop()
        marks[2].record()
        cpu_marks[2] = time.perf_counter()
        if segments is not None:
            segments.end(marks[2], cpu_marks[2])
        nvtx.range_push("optimizer.step")
        if engine is not None:
            engine.step()
        else:
            try:
                opt.step()
            except RuntimeError as e:  # fused AdamW refused (FSDP2's CPU shards): the foreach one
                if not fused or step:
                    raise
                print(f"fused AdamW refused ({str(e).splitlines()[0][:200]}); using foreach", flush=True)
                fused = False
                opt = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)
                opt.step()
            opt.zero_grad(set_to_none=True)
        nvtx.range_pop()
        marks[3].record()
        cpu_marks[3] = time.perf_counter()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if by_part and step >= args.warmup:
            link_counter.sample()
            at_end = (link_counter.h2d, link_counter.d2h)
            for k in range(2):  # in, out
                link_parts["forward"][k] += at_forward[k] - at_start[k]
                link_parts["rest"][k] += at_end[k] - at_forward[k]
        if trace:
            profiler.__exit__(None, None, None)
            profiler.export_chrome_trace(trace)
        if segments is not None:
            segments.collect()
        for k, part in enumerate(gpu_parts):
            gpu_parts[part].append(marks[k].elapsed_time(marks[k + 1]))
            cpu_parts[part].append((cpu_marks[k + 1] - cpu_marks[k]) * 1e3)
        losses.append(loss.detach().float().item())
        counts = allocator_counts()
        allocator = ""
        pinned = pinned_counts()
        if pinned0 is not None and pinned is not None and None not in pinned0 + pinned:
            allocator = (f"; {pinned[0] - pinned0[0]} new pinned host blocks "
                         f"({(pinned[1] - pinned0[1]) / 1e3:.1f} ms)")
        if None not in counts0 + counts:
            allocator += f"; allocator {counts[0] - counts0[0]} retries, {counts[1] - counts0[1]} cudaMalloc"
        print(f"step {step:3d}  loss {losses[-1]:.6f}  {times[-1] * 1e3:8.1f} ms  (Python's collector "
              f"{gc_step['ms']:.1f} ms, longest {gc_step['max']:.1f}, {gc_step['full']} full{allocator})",
              flush=True)
    timed = times[args.warmup:] or times
    median_ms = statistics.median(timed) * 1e3
    where = os.environ.get("GRID_HOST_MAP")
    rt = getattr(sys.modules.get("umpol"), "_rt", None)  # under umpol run only
    on_host = None
    if rt is not None and rt.active:  # how much of each parameter lies on the host
        host_map = [[name, p.numel() * p.element_size(),
                     min(p.numel() * p.element_size(),
                         max(0, rt.host_bytes(p.untyped_storage().data_ptr())))]
                    for name, p in model.named_parameters()]
        on_host = sum(h for _, _, h in host_map)
        # Each step reads a weight on the host in the forward pass (ahead, or where it lies),
        # again in the recomputation and in its update, which also writes it there.
        print(f"weights on the host after the last step: {on_host / 2**30:.2f} GiB of "
              f"{sum(n for _, n, _ in host_map) / 2**30:.2f}, in "
              f"{sum(1 for _, _, h in host_map if h)} parameters", flush=True)
        if where:
            with open(where, "w") as f:
                json.dump(host_map, f)
    allocated = None
    if caching:
        allocated = torch.cuda.max_memory_allocated(device)
    card, card_whole = tracker.stop()
    link = None
    if link_counter.ok and args.steps:
        link_counter.sample()
        if link_counter.trusted():
            link = {"h2d_bytes_per_step": link_counter.h2d / args.steps,
                    "d2h_bytes_per_step": link_counter.d2h / args.steps}
        else:  # a wrap may have been missed: no figure rather than a wrong one
            print(f"NVML's link counters were read {link_counter.max_gap * 1e3:.0f} ms apart at "
                  "most; a wrap may have been missed: no link figures for this run", flush=True)
    if by_part and args.steps and link_counter.trusted():
        print("the link by part of the step, as NVML counts it (GiB a step, in / out; the GPU "
              "drained at the forward pass's end): forward "
              + " / ".join(f"{b / args.steps / 2**30:.2f}" for b in link_parts["forward"])
              + "; backward and optimizer " + " / ".join(f"{b / args.steps / 2**30:.2f}" for b in link_parts["rest"]),
              flush=True)
    link_counter.close()
    parts = {k: statistics.median(v[args.warmup:] or v) for k, v in gpu_parts.items()}
    print("GPU time by part of the step (median): " + ", ".join(f"{k} {v:.1f} ms" for k, v in parts.items())
          + f"; the card sampler's longest pause {tracker.max_pause * 1e3:.1f} ms (5 ms asked)", flush=True)
    cpu = {k: statistics.median(v[args.warmup:] or v) for k, v in cpu_parts.items()}
    print("the job's thread by part of the step (median): "
          + ", ".join(f"{k} {v:.1f} ms" for k, v in cpu.items()), flush=True)
    if segments is not None:
        segments.report(args.warmup)
    auto = getattr(sys.modules.get("umpol"), "_auto", None)
    ahead = getattr(auto, "ahead", None)
    if ahead is not None:  # UMPOL_WEIGHTS_AHEAD (1 or auto)
        print(f"weights ahead: {ahead.copied / 2**30 / total:.2f} GiB copied a step", flush=True)
        kept = getattr(ahead, "kept_bytes", 0)
        if kept:  # the step in backward took the recomputation's copies
            early = getattr(ahead, "queued_ahead", None)  # packages that queue a segment ahead
            print(f"the recomputation's copies: {kept / 2**30 / total:.2f} GiB a step, "
                  f"{getattr(ahead, 'taken_bytes', 0) / 2**30 / total:.2f} taken by updates"
                  + ("" if early is None else
                     f", {early / 2**30 / total:.2f} queued a segment ahead"), flush=True)
    offload = getattr(auto, "offload", None)
    if offload is not None:  # UMPOL_SAVED_TO_HOST (1 or auto)
        print(f"saved to host: {offload.summary()} over {total} steps", flush=True)
    overlap = getattr(auto, "overlap", None)
    if getattr(overlap, "calls", None) and overlap.passes:  # UMPOL_STEP_IN_BACKWARD=1
        print(f"step in backward: {overlap.calls} calls of the optimizer's step over "
              f"{overlap.passes} backward passes", flush=True)
    copies = None
    copies1 = package_copies()
    if copies0 is not None and copies1 is not None and args.steps:
        copies = {k: (copies1[k] - copies0[k]) / args.steps for k in copies1}
        print("the package's copies a step (GiB): forward "
              f"{copies['forward_h2d_bytes'] / 2**30:.2f} in, {copies['forward_d2h_bytes'] / 2**30:.2f} "
              f"out; backward {copies['backward_h2d_bytes'] / 2**30:.2f} in, "
              f"{copies['backward_d2h_bytes'] / 2**30:.2f} out", flush=True)
    print(f"median step {median_ms:.1f} ms over steps {args.warmup}..{total - 1}; card peak "
          f"{card / 2**30:.2f} GiB above start (whole run {card_whole / 2**30:.2f})"
          + (f"; max allocated {allocated / 2**30:.2f} GiB" if allocated is not None else "")
          + (f"; link {link['h2d_bytes_per_step'] / 2**30:.2f} GiB/step in, "
             f"{link['d2h_bytes_per_step'] / 2**30:.2f} out" if link else "; no NVML link counters"),
          flush=True)
    if engine is not None or v == "fsdp-offload":
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"variant": v, "layers": args.layers, "params": params, "losses": losses,
                       "step_ms": [t * 1e3 for t in times], "warmup": args.warmup,
                       "median_step_ms": median_ms, "card_peak_bytes": card,
                       "card_peak_whole_run_bytes": card_whole, "max_allocated_bytes": allocated,
                       "fused_adamw": fused, "autocast_cache": autocast_cache, "link": link,
                       "gpu_part_ms": parts, "thread_part_ms": cpu, "package_copies": copies,
                       "weights_on_host_bytes": on_host,
                       "allocator": str(torch.cuda.get_allocator_backend())}, f, indent=1)


def bandwidth(args):
    """Pinned cudaMemcpy host->GPU, GPU->host and both at once (two streams),
    GB/s, median of 5 copies of SIZE; with NVML, what its PCIe counters count
    per byte copied (to turn counted bytes into payload), in the copy's own
    direction and in the other (a host->GPU copy's read requests, say)."""
    import torch
    n = args.gib << 30
    device = torch.device("cuda", 0)
    h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    h2 = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(n, dtype=torch.uint8, device=device)
    d2 = torch.empty(n, dtype=torch.uint8, device=device)
    h.fill_(1)
    d2.fill_(2)
    nvml = Nvml()
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

    link = LinkCounter(nvml)

    def timed(fn, reps=5):
        fn()
        torch.cuda.synchronize()
        link.reset()
        out = []
        for _ in range(reps):  # one copy (under 40 ms) between readings: the counters wrap at most once
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            out.append(time.perf_counter() - t0)
            link.sample()
        counted = (link.h2d / reps, link.d2h / reps) if link.ok else None
        return statistics.median(out), counted

    def both():
        with torch.cuda.stream(s1):
            d.copy_(h, non_blocking=True)
        with torch.cuda.stream(s2):
            h2.copy_(d2, non_blocking=True)

    t_h2d, c_h2d = timed(lambda: d.copy_(h, non_blocking=True))
    t_d2h, c_d2h = timed(lambda: h2.copy_(d2, non_blocking=True))
    t_both, _ = timed(both)
    r = {"bytes": n, "h2d_gbps": n / t_h2d / 1e9, "d2h_gbps": n / t_d2h / 1e9,
         "both_ways_gbps_each": n / t_both / 1e9,
         "nvml_counted_per_byte_h2d": c_h2d[0] / n if c_h2d else None,
         "nvml_counted_per_byte_d2h": c_d2h[1] / n if c_d2h else None,
         # The other direction's counter during each one-way copy: a host->GPU
         # copy's read requests go GPU->host, and a step's GPU->host count holds them.
         "nvml_reverse_per_byte_h2d": c_h2d[1] / n if c_h2d else None,
         "nvml_reverse_per_byte_d2h": c_d2h[0] / n if c_d2h else None}
    print(json.dumps(r), flush=True)
    with open(args.json, "w") as f:
        json.dump(r, f, indent=1)


def launch(cmd, log, env, timeout_s, nvml):
    """Run CMD (its own process group) with its output in LOG, polling NVML's
    used memory every 20 ms; returns (exit status, peak used above the value
    before it started, seconds)."""
    base = nvml.used()
    peak = [base]
    done = threading.Event()

    def poll():
        while not done.wait(0.02):
            u = nvml.used()
            peak[0] = max(peak[0], u) if u is not None else None

    t = threading.Thread(target=poll, daemon=True)
    if base is not None:
        t.start()
    t0 = time.time()
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
            out.write(f"\ngrid: killed after {timeout_s:.0f} s\n")
            rc = 124
    done.set()
    if base is not None:
        t.join()
    return rc, (peak[0] - base) if base is not None and peak[0] is not None else None, time.time() - t0


def set_budget(policy_text, budget_bytes):
    """POLICY_TEXT with its `budget gpu|card ...;` line set to BUDGET_BYTES (the
    same kind of budget)."""
    out, found = [], False
    for line in policy_text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "budget" and words[1] in ("gpu", "card"):
            line, found = f"budget {words[1]} {int(budget_bytes)}B;", True
        out.append(line)
    if not found:
        raise SystemExit("grid: the policy has no `budget gpu` or `budget card` line to change")
    return "\n".join(out) + "\n"


class Runner:
    """Runs `train` one process at a time, each a row of OUT/ROWS (JSON lines):
    its command, exit status, seconds, NVML's peak from outside and the run's
    own JSON; runs that would start within 30 s of the deadline are skipped."""

    def __init__(self, args, rows="cells.jsonl"):
        os.makedirs(args.out, exist_ok=True)
        self.args = args
        self.nvml = Nvml()
        self.here = os.path.abspath(__file__)
        self.deadline = time.time() + args.deadline_s
        self.rows = open(os.path.join(args.out, rows), "a")

    def run(self, tag, layers, variant, prefix=(), budget=None, policy=None, report=None,
            warmup=None, steps=None):
        args = self.args
        left = self.deadline - time.time()
        name = f"L{layers}-{tag}"
        row = {"layers": layers, "variant": variant, "tag": tag, "budget_bytes": budget, "policy": policy,
               "report": report and os.path.basename(report)}
        if left < 30:
            print(f"{name}: skipped (deadline)", flush=True)
            return self.skip(row, "the run's deadline had passed")
        js = os.path.join(args.out, name + ".json")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        common = ["--warmup", str(args.warmup if warmup is None else warmup),
                  "--steps", str(args.steps if steps is None else steps), "--seed", str(args.seed)]
        cmd = list(prefix) + [sys.executable, self.here, "train", "--variant", variant,
                              "--layers", str(layers), "--json", js] + common
        rc, outside, secs = launch(cmd, os.path.join(args.out, name + ".log"), env,
                                   min(args.cell_timeout_s, left - 5), self.nvml)
        row.update(rc=rc, seconds=round(secs, 1), nvml_peak_bytes=outside, command=" ".join(cmd))
        if rc == 0 and os.path.exists(js):
            row["run"] = json.load(open(js))
        else:
            tail = open(os.path.join(args.out, name + ".log"), errors="replace").read()[-1500:]
            row["error_tail"] = tail
        r = row.get("run")
        print(f"{name}: rc {rc}, {secs:.0f} s" + (
            f", {r['median_step_ms']:.1f} ms/step, card {r['card_peak_bytes'] / 2**30:.2f} GiB"
            if r else ""), flush=True)
        self.rows.write(json.dumps(row) + "\n")
        self.rows.flush()
        return row

    def skip(self, row, why):
        """ROW as a run that did not happen, for WHY."""
        row.update(rc=None, skipped=why)
        self.rows.write(json.dumps(row) + "\n")
        self.rows.flush()
        return row

    def close(self):
        self.rows.close()


def record(runner, umpol, out, layers, warmup, steps):
    """One short run of LAYERS under RECORD_POLICY with a report, as `umpol
    suggest -- COMMAND` records; the report's path, or None with why."""
    policy = os.path.join(out, "record.umpol")
    open(policy, "w").write(RECORD_POLICY)
    report = os.path.join(out, f"L{layers}-record-report.json")
    if os.path.exists(report):
        os.unlink(report)
    row = runner.run("record", layers, "ckpt", prefix=[umpol, "run", "-p", policy, "-r", report, "--"],
                     policy=policy, report=report, warmup=warmup, steps=steps)
    if not os.path.exists(report):
        return None, f"the recorded run wrote no report (rc {row.get('rc')})"
    return report, None


def draft(umpol, report, budget, path):
    """`umpol suggest --budget BUDGET -o PATH REPORT`, the same as `umpol suggest
    --budget SIZE -- COMMAND` from that recording; None, or why it failed."""
    cmd = [umpol, "suggest", "--budget", str(int(budget)), "-o", path, report]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return None if p.returncode == 0 else f"umpol suggest exited {p.returncode}: {p.stderr.strip()[-600:]}"


def drive(args):
    """Every anchor, then umpol at three budgets read from the anchors' peaks
    (and a fourth at the lowest peak where an anchor peaked below DeepSpeed),
    per model: under --policy, or with --policy suggest under the policy
    `umpol suggest` drafts for each budget from one recorded run."""
    if any("suggest" in entry.split("|") for entry in args.policy) and args.policy != ["suggest"]:
        raise SystemExit("grid: --policy suggest stands alone (umpol suggest drafts every budget's policy)")
    runner = Runner(args)
    nvml, here, run = runner.nvml, runner.here, runner.run

    bw = os.path.join(args.out, "bandwidth.json")
    if not os.path.exists(bw):
        launch([sys.executable, here, "bandwidth", "--json", bw], os.path.join(args.out, "bandwidth.log"),
               dict(os.environ), 120, nvml)
    drafting = args.policy == ["suggest"]
    def policy(entry):
        """ENTRY's path, text and name. A policy may carry the runtime's
        variables for its runs, "P+VAR=V+..." (umpol-python(7)'s
        UMPOL_WEIGHTS_AHEAD=1 at the budgets it serves); they name it too."""
        path, *variables = entry.split("+")
        return (entry, open(path).read(), os.path.splitext(os.path.basename(path))[0]
                + "".join("+" + v.split("=")[0].lower() for v in variables))
    # One policy for every budget, or one per budget, highest budget first
    # (the last one also serves any budget after it); "A|B" at a budget runs
    # each of A and B there, side by side (the summary keeps the faster).
    policies = [[policy(p) for p in entry.split("|")] for entry in ([] if drafting else args.policy)]
    for entry in policies:  # each policy's files and rows are named after it
        names = [name for _, _, name in entry]
        if len(set(names)) != len(names):
            raise SystemExit(f"grid: two policies named alike at one budget: {' | '.join(names)}")
    pol_name = "suggested"
    if args.budgets and len(args.layers) != 1:
        raise SystemExit("grid: --budgets needs one --layers value")
    # With --profile, CUPTI counts the migrations of the timed steps only.
    profile = ["env", "UMPOL_PROFILE=1", f"UMPOL_PROFILE_STEPS={args.warmup}..{args.warmup + args.steps - 1}",
               "UMPOL_PROFILE_STEP_PHASE=forward"] if args.profile else []
    kind = "umpol-profiled" if args.profile else "umpol"
    for layers in args.layers:
        rows = {}
        for v in args.variants:
            rows[v] = run(v, layers, v)
        budgets = args.budgets
        if not budgets:
            ckpt = rows.get("ckpt", {}).get("run")
            ds = (rows.get("deepspeed") or {}).get("run")
            if not ckpt:
                print(f"L{layers}: checkpointing alone failed: no budgets", flush=True)
                continue
            top = ckpt["card_peak_bytes"] * args.top_fraction
            low = ds["card_peak_bytes"] if ds else None
            if low is None:
                print(f"L{layers}: DeepSpeed failed: its budget is left out", flush=True)
            budgets = [b for b in (top, (top + low) / 2 if low else None, low) if b]
            # Where another anchor peaked lower than DeepSpeed (or DeepSpeed
            # failed), a fourth budget at the lowest such peak: umpol against
            # the strongest tool below DeepSpeed's memory.
            peaks = [r["run"]["card_peak_bytes"] for v, r in rows.items()
                     if v != "ckpt" and r and r.get("run") and r["run"].get("card_peak_bytes")]
            floor = min(peaks) if peaks else None
            if floor and floor < (low or top) * 0.98:
                budgets.append(floor)
        recorded, why = record(runner, args.umpol, args.out, layers, 1, 2) if drafting and budgets else (None, None)
        for i, b in enumerate(budgets):
            alternatives = [(None, None, pol_name)] if drafting else policies[min(i, len(policies) - 1)]
            for j, (source, policy_text, pol_name) in enumerate(alternatives):
                # The first policy's tag is the budget's; another's names it too.
                tag = f"{kind}-{b / 2**30:.2f}GiB" + (f"-{pol_name}" if j else "")
                pol = os.path.join(args.out, f"L{layers}-{pol_name}-{b / 2**30:.2f}GiB.umpol")
                failed = why or (draft(args.umpol, recorded, b, pol) if drafting else None)
                if failed:
                    print(f"L{layers} {b / 2**30:.2f}GiB: {failed}", flush=True)
                    runner.skip({"layers": layers, "variant": "ckpt", "tag": tag,
                                 "budget_bytes": int(b), "policy": "suggest"}, failed)
                    continue
                if not drafting:
                    open(pol, "w").write(set_budget(policy_text, b))
                report = pol[:-len(".umpol")] + ("-profiled" if args.profile else "") + "-report.json"
                env = [] if drafting else ["env"] + source.split("+")[1:]
                run(tag, layers, "ckpt",
                    prefix=profile + env + [args.umpol, "run", "-p", pol, "-r", report, "--"], budget=int(b),
                    policy=os.path.relpath(pol, os.getcwd()) if drafting else source, report=report)
    runner.close()


# ---- `suggest`: umpol suggest's policy against the stock ones, per model and budget ----

# What `umpol suggest -- COMMAND` records under (src/cli/suggest.c): every
# allocation plain device memory, as without umpol.
RECORD_POLICY = """# grid.py suggest's recording policy: every allocation plain device memory, as without umpol.
umpol 1;
class everything {
    match any;
    memory device;
}
"""
# The stock policies written for training, in policies/; each runs at the cell's budget.
STOCK_POLICIES = ("optimizer-offload", "weights-offload", "auto-offload", "llm-finetune")
SIZE_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def parse_size(text):
    """Bytes of TEXT: a number of bytes (1e10 too) or one with a unit, 8GiB, 7.5GiB."""
    num = text.rstrip("BKMGTi")
    unit = text[len(num):]
    try:
        value = float(num) * SIZE_UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size such as 12GiB or 12884901888")
    if not value >= 1 << 20:
        raise argparse.ArgumentTypeError(f"{text!r}: a budget of at least 1MiB")
    return int(value)


def held_peak(path):
    """The most umpol held on the GPU by its own count (its report's timeline), or None."""
    try:
        events = (json.load(open(path)).get("timeline") or {}).get("events") or []
    except (OSError, ValueError):
        return None
    return max((e.get("resident_bytes", 0) for e in events), default=None)


def run_figures(row, out):
    """What a cell keeps of one run: ms per step and its memory, or why it has none."""
    r = row.get("run")
    if not r:
        return {"rc": row.get("rc"), "why": row.get("skipped") or (row.get("error_tail") or "")[-300:]}
    fig = {"rc": 0, "median_step_ms": r["median_step_ms"], "card_peak_bytes": r["card_peak_bytes"],
           "nvml_peak_bytes": row.get("nvml_peak_bytes"), "losses": r["losses"]}
    if row.get("report"):
        fig["held_peak_bytes"] = held_peak(os.path.join(out, row["report"]))
    return fig


def suggest_cell(layers, budget, suggested, stock, drafted):
    """One cell: SUGGESTED and STOCK (name -> figures) at BUDGET; the ratio is
    the fastest stock policy's ms over the suggested policy's, 0 when only the
    suggested one failed (or umpol suggest refused), null when no stock ran.
    The same against the fastest stock policy that left no more on the card
    (cudaMemGetInfo's peak, 2% slack for noise) than the suggested one."""
    ran = {k: v for k, v in stock.items() if v.get("median_step_ms")}
    fastest = lambda names: min(names, key=lambda k: ran[k]["median_step_ms"]) if names else None  # noqa: E731
    best = fastest(list(ran))
    card = suggested.get("card_peak_bytes")
    within = fastest([k for k in ran if card and ran[k].get("card_peak_bytes") is not None
                      and ran[k]["card_peak_bytes"] <= card * 1.02])

    def ratio(name):
        if name and suggested.get("median_step_ms"):
            return ran[name]["median_step_ms"] / suggested["median_step_ms"]
        return 0.0 if name else None
    return {"layers": layers, "budget_bytes": budget, "drafted": drafted, "suggested": suggested,
            "stock": stock, "best_stock": best,
            "best_stock_ms": ran[best]["median_step_ms"] if best else None,
            "over_best_stock": ratio(best), "best_stock_within_card": within,
            "over_best_stock_within_card": ratio(within)}


def suggest_summary(cells):
    """The suggest.* keys: per cell its figures, and the least ratio over the
    cells that have one (null when none has)."""
    ratios = [c["over_best_stock"] for c in cells if c["over_best_stock"] is not None]
    within = [c["over_best_stock_within_card"] for c in cells if c.get("over_best_stock_within_card") is not None]
    keys = {"suggest.min_over_best_stock": min(ratios) if ratios else None,
            "suggest.min_over_best_stock_within_card": min(within) if within else None,
            "suggest.cells_compared": len(ratios), "suggest.cells": []}
    for c in cells:
        memory = {name: {k: fig.get(k) for k in ("card_peak_bytes", "nvml_peak_bytes", "held_peak_bytes")}
                  for name, fig in [("suggested", c["suggested"])] + sorted(c["stock"].items())}
        keys["suggest.cells"].append({
            "layers": c["layers"], "budget_bytes": c["budget_bytes"],
            "suggested_ms": c["suggested"].get("median_step_ms"), "best_stock": c["best_stock"],
            "best_stock_ms": c["best_stock_ms"], "over_best_stock": c["over_best_stock"],
            "best_stock_within_card": c.get("best_stock_within_card"),
            "over_best_stock_within_card": c.get("over_best_stock_within_card"),
            "stock_ms": {k: v.get("median_step_ms") for k, v in sorted(c["stock"].items())},
            "card_memory": memory})
    return keys


def suggest_table(keys):
    """SUGGEST_SUMMARY's keys as a markdown table: each policy's ms and, in
    brackets, the GiB the card showed at its peak."""
    gib = lambda b: f"{b / 2**30:.2f}" if b is not None else "-"  # noqa: E731
    ms = lambda t: f"{t:.1f}" if t is not None else "failed"  # noqa: E731
    r3 = lambda r: "-" if r is None else f"{r:.3f}"  # noqa: E731
    names = sorted({n for c in keys["suggest.cells"] for n in c["stock_ms"]})
    lines = ["| layers | budget GiB | suggested ms (card GiB) | " + " | ".join(f"{n} ms (card)" for n in names)
             + " | best stock / suggested | same, stock within the card's memory | suggested held GiB |",
             "|---" * (6 + len(names)) + "|"]
    for c in keys["suggest.cells"]:
        m = c["card_memory"]
        cell = lambda name, t: f"{ms(t)} ({gib(m.get(name, {}).get('card_peak_bytes'))})"  # noqa: E731
        lines.append(f"| {c['layers']} | {gib(c['budget_bytes'])} | {cell('suggested', c['suggested_ms'])} | "
                     + " | ".join(cell(n, c["stock_ms"].get(n)) for n in names)
                     + f" | {r3(c['over_best_stock'])} | {r3(c.get('over_best_stock_within_card'))} | "
                     f"{gib(m['suggested'].get('held_peak_bytes'))} |")
    lines.append("")
    lines.append(f"suggest.min_over_best_stock = {r3(keys['suggest.min_over_best_stock'])}, within the "
                 f"card's memory {r3(keys.get('suggest.min_over_best_stock_within_card'))}, "
                 f"over {keys['suggest.cells_compared']} cells (goal >= 0.95)")
    return "\n".join(lines)


def suggest(args):
    """Per model: one short recorded run; per budget: umpol suggest's policy
    drafted from it, then that policy and each stock one, timed alike."""
    runner = Runner(args, rows="runs.jsonl")
    out, umpol = args.out, args.umpol
    top = os.path.dirname(os.path.dirname(runner.here))
    stock = [(n, os.path.join(args.policies, n + ".umpol")) for n in args.stock]
    missing = [path for _, path in stock if not os.path.exists(path)]
    if missing:
        print(f"grid: no stock policy {', '.join(missing)}: left out", flush=True)
    stock = [(n, path) for n, path in stock if os.path.exists(path)]
    cells = []
    cells_file = open(os.path.join(out, "cells.jsonl"), "a")
    for layers in args.layers:
        report, recorded_why = record(runner, umpol, out, layers, args.record_warmup, args.record_steps)
        for budget in args.budgets:
            gib = f"{budget / 2**30:.2f}GiB"
            drafted = os.path.join(out, f"L{layers}-suggested-{gib}.umpol")
            why = recorded_why or draft(umpol, report, budget, drafted)
            if why:
                print(f"L{layers} {gib}: {why}", flush=True)
                suggested = {"rc": None, "why": why}
            else:
                rep = drafted[:-len(".umpol")] + "-report.json"
                row = runner.run(f"suggested-{gib}", layers, "ckpt",
                                 prefix=[umpol, "run", "-p", drafted, "-r", rep, "--"], budget=budget,
                                 policy=drafted, report=rep)
                suggested = run_figures(row, out)
            figures = {}
            for name, path in stock:
                pol = os.path.join(out, f"L{layers}-{name}-{gib}.umpol")
                open(pol, "w").write(set_budget(open(path).read(), budget))
                rep = pol[:-len(".umpol")] + "-report.json"
                row = runner.run(f"{name}-{gib}", layers, "ckpt", prefix=[umpol, "run", "-p", pol, "-r", rep, "--"],
                                 budget=budget, policy=os.path.relpath(path, top), report=rep)
                figures[name] = run_figures(row, out)
            cell = suggest_cell(layers, budget, suggested, figures,
                                os.path.basename(drafted) if not why else None)
            cells.append(cell)
            cells_file.write(json.dumps(cell) + "\n")
            cells_file.flush()
            r = cell["over_best_stock"]
            print(f"L{layers} {gib}: best stock {cell['best_stock']}, best stock / suggested "
                  + ("-" if r is None else f"{r:.3f}"), flush=True)
    cells_file.close()
    runner.close()
    keys = suggest_summary(cells)
    with open(os.path.join(out, "latest-suggest.json"), "w") as f:
        json.dump(keys, f, indent=1)
    table = suggest_table(keys)
    open(os.path.join(out, "summary.md"), "w").write(table + "\n")
    print(table, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="one training run")
    t.add_argument("--variant", choices=ANCHORS, required=True)
    t.add_argument("--layers", type=int, default=16)
    t.add_argument("--warmup", type=int, default=3)
    t.add_argument("--steps", type=int, default=5, help="timed steps after the warm-up")
    t.add_argument("--seed", type=int, default=3)
    t.add_argument("--json", help="write losses, step times and memory here")
    b = sub.add_parser("bandwidth", help="pinned cudaMemcpy bandwidth both ways")
    b.add_argument("--gib", type=int, default=2)
    b.add_argument("--json", required=True)
    d = sub.add_parser("drive", help="the whole grid")
    d.add_argument("--out", required=True)
    d.add_argument("--layers", type=int, nargs="+", default=[16, 32])
    d.add_argument("--variants", nargs="*", default=list(ANCHORS), choices=ANCHORS)
    d.add_argument("--budgets", type=float, nargs="+",
                   help="umpol's budgets in bytes (one model), instead of those read from the anchors")
    d.add_argument("--profile", action="store_true",
                   help="run umpol's cells with UMPOL_PROFILE=1 over the timed steps (for the bytes moved)")
    d.add_argument("--policy", nargs="+", default=["policies/optimizer-offload.umpol"],
                   help="umpol's policy, its budget line set per cell, or one per budget (highest "
                        "budget first; the last serves the rest), 'A|B' for each of A and B at "
                        "that budget; 'suggest': the policy umpol suggest drafts per budget from "
                        "one recorded run of the model")
    d.add_argument("--umpol", default="umpol", help="the umpol executable")
    d.add_argument("--warmup", type=int, default=3)
    d.add_argument("--steps", type=int, default=5)
    d.add_argument("--seed", type=int, default=3)
    d.add_argument("--top-fraction", type=float, default=0.9,
                   help="the highest budget, as a fraction of checkpointing alone's card peak")
    d.add_argument("--cell-timeout-s", type=float, default=200)
    d.add_argument("--deadline-s", type=float, default=3600, help="skip cells that would start after this")
    s = sub.add_parser("suggest", help="umpol suggest's policy against the stock ones, per model and budget")
    s.add_argument("--out", required=True)
    s.add_argument("--umpol", default="umpol", help="the umpol executable")
    s.add_argument("--layers", type=int, nargs="+", default=[16, 32])
    s.add_argument("--budgets", type=parse_size, nargs="+", required=True,
                   help="GPU budgets, each for every model: bytes or sizes such as 12GiB")
    s.add_argument("--policies", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                      "policies"),
                   help="where the stock policies are")
    s.add_argument("--stock", nargs="+", default=list(STOCK_POLICIES), choices=STOCK_POLICIES,
                   help="the stock policies to time beside the suggested one")
    s.add_argument("--warmup", type=int, default=3)
    s.add_argument("--steps", type=int, default=5, help="timed steps after the warm-up, for every policy")
    s.add_argument("--record-warmup", type=int, default=1, help="the recorded run's warm-up steps")
    s.add_argument("--record-steps", type=int, default=2, help="the recorded run's further steps")
    s.add_argument("--seed", type=int, default=3)
    s.add_argument("--cell-timeout-s", type=float, default=150, help="one run's limit")
    s.add_argument("--deadline-s", type=float, default=570, help="skip runs that would start after this")
    sub.add_parser("link-sampler", help="(used by train) NVML's link counters, read every 2 ms")
    args = p.parse_args()
    {"train": train, "bandwidth": bandwidth, "drive": drive, "suggest": suggest,
     "link-sampler": link_sampler}[args.cmd](args)


if __name__ == "__main__":
    main()
