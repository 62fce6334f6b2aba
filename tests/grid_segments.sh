#!/bin/sh
# bench/grid.py's GRID_SEGMENTS timing over a fake torch (no PyTorch, no GPU): the
# forward pass by segment, and the backward pass by the checkpointed layers'
# recomputations in reverse order (the head and loss before the last one's, the
# first layer's running to backward's end); no backward line where nothing is
# recomputed; a step whose pass skipped a segment is not counted.
. "${top_srcdir:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
PYTHONPATH="$top_srcdir/bench" python3 - >"$tmp/out" 2>&1 <<'PY' && pass || { cat "$tmp/out" >&2; fail "grid.py's segments"; }
import contextlib, io, types
import grid

clock = [0.0]  # the GPU's time, ms


class Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = clock[0]

    def elapsed_time(self, other):
        return other.t - self.t


class Module:
    def __init__(self):
        self.hooks = []

    def register_forward_pre_hook(self, hook, prepend=False):
        self.hooks.insert(0, hook) if prepend else self.hooks.append(hook)

    def __call__(self, ms):
        for hook in self.hooks:
            hook(self, ())
        clock[0] += ms


torch = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=Event))
layers = [Module() for _ in range(3)]
model = types.SimpleNamespace(model=types.SimpleNamespace(embed_tokens=Module(), layers=layers,
                                                          norm=Module()))


def mark():
    e = Event()
    e.record()
    return e


def step(seg, recompute=True, skip=None):
    seg.begin(mark(), 0.0)
    clock[0] += 0.5
    model.model.embed_tokens(1)
    for i, layer in enumerate(layers):
        if i != skip:
            layer(10 + i)
    model.model.norm(5)
    seg.end(mark(), 0.0)
    seg.begin(mark(), 0.0, "backward")
    clock[0] += 7
    for i in reversed(range(len(layers))):
        if recompute:
            layers[i](20 + i)
        else:
            clock[0] += 20 + i
    clock[0] += 2
    seg.end(mark(), 0.0)
    seg.collect()


def report(seg, warmup):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        seg.report(warmup)
    return {line.split(" (")[0] + (" GPU" if "(GPU" in line else " thread"): line
            for line in out.getvalue().splitlines()}


seg = grid.Segments(torch, model)
step(seg)
step(seg, skip=1)  # not comparable: left out of the medians
step(seg)
lines = report(seg, 1)
assert lines["forward by segment GPU"].endswith(
    "start 0.50, embed 1.00, layer 0 10.00, layer 1 11.00, layer 2 12.00, head+loss 5.00"), lines
assert lines["backward by segment GPU"].endswith(
    "head+loss 7.00, layer 2 22.00, layer 1 21.00, layer 0+embed 22.00"), lines
seg = grid.Segments(torch, model)
step(seg, recompute=False)
lines = report(seg, 0)
assert "forward by segment GPU" in lines and not any(k.startswith("backward") for k in lines), lines
PY
finish
