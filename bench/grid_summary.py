#!/usr/bin/env python3
"""Table and `grid.*` keys from the cells of one or more `grid.py drive` runs.

usage: grid_summary.py DEVICE COMMIT KEYS_JSON DIR [DIR...]
Prints a markdown summary; writes the keys (to merge into
bench/results/latest.json) to KEYS_JSON. A later DIR's cells replace an
earlier one's for the same model and tag; the pinned bandwidth is the first
DIR's; cells tagged umpol-profiled-* (grid.py drive --profile) only lend
their CUPTI counts to the umpol cell of the same model, budget and policy.
Where several policies ran at one budget (grid.py drive's 'A|B'), the
fastest stands for it and the others go with it under "alternatives"; since
a later DIR replaces rows by tag, run such a budget's policies in one call.

Per umpol cell:
  memory      the budget; what the card saw in the process (cudaMemGetInfo,
              total - free, peak over the timed steps above the process's
              start); NVML's used memory polled from outside (above the value
              before the process started, its CUDA context included); and the
              most umpol held on the GPU by its own count (report timeline)
  best anchor the fastest anchor run whose card peak is within the budget
              (2% allowed for sampling); umpol_over_best = its ms / umpol's ms,
              above 1 when umpol is faster; the same at the card's figure for
              umpol instead of its budget (umpol_over_best_at_card_memory)
  bound       the link-bound lower bound: max(compute, h2d/bw_h2d, d2h/bw_d2h),
              compute being checkpointing alone's step in the same run, bw the
              pinned cudaMemcpy bandwidth measured in the same run, and the
              bytes per timed step each way: NVML's PCIe counters, scaled by
              what they counted for a pinned copy, where that count is about
              the copy's size; else migrations (CUPTI's counts of a profiled
              run of the same budget, else the runtime's own) plus modelled
              zero-copy traffic (see report_of). It assumes a full-duplex link
              and moves hidden behind compute.
  two-way     the same bound with the link as measured both ways at once (a
              pinned copy each way on two streams, both_ways_gbps_each): the
              bytes both directions share cross at that rate, the rest at its
              own one-way rate, min(h2d,d2h)/bw_both + the rest/bw_one_way,
              the least time any mix of the three measured rates allows. It
              is never below bound; it is what a step that moves about as much
              each way can reach on a link that is not full duplex.
  fewest bytes where several policies ran at one budget, the kept (fastest)
              run's ms over the lowest bound among them: a policy that moves
              more bytes raises its own bound, so this says how far the
              budget's best step is from the least the link needs there
              (umpol_over_bound_fewest_bytes; the key takes umpol_over_bound
              where one policy ran)
  by part     the bound of each part of the step, summed: the forward pass
              takes at least checkpointing alone's forward GPU time and at
              least its own copies' time over the link (weights ahead in,
              saved tensors out: grid.py's package_copies), the backward pass
              at least checkpointing alone's backward and optimizer time and
              at least its own copies' time (saved tensors back, the
              optimizer state staged in and out), each with the link both
              ways at once as in two-way. The rest of what NVML counted (reads
              and writes where the memory lies, the runtime's moves) may have
              crossed in either part, and is put where it costs least; the
              figure is never below two-way. Only where NVML counted the
              bytes (the package's copies are among them). A step whose
              backward pass carries most of the bytes cannot hide them behind
              the forward pass's compute: this says how far umpol is from
              what its placement of bytes by part allows (umpol_over_bound_by_part;
              grid.max_umpol_over_bound_by_part), where bound says how far
              from what its bytes allow anywhere in the step. The best
              split's parts (bound_by_part_forward_ms, _backward_ms) are
              printed against umpol's GPU time by part, which shows the part
              that is further from its floor. Backward's
              compute is checkpointing alone's backward plus its optimizer
              step, though with the step in backward the updates may overlap
              backward's kernels (bound counts the whole step's compute the
              same way)
  gh200       the same bytes over NVLink-C2C at 346 GB/s each way (a paper
              projection, compute unchanged)
  thread pace the parts of the step (forward, backward) whose job's thread
              took 0.97 of their GPU time or more (grid.py's thread_part_ms):
              the GPU got its work only as the thread issued it, so a busy
              host slows that cell (paced_by_thread; the cells with any in
              grid.cells_paced_by_thread). A part whose thread waits for the
              GPU (a synchronisation) shows so too: the mark says the thread
              was no earlier than the GPU, not why. Runs without thread times
              (grids before it) get neither.
  in order    the bound that keeps the job's order of work: the AdamW step
              (fused, fp32) reads weights, gradients and both moments, 16
              bytes a parameter, and it starts only when the backward pass has
              ended, while the card holds at most its peak; so at least
              16 x params - card peak of them cross the link inside the step,
              with no compute beside them:
              max(bound, compute + that / bw_h2d). Compute is checkpointing
              alone's whole step, its own AdamW on the card included (28 bytes
              a parameter at HBM speed, about 2-4% of it), as in bound.
"""
import json
import os
import sys

GH200_BPS = 346e9
# A fused fp32 AdamW step reads weights, gradients and both moments.
OPTIMIZER_BYTES_PER_PARAM = 16


# A part of the step ran at the job's thread's pace where the thread took this
# share of the part's GPU time or more: the GPU had its work only as the thread
# issued it, and a slower thread (a busy host) slows the step with it.
THREAD_PACE = 0.97


def thread_paced(run):
    """The parts of RUN's step (forward, backward) whose GPU time its job's
    thread matched: [(part, thread ms, GPU ms)]; none where the run has no
    thread times (runs before grid.py recorded them)."""
    gpu, thread = run.get("gpu_part_ms") or {}, run.get("thread_part_ms") or {}
    return [(part, thread[part], gpu[part]) for part in ("forward", "backward")
            if gpu.get(part) and thread.get(part) is not None and thread[part] >= THREAD_PACE * gpu[part]]


def load_cells(dirs):
    """Rows of every DIR's cells.jsonl (a later DIR's row replaces an earlier
    one of the same model and tag), each with the pinned-copy bandwidth its own
    call measured (row["bw"]: its DIR's, else the first DIR's), and the first
    DIR's bandwidth, the grid's own."""
    cells, bw = {}, None
    for d in dirs:
        b = os.path.join(d, "bandwidth.json")
        own = json.load(open(b)) if os.path.exists(b) else None
        bw = bw or own
        p = os.path.join(d, "cells.jsonl")
        if os.path.exists(p):
            for line in open(p):
                row = json.loads(line)
                row["dir"], row["bw"] = d, own
                cells[(row["layers"], row["tag"])] = row
    for row in cells.values():
        row["bw"] = row["bw"] or bw
    return cells, bw


def report_of(row):
    """umpol's report of ROW's run: its held peak and the bytes it moved each way
    per timed step, in three parts: migrations (CUPTI's counts when the run
    was profiled, else the runtime's own: its prefetches to the GPU and
    evictions in the timed steps, plus its reclaims averaged over the run),
    and the modelled zero-copy traffic of memory the GPU reads where it lies on
    the host: a host-placed class (AdamW's moments) read and written once a
    step; weights evicted to the host read twice (the bf16 cast in the forward
    pass and again in checkpointing's recomputation) and read and written once
    by the optimizer."""
    if not row.get("report"):
        return None
    path = os.path.join(row["dir"], row["report"])
    if not os.path.exists(path):
        return None
    r = json.load(open(path))
    run = row["run"]
    steps = len(run["losses"]) - run["warmup"]
    tl = r.get("timeline") or {}
    held = max((e.get("resident_bytes", 0) for e in tl.get("events", [])), default=None)
    peaks = [d["resident_peak_bytes"] for d in r.get("devices", []) if "resident_peak_bytes" in d]
    if peaks:  # counted at every change, not only at the timeline's moves
        held = max(peaks)
    names = [ph["name"] for ph in r.get("phases", [])]
    forwards = [sp["start_ns"] for sp in tl.get("spans", [])
                if sp["phase"] < len(names) and names[sp["phase"]] == "forward"]
    t0 = forwards[run["warmup"]] if len(forwards) > run["warmup"] else None
    out = {"held_peak_bytes": held, "runtime_ns": r["totals"].get("runtime_ns"),
           "reclaim_ns": r["totals"].get("reclaim_ns"),
           "evictions": sum(c.get("evictions", 0) for c in r["classes"])}
    if t0 is not None:
        window = [e for e in tl.get("events", []) if e["t_ns"] >= t0]
        out["runtime_h2d_bytes_per_step"] = sum(e["bytes"] for e in window if e["kind"] == "prefetch_gpu") / steps
        out["runtime_d2h_bytes_per_step"] = (
            sum(e["bytes"] for e in window if e["kind"] in ("evict", "prefetch_host")) / steps
            + sum(c.get("reclaim_bytes", 0) for c in r["classes"]) / len(run["losses"]))
    host = sum(c.get("peak_bytes", 0) for c in r["classes"]
               if str(c.get("policy", {}).get("place", "")).startswith("host"))
    weights = next((c for c in r["classes"] if c.get("name") == "weights"), None)
    evicted = 0
    if weights:  # evicted and not brought back (prefetches beyond the first placement)
        back = max(0, weights.get("prefetch_bytes", 0) - weights.get("peak_bytes", 0))
        evicted = max(0, weights.get("evict_bytes", 0) - back)
    out["zero_copy_h2d_bytes_per_step"] = host + 3 * evicted
    out["zero_copy_d2h_bytes_per_step"] = host + evicted
    out["host_class_bytes"], out["evicted_weight_bytes"] = host, evicted
    return out


def cupti_of(row):
    """Bytes migrated each way per timed step by CUPTI's counts, from a profiled run's report."""
    if not row or not row.get("run") or not row.get("report"):
        return None
    path = os.path.join(row["dir"], row["report"])
    if not os.path.exists(path):
        return None
    r = json.load(open(path))
    um = [c.get("um") or {} for c in r["classes"]] + [r.get("profile", {}).get("unattributed") or {}]
    steps = len(row["run"]["losses"]) - row["run"]["warmup"]
    return {"h2d": sum(u.get("htod_bytes", 0) for u in um) / steps,
            "d2h": sum(u.get("dtoh_bytes", 0) for u in um) / steps,
            "profiled_ms": row["run"]["median_step_ms"]}


def profiled_for(runs, policy, policies_here):
    """Of the profiled RUNS at one budget, the one under POLICY; where none
    names it, the only one, if only one policy ran at the budget (a drafted
    policy's path differs between the profiled call and the other)."""
    same = [r for r in runs if r.get("policy") == policy]
    return same[0] if same else (runs[0] if len(runs) == 1 and policies_here == 1 else None)


ALTERNATIVE_KEYS = ("policy", "umpol_ms", "card_peak_bytes", "umpol_over_best", "bound_ms",
                    "umpol_over_bound", "umpol_over_bound_two_way", "failed")


def keep_fastest(cells):
    """One cell per model and budget: where several policies ran at one
    budget (grid.py drive's 'A|B'), the fastest stands for it, as the policy a
    user would keep, and the others go with it under "alternatives"."""
    groups = {}
    for c in cells:
        groups.setdefault((c["model_layers"], c["budget_bytes"]), []).append(c)
    kept = []
    for group in groups.values():
        ran = [c for c in group if c.get("umpol_ms") is not None]
        best = min(ran, key=lambda c: c["umpol_ms"]) if ran else group[0]
        others = [c for c in group if c is not best]
        if others:
            best = dict(best, alternatives=[{k: c[k] for k in ALTERNATIVE_KEYS if k in c} for c in others])
            # A policy that moves more bytes raises its own bound: the kept run
            # measured also against the bound of the policy that moved fewest.
            fewest = min((c["bound_ms"] for c in ran if c.get("bound_ms")), default=None)
            if fewest and best.get("umpol_ms") is not None:
                best["bound_fewest_bytes_ms"] = fewest
                best["umpol_over_bound_fewest_bytes"] = round(best["umpol_ms"] / fewest, 3)
        kept.append(best)
    return kept


def sci(x):
    return "" if x is None else f"{x:.2e}"


def gib(b):
    return "" if b is None else f"{b / 2**30:.2f}"


def payload(counted_in, counted_out, bw):
    """The bytes of data that crossed the link each way, from NVML's counts
    (COUNTED_IN host->GPU, COUNTED_OUT GPU->host) and the pinned copies' call
    BW: each direction's count per byte copied that way (c_h2d, c_d2h) and,
    where the call recorded it, what the other direction counted meanwhile
    (r_h2d: GPU->host counts per byte of a host->GPU copy, its read requests;
    r_d2h: host->GPU counts per byte of a GPU->host copy). Those give two
    equations, in = c_h2d*H + r_d2h*D and out = c_d2h*D + r_h2d*H, solved
    for H and D. Returns (H, D, source)."""
    c_h2d, c_d2h = bw["nvml_counted_per_byte_h2d"], bw["nvml_counted_per_byte_d2h"]
    r_h2d, r_d2h = bw.get("nvml_reverse_per_byte_h2d"), bw.get("nvml_reverse_per_byte_d2h")
    if r_h2d is None or r_d2h is None:
        return counted_in / c_h2d, counted_out / c_d2h, "NVML's PCIe counters, scaled by a pinned copy's"
    h2d = max(0.0, (counted_in - r_d2h * counted_out / c_d2h) / (c_h2d - r_d2h * r_h2d / c_d2h))
    d2h = max(0.0, (counted_out - r_h2d * h2d) / c_d2h)
    return h2d, d2h, ("NVML's PCIe counters, scaled by a pinned copy's, less what each "
                      "direction's copies counted in the other (read requests)")


def both_ways_ms(h2d, d2h, bw):
    """The least time H2D bytes in and D2H out take over the link of BW (a
    call's pinned copies): what both directions share at the rate measured
    both ways at once, the rest at its own one-way rate."""
    shared = min(h2d, d2h) if bw.get("both_ways_gbps_each") else 0
    return (shared / (bw["both_ways_gbps_each"] * 1e6) if shared else 0.0) \
        + (h2d - shared) / (bw["h2d_gbps"] * 1e6) + (d2h - shared) / (bw["d2h_gbps"] * 1e6)


def phase_bound(copies, h2d, d2h, ckpt, bw, steps=50):
    """The bound by part of the step (ms), or None without the figures: each
    part takes at least its compute (checkpointing alone's forward; its
    backward and optimizer step, which the step in backward runs inside
    backward) and at least the time its own bytes take over the link both
    ways at once (both_ways_ms). COPIES are the package's copies a step by
    part (grid.py's package_copies), which stay in their part; the rest of
    what crossed the link each way (H2D, D2H less the copies: reads and
    writes where the memory lies, the runtime's moves) may have crossed in
    either, and goes where it costs least (searched in STEPS shares each
    way), so that this stays a lower bound wherever those bytes crossed.
    Returns (step, forward, backward) of the best split, or None."""
    parts = (ckpt or {}).get("gpu_part_ms") or {}
    if not copies or "forward" not in parts or "backward" not in parts:
        return None
    f_in, f_out = copies["forward_h2d_bytes"], copies["forward_d2h_bytes"]
    b_in, b_out = copies["backward_h2d_bytes"], copies["backward_d2h_bytes"]
    r_in, r_out = max(0.0, h2d - f_in - b_in), max(0.0, d2h - f_out - b_out)
    c_forward = parts["forward"]
    c_backward = parts["backward"] + parts.get("optimizer", 0.0)
    best = None
    for i in range(steps + 1):
        for j in range(steps + 1):
            x_in, x_out = r_in * i / steps, r_out * j / steps  # of the rest, in forward
            forward = max(c_forward, both_ways_ms(f_in + x_in, f_out + x_out, bw))
            backward = max(c_backward, both_ways_ms(b_in + r_in - x_in, b_out + r_out - x_out, bw))
            if best is None or forward + backward < best[0]:
                best = (forward + backward, forward, backward)
    return best


def by_part_detail(parts, gpu):
    """', forward F against umpol's G GPU ms, backward ...' from the best
    split's PARTS (forward, backward ms) and umpol's GPU time by part (GPU:
    grid.py's gpu_part_ms, the optimizer's inside backward with the step in
    backward); empty without either."""
    if not parts or not gpu or "forward" not in gpu or "backward" not in gpu:
        return ""
    backward = gpu["backward"] + gpu.get("optimizer", 0.0)
    return (f"; forward {parts[0]:.1f} against umpol's {gpu['forward']:.1f} GPU ms, "
            f"backward {parts[1]:.1f} against {backward:.1f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    if len(sys.argv) < 5:
        sys.exit("usage: grid_summary.py DEVICE COMMIT KEYS_JSON DIR [DIR...] (--help says more)")
    device, commit, keys_path, dirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    cells, bw = load_cells(dirs)
    out = {"grid.device": device, "grid.commit": commit}
    if bw:
        out["grid.pinned_h2d_gbps"] = round(bw["h2d_gbps"], 2)
        out["grid.pinned_d2h_gbps"] = round(bw["d2h_gbps"], 2)
        out["grid.pinned_both_ways_gbps_each"] = round(bw["both_ways_gbps_each"], 2)
    # NVML's PCIe byte counters stand only where they counted a pinned copy as about its size.
    nvml_valid = bool(bw) and all(0.8 <= (bw.get(k) or 0) <= 1.6
                                  for k in ("nvml_counted_per_byte_h2d", "nvml_counted_per_byte_d2h"))
    out["grid.nvml_link_counters_valid"] = nvml_valid
    models = sorted({k[0] for k in cells})
    grid_cells, anchors_out = [], {}
    lines = []
    for layers in models:
        rows = {tag: r for (l, tag), r in cells.items() if l == layers and not tag.startswith("umpol-profiled-")}
        profiled = {}  # per budget, the profiled runs (one per policy run there)
        for (l, tag), r in cells.items():
            if l == layers and tag.startswith("umpol-profiled-"):
                profiled.setdefault(r["budget_bytes"], []).append(r)
        # Budgets run under more than one policy (grid.py drive's 'A|B'): their rows name it.
        per_budget = {}
        for tag, r in rows.items():
            if tag.startswith("umpol-"):
                per_budget[r["budget_bytes"]] = per_budget.get(r["budget_bytes"], 0) + 1
        ckpt = (rows.get("ckpt") or {}).get("run")
        base = ckpt["losses"] if ckpt else None
        params = next((r["run"]["params"] for r in rows.values() if r.get("run")), None)

        def loss_diff(run):
            if not base:
                return None
            return max(abs(a - b) for a, b in zip(base, run["losses"]))

        lines.append(f"\n### {layers} layers, {params / 1e9:.2f}B parameters\n" if params else f"\n### {layers} layers\n")
        mbw = next((r["bw"] for r in rows.values() if r.get("bw")), None)
        if mbw and mbw is not bw:
            lines.append(f"(pinned cudaMemcpy in this model's own call, which its bounds use: host->GPU "
                         f"{mbw['h2d_gbps']:.1f} GB/s, GPU->host {mbw['d2h_gbps']:.1f} GB/s)\n")
        off = sorted(tag for tag, r in rows.items() if (r.get("run") or {}).get("autocast_cache") is False)
        if off:  # the job itself changed (grid.py's GRID_AUTOCAST_CACHE=0): said, for every run it touched
            lines.append("(autocast keeps no casts of the weights in "
                         + ("every run" if len(off) == sum(1 for r in rows.values() if r.get("run"))
                            else "these runs: " + ", ".join(off)) + ")\n")
        lines.append("| run | ms/step (median) | GPU memory, tool's own (GiB) | card, cudaMemGetInfo (GiB) | "
                     "card, NVML outside (GiB) | link in / out per step (GiB; anchors: NVML's counters where valid) | max \\|loss diff\\| vs ckpt | status |")
        lines.append("|---|---|---|---|---|---|---|---|")
        anchors = {}
        for tag, row in rows.items():
            if tag.startswith("umpol-"):
                continue
            run = row.get("run")
            if not run:
                why = row.get("skipped") or f"exit {row.get('rc')}: " + " ".join(
                    (row.get("error_tail") or "").strip().splitlines()[-1:])[:200]
                lines.append(f"| {tag} | failed | | | | | | {why.replace('|', '/')} |")
                anchors_out[f"L{layers}.{tag}"] = {"failed": why}
                continue
            link = (run.get("link") or {}) if nvml_valid else {}
            anchors[tag] = run
            anchors_out[f"L{layers}.{tag}"] = {
                "ms": round(run["median_step_ms"], 1), "card_peak_bytes": run["card_peak_bytes"],
                "nvml_peak_bytes": row.get("nvml_peak_bytes"), "max_allocated_bytes": run["max_allocated_bytes"],
                "max_loss_diff": loss_diff(run)}
            lines.append(f"| {tag} | {run['median_step_ms']:.1f} | {gib(run['max_allocated_bytes'])} (max allocated) | "
                         f"{gib(run['card_peak_bytes'])} | {gib(row.get('nvml_peak_bytes'))} | "
                         f"{gib(link.get('h2d_bytes_per_step'))} / {gib(link.get('d2h_bytes_per_step'))} | "
                         f"{sci(loss_diff(run))} | ok |")
        for tag, row in sorted(rows.items(), key=lambda kv: -(kv[1].get("budget_bytes") or 0)):
            if not tag.startswith("umpol-"):
                continue
            run = row.get("run")
            budget = row["budget_bytes"]
            cell = {"model_layers": layers, "params": params, "policy": row.get("policy"), "budget_bytes": budget}
            # The policy's name, with the variables it ran under (grid.py's "P+VAR=V").
            source, *env = (row.get("policy") or "").split("+")
            label = f"umpol, budget {gib(budget)}" + (
                f" ({os.path.splitext(os.path.basename(source))[0]}{''.join(' ' + v for v in env)})"
                if per_budget[budget] > 1 or env else "")
            if not run:
                why = row.get("skipped") or f"exit {row.get('rc')}: " + " ".join(
                    (row.get("error_tail") or "").strip().splitlines()[-1:])[:200]
                cell["failed"] = why
                grid_cells.append(cell)
                lines.append(f"| {label} | failed | | | | | | {why.replace('|', '/')} |")
                continue
            rep = report_of(row) or {}
            ms = run["median_step_ms"]
            fits = {t: a for t, a in anchors.items() if a["card_peak_bytes"] <= budget * 1.02}
            best = min(fits.items(), key=lambda kv: kv[1]["median_step_ms"]) if fits else None
            # The same, by what the card saw umpol use rather than its budget.
            card_fits = {t: a for t, a in anchors.items() if a["card_peak_bytes"] <= run["card_peak_bytes"] * 1.02}
            card_best = min(card_fits.items(), key=lambda kv: kv[1]["median_step_ms"]) if card_fits else None
            # Bytes over the link per timed step: migrations (CUPTI's where a
            # profiled run of the same budget exists) plus modelled zero-copy.
            prof = cupti_of(profiled_for(profiled.get(budget, []), row.get("policy"), per_budget[budget]))
            h2d = d2h = None
            cbw = row["bw"]  # the pinned copies of this run's own call
            measured = run.get("link") if nvml_valid else None
            if measured:  # what crossed the link, counted by the card
                mig_h2d = mig_d2h = None
                h2d, d2h, source = payload(measured["h2d_bytes_per_step"], measured["d2h_bytes_per_step"], cbw)
            elif prof:
                mig_h2d, mig_d2h, source = prof["h2d"], prof["d2h"], "CUPTI (profiled run, timed steps)"
            else:
                mig_h2d, mig_d2h = rep.get("runtime_h2d_bytes_per_step"), rep.get("runtime_d2h_bytes_per_step")
                source = "runtime's counts"
            if mig_h2d is not None and rep:
                source += ", + modelled zero-copy"
                h2d = mig_h2d + rep["zero_copy_h2d_bytes_per_step"]
                d2h = mig_d2h + rep["zero_copy_d2h_bytes_per_step"]
            bound = gh = in_order = two_way = phase = phase_parts = None
            if h2d is not None and cbw and ckpt:
                compute = ckpt["median_step_ms"]
                link_ms = max(h2d / (cbw["h2d_gbps"] * 1e6), d2h / (cbw["d2h_gbps"] * 1e6))
                bound = max(compute, link_ms)
                if cbw.get("both_ways_gbps_each"):
                    two_way = max(compute, both_ways_ms(h2d, d2h, cbw))
                gh = max(compute, max(h2d, d2h) / GH200_BPS * 1e3)
                if measured:  # the package's copies are among what NVML counted
                    split = phase_bound(run.get("package_copies"), h2d, d2h, ckpt, cbw)
                    if split is not None:
                        phase, phase_parts = split[0], split[1:]
                        if two_way is not None:  # both are floors
                            phase = max(phase, two_way)
                if params:
                    in_step = max(0, OPTIMIZER_BYTES_PER_PARAM * params - run["card_peak_bytes"])
                    in_order = max(bound, compute + in_step / (cbw["h2d_gbps"] * 1e6))
            cell.update({
                "umpol_ms": round(ms, 1), "card_peak_bytes": run["card_peak_bytes"],
                "nvml_peak_bytes": row.get("nvml_peak_bytes"), "held_peak_bytes": rep.get("held_peak_bytes"),
                "best_anchor": None if not best else {"name": best[0], "ms": round(best[1]["median_step_ms"], 1),
                                                      "card_peak_bytes": best[1]["card_peak_bytes"]},
                "umpol_over_best": None if not best else round(best[1]["median_step_ms"] / ms, 3),
                "best_anchor_at_card_memory": None if not card_best else {
                    "name": card_best[0], "ms": round(card_best[1]["median_step_ms"], 1),
                    "card_peak_bytes": card_best[1]["card_peak_bytes"]},
                "umpol_over_best_at_card_memory": None if not card_best
                else round(card_best[1]["median_step_ms"] / ms, 3),
                "states_fit": params is not None and budget >= 8 * params,
                "link_h2d_bytes_per_step": h2d, "link_d2h_bytes_per_step": d2h,
                "migrated_h2d_bytes_per_step": mig_h2d, "migrated_d2h_bytes_per_step": mig_d2h,
                "link_bytes_source": source,
                "zero_copy_h2d_bytes_per_step": rep.get("zero_copy_h2d_bytes_per_step"),
                "zero_copy_d2h_bytes_per_step": rep.get("zero_copy_d2h_bytes_per_step"),
                "runtime_h2d_bytes_per_step": rep.get("runtime_h2d_bytes_per_step"),
                "runtime_d2h_bytes_per_step": rep.get("runtime_d2h_bytes_per_step"),
                "runtime_ms_per_step": None if rep.get("runtime_ns") is None
                else round(rep["runtime_ns"] / 1e6 / len(run["losses"]), 1),
                "nvml_link": run.get("link") if nvml_valid else None,
                "bound_ms": None if bound is None else round(bound, 1),
                "umpol_over_bound": None if bound is None else round(ms / bound, 3),
                "bound_two_way_ms": None if two_way is None else round(two_way, 1),
                "umpol_over_bound_two_way": None if two_way is None else round(ms / two_way, 3),
                "gh200_projection_ms": None if gh is None else round(gh, 1),
                "bound_in_order_ms": None if in_order is None else round(in_order, 1),
                "umpol_over_bound_in_order": None if in_order is None else round(ms / in_order, 3),
                "max_loss_diff": loss_diff(run)})
            if run.get("package_copies"):  # grids since the package counted its copies by part
                cell.update({"package_copies": run["package_copies"],
                             "bound_by_part_ms": None if phase is None else round(phase, 1),
                             "umpol_over_bound_by_part": None if phase is None else round(ms / phase, 3),
                             "bound_by_part_forward_ms": None if phase_parts is None
                             else round(phase_parts[0], 1),
                             "bound_by_part_backward_ms": None if phase_parts is None
                             else round(phase_parts[1], 1)})
            paced = thread_paced(run)
            if run.get("thread_part_ms") is not None:
                cell["paced_by_thread"] = [part for part, _, _ in paced]
            grid_cells.append(cell)
            lines.append(
                f"| {label} | {ms:.1f} | {gib(rep.get('held_peak_bytes'))} (held, its count) | "
                f"{gib(run['card_peak_bytes'])} | {gib(row.get('nvml_peak_bytes'))} | {gib(h2d)} / {gib(d2h)} ({source}) | "
                f"{sci(loss_diff(run))} | best anchor within the budget: "
                + (f"{best[0]} {best[1]['median_step_ms']:.1f} ms at {gib(best[1]['card_peak_bytes'])} GiB, "
                   f"umpol x{cell['umpol_over_best']:.2f}" if best else "none")
                + (f"; at the card's {gib(run['card_peak_bytes'])} GiB: {card_best[0]}, umpol "
                   f"x{cell['umpol_over_best_at_card_memory']:.2f}" if card_best else "")
                + (f"; bound {bound:.1f} ms (umpol / bound {ms / bound:.2f})" if bound else "")
                + (f", both ways at once {two_way:.1f} ms (umpol / it {ms / two_way:.2f})" if two_way else "")
                + (f"; by part of the step {phase:.1f} ms (umpol / it {ms / phase:.2f}"
                   + by_part_detail(phase_parts, run.get("gpu_part_ms")) + ")" if phase else "")
                + (f"; GH200 projection {gh:.1f} ms" if gh else "")
                + (f"; in the job's order {in_order:.1f} ms (umpol / it {ms / in_order:.2f})" if in_order else "")
                + ("; at the job's thread's pace: " + ", ".join(
                    f"{part} ({t:.1f} ms of thread for {g:.1f} on the GPU)" for part, t, g in paced)
                   if paced else "")
                + " |")
    def pick(cs, key="umpol_over_best"):
        vals = [c[key] for c in cs if c.get(key) is not None]
        return min(vals) if vals else None
    grid_cells = keep_fastest(grid_cells)
    out["grid.cells"] = grid_cells
    out["grid.anchors"] = anchors_out
    out["grid.min_umpol_over_best"] = pick(grid_cells)
    out["grid.min_umpol_over_best_where_states_fit"] = pick([c for c in grid_cells if c.get("states_fit")])
    out["grid.min_umpol_over_best_at_card_memory"] = pick(grid_cells, "umpol_over_best_at_card_memory")
    bounds = [c["umpol_over_bound"] for c in grid_cells if c.get("umpol_over_bound") is not None]
    out["grid.max_umpol_over_bound"] = max(bounds) if bounds else None
    two = [c["umpol_over_bound_two_way"] for c in grid_cells if c.get("umpol_over_bound_two_way") is not None]
    out["grid.max_umpol_over_bound_two_way"] = max(two) if two else None
    by_part = [c["umpol_over_bound_by_part"] for c in grid_cells if c.get("umpol_over_bound_by_part") is not None]
    if by_part:
        out["grid.max_umpol_over_bound_by_part"] = max(by_part)
    ordered = [c["umpol_over_bound_in_order"] for c in grid_cells if c.get("umpol_over_bound_in_order") is not None]
    out["grid.max_umpol_over_bound_in_order"] = max(ordered) if ordered else None
    if any("umpol_over_bound_fewest_bytes" in c for c in grid_cells):
        out["grid.max_umpol_over_bound_fewest_bytes"] = max(
            c.get("umpol_over_bound_fewest_bytes", c["umpol_over_bound"]) for c in grid_cells
            if c.get("umpol_over_bound") is not None)
    if any("paced_by_thread" in c for c in grid_cells):  # the cells a busy host can slow
        out["grid.cells_paced_by_thread"] = [
            {"model_layers": c["model_layers"], "budget_bytes": c["budget_bytes"], "parts": c["paced_by_thread"]}
            for c in grid_cells if c.get("paced_by_thread")]
    # The least umpol / bound any placement could reach in a cell: its in-order bound over its bound.
    floors = [c["bound_in_order_ms"] / c["bound_ms"] for c in grid_cells if c.get("bound_in_order_ms")]
    out["grid.max_bound_in_order_over_bound"] = round(max(floors), 3) if floors else None
    print(f"device: {device}; commit {commit}")
    if bw:
        print(f"\npinned cudaMemcpy ({bw['bytes'] >> 30} GiB, median of 5): host->GPU {bw['h2d_gbps']:.1f} GB/s, "
              f"GPU->host {bw['d2h_gbps']:.1f} GB/s, both at once {bw['both_ways_gbps_each']:.1f} GB/s each; "
              + (f"NVML's PCIe counters counted {bw['nvml_counted_per_byte_h2d']:.3f} / "
                 f"{bw['nvml_counted_per_byte_d2h']:.3f} bytes per byte copied"
                 + (f" ({bw['nvml_reverse_per_byte_h2d']:.3f} / {bw['nvml_reverse_per_byte_d2h']:.3f} "
                    "in the other direction)" if bw.get("nvml_reverse_per_byte_h2d") is not None else "")
                 if nvml_valid else
                 "NVML's PCIe counters not used (they did not count a pinned copy as about its size)"))
    print("\n".join(lines))
    print(f"\ngrid.min_umpol_over_best {out['grid.min_umpol_over_best']} (goal >= 1.0); "
          f"where the states fit {out['grid.min_umpol_over_best_where_states_fit']} (goal >= 1.5); "
          f"grid.max_umpol_over_bound {out['grid.max_umpol_over_bound']} (goal <= 1.25; no placement that steps after "
          f"backward can go below {out['grid.max_bound_in_order_over_bound']}, where it is "
          f"{out['grid.max_umpol_over_bound_in_order']}; by the link both ways at once "
          f"{out['grid.max_umpol_over_bound_two_way']}"
          + (f"; by part of the step {out['grid.max_umpol_over_bound_by_part']}"
             if "grid.max_umpol_over_bound_by_part" in out else "")
          + (f"; by the bound of the policy that moved fewest bytes where several ran "
             f"{out['grid.max_umpol_over_bound_fewest_bytes']}" if "grid.max_umpol_over_bound_fewest_bytes" in out else "")
          + "); "
          f"by the card's memory instead of the budget {out['grid.min_umpol_over_best_at_card_memory']}")
    json.dump(out, open(keys_path, "w"), indent=1)


if __name__ == "__main__":
    main()
