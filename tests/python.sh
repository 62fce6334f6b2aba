#!/bin/sh
# The umpol Python package without PyTorch or a GPU: `umpol run` puts it on
# PYTHONPATH and its sitecustomize chains to the one it shadows; the API
# reaches the preloaded runtime through ctypes (phases in the report, classes
# in memory_stats, named exits leave inner phases alone); the import hook;
# the opt-outs (--no-python, UMPOL_PYTHON=0); and, with no runtime, no-ops.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
[ -f "$top_builddir/.libs/libumpol.so" ] || { echo "SKIP: libumpol.so not built"; exit 77; }
# Python cannot load a sanitizer-built library (and leaks as it pleases); the
# package's logic does not depend on how the runtime is built.
if ldd "$top_builddir/.libs/libumpol.so" 2>/dev/null | grep -q 'lib[at]san'; then
    echo "SKIP: sanitizer build"
    exit 77
fi
policy="$tmp/p.umpol"
printf 'umpol 1;\nclass kv { match tag "kv"; memory device; }\nclass rest { match any; memory device; }\n' >"$policy"
mkdir "$tmp/other"
echo 'import os; os.environ["OTHER_SITECUSTOMIZE"] = "ran"' >"$tmp/other/sitecustomize.py"

cat >"$tmp/api.py" <<'PY'
import os, sys
import umpol
assert umpol.active(), "runtime not active"
assert "torch" not in sys.modules, "importing umpol imported torch"
assert os.environ.get("OTHER_SITECUSTOMIZE") == "ran", "the shadowed sitecustomize did not run"
assert sys.modules["sitecustomize"].__file__.endswith("other/sitecustomize.py")
assert list(umpol.memory_stats()) == ["kv", "rest"], umpol.memory_stats()
assert set(umpol.memory_stats()["kv"]) >= {"live_bytes", "peak_bytes", "resident_bytes",
                                          "evict_bytes", "prefetch_bytes", "saved_bytes"}
assert umpol._rt.evictions() == 0, umpol._rt.evictions()  # nothing evicted under this policy
# The UMPOL_* switches: 0, 1, or auto (unset too); anything else is auto, said on stderr.
for value, want in (("0", False), ("1", True), ("auto", "auto"), (None, "auto"), ("yes", "auto")):
    if value is None:
        os.environ.pop("UMPOL_TEST_SWITCH", None)
    else:
        os.environ["UMPOL_TEST_SWITCH"] = value
    assert umpol._switch("UMPOL_TEST_SWITCH") == want, (value, umpol._switch("UMPOL_TEST_SWITCH"))

@umpol.phase("outer")
def f():
    umpol._rt.enter("inner")          # a range the job opened itself
    umpol._rt.exit("outer")           # closing outer by name leaves inner open
    umpol._rt.enter("outer")          # reopened so that the decorator closes it
    umpol._rt.exit("inner")
f()
with umpol.tag("kv"), umpol.phase("ctx"):
    umpol.mark("m")
try:
    umpol.phase(3)
except TypeError:
    pass
else:
    raise AssertionError("a non-str phase name was accepted")
# The import hook: a module imported later is handed over once, after it ran.
from umpol._importhook import when_imported
seen = []
when_imported("json_fake_for_umpol", seen.append)
sys.path.insert(0, os.environ["FAKE_DIR"])
import json_fake_for_umpol
assert seen == [json_fake_for_umpol] and json_fake_for_umpol.ran
assert json_fake_for_umpol.__loader__.__class__.__name__ != "_Loader"
print("api ok")
PY
mkdir "$tmp/fake"
echo 'ran = True' >"$tmp/fake/json_fake_for_umpol.py"

expect_status 0 "API through umpol run" env PYTHONPATH="$tmp/other" FAKE_DIR="$tmp/fake" \
    "$UMPOL_BIN" run -p "$policy" -r "$tmp/report.json" -- python3 "$tmp/api.py"
grep -q "api ok" "$tmp/out" || { fail "API checks"; cat "$tmp/out"; }
grep -q "UMPOL_TEST_SWITCH='yes': expected 0, 1 or auto; taken as auto" "$tmp/out" ||
    fail "a bad switch value is not said"
# The ctypes mirrors of umpol.h's structs: the same fields in the same order.
PYTHONPATH="$top_srcdir/python" python3 - "$top_srcdir/src/umpol.h" <<'PY' || fail "ctypes structs differ from umpol.h"
import re, sys
from umpol._runtime import ClassStats, Stats
header = open(sys.argv[1]).read()
for name, mirror in (("umpol_stats", Stats), ("umpol_class_stats", ClassStats)):
    body = re.search(r"struct %s \{(.*?)\};" % name, header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = [f.strip() for decl in body.split(";") if decl.strip()
              for f in decl.replace("unsigned long long", "").split(",")]
    got = [f for f, _ in mirror._fields_]
    assert fields == got, (name, fields, got)
PY
python3 - "$tmp/report.json" <<'PY' || fail "phases in the report"
import json, sys
phases = {p["name"]: p["entries"] for p in json.load(open(sys.argv[1]))["phases"]}
assert phases == {"outer": 2, "inner": 1, "ctx": 1}, phases
PY

# `update in backward;` (umpol(5)): the runtime says so, and the package's step
# in backward follows it unless UMPOL_STEP_IN_BACKWARD is 0 or 1; a policy
# without it leaves the step after backward.
sed 's/^umpol 1;$/umpol 1;\nupdate in backward;/' "$policy" >"$tmp/update.umpol"
cat >"$tmp/update.py" <<'PY'
import os, sys
import umpol
want = sys.argv[1] == "1"
assert umpol._rt.update_in_backward is want, umpol._rt.update_in_backward
for value, on in (("0", False), ("1", True), (None, want), ("yes", want)):
    if value is None:
        os.environ.pop("UMPOL_STEP_IN_BACKWARD", None)
    else:
        os.environ["UMPOL_STEP_IN_BACKWARD"] = value
    assert umpol._step_in_backward(umpol._rt) is on, (value, on)
print("update ok")
PY
for on in 0 1; do
    p=$policy
    [ $on = 1 ] && p=$tmp/update.umpol
    expect_status 0 "update in backward: $on" "$UMPOL_BIN" run -p "$p" -- python3 "$tmp/update.py" $on
    grep -q "update ok" "$tmp/out" || { fail "update in backward: $on"; cat "$tmp/out"; }
done
grep -q "UMPOL_STEP_IN_BACKWARD='yes': expected 0 or 1; the policy decides (on)" "$tmp/out" ||
    fail "a bad UMPOL_STEP_IN_BACKWARD is not said"

# A second copy of the package on the job's own PYTHONPATH (a source tree's
# python/, say): umpol's sitecustomize runs once, then the job's own one.
cp -R "$top_srcdir/python" "$tmp/copy"
expect_status 0 "a second copy of umpol's sitecustomize on PYTHONPATH" \
    env PYTHONPATH="$tmp/copy:$tmp/other" "$UMPOL_BIN" run -p "$policy" -- python3 -c '
import os, sys
assert os.environ.get("OTHER_SITECUSTOMIZE") == "ran", "the shadowed sitecustomize did not run"
hooks = [f for f in sys.meta_path if type(f).__name__ == "_Finder" and f.name == "torch"]
assert len(hooks) == 1, f"{len(hooks)} torch hooks"'
if grep -q "Error in sitecustomize" "$tmp/out"; then fail "sitecustomize chained to a copy of itself"; cat "$tmp/out"; fi
# A folder holding only a link to umpol's sitecustomize.py (stow, a profile of links).
mkdir "$tmp/linked"
ln -s "$top_srcdir/python/sitecustomize.py" "$tmp/linked/sitecustomize.py"
expect_status 0 "a link to umpol's sitecustomize on PYTHONPATH" \
    env PYTHONPATH="$tmp/linked:$tmp/other" timeout 60 "$UMPOL_BIN" run -p "$policy" -- python3 -c '
import os
assert os.environ.get("OTHER_SITECUSTOMIZE") == "ran", "the shadowed sitecustomize did not run"'

expect_status 0 "--no-python leaves PYTHONPATH alone" "$UMPOL_BIN" run --no-python -p "$policy" -- \
    python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("umpol") is not None)'
expect_status 0 "UMPOL_PYTHON=0: importable, no automatic phases" env UMPOL_PYTHON=0 \
    "$UMPOL_BIN" run -p "$policy" -- python3 -c '
import sys, umpol
assert umpol.active() and not any(type(f).__name__ == "_Finder" for f in sys.meta_path)'
expect_status 0 "automatic phases wait for torch" "$UMPOL_BIN" run -p "$policy" -- python3 -c '
import sys
assert any(type(f).__name__ == "_Finder" and f.name == "torch" for f in sys.meta_path)'
expect_status 0 "without the runtime everything is a no-op" env PYTHONPATH="$top_builddir/python" \
    python3 -c '
import umpol
assert not umpol.active() and umpol.memory_stats() == {} and umpol.steps() == 0
with umpol.phase("x"), umpol.tag("y"):
    umpol.mark("z")
umpol.enable_auto()'
# Against the fake CUDA runtime, allocations from Python (ctypes) classified
# by the package's phases and tags: a phase closed by name leaves the job's
# inner range open; memory_stats counts; umpol_note_saved finds the block.
fake="$top_builddir/tests/fake/.libs/libfake_cudart.so"
if [ -f "$fake" ]; then
    printf 'umpol 1;\nclass kv { match tag "kv"; memory device; }\nclass inner { match phase "inner"; memory device; }\nclass outer { match phase "outer"; memory device; }\nclass rest { match any; memory device; }\n' >"$tmp/classes.umpol"
    cat >"$tmp/alloc.py" <<'PY'
import ctypes, umpol
cuda = ctypes.CDLL(None)  # the preloaded runtime's cudaMalloc, then the fake's
def alloc(n):
    p = ctypes.c_void_p()
    assert cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p.value
def allocations():
    return {k: v["allocations"] for k, v in umpol.memory_stats().items()}
with umpol.phase("outer"):
    alloc(1000)                      # outer
    umpol._rt.enter("inner")         # the job's own range, opened inside
a = alloc(3000)                      # inner: still open after outer closed by name
umpol._rt.exit()                     # the job closes its range
with umpol.tag("kv"):
    kv = alloc(5000)
alloc(7000)                          # rest
assert allocations() == {"kv": 1, "inner": 1, "outer": 1, "rest": 1}, allocations()
s = umpol.memory_stats()
assert s["inner"]["live_bytes"] == 3072 and s["inner"]["resident_bytes"] == 3072, s["inner"]
assert umpol._rt.note_saved(a) == 1 and umpol._rt.note_saved(a + 512) == -1
assert umpol.memory_stats()["inner"]["saved"] == 1
assert umpol.memory_stats()["inner"]["saved_bytes"] == 3072
assert cuda.cudaFree(ctypes.c_void_p(kv)) == 0
assert umpol.memory_stats()["kv"]["live_bytes"] == 0 and umpol.memory_stats()["kv"]["frees"] == 1
print("alloc ok")
PY
    expect_status 0 "classes from Python, fake CUDA runtime" env LD_PRELOAD="$top_builddir/.libs/libumpol.so $fake" \
        UMPOL_POLICY="$tmp/classes.umpol" PYTHONPATH="$top_builddir/python" python3 "$tmp/alloc.py"
    grep -q "alloc ok" "$tmp/out" || { fail "classes from Python"; cat "$tmp/out"; }
    # A tag the policy does not name still reaches the report's sites, for umpol suggest.
    printf 'umpol 1;\nclass everything { match any; memory device; }\n' >"$tmp/record.umpol"
    cat >"$tmp/tagged.py" <<'PY'
import ctypes, umpol
cuda = ctypes.CDLL(None)
p = ctypes.c_void_p()
with umpol.tag("kv"):
    assert cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(5000)) == 0
assert cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(5000)) == 0
PY
    expect_status 0 "a tag from Python in the report" env LD_PRELOAD="$top_builddir/.libs/libumpol.so $fake" \
        UMPOL_POLICY="$tmp/record.umpol" UMPOL_REPORT="$tmp/tagged.json" PYTHONPATH="$top_builddir/python" \
        python3 "$tmp/tagged.py"
    python3 - "$tmp/tagged.json" <<'PY' || fail "the tag of a site from Python"
import json, sys
sites = json.load(open(sys.argv[1]))["sites"]
assert sorted((str(s.get("tag")), s["allocations"]) for s in sites) == [("None", 1), ("kv", 1)], sites
PY
    # `match saved`: a block reported saved moves to the class it matches
    # then, and memory_stats follows it; a weight allocated outside forward stays.
    printf 'umpol 1;\nclass saved_acts { match phase "forward" and saved; priority 1; }\nclass acts { match phase "forward"; }\nclass weights { match phase "model.init"; }\nclass rest { match any; }\n' >"$tmp/saved.umpol"
    cat >"$tmp/saved.py" <<'PY'
import ctypes, umpol
cuda = ctypes.CDLL(None)
def alloc(n):
    p = ctypes.c_void_p()
    assert cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p.value
with umpol.phase("model.init"):
    w = alloc(4096)
with umpol.phase("forward"):
    a, t = alloc(1 << 20), alloc(1 << 20)
    s = umpol.memory_stats()
    assert s["acts"]["allocations"] == 2 and s["saved_acts"]["allocations"] == 0, s
    assert umpol._rt.note_saved(a) == 0   # now in saved_acts
    assert umpol._rt.note_saved(w) == 2   # a weight stays a weight
s = umpol.memory_stats()
assert s["saved_acts"]["allocations"] == 1 and s["saved_acts"]["live_bytes"] == 1 << 20, s
assert s["saved_acts"]["saved"] == 1 and s["acts"]["saved"] == 0, s
assert s["acts"]["allocations"] == 1 and s["acts"]["live_bytes"] == 1 << 20, s
assert s["weights"]["saved"] == 1, s
assert cuda.cudaFree(ctypes.c_void_p(a)) == 0
s = umpol.memory_stats()
assert s["saved_acts"]["frees"] == 1 and s["saved_acts"]["live_bytes"] == 0, s
print("saved ok")
PY
    expect_status 0 "match saved from Python, fake CUDA runtime" env LD_PRELOAD="$top_builddir/.libs/libumpol.so $fake" \
        UMPOL_POLICY="$tmp/saved.umpol" UMPOL_REPORT="$tmp/saved.json" PYTHONPATH="$top_builddir/python" \
        python3 "$tmp/saved.py"
    grep -q "saved ok" "$tmp/out" || { fail "match saved from Python"; cat "$tmp/out"; }
    python3 -c 'import json, sys; c = {k["name"]: k for k in json.load(open(sys.argv[1]))["classes"]}; sys.exit(0 if c["saved_acts"]["reclassified"] == 1 and c["acts"]["reclassified"] == 0 else 1)' "$tmp/saved.json" &&
        pass || fail "the report counts the reclassified block"
fi

# With a PyTorch (a CPU-only one will do), the automatic phases of an
# unmodified loop, counted in the runtime's report.
torch_python=
for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch' 2>/dev/null; then
        torch_python=$py
        break
    fi
done
if [ -n "$torch_python" ]; then
    expect_status 0 "automatic phases ($("$torch_python" -c 'import torch; print("PyTorch", torch.__version__)'))" \
        "$UMPOL_BIN" run -p "$policy" -r "$tmp/torch.json" -- "$torch_python" "$top_srcdir/tests/python_torch.py"
    grep -q "torch phases ok" "$tmp/out" || { fail "automatic phases"; cat "$tmp/out"; }
    expect_status 0 "the package's saved-tensor hooks beside the job's" \
        "$UMPOL_BIN" run -p "$policy" -- "$torch_python" "$top_srcdir/tests/python_torch_hooks.py"
    grep -q "hooks ok\|hooks: nothing to check" "$tmp/out" || { fail "saved-tensor hooks"; cat "$tmp/out"; }
    expect_status 0 "installing the phases fails: the job's import torch does not" \
        "$UMPOL_BIN" run -p "$policy" -- "$torch_python" "$top_srcdir/tests/python_torch_install_fails.py"
    grep -q "import torch ok" "$tmp/out" &&
        grep -q "umpol: automatic PyTorch phases: installing them failed (AttributeError: no such thing in this PyTorch); they are off, and torch is left as it was" "$tmp/out" &&
        ! grep -q "autocast keeps no casts" "$tmp/out" ||
        { fail "a failed install"; cat "$tmp/out"; }
    python3 - "$tmp/torch.json" <<'PY' || fail "automatic phases in the report"
import json, sys
phases = {p["name"]: p["entries"] for p in json.load(open(sys.argv[1]))["phases"]}
want = {"model.init": 2, "forward": 10, "backward": 8, "optimizer.step": 5, "zero_grad": 4,
        "forward.eval": 1, "forward.recompute": 1, "job.range": 1}
assert phases == want, phases
PY
    ! grep -q "UMPOL_SAVED_TO_HOST=auto\|UMPOL_WEIGHTS_AHEAD=auto" "$tmp/out" ||
        fail "a switch at auto turned on with nothing evicted"
    expect_status 0 "the switches set to 1 and 0" env UMPOL_SAVED_TO_HOST=1 UMPOL_WEIGHTS_AHEAD=0 \
        "$UMPOL_BIN" run -p "$policy" -- "$torch_python" "$top_srcdir/tests/python_torch.py"
    grep -q "torch phases ok" "$tmp/out" || { fail "the switches set to 1 and 0"; cat "$tmp/out"; }
    # Asked for the step in backward, a job on the CPU is told why it stays off,
    # and runs with the same phases.
    expect_status 0 "step in backward asked for on the CPU" env UMPOL_STEP_IN_BACKWARD=1 \
        "$UMPOL_BIN" run -p "$policy" -r "$tmp/torch-sib.json" -- "$torch_python" "$top_srcdir/tests/python_torch.py"
    grep -q "torch phases ok" "$tmp/out" && grep -q "step in backward: off: a parameter is not a dense CUDA tensor" "$tmp/out" ||
        { fail "step in backward on the CPU"; cat "$tmp/out"; }
    cmp -s "$tmp/torch.json" "$tmp/torch-sib.json" ||
        python3 -c 'import json, sys; p = [{q["name"]: q["entries"] for q in json.load(open(f))["phases"]} for f in sys.argv[1:]]; sys.exit(p[0] != p[1])' \
            "$tmp/torch.json" "$tmp/torch-sib.json" || fail "the step in backward changed the phases"
    # UMPOL_AUTOCAST_CACHE=0: the job's autocast regions keep no casts, said on
    # stderr; unset, torch's default stays.
    printf '%s\n' 'import torch' 'with torch.autocast("cpu", dtype=torch.bfloat16):' \
        '    print("cache", torch.is_autocast_cache_enabled())' >"$tmp/cache.py"
    expect_status 0 "autocast cache off" env UMPOL_AUTOCAST_CACHE=0 \
        "$UMPOL_BIN" run -p "$policy" -- "$torch_python" "$tmp/cache.py"
    grep -q "cache False" "$tmp/out" && grep -q "umpol: autocast keeps no casts of the weights" "$tmp/out" ||
        { fail "autocast cache off"; cat "$tmp/out"; }
    expect_status 0 "autocast cache by default" "$UMPOL_BIN" run -p "$policy" -- "$torch_python" "$tmp/cache.py"
    grep -q "cache True" "$tmp/out" && ! grep -q "autocast keeps" "$tmp/out" ||
        { fail "autocast cache by default"; cat "$tmp/out"; }
else
    echo "no PyTorch: automatic phases not tested here (tests/gpu_python.sh does on a GPU)"
fi

for f in "$top_srcdir"/python/umpol/*.py "$top_srcdir"/python/sitecustomize.py; do
    expect_status 0 "parses: $f" python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$f"
done
finish
