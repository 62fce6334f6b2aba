"""Each run's distance from its link bound, as bench/grid_summary.py computes it,
with compute (checkpointing alone) taken from the dfd8560 grid's call on an H100
(399.0 ms at 32 layers, 206.9 at 16): this call ran no checkpointing anchor.
Run from this folder: python3 bounds.py"""
import glob
import json

COMPUTE_MS = {32: 399.0, 16: 206.9}

for d in sorted(glob.glob("L*-r*")):
    bw = json.load(open(f"{d}/bandwidth.json"))
    run = json.load(open(glob.glob(f"{d}/L*-umpol-*.json")[0]))
    layers = int(d[1:3])
    link = run["link"]
    h2d = link["h2d_bytes_per_step"] / bw["nvml_counted_per_byte_h2d"]
    d2h = link["d2h_bytes_per_step"] / bw["nvml_counted_per_byte_d2h"]
    one_way = max(h2d / (bw["h2d_gbps"] * 1e6), d2h / (bw["d2h_gbps"] * 1e6))
    shared = min(h2d, d2h)
    two_way = (shared / (bw["both_ways_gbps_each"] * 1e6) + (h2d - shared) / (bw["h2d_gbps"] * 1e6)
               + (d2h - shared) / (bw["d2h_gbps"] * 1e6))
    bound, bound2 = max(COMPUTE_MS[layers], one_way), max(COMPUTE_MS[layers], two_way)
    ms = run["median_step_ms"]
    print(f"{d:26s} {ms:7.1f} ms  card {run['card_peak_bytes'] / 2**30:5.2f} GiB  link in {h2d / 1e9:5.1f} "
          f"out {d2h / 1e9:5.1f} GB  bound {bound:6.1f} (x{ms / bound:.3f})  two-way {bound2:6.1f} "
          f"(x{ms / bound2:.3f})  last loss {run['losses'][-1]:.6f}")
