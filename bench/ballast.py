#!/usr/bin/env python3
"""Make the GPU a smaller card: hold device memory (cudaMalloc, never managed)
until killed, leaving free BYTES more than one CUDA context takes, then write
READY ("held free context", in bytes).

    ballast.py --free BYTES --ready FILE [--device N]

The context is measured as this process makes its own (the card's used
memory before and after), so a job started next has BYTES for its growth
beyond its own context. Refuses, and writes nothing, where the card has less
free than that."""
import argparse
import signal
import subprocess
import sys


def used_mib(device):
    out = subprocess.run(["nvidia-smi", "-i", str(device), "--query-gpu=memory.used",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--free", type=int, required=True, help="bytes to leave free")
    p.add_argument("--ready", required=True, help="file written once the ballast is held")
    p.add_argument("--device", type=int, default=0)
    args = p.parse_args()
    before = used_mib(args.device)
    import torch
    torch.cuda.set_device(args.device)
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context, made
    context = (used_mib(args.device) - before) << 20
    free, total = torch.cuda.mem_get_info()
    take = free - (args.free + context)
    if take <= 0:
        sys.exit(f"ballast: the card has {free} bytes free, not more than the {args.free} "
                 f"asked and a context of {context}")
    held = torch.empty(take, dtype=torch.uint8, device="cuda")
    free_after, _ = torch.cuda.mem_get_info()
    with open(args.ready, "w") as f:
        f.write(f"{take} {free_after} {context}\n")
    print(f"ballast: holding {take} bytes; the card has {free_after} of {total} free; "
          f"a CUDA context took {context} bytes", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    del held


if __name__ == "__main__":
    main()
