"""How fast this host's CPU runs torch's own AdamW on fp32 tensors, alone and
beside pinned copies both ways over the link (which share host memory)."""
import os, sys, threading, time, subprocess
import torch
print(subprocess.run("lscpu | grep -E 'Model name|^CPU\\(s\\)|Thread|Socket|NUMA node|L3'", shell=True,
                     capture_output=True, text=True).stdout)
print("torch", torch.__version__, "threads", torch.get_num_threads(), "affinity", len(os.sched_getaffinity(0)))
N = 64 << 20  # elements per tensor, 256 MiB
def mk(n):
    p = torch.randn(n); p.grad = torch.randn(n) * 1e-3
    return p
def rate(fused, foreach, threads, n=N, tensors=4, reps=5):
    torch.set_num_threads(threads)
    ps = [mk(n // tensors) for _ in range(tensors)]
    kw = {"fused": True} if fused else {"foreach": foreach}
    opt = torch.optim.AdamW(ps, lr=1e-4, **kw)
    opt.step()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); opt.step(); t.append(time.perf_counter() - t0)
    t.sort()
    return n / t[len(t) // 2] / 1e9
def membw(threads):
    torch.set_num_threads(threads)
    a = torch.empty(N * 4, dtype=torch.uint8).fill_(1); b = torch.empty_like(a)
    b.copy_(a); t0 = time.perf_counter()
    for _ in range(5): b.copy_(a)
    return 2 * a.numel() * 5 / (time.perf_counter() - t0) / 1e9
for th in (1, 4, 8, 12, 16):
    print(f"threads {th:2d}: copy {membw(th):6.1f} GB/s  fused {rate(True, False, th):5.2f} G/s  "
          f"foreach {rate(False, True, th):5.2f} G/s  for-loop {rate(False, False, th, reps=3):5.2f} G/s", flush=True)
# beside the link
dev = torch.device("cuda")
h_in = torch.empty(1 << 30, dtype=torch.uint8).pin_memory(); d_in = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
h_out = torch.empty(1 << 30, dtype=torch.uint8).pin_memory(); d_out = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
def link(seconds, stats):
    moved, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        with torch.cuda.stream(s1): d_in.copy_(h_in, non_blocking=True)
        with torch.cuda.stream(s2): h_out.copy_(d_out, non_blocking=True)
        s1.synchronize(); s2.synchronize(); moved += 1 << 30
    stats.append(moved / (time.perf_counter() - t0) / 1e9)
st = []; link(1.0, st); print(f"link alone, each way: {st[-1]:.1f} GB/s")
for th in (4, 8, 14, 16):
    st = []
    th_ = threading.Thread(target=link, args=(3.0, st)); th_.start()
    time.sleep(0.2)
    r = rate(True, False, th, reps=5)
    th_.join()
    print(f"beside the link: fused {th:2d} threads {r:5.2f} G/s, link each way {st[-1]:.1f} GB/s", flush=True)
