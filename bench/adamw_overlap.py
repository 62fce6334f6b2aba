#!/usr/bin/env python3
"""Can the optimizer's updates overlap the backward pass when AdamW's state
lies in pinned host memory? A question for the step in backward
(umpol-python(7)), asked away from any model:

    umpol run -p bench/adamw_overlap.umpol -- python3 bench/adamw_overlap.py [--json OUT]

The moments (exp_avg, exp_avg_sq) of TENSORS parameters of CHUNK fp32
elements are allocated inside umpol.tag("host"), which the policy places in
pinned host memory the GPU maps (`memory host`); parameters and gradients
are on the GPU. "Compute" is a chain of bf16 matmuls on the job's stream,
standing for the backward pass. Timed with CUDA events, median of --reps:

  compute            the matmuls alone
  zero_copy          fused AdamW per parameter, reading the moments where they lie
  compute+zero_copy  both at once (the updates on a side stream)
  staged             the moments copied in on one stream, updated on a second,
                     copied out on a third, through RING device slots
  compute+staged     both at once
  copies             the staged copies alone (in and out, no update)

and prints each pair's time against the sum and the longer of its parts
(1.0 of the longer: perfect overlap; 1.0 of the sum: none), with the link's
rate for the copies. Nothing here is managed memory."""
import argparse
import json
import statistics


def timed(torch, fn, reps, streams):
    """Median milliseconds of FN over REPS runs, all STREAMS joined at the end."""
    times = []
    for _ in range(reps + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        main = torch.cuda.current_stream()
        for s in streams:
            main.wait_stream(s)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times[1:])  # the first run warms up


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tensors", type=int, default=48, help="parameters (default 48)")
    ap.add_argument("--chunk", type=int, default=8 << 20, help="fp32 elements each (default 8Mi)")
    ap.add_argument("--ring", type=int, default=3, help="device slots for staged moments (default 3)")
    ap.add_argument("--matmuls", type=int, default=60, help="bf16 8192^2 matmuls of compute (default 60)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs of each (default 5)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    import torch  # after the arguments: --help needs no GPU stack

    import umpol
    if not umpol.active():
        ap.error("run it under `umpol run -p bench/adamw_overlap.umpol`: the moments need pinned "
                 "host memory the GPU maps")
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    items = []
    for _ in range(args.tensors):
        p = torch.randn(args.chunk, device=dev)
        p.grad = torch.randn(args.chunk, device=dev) * 1e-3
        with umpol.tag("host"):
            m = torch.zeros(args.chunk, device=dev)
            v = torch.zeros(args.chunk, device=dev)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        opt.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=dev),
                        "exp_avg": m, "exp_avg_sq": v}
        items.append((p, opt, m, v))
    host = umpol.memory_stats().get("moments", {}).get("live_bytes", 0)
    if host < 2 * 4 * args.chunk * args.tensors:
        raise SystemExit(f"the moments are not in the policy's moments class ({host} bytes there)")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    side, s_in, s_up, s_out = (torch.cuda.Stream(dev) for _ in range(4))
    slots = [(torch.empty(args.chunk, device=dev), torch.empty(args.chunk, device=dev))
             for _ in range(args.ring)]

    def compute():
        c = a
        for _ in range(args.matmuls):
            c = torch.mm(c, b)

    def zero_copy(stream):
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _, opt, _, _ in items:
                opt.step()

    def staged(update=True):
        for s in (s_in, s_up, s_out):
            s.wait_stream(torch.cuda.current_stream())
        freed = [None] * args.ring
        for i, (p, opt, m, v) in enumerate(items):
            k = i % args.ring
            sm, sv = slots[k]
            if freed[k] is not None:
                s_in.wait_event(freed[k])
            with torch.cuda.stream(s_in):
                sm.copy_(m, non_blocking=True)
                sv.copy_(v, non_blocking=True)
            s_up.wait_stream(s_in)
            if update:
                st = opt.state[p]
                st["exp_avg"], st["exp_avg_sq"] = sm, sv
                with torch.cuda.stream(s_up):
                    opt.step()
                st["exp_avg"], st["exp_avg_sq"] = m, v
            s_out.wait_stream(s_up)
            with torch.cuda.stream(s_out):
                m.copy_(sm, non_blocking=True)
                v.copy_(sv, non_blocking=True)
                freed[k] = s_out.record_event()

    three = (s_in, s_up, s_out)
    fig = {
        "compute": timed(torch, compute, args.reps, ()),
        "zero_copy": timed(torch, lambda: zero_copy(side), args.reps, (side,)),
        "compute+zero_copy": timed(torch, lambda: (zero_copy(side), compute()), args.reps, (side,)),
        "staged": timed(torch, staged, args.reps, three),
        "compute+staged": timed(torch, lambda: (staged(), compute()), args.reps, three),
        "copies": timed(torch, lambda: staged(update=False), args.reps, three),
    }
    moved = 2 * 4 * args.chunk * args.tensors  # each way
    print(f"{args.tensors} parameters of {args.chunk} fp32 elements; moments "
          f"{moved / 2**30:.2f} GiB each way; ring {args.ring}; {args.matmuls} matmuls")
    for k, ms in fig.items():
        print(f"  {k:18s} {ms:8.1f} ms")
    for u in ("zero_copy", "staged"):
        both, c, x = fig[f"compute+{u}"], fig["compute"], fig[u]
        print(f"  compute+{u}: {both / (c + x):.2f} of the sum, {both / max(c, x):.2f} of the longer")
    print(f"  copies: {moved / fig['copies'] / 1e6:.1f} GB/s each way, both at once")
    if args.json:
        json.dump(dict(fig, tensors=args.tensors, chunk=args.chunk, ring=args.ring,
                       matmuls=args.matmuls, bytes_each_way=moved,
                       device=torch.cuda.get_device_name(dev)), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
