#!/usr/bin/env python3
"""Tables and latest.json from one bench/run-gpu.sh output directory.

usage: summarize.py OUT DEVICE COMMIT [PREVIOUS_LATEST_JSON]
Every ratio compares runs made side by side in the same session. The
constrained figures come from OUT/constrained (bench/run-constrained.sh);
the two-GPU keys (ddp2.*, fsdp2.*, made by bench/run-ddp.sh) and the grid keys
(grid.*, bench/run-grid.sh, unless OUT/grid holds a new run) are carried over
from PREVIOUS_LATEST_JSON."""
import json
import os
import statistics
import sys

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)
if len(sys.argv) < 4:
    sys.exit("usage: summarize.py OUT DEVICE COMMIT [PREVIOUS_LATEST_JSON] (--help says more)")
out, device, commit = sys.argv[1:4]
previous = sys.argv[4] if len(sys.argv) > 4 else None


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
    def pair(label, key):
        return med(r[key] for r in pairs if r["label"] == label and r.get("kind") == "async")
    managed = med(r["pair_ns"] for r in pairs if r.get("kind") == "managed")
    print("\n| allocation + free pair, mixed sizes 512 B-64 MiB, 8 live (ns, best of 5; median of 3 interleaved rounds) "
          "| native cudaMallocAsync | umpol, managed class | umpol, device class | umpol managed / native | goal |")
    print("|---|---|---|---|---|---|")
    for key, what in (("pair_ns", "one stream"), ("cross_stream_pair_ns", "allocated on one stream, freed on another")):
        nat, um, dev = pair("native", key), pair("umpol-managed", key), pair("umpol-device", key)
        ratio = um / nat
        print(f"| {what} | {nat:.0f} | {um:.0f} | {dev:.0f} | {ratio:.2f} | <= 1.0 {'met' if ratio <= 1.0 else 'MISSED'} |")
        suffix = "" if key == "pair_ns" else "_cross_stream"
        latest[f"alloc.native_async{suffix}_ns"] = round(nat, 1)
        latest[f"alloc.umpol_async{suffix}_ns"] = round(um, 1)
        latest[f"alloc.umpol_device_class{suffix}_ns"] = round(dev, 1)
        latest[f"alloc.umpol_over_native{suffix}"] = round(ratio, 3)
    print(f"\nnative cudaMallocManaged + cudaFree, same sizes: {managed:.0f} ns a pair")
    latest["alloc.managed_ns"] = round(managed, 1)

mig = jsonl("migrate.jsonl")
if mig:
    print("\n| 4 GiB migration (median of 2) | fault-driven GB/s | umpol prefetch on phase GB/s | pinned cudaMemcpy GB/s | umpol / memcpy | goal |")
    print("|---|---|---|---|---|---|")
    for d, prefix in (("h2d", "migrate."), ("d2h", "migrate.d2h_")):
        fault = med(r["gbps"] for r in mig if r["direction"] == d and r["label"] == "fault")
        um = med(r["gbps"] for r in mig if r["direction"] == d and r["label"] == "umpol")
        cp_rows = [r["memcpy_gbps"] for r in mig if r["direction"] == d and r["label"] != "movable"]
        cp = med(cp_rows)
        ratio = um / cp
        print(f"| {'host->GPU' if d == 'h2d' else 'GPU->host'} | {fault:.1f} | {um:.1f} | {cp:.1f} | "
              f"{ratio:.2f} | >= 0.90 {'met' if ratio >= 0.9 else 'MISSED'} |")
        latest[prefix + "pinned_memcpy_gbps"] = round(cp, 2)
        latest[prefix + "fault_gbps"] = round(fault, 2)
        latest[prefix + "umpol_prefetch_gbps"] = round(um, 2)
        latest[prefix + "managed_prefetch_over_memcpy"] = round(ratio, 3)
        latest[prefix + "umpol_over_memcpy"] = round(ratio, 3)  # unless movable memory ran below
    # Movable memory (bench/migrate-movable.umpol): the move alone, by the
    # runtime's copy engines, with the card's used memory before and after.
    movable = [r for r in mig if r["label"] == "movable"]
    if movable:
        print("\n| 4 GiB, movable memory (median of 2) | move GB/s | pinned cudaMemcpy GB/s | move / memcpy | card MiB before -> after |")
        print("|---|---|---|---|---|")
    for d, prefix in (("h2d", "migrate.movable_"), ("d2h", "migrate.d2h_movable_")):
        rows = [r for r in movable if r["direction"] == d]
        if not rows:
            continue
        # umpol's way to move a class at the link's rate is movable memory:
        # the goal key takes it, the managed prefetch keeps its own key.
        latest[prefix.replace("movable_", "umpol_over_memcpy")] = round(
            med(r["ratio_to_memcpy"] for r in rows), 3)
        latest["migrate.umpol_mechanism"] = "memory movable (bench/migrate-movable.umpol)"
        mv = med(r["gbps"] for r in rows)
        cp = med(r["memcpy_gbps"] for r in rows)
        card = rows[-1]
        print(f"| {'host->GPU' if d == 'h2d' else 'GPU->host'} | {mv:.1f} | {cp:.1f} | {mv / cp:.2f} | "
              f"{card['card_used_mib_before']} -> {card['card_used_mib_after']} |")
        latest[prefix + "gbps"] = round(mv, 2)
        latest[prefix + "over_memcpy"] = round(mv / cp, 3)
        latest[prefix + "card_used_mib_before_after"] = [card["card_used_mib_before"],
                                                          card["card_used_mib_after"]]

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

labels = ("native", "native-async", "naive", "umpol-passthrough", "umpol-finetune", "umpol-finetune-profiled")


def rounds_of(label):
    """Round number -> run, for every train-LABEL-N.json."""
    found = {}
    for name in os.listdir(out):
        head, _, tail = name.rpartition("-")
        if head == f"train-{label}" and tail.endswith(".json") and tail[:-5].isdigit():
            found[int(tail[:-5])] = load(name)
    return found


runs = {lab: rounds_of(lab) for lab in labels}


def steps_ms(lab):
    return [r["median_step_ms"] for r in runs[lab].values()]


if runs["native"]:
    base = next(iter(runs["native"].values()))["losses"]
    nat, best_nat = med(steps_ms("native")), min(steps_ms("native"))

    def loss_diff(run):
        """The largest relative difference of RUN's losses from native's."""
        return max(abs(a - b) / abs(a) for a, b in zip(base, run["losses"]))

    def per_round(lab):
        """The median over rounds of LAB's step over native's in the same round."""
        return med(runs[lab][i]["median_step_ms"] / runs["native"][i]["median_step_ms"]
                   for i in runs[lab] if i in runs["native"])

    print(f"\n| training, 8 layers, dim 1024, 16 x 1024 tokens, bf16, fused AdamW ({len(runs['native'])} interleaved rounds) "
          "| step ms, median of rounds | fastest round | / native, median of per-round ratios | / native, fastest rounds | losses vs native |")
    print("|---|---|---|---|---|---|")
    for lab in labels:
        if not runs[lab]:
            print(f"| {lab} | failed | | | | |")
            continue
        ms, best = med(steps_ms(lab)), min(steps_ms(lab))
        diff = max(loss_diff(r) for r in runs[lab].values())
        print(f"| {lab} | {ms:.1f} | {best:.1f} | {per_round(lab):.3f} | {best / best_nat:.3f} | max rel. diff {diff:.1e} |")
    latest["train.native_step_ms"] = round(nat, 2)
    for lab, key in (("native-async", "train.native_async_step_ms"), ("naive", "train.naive_um_step_ms"),
                     ("umpol-finetune", "train.umpol_step_ms")):
        if runs[lab]:
            latest[key] = round(med(steps_ms(lab)), 2)
    if runs["umpol-finetune"]:
        latest["train.umpol_over_native"] = round(per_round("umpol-finetune"), 3)
        if runs["native-async"]:
            # PyTorch's own cudaMallocAsync backend, which `umpol run` selects:
            # what the job pays for allocating through the CUDA runtime at all.
            latest["train.native_async_over_native"] = round(per_round("native-async"), 3)
        latest["train.loss_match"] = all(loss_diff(r) <= 1e-2 for r in runs["umpol-finetune"].values())
        print(f"\ntrain.umpol_over_native (median of per-round ratios): {latest['train.umpol_over_native']:.3f} "
              f"(goal <= 1.02: {'met' if latest['train.umpol_over_native'] <= 1.02 else 'MISSED'})")
    if runs["umpol-finetune-profiled"] and runs["umpol-finetune"]:
        over = med(steps_ms("umpol-finetune-profiled")) / latest["train.umpol_step_ms"]
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

con = load(os.path.join("constrained", "latest-constrained.json"))
if con:
    summary = open(os.path.join(out, "constrained", "summary.md")).read()
    print("\n## Constrained training (bench/run-constrained.sh)\n\n" + summary.split("\n{")[0].strip())
    latest.update(con)
    latest["constrained.commit"] = commit
    steps = load(os.path.join("constrained", "constrained-fsdp-cpu-offload.json"))
    if steps:
        latest["constrained.steps"] = len(steps["losses"])
grid = load(os.path.join("grid", "latest-grid.json"))  # bench/run-grid.sh, when run into OUT/grid
if grid:
    latest.update(grid)
if previous and os.path.exists(previous):
    for key, value in json.load(open(previous)).items():
        if key.startswith(("ddp2.", "fsdp2.")) or (key.startswith("grid.") and key not in latest):
            latest[key] = value

json.dump(latest, open(os.path.join(out, "latest.json"), "w"), indent=1)
print("\nlatest.json:", json.dumps(latest))
