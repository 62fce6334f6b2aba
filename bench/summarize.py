#!/usr/bin/env python3
"""Tables and latest.json from one bench/run-gpu.sh output directory.

usage: summarize.py OUT DEVICE COMMIT
Every ratio compares runs made side by side in the same session."""
import json
import os
import statistics
import sys

out, device, commit = sys.argv[1:4]


def jsonl(name):
    path = os.path.join(out, name)
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def load(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None


def med(values):
    values = list(values)
    return statistics.median(values) if values else float("nan")


latest = {"device": device, "commit": commit}

pairs = jsonl("alloc-pair.jsonl")
if pairs:
    print("\n| allocation pair, ns (best of 5 x 200k; median of 3 interleaved rounds) | native | umpol device class | umpol managed class | umpol / native |")
    print("|---|---|---|---|---|")
    for key in ("pair_ns_4096", "pair_ns_1048576", "pair_ns_67108864"):
        m = {lab: med(r[key] for r in pairs if r["label"] == lab)
             for lab in ("native", "umpol-device", "umpol-managed")}
        print(f"| {key[8:]} B | {m['native']:.0f} | {m['umpol-device']:.0f} | {m['umpol-managed']:.0f} | "
              f"{m['umpol-device'] / m['native']:.2f} |")
        if key == "pair_ns_1048576":
            latest["alloc.native_pair_ns"] = round(m["native"], 1)
            latest["alloc.umpol_pair_ns"] = round(m["umpol-device"], 1)
            latest["alloc.umpol_over_native"] = round(m["umpol-device"] / m["native"], 3)

mig = jsonl("migrate.jsonl")
if mig:
    print("\n| 4 GiB migration (median of 2) | fault-driven GB/s | umpol prefetch on phase GB/s | pinned cudaMemcpy GB/s | umpol / memcpy | goal |")
    print("|---|---|---|---|---|---|")
    for d, prefix in (("h2d", "migrate."), ("d2h", "migrate.d2h_")):
        fault = med(r["gbps"] for r in mig if r["direction"] == d and r["label"] == "fault")
        um = med(r["gbps"] for r in mig if r["direction"] == d and r["label"] == "umpol")
        cp = med(r["memcpy_gbps"] for r in mig if r["direction"] == d)
        ratio = um / cp
        print(f"| {'host->GPU' if d == 'h2d' else 'GPU->host'} | {fault:.1f} | {um:.1f} | {cp:.1f} | "
              f"{ratio:.2f} | >= 0.90 {'met' if ratio >= 0.9 else 'MISSED'} |")
        latest[prefix + "pinned_memcpy_gbps"] = round(cp, 2)
        latest[prefix + "fault_gbps"] = round(fault, 2)
        latest[prefix + "umpol_prefetch_gbps"] = round(um, 2)
        latest[prefix + "umpol_over_memcpy"] = round(ratio, 3)

naive, pref = load("faults-naive.json"), load("faults-prefetch.json")
if naive and pref:
    def faults(r):
        return sum(c.get("um", {}).get("gpu_faults", 0) for c in r["classes"])
    def moved(r):
        return sum(c.get("um", {}).get("htod_bytes", 0) for c in r["classes"])
    fn, fp = faults(naive), faults(pref)
    print(f"\nGPU page faults, 4 GiB read by a kernel after CPU initialisation (UMPOL_PROFILE=1): "
          f"naive {fn}, prefetch on phase {fp} ({fn / max(fp, 1):.0f}x fewer); "
          f"migrated host->GPU {moved(naive) / 2**30:.2f} GiB and {moved(pref) / 2**30:.2f} GiB")
    latest["faults.microbench_naive"] = fn
    latest["faults.microbench_prefetch"] = fp

labels = ("native", "naive", "umpol-passthrough", "umpol-finetune", "umpol-finetune-profiled")
runs = {lab: [r for r in (load(f"train-{lab}-{i}.json") for i in (1, 2)) if r] for lab in labels}
if runs["native"]:
    base = runs["native"][0]["losses"]
    nat = med(r["median_step_ms"] for r in runs["native"])
    print("\n| training, 8 layers, dim 1024, 4 x 1024 tokens, bf16, fused AdamW (median step of 2 runs) | step ms | / native | losses vs native |")
    print("|---|---|---|---|")
    for lab in labels:
        if not runs[lab]:
            print(f"| {lab} | failed | | |")
            continue
        ms = med(r["median_step_ms"] for r in runs[lab])
        diff = max(max(abs(a - b) / abs(a) for a, b in zip(base, r["losses"])) for r in runs[lab])
        print(f"| {lab} | {ms:.1f} | {ms / nat:.3f} | max rel. diff {diff:.1e} |")
    latest["train.native_step_ms"] = round(nat, 2)
    for lab, key in (("naive", "train.naive_managed_step_ms"), ("umpol-finetune", "train.umpol_step_ms")):
        if runs[lab]:
            latest[key] = round(med(r["median_step_ms"] for r in runs[lab]), 2)
    if runs["umpol-finetune"]:
        latest["train.umpol_over_native"] = round(latest["train.umpol_step_ms"] / nat, 3)
        latest["train.loss_match"] = all(
            max(abs(a - b) / abs(a) for a, b in zip(base, r["losses"])) <= 1e-2 for r in runs["umpol-finetune"])
    if runs["umpol-finetune-profiled"] and runs["umpol-finetune"]:
        over = med(r["median_step_ms"] for r in runs["umpol-finetune-profiled"]) / latest["train.umpol_step_ms"]
        print(f"\nCUPTI profiling overhead on the training step (UMPOL_PROFILE=1, llm-finetune): {over:.3f}x")
        latest["profile.cupti_overhead"] = round(over, 3)

steps = 25
pn, pf = load("train-profile-naive-1.json"), load("train-profile-finetune-1.json")
if pn and pf:
    def faults(r):
        return sum(c.get("um", {}).get("gpu_faults", 0) for c in r["classes"])
    latest["faults.naive_per_step"] = round(faults(pn) / steps, 1)
    latest["faults.umpol_per_step"] = round(faults(pf) / steps, 1)
    print(f"\nGPU page faults per training step: naive managed {faults(pn) / steps:.1f}, "
          f"llm-finetune {faults(pf) / steps:.1f}")

json.dump(latest, open(os.path.join(out, "latest.json"), "w"), indent=1)
print("\nlatest.json:", json.dumps(latest))
