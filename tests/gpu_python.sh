#!/bin/sh
# GPU tests of the umpol Python package, skipped (exit 77) without a GPU or
# PyTorch:
#   - each automatic phase rule (tests/gpu/python_phases.py, one class per phase)
#   - `match saved`: saved activations move to their class, weights and
#     temporaries stay, gradients are right (tests/gpu/python_saved.py)
#   - a training step captured in a CUDA graph with the optimizer's state in
#     movable memory: it trains, and nothing moved during the capture
#     (tests/gpu/python_graph.py)
#   - an unmodified transformers training loop under `umpol run` gets the same
#     per-class allocation counts and bytes, within 1%, as the same loop with
#     NVTX ranges added by hand (zero_code.unmodified_matches_annotated)
#   - an unmodified transformers Trainer (gradient accumulation): every class
#     of the fine-tune policy gets allocations, every optimizer step is seen
#   - the optimizer's step in backward (UMPOL_STEP_IN_BACKWARD=1, or the
#     policy's `update in backward;`, tests/gpu/python_step_in_backward.py):
#     the same weights bit for bit as stepping after backward, the gradients
#     gone after backward, off when the job clips or accumulates; with the
#     state in host memory, staged through a ring small enough to wrap, the
#     same weights again; with the weights on the host too, updated on
#     copies the lane makes, the same weights and state bit for bit as
#     stepping after backward; the state
#     on the host traded to the parameters updated first: the same weights
#     and state bit for bit, for three optimizers (tests/gpu/python_state_trade.py)
#   - saved activations in host memory until backward (UMPOL_SAVED_TO_HOST=1,
#     tests/gpu/python_saved_to_host.py): the same weights and losses bit for
#     bit, with reentrant and non-reentrant checkpointing and with the step in
#     backward; every tensor that left came back ahead of its read
#   - the step's plan (auto-offload.umpol: optimizer-offload.umpol with
#     `learn step "forward";`, tests/gpu/python_step_plan.py): the same weights
#     and losses bit for bit as without it, the plan serving blocks and not
#     given up
# With PYTHON_GPU_OUT set, the reports and figures are kept there. With
# GPU_PYTHON_ONLY set to some of phases saved graph sib ahead saved-to-host
# plan zero-code (space-separated), only those parts run (a part of the
# device's time: `GPU_PYTHON_ONLY="sib ahead" sh tests/gpu_python.sh`).
. "${top_srcdir:-.}/tests/lib.sh"
[ -f "$top_builddir/.libs/libumpol.so" ] || { echo "SKIP: libumpol.so not built"; exit 77; }
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: no GPU or no PyTorch"; exit 77; }
out=${PYTHON_GPU_OUT:-$tmp}
mkdir -p "$out"
# only PART: whether PART is one of GPU_PYTHON_ONLY's words (all where it has none).
set -f  # the words are names, never patterns
parts=$(echo ${GPU_PYTHON_ONLY:-})
for part in $parts; do
    case $part in phases | saved | graph | sib | ahead | saved-to-host | plan | zero-code) ;;
    *) echo "gpu_python.sh: GPU_PYTHON_ONLY: no part $part" >&2; exit 2 ;; esac
done
set +f
only() {
    [ -z "$parts" ] && return 0
    case " $parts " in *" $1 "*) return 0 ;; esac
    return 1
}
# on_and_off NAME VARIABLE POLICY SCRIPT MODE...: SCRIPT MODE OUT.json under
# POLICY with VARIABLE=0 and =1, for each MODE (sib, sibnr: with the step in
# backward too); its output in $out/NAME-MODE-ON.json and .log.
on_and_off() {
    oo_name=$1 oo_variable=$2 oo_policy=$3 oo_script=$4
    shift 4
    for m in "$@"; do
        for on in 0 1; do
            expect_status 0 "$oo_name ($m, $on)" env "$oo_variable=$on" \
                UMPOL_STEP_IN_BACKWARD=$(case $m in sib*) echo 1 ;; *) echo 0 ;; esac) \
                "$UMPOL_BIN" run -p "$oo_policy" -- python3 "$oo_script" "$m" "$out/$oo_name-$m-$on.json"
            cp "$tmp/out" "$out/$oo_name-$m-$on.log"
            cat "$tmp/out"
        done
    done
}

if only phases; then
expect_status 0 "automatic phase rules" "$UMPOL_BIN" run -p "$top_srcdir/tests/gpu/phases.umpol" \
    -r "$out/phases-report.json" -- python3 "$top_srcdir/tests/gpu/python_phases.py" "$out/phases.json"
cat "$tmp/out"
fi  # phases

if only saved; then
expect_status 0 "match saved" "$UMPOL_BIN" run -p "$top_srcdir/tests/gpu/saved.umpol" \
    -r "$out/saved-report.json" -- python3 "$top_srcdir/tests/gpu/python_saved.py" "$out/saved.json"
cat "$tmp/out"
python3 -c 'import json, sys; c = {k["name"]: k for k in json.load(open(sys.argv[1]))["classes"]}; sys.exit(0 if c["saved_acts"]["reclassified"] > 0 and c["init"]["reclassified"] == 0 else 1)' \
    "$out/saved-report.json" && pass || fail "the report counts the blocks moved to saved_acts"
fi  # saved

if only graph; then
# A step captured in a CUDA graph, the optimizer's state in movable memory: the
# capture succeeds and trains, the rules that fired during it moved nothing.
expect_status 0 "a CUDA graph over movable memory" "$UMPOL_BIN" run -p "$top_srcdir/tests/gpu/graph.umpol" \
    -r "$out/graph-report.json" -- python3 "$top_srcdir/tests/gpu/python_graph.py" "$out/graph.json"
cat "$tmp/out"
python3 - "$out/graph-report.json" <<'PY' && pass || fail "movable memory in a captured step"
import json, sys
c = {k["name"]: k for k in json.load(open(sys.argv[1]))["classes"]}
m = c["state"]["movable"]
print("state:", m)
assert c["state"]["allocations"] > 0 and m["to_host_bytes"] > 0 and m["to_gpu_bytes"] > 0, m
assert m["skipped_in_capture"] > 0, m
PY
fi  # graph

if only sib; then
# The optimizer's step in backward: the same weights bit for bit as stepping
# after backward, every gradient gone when backward() returns, and off (said
# on stderr) when the job clips or accumulates, with the optimizer's own count
# of steps kept.
sib="$top_srcdir/tests/gpu/python_step_in_backward.py"
policy="$top_srcdir/policies/stream-offload.umpol"
for m in plain clip accumulate; do
    for on in 0 1; do
        expect_status 0 "step in backward ($m, $on)" env UMPOL_STEP_IN_BACKWARD=$on \
            "$UMPOL_BIN" run -p "$policy" -- python3 "$sib" $m "$out/sib-$m-$on.json"
        cp "$tmp/out" "$out/sib-$m-$on.log"
        cat "$tmp/out"
    done
done
# The policy's `update in backward;` (umpol(5)) turns it on with the variable unset.
sed 's/^umpol 1;$/umpol 1;\nupdate in backward;/' "$policy" >"$tmp/update.umpol"
expect_status 0 "step in backward (plain, the policy's)" env -u UMPOL_STEP_IN_BACKWARD \
    "$UMPOL_BIN" run -p "$tmp/update.umpol" -- python3 "$sib" plain "$out/sib-plain-policy.json"
cp "$tmp/out" "$out/sib-plain-policy.log"
cat "$tmp/out"
for m in host hostw; do
    case $m in host) hpolicy=sib-host.umpol ;; *) hpolicy=sib-host-weights.umpol ;; esac
    for on in 0 1; do
        expect_status 0 "step in backward ($m, $on)" env UMPOL_STEP_IN_BACKWARD=$on \
            "$UMPOL_BIN" run -p "$top_srcdir/tests/gpu/$hpolicy" -- python3 "$sib" $m \
            "$out/sib-$m-$on.json"
        cp "$tmp/out" "$out/sib-$m-$on.log"
        cat "$tmp/out"
    done
done
# The state on the host traded to the parameters updated first: the same
# weights and state bit for bit as without the trade and without umpol, for
# real torch optimizers (tests/gpu/python_state_trade.py).
trade_ok=1
for optimizer in '["AdamW", {"fused": true}]' '["Adam", {"foreach": true, "amsgrad": true}]' \
        '["SGD", {"lr": 0.01, "momentum": 0.9}]'; do
    for m in ref notrade trade; do
        env PYTHONPATH="$top_srcdir/python" python3 "$top_srcdir/tests/gpu/python_state_trade.py" \
            "$optimizer" $m > "$tmp/trade-$m.json" 2> "$tmp/trade-$m.err" || trade_ok=0
        cat "$tmp/trade-$m.json"
    done
    python3 - "$tmp" <<'PY' || trade_ok=0
import json, sys
r = {m: json.load(open(f"{sys.argv[1]}/trade-{m}.json")) for m in ("ref", "notrade", "trade")}
sys.exit(0 if len({x["digest"] for x in r.values()}) == 1 and r["trade"]["traded"]
         and not r["notrade"]["traded"] else 1)
PY
done
[ $trade_ok = 1 ] && pass || fail "the state traded to the parameters updated first"
python3 - "$out" <<'PY' && pass || fail "the step in backward"
import json, sys
r = {f"{m}-{on}": json.load(open(f"{sys.argv[1]}/sib-{m}-{on}.json"))
     for m in ("plain", "clip", "accumulate", "host") for on in (0, 1)}
log = {k: open(f"{sys.argv[1]}/sib-{k}.log").read() for k in r}
assert r["plain-1"]["digest"] == r["plain-0"]["digest"], "different weights"
assert r["plain-1"]["losses"] == r["plain-0"]["losses"]
assert all(r["plain-1"]["grads_gone"]) and not any(r["plain-0"]["grads_gone"])
assert "step in backward: on" in log["plain-1"] and "step in backward" not in log["plain-0"]
assert "off: the job called torch.nn.utils.clip_grad_norm_" in log["clip-1"], log["clip-1"]
assert r["clip-1"]["grads_gone"] == [True] * 4 + [False] * 2
assert "off: a second backward pass ran" in log["accumulate-1"], log["accumulate-1"]
# Each parameter's own count of updates: one a step, and at the accumulated
# step, as said on stderr, the first pass's update and then the second's.
steps = {k: r[k]["steps"] for k in r}
assert steps == dict({k: 6 for k in r}, **{"accumulate-1": 7}), steps
# The job's own steps, as umpol counts them: the updates are not steps.
assert all(r[k]["umpol_steps"] == 6 for k in r), {k: r[k]["umpol_steps"] for k in r}
# The state on the host, staged through a ring of the largest parameter's
# state (two 4 MiB moments and its step) and 1 MiB: the same weights.
assert r["host-1"]["ring_bytes"] == [2 * 4 * 1024 * 1024 + 512 + (1 << 20)], r["host-1"]["ring_bytes"]
assert r["host-0"]["ring_bytes"] == []
# Every update after the first step's was staged, those after the reload at
# step 3 too (the loaded state lies on the host), and the regions wrapped.
assert r["host-1"]["staged"] == 5 * 6 and r["host-1"]["wraps"] >= 5, (r["host-1"]["staged"], r["host-1"]["wraps"])
assert r["host-1"]["digest"] == r["host-0"]["digest"] == r["plain-0"]["digest"], "staged weights differ"
assert r["host-1"]["state_digest"] == r["host-0"]["state_digest"] == r["plain-0"]["state_digest"], \
    "staged optimizer state differs"
assert r["plain-1"]["state_digest"] == r["plain-0"]["state_digest"], "optimizer state differs"
# One call a parameter at the first step, which makes the state; then the
# whole model is one batch (under 64 MiB, one group): one call a pass where
# its state lies on the GPU; where it lies on the host, staged in parts of at
# most half the ring. A ring of all the state (stream-offload's: two 4 MiB
# weights' moments and the rest) makes three parts a pass; sib-host's
# smaller ring more, but fewer calls than parameters.
plain = r["plain-1"]
assert plain["calls"] == 6 + 5 * (3 if plain["staged"] else 1), (plain["calls"], plain["staged"])
# `spare` keeps on the GPU the state that fits beside the step's peak as the
# first pass makes it (since 18ecd03 a climb ends at a closed phase, so part
# of it may); the rest lies on the host, staged at every later pass: the same
# parameters each pass (10 of 30 on an H200 at db1da8e, all 30 before).
assert plain["staged"] % 5 == 0 and plain["staged"] <= 5 * 6, plain["staged"]
assert 6 + 5 * 3 < r["host-1"]["calls"] < 6 * 6, r["host-1"]["calls"]
assert r["host-1"]["losses"] == r["host-0"]["losses"]
print("step in backward: same weights (staged too), gradients gone, off when clipping or accumulating")
PY
python3 - "$out" <<'PY' && pass || fail "the step in backward turned on by the policy"
import json, sys
r = {k: json.load(open(f"{sys.argv[1]}/sib-{k}.json")) for k in ("plain-policy", "plain-0")}
log = open(f"{sys.argv[1]}/sib-plain-policy.log").read()
assert "step in backward: on" in log, log
assert all(r["plain-policy"]["grads_gone"]), r["plain-policy"]["grads_gone"]
assert r["plain-policy"]["digest"] == r["plain-0"]["digest"], "different weights"
assert r["plain-policy"]["losses"] == r["plain-0"]["losses"]
PY
# The weights on the host too: each update in backward after the first pass
# runs on a copy of its weight the lane made (the two 1024 x 1024 fp32 weights;
# the biases and the head's are under 1 MiB), and the weights and state come
# out the same bit for bit as stepping after backward with them on the GPU.
python3 - "$out" <<'PY' && pass || fail "the step in backward on weights on the host"
import json, sys
r = {k: json.load(open(f"{sys.argv[1]}/sib-{k}.json")) for k in ("hostw-0", "hostw-1", "plain-0")}
assert r["hostw-1"]["weights_in"] == 5 * 2 * 4 * 1024 * 1024, r["hostw-1"]["weights_in"]
assert r["hostw-0"]["weights_in"] == 0
assert r["hostw-1"]["digest"] == r["hostw-0"]["digest"] == r["plain-0"]["digest"], "weights differ"
assert r["hostw-1"]["state_digest"] == r["hostw-0"]["state_digest"] == r["plain-0"]["state_digest"]
assert r["hostw-1"]["losses"] == r["plain-0"]["losses"]
print("step in backward: weights on the host updated on copies, the same weights and state")
PY
fi  # sib

if only ahead; then
# Weights ahead: the forward pass's weights that lie on the host copied ahead
# of their layers, the same weights and losses bit for bit as reading them
# where they lie, with the step in backward or without; each weight's own
# storage back after every pass.
on_and_off ahead UMPOL_WEIGHTS_AHEAD "$top_srcdir/tests/gpu/weights-host.umpol" \
    "$top_srcdir/tests/gpu/python_weights_ahead.py" plain sib sibnr
python3 - "$out" <<'PY' && pass || fail "weights ahead"
import json, sys
r = {f"{m}-{on}": json.load(open(f"{sys.argv[1]}/ahead-{m}-{on}.json"))
     for m in ("plain", "sib", "sibnr") for on in (0, 1)}
for m in ("plain", "sib", "sibnr"):
    assert r[f"{m}-1"]["digest"] == r[f"{m}-0"]["digest"], f"{m}: different weights"
    assert r[f"{m}-1"]["losses"] == r[f"{m}-0"]["losses"], f"{m}: different losses"
    assert all(r[f"{m}-1"]["own_storage"]), f"{m}: a weight's storage was not put back"
    # Steps 1-5 copy the three 1024 x 1024 fp32 weights (the head's and the
    # biases are under 1 MiB); the first pass records, the eval pass reads.
    assert r[f"{m}-1"]["copied"] == 5 * 3 * 4 * 1024 * 1024, (m, r[f"{m}-1"]["copied"])
    assert r[f"{m}-0"]["copied"] == 0
# With the step in backward, each recomputation of the checkpointed block after
# the first (whose updates make the state, alone) copies its two 4 MiB weights,
# and their updates take the copies (the same weights bit for bit, above), with
# reentrant and non-reentrant checkpointing; without it, none.
for m in ("sib", "sibnr"):
    assert r[f"{m}-1"]["recompute_kept"] == 5 * 2 * 4 * 1024 * 1024, (m, r[f"{m}-1"])
    assert r[f"{m}-1"]["recompute_taken"] == r[f"{m}-1"]["recompute_kept"], (m, r[f"{m}-1"])
    assert r[f"{m}-0"]["recompute_kept"] == 0
assert r["plain-1"]["recompute_kept"] == 0
print("weights ahead: same weights and losses, 60 MiB copied ahead, 40 MiB of the "
      "recomputation's copies updated in backward (reentrant and not), storages put back")
PY
fi  # ahead

if only saved-to-host; then
# Saved activations in host memory until backward: the same weights and losses
# bit for bit as keeping them on the GPU, with reentrant and non-reentrant
# checkpointing and with the step in backward; every tensor that left came
# back ahead of its read.
on_and_off saved-to-host UMPOL_SAVED_TO_HOST "$top_srcdir/policies/optimizer-offload.umpol" \
    "$top_srcdir/tests/gpu/python_saved_to_host.py" plain reentrant sib
python3 - "$out" <<'PY' && pass || fail "saved to host"
import json, sys
r = {f"{m}-{on}": json.load(open(f"{sys.argv[1]}/saved-to-host-{m}-{on}.json"))
     for m in ("plain", "reentrant", "sib") for on in (0, 1)}
for m in ("plain", "reentrant", "sib"):
    on, off = r[f"{m}-1"], r[f"{m}-0"]
    assert on["digest"] == off["digest"], f"{m}: different weights"
    assert on["losses"] == off["losses"], f"{m}: different losses"
    # Six passes; in each, the layers' inputs but the newest two leave (16 MiB each).
    assert on["sent"] >= 6 * 4 * (16 << 20), (m, on["sent"])
    assert on["back"] == on["sent"] and on["late"] == 0, (m, on)
    assert off["sent"] == 0
print("saved to host: same weights and losses; every tensor sent came back ahead of its read")
PY
fi  # saved-to-host

if only plan; then
# The step's plan: auto-offload.umpol, which is optimizer-offload.umpol with
# `learn step "forward";` (tests/stock_policies.sh), gives the same weights
# and losses bit for bit as optimizer-offload.umpol, with the optimizer's
# step in backward and without; the plan served blocks of the activations'
# class and was not given up.
for sib in 0 1; do
    for p in optimizer-offload auto-offload; do
        expect_status 0 "step plan ($p, step in backward $sib)" env UMPOL_STEP_IN_BACKWARD=$sib \
            "$UMPOL_BIN" run -p "$top_srcdir/policies/$p.umpol" -r "$out/plan-$p-$sib-report.json" -- \
            python3 "$top_srcdir/tests/gpu/python_step_plan.py" "$out/plan-$p-$sib.json"
        cat "$tmp/out"
    done
done
python3 - "$out" <<'PY' && pass || fail "step plan"
import json, sys
out = sys.argv[1]
for sib in (0, 1):
    a, b = (json.load(open(f"{out}/plan-{p}-{sib}.json")) for p in ("optimizer-offload", "auto-offload"))
    assert a["digest"] == b["digest"], f"step in backward {sib}: different weights"
    assert a["losses"] == b["losses"], f"step in backward {sib}: different losses"
    r = json.load(open(f"{out}/plan-auto-offload-{sib}-report.json"))
    plan = next(c for c in r["classes"] if c["name"] == "activations")["plan"]
    assert plan["planned_allocations"] > 0 and not plan["given_up"], (sib, plan, r.get("step"))
    print(f"step plan, step in backward {sib}: same weights and losses; {plan}")
PY
fi  # plan

if only zero-code; then
if python3 -c 'import transformers' 2>/dev/null; then
    policy="$top_srcdir/policies/llm-finetune.umpol"
    expect_status 0 "unmodified transformers loop" "$UMPOL_BIN" run -p "$policy" \
        -r "$out/unmodified.json" -- python3 "$top_srcdir/tests/gpu/hf_train.py" \
        --json "$out/unmodified-run.json"
    cat "$tmp/out"
    expect_status 0 "annotated transformers loop" env UMPOL_PYTHON=0 "$UMPOL_BIN" run -p "$policy" \
        -r "$out/annotated.json" -- python3 "$top_srcdir/tests/gpu/hf_train.py" --annotate \
        --json "$out/annotated-run.json"
    cat "$tmp/out"
    python3 - "$out" <<'PY' || fail "unmodified and annotated runs differ"
import json, sys
out = sys.argv[1]
u, a = (json.load(open(f"{out}/{n}.json")) for n in ("unmodified", "annotated"))
ok = True
figures = {}
for cu, ca in zip(u["classes"], a["classes"]):
    assert cu["name"] == ca["name"]
    for key in ("allocations", "bytes_requested"):
        x, y = cu[key], ca[key]
        close = abs(x - y) <= 0.01 * max(x, y)
        ok &= close
        figures[f"zero_code.{cu['name']}.{key}.unmodified"] = x
        figures[f"zero_code.{cu['name']}.{key}.annotated"] = y
        print(f"{cu['name']:12s} {key:16s} unmodified {x:>12d}  annotated {y:>12d}  "
              f"{'ok' if close else 'DIFFERENT'}")
ok &= all(c["allocations"] > 0 for c in u["classes"] if c["name"] != "rest")
lu = json.load(open(f"{out}/unmodified-run.json"))["losses"]
la = json.load(open(f"{out}/annotated-run.json"))["losses"]
figures["zero_code.unmodified_matches_annotated"] = bool(ok)
figures["zero_code.loss_match"] = all(abs(x - y) < 1e-3 for x, y in zip(lu, la))
json.dump(figures, open(f"{out}/zero_code.json", "w"), indent=1)
print("zero_code.unmodified_matches_annotated", ok)
sys.exit(0 if ok else 1)
PY
    expect_status 0 "unmodified transformers Trainer" "$UMPOL_BIN" run -p "$policy" \
        -r "$out/trainer.json" -- python3 "$top_srcdir/tests/gpu/hf_trainer.py"
    cat "$tmp/out"
else
    echo "transformers not installed: the zero-code comparison is skipped"
fi
fi  # zero-code
finish
