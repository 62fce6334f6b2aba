#!/bin/sh
# `umpol suggest`: policies drafted from a recorded report against the expected
# ones (each must pass `umpol check` with no warning), a budget that cannot
# work, bad reports (exit 2, nothing written, an existing output kept), and,
# with the fake CUDA runtime, recording a job end to end.
. "${top_srcdir:-.}/tests/lib.sh"
dir="$top_srcdir/tests/suggest"
report="$dir/train-like.json"

# Golden: run from the folder so that the header names the report as recorded.
# golden REPORT PREFIX [OPTIONS]: the draft equals PREFIX[-OPTIONS].umpol and
# passes check with no warning.
golden() {
    from=$1 prefix=$2
    shift 2
    name=$(echo "$*" | tr -d ' -')
    expected="$dir/$prefix${name:+-$name}.umpol"
    (cd "$dir" && "$UMPOL_BIN" suggest "$@" "$from") >"$tmp/got.umpol" 2>"$tmp/err" ||
        fail "suggest $* $from: exit $?: $(cat "$tmp/err")"
    if diff -u "$expected" "$tmp/got.umpol" >"$tmp/diff"; then pass; else
        fail "suggest $* $from differs from $expected"
        head -40 "$tmp/diff" >&2
    fi
    expect_status 0 "check of suggest $* $from" "$UMPOL_BIN" check "$tmp/got.umpol"
    grep -q "valid (0 errors, 0 warnings)" "$tmp/out" || fail "suggest $* $from: check is not clean"
}
for opts in "" "--budget 200MiB" "--budget 120MiB" "--goal memory"; do
    golden train-like.json expected $opts
    expect_status 0 "explain of suggest $opts" "$UMPOL_BIN" explain "$tmp/got.umpol"
done
# A report with a cache made under tag "kv" (train_like 6 kv, recorded): the tag is its own class.
for opts in "" "--budget 200MiB"; do
    golden kv-like.json expected-kv $opts
done
# The tag's class comes first (a tagged block also matches its phase's class) and goes to the
# host under the budget, beside the optimizer-like state.
[ "$(grep '^class ' "$dir/expected-kv-budget200MiB.umpol" | head -2 | tr '\n' ' ')" = \
  "class step_state_tag_kv_gpu { class step_state_tag_kv { " ] ||
    fail "the tag's classes (the spare room on the GPU, then the host) are not the first"
sed -n '/^class step_state_tag_kv/,/^}/p' "$dir/expected-kv-budget200MiB.umpol" >"$tmp/kv"
grep -q 'match tag "kv" and size >= 1MiB;' "$tmp/kv" && grep -q "place host near;" "$tmp/kv" ||
    fail "the tag's class: not matched by tag, or not on the host under the budget"
grep -q 'Tag "kv" (first seen in phase .forward.)' "$dir/expected-kv.umpol" ||
    fail "the tag's class has no comment naming the tag"
# explain of a drafted policy reads as its reasoning: each class with the comment above it.
for json in "" --json; do
    expected="$dir/expected-kv-budget200MiB.explain${json:+.json}"
    (cd "$dir" && "$UMPOL_BIN" explain $json expected-kv-budget200MiB.umpol) >"$tmp/explain" 2>"$tmp/err" ||
        fail "explain $json of a drafted policy: exit $?: $(cat "$tmp/err")"
    if diff -u "$expected" "$tmp/explain" >"$tmp/diff"; then pass; else
        fail "explain $json of a drafted policy differs from $expected"
        head -40 "$tmp/diff" >&2
    fi
done

# A real recording: a transformers Llama (0.94B, checkpointing, bf16 autocast) under the
# package's automatic phases and hand-written NVTX ranges, three steps (bench/grid.py suggest on
# an H100). Its phases nest (model.init eleven times in one stretch, forward.recompute on
# autograd's thread inside backward): the step is the timeline's repetition, not an entry count.
for opts in "--budget 5640MiB" "--budget 7770MiB" "--budget 11980MiB"; do
    golden llama-h100.json expected-llama $opts
done
grep -q "^# Per rank: 3 steps of 211.7 ms;" "$dir/expected-llama-budget7770MiB.umpol" ||
    fail "the recorded Llama's three steps not found (phases counted by entries?)"
# Weights (model.init) are model state; AdamW's moments are step state, always on the host here;
# the weights are movable memory where the budget has room for 64 MiB of them beside the step's
# blocks (5619 MiB at least), pinned host memory where it has not (5640MiB).
for budget in 5640MiB 7770MiB 11980MiB; do
    sed -n '/^class persistent_model_init/,/^}/p' "$dir/expected-llama-budget$budget.umpol" >"$tmp/w.$budget"
    sed -n '/^class step_state_optimizer_step/,/^}/p' "$dir/expected-llama-budget$budget.umpol" |
        grep -q "memory host;" || fail "$budget: the optimizer state is not in pinned host memory"
done
grep -q "memory host;" "$tmp/w.5640MiB" || fail "5640MiB: the weights are not in pinned host memory"
grep -q "memory movable;" "$tmp/w.7770MiB" || fail "7770MiB: the weights are not movable memory"
grep -q "memory movable;" "$tmp/w.11980MiB" || fail "11980MiB: the weights are not movable memory"

# A run recorded under `budget card`: the draft says `budget card` again, and plans with the
# budget less what the card held outside umpol then (here 7770 MiB less 2150 MiB: the same
# room for the model state as `--budget 5620MiB`, none).
if command -v python3 >/dev/null 2>&1; then
    python3 - "$dir/llama-h100.json" "$tmp/card.json" <<'PY' || fail "suggest: could not write the card run"
import json, sys
r = json.load(open(sys.argv[1]))
r["devices"][0]["budget_bytes"] = 7770 << 20
r["devices"][0]["card"] = {"base_used_bytes": 0, "peak_used_bytes": 0, "resident_at_peak_bytes": 0,
                           "samples": 9, "outside_bytes": 2150 << 20, "budget_counts_card": True}
json.dump(r, open(sys.argv[2], "w"))
PY
    expect_status 0 "suggest from a budget card run" "$UMPOL_BIN" suggest -o "$tmp/card.umpol" "$tmp/card.json"
    grep -q "^budget card 7770MiB;   # 5.5 GiB for umpol (2.1 GiB held outside it when recorded): no room" \
        "$tmp/card.umpol" || fail "a budget card run: not drafted as budget card, less what was outside"
    expect_status 0 "check of the budget card draft" "$UMPOL_BIN" check "$tmp/card.umpol"
    grep -q "valid (0 errors, 0 warnings)" "$tmp/out" || fail "the budget card draft: check is not clean"
else
    echo "python3 missing: the budget card run is not tested" >&2
fi

# Timelines that could mislead the step: a range around the whole loop (entered once), a
# timeline the runtime cut short, and a range around each step holding its own transient
# blocks (its class must stay after the state classes of the phases inside it).
if command -v python3 >/dev/null 2>&1; then
    python3 - "$report" "$tmp" <<'PY' || fail "suggest: could not write the timeline variants"
import copy, json, sys
r = json.load(open(sys.argv[1]))
spans = r["timeline"]["spans"]
once = copy.deepcopy(r)
once["phases"].append({"name": "train", "entries": 1, "total_ns": 1})
once["timeline"]["spans"] = [{"phase": 4, "start_ns": spans[1]["start_ns"] - 1, "end_ns": spans[-1]["end_ns"] + 1,
                              "depth": 0}] + [dict(s, depth=s["depth"] + 1) for s in spans]
json.dump(once, open(sys.argv[2] + "/once.json", "w"))
cut = copy.deepcopy(r)
cut["timeline"]["spans"], cut["timeline"]["spans_dropped"] = spans[:3], len(spans) - 3
json.dump(cut, open(sys.argv[2] + "/cut.json", "w"))
wrap = copy.deepcopy(r)
wrap["phases"].append({"name": "train_step", "entries": 6, "total_ns": 1})
steps = [s for s in spans if s["phase"] == 1]
ends = [s["end_ns"] for s in spans if s["phase"] == 3]
wrap["timeline"]["spans"] = [spans[0]] + [dict(s, depth=1) for s in spans[1:]] + [
    {"phase": 4, "start_ns": f["start_ns"] - 1, "end_ns": e + 1, "depth": 0} for f, e in zip(steps, ends)]
wrap["sites"].append({"class": 0, "phase": 4, "allocations": 6, "frees": 6, "bytes": 12582912,
                      "min_size": 2097152, "max_size": 2097152, "peak_live_bytes": 2097152,
                      "lifetime_ns": 600000, "first_ns": 1, "last_ns": 2})
json.dump(wrap, open(sys.argv[2] + "/wrap.json", "w"))
PY
    expect_status 0 "suggest with a range around the loop" "$UMPOL_BIN" suggest --budget 200MiB "$tmp/once.json"
    grep -q "^# Per rank: 6 steps of 7.2 ms;" "$tmp/out" || fail "a range entered once made the run one step"
    expect_status 0 "suggest with a cut timeline" "$UMPOL_BIN" suggest --budget 200MiB "$tmp/cut.json"
    grep -q "^# Per rank: 6 steps of 7.8 ms;" "$tmp/out" || fail "a cut timeline was trusted (or entries not counted)"
    expect_status 0 "suggest with a range around each step" "$UMPOL_BIN" suggest --budget 230MiB \
        -o "$tmp/wrap.umpol" "$tmp/wrap.json"
    state=$(grep -n "^class step_state_optimizer_step" "$tmp/wrap.umpol" | head -1 | cut -d: -f1)
    outer=$(grep -n 'phase "train_step"' "$tmp/wrap.umpol" | head -1 | cut -d: -f1)
    [ -n "$state" ] && [ -n "$outer" ] && [ "$state" -lt "$outer" ] ||
        fail "the step range's transient class comes before the optimizer state's class"
fi

# What the golden files say, so that a regenerated golden cannot silently lose it.
grep -q "^class step_state_optimizer_step" "$dir/expected-budget200MiB.umpol" &&
    sed -n '/^class step_state_optimizer_step/,/^}/p' "$dir/expected-budget200MiB.umpol" |
    grep -q "place host near;" || fail "optimizer-like state not on the host under the budget"
sed -n '/^class step_state_optimizer_step/,/^}/p' "$dir/expected.umpol" | grep -q "place gpu;" ||
    fail "optimizer-like state not on the GPU without a budget"
sed -n '/^class transient {/,/^}/p' "$dir/expected-budget120MiB.umpol" | grep -q "priority 5" ||
    fail "activations not above the state"
# The transient groups of several phases are one class (its own free space is reused by the
# next phase where it is), matched by each phase in turn.
sed -n '/^class transient {/,/^}/p' "$dir/expected.umpol" >"$tmp/transient"
grep -q '^    match phase "forward" and size >= 1MiB$' "$tmp/transient" &&
    grep -q '^       or phase "backward" and size >= 1MiB;$' "$tmp/transient" ||
    fail "the transient groups are not one class matching each phase"

# umpol-suggest(1)'s worked example is the golden output, word for word.
awk '/^\.EX/ { on = 1; next } /^\.EE/ { on = 0 } on && /^# Drafted/ { keep = 1 } on && keep { print } /^\.EE/ { keep = 0 }' \
    "$top_builddir/man/umpol-suggest.1" | sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/^\\&//' >"$tmp/man.umpol"
if diff -u "$dir/expected-budget200MiB.umpol" "$tmp/man.umpol" >"$tmp/diff"; then pass; else
    fail "umpol-suggest(1)'s example is not the output of suggest --budget 200MiB"
    head -20 "$tmp/diff" >&2
fi

# Its explain excerpt is explain's output, line for line, in order.
awk '/^\.EX/ { on = 1; next } /^\.EE/ { on = 0; keep = 0 } on && /^policy:/ { keep = 1 } on && keep { print }' \
    "$top_builddir/man/umpol-suggest.1" | sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/^\\&//' >"$tmp/man.explain"
cp "$dir/expected-budget200MiB.umpol" "$tmp/train.umpol"
(cd "$tmp" && "$UMPOL_BIN" explain train.umpol) >"$tmp/explain"
python3 - "$tmp/man.explain" "$tmp/explain" <<'PY' && pass || fail "umpol-suggest(1)'s explain excerpt is not explain's output"
import sys
shown = [l for l in open(sys.argv[1]).read().splitlines() if l != "..."]
real = open(sys.argv[2]).read().splitlines()
assert len(shown) > 10 and any(l.startswith("     doc:") for l in shown), shown
at = 0
for line in shown:
    at = real.index(line, at) + 1  # ValueError: not there, or out of order
PY

# -o writes the file whole; the budget too small writes nothing, keeps what is there.
expect_status 0 "suggest -o" "$UMPOL_BIN" suggest --budget 200MiB -o "$tmp/p.umpol" "$report"
"$UMPOL_BIN" check -q "$tmp/p.umpol" || fail "suggest -o: output does not check"
echo keep >"$tmp/keep.umpol"
expect_status 1 "budget below the transient peak" "$UMPOL_BIN" suggest --budget 10MiB -o "$tmp/keep.umpol" "$report"
grep -q "smallest budget that can work is 96.0 MiB (100696064 bytes)" "$tmp/out" ||
    fail "too small a budget: no smallest budget given"
[ "$(cat "$tmp/keep.umpol")" = keep ] || fail "too small a budget: output file changed"
ls -a "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind"

# A budget of another form, or an output that cannot be written, is a usage
# error before any job runs; so are reports and a command together.
for b in 0x10MiB 1e3MiB " 200MiB" .5GiB 1.GiB -1GiB 12XB 0% 101%; do
    expect_status 2 "suggest --budget '$b'" "$UMPOL_BIN" suggest --budget "$b" "$report"
    grep -q "expected a size such as 8GiB" "$tmp/out" || fail "suggest --budget '$b': no reason"
done
expect_status 0 "suggest --budget 1.5GiB" "$UMPOL_BIN" suggest --budget 1.5GiB "$report"
expect_status 2 "a bad budget, before the job" "$UMPOL_BIN" suggest -b 12XB -- sh -c "touch '$tmp/ran'"
expect_status 2 "an unwritable output, before the job" "$UMPOL_BIN" suggest \
    -o "$tmp/no/such/dir/p.umpol" -- sh -c "touch '$tmp/ran'"
grep -q "cannot write there: No such file or directory" "$tmp/out" || fail "unwritable -o: no reason"
expect_status 2 "a directory as the output, before the job" "$UMPOL_BIN" suggest -o "$tmp" \
    -- sh -c "touch '$tmp/ran'"
grep -q "cannot write there: Is a directory" "$tmp/out" || fail "-o a directory: no reason"
[ -e "$tmp/ran" ] && fail "suggest ran the job before refusing its options"
expect_status 2 "reports and a command" "$UMPOL_BIN" suggest "$report" -- true
grep -q "give reports or -- COMMAND, not both" "$tmp/out" || fail "reports and a command: message"
sed 's/"total_bytes": [0-9]*/"total_bytes": 0/' "$report" >"$tmp/nosize.json"
expect_status 2 "a percentage without the GPU's memory" "$UMPOL_BIN" suggest -b 50% "$tmp/nosize.json"
grep -q "do not say the GPU's memory" "$tmp/out" || fail "a percentage without the GPU's memory: message"

# A name that is not a regular file is written into, never replaced: through a
# link, so that a regression replaces the link and not the system's device.
ln -s /dev/null "$tmp/null"
expect_status 0 "suggest -o a link to /dev/null" "$UMPOL_BIN" suggest -o "$tmp/null" "$report"
[ -L "$tmp/null" ] && [ -c /dev/null ] || fail "suggest -o /dev/null replaced the device's name"
ln -s /dev/full "$tmp/full"
expect_status 2 "suggest -o a link to /dev/full" "$UMPOL_BIN" suggest -o "$tmp/full" "$report"
grep -q "cannot write $tmp/full: No space left on device" "$tmp/out" || fail "suggest -o /dev/full: no reason"
[ -L "$tmp/full" ] || fail "suggest -o /dev/full replaced the link"
# A name of one of the process's own descriptors is written through it, where
# it stands (after what is there); /proc's name, so that a regression fails to
# rename into /proc instead of replacing /dev/stdout.
echo first >"$tmp/own.out"
"$UMPOL_BIN" suggest --budget 200MiB -o /proc/self/fd/1 "$report" >>"$tmp/own.out" 2>"$tmp/err" ||
    fail "suggest -o /proc/self/fd/1: exit $?: $(cat "$tmp/err")"
{ echo first; cat "$tmp/p.umpol"; } | cmp -s - "$tmp/own.out" || fail "suggest -o /proc/self/fd/1: not written after what was there"
# A reader gone: an error (EPIPE), not death by SIGPIPE.
{ sleep 1; "$UMPOL_BIN" suggest -o /dev/fd/1 "$report" 2>"$tmp/epipe"; echo $? >"$tmp/epipe.rc"; } | true
[ "$(cat "$tmp/epipe.rc")" = 2 ] || fail "suggest into a closed pipe: exit $(cat "$tmp/epipe.rc"), expected 2"
grep -q "Broken pipe" "$tmp/epipe" || fail "suggest into a closed pipe: no reason"
if mkfifo "$tmp/fifo" 2>/dev/null; then
    # Nobody reads: an error at once, not a writer waiting for a reader.
    expect_status 2 "suggest -o a pipe nobody reads" timeout 20 "$UMPOL_BIN" suggest -o "$tmp/fifo" "$report"
    grep -q "No such device or address" "$tmp/out" || fail "suggest -o an unread pipe: no reason"
    # A reader that is there before the writer (opened both ways, it does not wait).
    exec 3<>"$tmp/fifo"
    expect_status 0 "suggest -o a pipe" timeout 20 "$UMPOL_BIN" suggest --budget 200MiB -o "$tmp/fifo" "$report"
    head -c "$(wc -c <"$tmp/p.umpol")" <&3 >"$tmp/fifo.out"
    exec 3<&-
    cmp -s "$tmp/fifo.out" "$tmp/p.umpol" || fail "suggest -o a pipe: not the policy written to a file"
    [ -p "$tmp/fifo" ] || fail "suggest -o a pipe replaced it"
fi

# Bad input: exit 2, a clear message, the existing output untouched.
bad() { # description, file, expected message
    expect_status 2 "$1" "$UMPOL_BIN" suggest -o "$tmp/keep.umpol" "$2"
    grep -q "$3" "$tmp/out" || { fail "$1: message"; cat "$tmp/out" >&2; }
    grep -q "nothing written" "$tmp/out" || fail "$1: does not say nothing was written"
    [ "$(cat "$tmp/keep.umpol")" = keep ] || fail "$1: output file changed"
}
head -c 2000 "$report" >"$tmp/trunc.json"
bad "truncated report" "$tmp/trunc.json" "invalid JSON"
sed 's/"umpol_report": 1/"umpol_report": 2/' "$report" >"$tmp/v2.json"
bad "newer report" "$tmp/v2.json" "unsupported report version 2 (this umpol reads 1)"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); del d["sites"]; del d["sites_dropped"]; json.dump(d, open(sys.argv[2], "w"))' \
    "$report" "$tmp/old.json" && bad "report without sites" "$tmp/old.json" "no allocation sites"
bad "older report from the bench" "$top_srcdir/bench/results/2026-11-22-h200-runtime/train-report-llm-finetune.json" "no allocation sites"
sed 's/"total_bytes": [0-9]*/"total_bytes": 1234567/' "$report" >"$tmp/othergpu.json"
expect_status 2 "reports of two GPUs" "$UMPOL_BIN" suggest "$report" "$tmp/othergpu.json"
grep -q "recorded on a GPU of 1234567 bytes" "$tmp/out" || fail "other GPU: message"
sed '0,/"allocations": 72/s//"allocations": -72/' "$report" >"$tmp/neg.json"
bad "negative count" "$tmp/neg.json" "expected an integer from 0 to"
sed '0,/"allocations": 72/s//"allocations": 1e300/' "$report" >"$tmp/huge.json"
bad "huge count" "$tmp/huge.json" "expected an integer from 0 to"
sed '0,/"phase": 1,/s//"phase": 99,/' "$report" >"$tmp/phase.json"
bad "site of an unknown phase" "$tmp/phase.json" "sites\[1\].phase: no phase 99 in this report"
sed '0,/"frees": 72/s//"frees": 73/' "$report" >"$tmp/frees.json"
bad "more frees than allocations" "$tmp/frees.json" "73 frees of 72 allocations"
sed 's/"name": "forward"/"name": "for\\u0001ward"/' "$report" >"$tmp/ctl.json"
bad "control character in a phase name" "$tmp/ctl.json" "printable name"
python3 -c 'print("[" * 100000 + "]" * 100000)' >"$tmp/deep.json"
bad "deeply nested" "$tmp/deep.json" "nested too deeply"
printf '{"something": "else"}' >"$tmp/other.json"
bad "not a report" "$tmp/other.json" "not an umpol report"
bad "missing report" "$tmp/none.json" "cannot open"
expect_status 2 "no report" "$UMPOL_BIN" suggest
expect_status 2 "bad budget" "$UMPOL_BIN" suggest --budget 12parsecs "$report"
expect_status 2 "bad goal" "$UMPOL_BIN" suggest --goal fame "$report"
expect_status 0 "suggest --help" "$UMPOL_BIN" suggest --help
grep -q "^usage: umpol suggest" "$tmp/out" || fail "suggest --help: no usage"

# A phase name with glob characters and quotes matches only itself.
sed 's/"name": "backward"/"name": "back*ward \\"x\\""/' "$report" >"$tmp/glob.json"
expect_status 0 "phase name with glob characters" "$UMPOL_BIN" suggest -o "$tmp/glob.umpol" "$tmp/glob.json"
grep -q 'phase "back\\\\\*ward \\"x\\"" and' "$tmp/glob.umpol" || fail "glob characters not escaped"
"$UMPOL_BIN" check -q "$tmp/glob.umpol" || fail "escaped phase name does not check"

# End to end with the fake CUDA runtime: record the job, draft its policy.
if fake_job train_like; then
    export FAKE_GPU_BYTES=536870912
    expect_status 0 "suggest -- COMMAND" env ${san:+LD_PRELOAD="$san"} \
        "$UMPOL_BIN" suggest --budget 200MiB -o "$tmp/rec.umpol" -- "$job" 4
    grep -q "recording one run of" "$tmp/out" || fail "suggest -- COMMAND: no recording message"
    "$UMPOL_BIN" check -q "$tmp/rec.umpol" || fail "suggest -- COMMAND: output does not check"
    for c in transient persistent_model_init step_state_optimizer_step rest; do
        grep -q "^class $c {" "$tmp/rec.umpol" || fail "suggest -- COMMAND: no class $c"
    done
    # A tag pushed by the job, which the recording policy does not name, still makes its class.
    expect_status 0 "suggest -- COMMAND with a tag" env ${san:+LD_PRELOAD="$san"} \
        "$UMPOL_BIN" suggest -o "$tmp/kv.umpol" -- "$job" 4 kv
    grep -q '^    match tag "kv" and size >= 1MiB;' "$tmp/kv.umpol" ||
        fail "suggest -- COMMAND with a tag: no class for tag kv"
    # The report's sites table, figure by figure (train_like.c's pattern, 3 steps).
    expect_status 0 "umpol run -r records sites" env ${san:+LD_PRELOAD="$san"} \
        "$UMPOL_BIN" run -p "$top_srcdir/policies/passthrough.umpol" -r "$tmp/sites.json" -- "$job" 3
    python3 - "$tmp/sites.json" <<'PY' || fail "sites table"
import json, sys
r = json.load(open(sys.argv[1]))
phases = [p["name"] for p in r["phases"]]
sites = {(phases[s["phase"]] if s["phase"] is not None else None, s["min_size"]): s for s in r["sites"]}
M = 1 << 20
def site(phase, size, allocs, peak):
    s = sites[(phase, size)]
    assert s["class"] == 0 and s["allocations"] == allocs and s["frees"] == allocs, s
    assert s["bytes"] == allocs * size and s["max_size"] == size, s
    assert s["peak_live_bytes"] == peak, s
    assert s["lifetime_ns"] > 0 and s["last_ns"] >= s["first_ns"], s
    return s
w = site("model.init", 2 * M, 24, 48 * M)
site("forward", 4 * M, 12 * 3, 48 * M)
site("forward", 4096, 8 * 3, 8 * 4096)
g = site("backward", 2 * M, 24 * 3, 48 * M)
o = site("optimizer.step", 2 * M, 48, 96 * M)
assert o["first_ns"] == min(o["first_ns"], o["last_ns"]) and o["last_ns"] < g["last_ns"], "state made at the first step only"
assert w["lifetime_ns"] / 24 > g["lifetime_ns"] / 72, "weights outlive gradients"
assert r["sites_dropped"] == 0 and len(r["sites"]) == 5, r["sites"]
PY
    # A job of more processes than the reader ever held at once: every report
    # read, and every one removed with the recording's directory.
    mkdir "$tmp/many"
    expect_status 0 "suggest -- a job of 70 processes" env TMPDIR="$tmp/many" ${san:+LD_PRELOAD="$san"} \
        "$UMPOL_BIN" suggest --budget 200MiB -o "$tmp/many.umpol" -- \
        sh -c 'for i in $(seq 70); do "$1" 1 || exit 1; done' sh "$job"
    "$UMPOL_BIN" check -q "$tmp/many.umpol" || fail "suggest -- 70 processes: output does not check"
    [ -z "$(ls -A "$tmp/many")" ] || fail "suggest -- 70 processes: left $(ls -A "$tmp/many")"
    expect_status 2 "suggest -- a job that records nothing" env ASAN_OPTIONS=detect_leaks=0 \
        ${san:+LD_PRELOAD="$san"} "$UMPOL_BIN" suggest -o "$tmp/none.umpol" -- true
    grep -q "wrote no report" "$tmp/out" || fail "suggest -- true: message"
    [ ! -e "$tmp/none.umpol" ] || fail "suggest -- true: wrote a policy"
else
    echo "libumpol.so or the fake job not built: recording not tested"
fi
finish
