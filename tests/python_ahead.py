#!/usr/bin/env python3
"""umpol._ahead (weights ahead of the forward pass's layers) over a fake
torch: no PyTorch, no GPU. Each check names what a job would see go wrong.

Run by tests/python_ahead.sh with PYTHONPATH on the package; prints one line
a check and exits non-zero on the first failure."""
import contextlib
import types

from python_fakes import LOG, Event, OutOfMemoryError, Stream, check, said, stream_api

import umpol._ahead as ahead_module
from umpol._ahead import WeightsAhead

MiB = 1 << 20


class Tensor:
    """A weight's storage (at PTR), or a copy of one."""
    made = 0

    def __init__(self, ptr, nbytes, value):
        self.ptr, self.nbytes, self.value = ptr, nbytes, value

    def data_ptr(self):
        return self.ptr


class Param:
    """A parameter: .data is its tensor, swapped as torch's is."""

    def __init__(self, ptr, nbytes, value=1.0):
        self.data = Tensor(ptr, nbytes, value)
        self.is_cuda, self.layout, self.device = True, "strided", "cuda:0"

    def numel(self):
        return self.data.nbytes // 4

    def element_size(self):
        return 4

    def is_contiguous(self):
        return True

    def untyped_storage(self):
        return types.SimpleNamespace(data_ptr=lambda: self.data.ptr)


def make_torch():
    torch = types.SimpleNamespace(strided="strided", contiguous_format="contiguous")
    current, stream, new_stream = stream_api(Stream, "job", "copy")
    torch.Tensor = Tensor

    def empty_like(p, memory_format=None):
        room["tries"] += 1
        if room["left"] is not None:
            if room["left"] == 0:
                raise OutOfMemoryError("CUDA out of memory (fake)")
            room["left"] -= 1
        Tensor.made += 1
        LOG.append((current["stream"].name, "alloc"))
        return Copy(0xC000000 + Tensor.made * 0x1000, p.data.nbytes, None, current)

    class Copy(Tensor):
        def __init__(self, ptr, nbytes, value, cur):
            super().__init__(ptr, nbytes, value)
            self.cur, self.recorded = cur, []
            self.made_on = cur["stream"].name  # the stream its memory is freed on

        def copy_(self, src, non_blocking=False):
            self.value = src.data.value
            LOG.append((self.cur["stream"].name, f"copy {src.data.ptr:#x}"))

        def record_stream(self, s):
            self.recorded.append(s.name)

    class Linear:
        def __init__(self, name, *params):
            self.name = name
            self._parameters = {f"p{i}": p for i, p in enumerate(params)}

    class Embedding(Linear):
        pass

    torch.nn = types.SimpleNamespace(Linear=Linear, Embedding=type("Embedding", (), {}))
    torch.empty_like = empty_like
    torch.no_grad = contextlib.nullcontext
    torch.cuda = types.SimpleNamespace(Stream=new_stream, stream=stream, Event=Event,
                                       current_stream=lambda device=None: current["stream"],
                                       OutOfMemoryError=OutOfMemoryError)
    return torch


room = {"left": None, "tries": 0}  # copies the fake GPU has room for (None: any), asked for


class Model:
    """The outermost module; LAYERS are called in turn, each seeing the value
    its weight's .data holds while it runs."""

    def __init__(self, torch, layers):
        self.layers, self.seen = layers, []


def run(ahead, model, order=None):
    """One training forward pass as the package's hooks see it: the model,
    then each layer's pre and post."""
    p = ahead.begin(model)
    seen = []
    for layer in (order or model.layers):
        p.pre(layer)
        seen.append([q.data for q in layer._parameters.values()])
        p.post(layer)
    p.end()
    return seen


torch = make_torch()
Linear = torch.nn.Linear
host = set()  # the pointers of the blocks that lie on the host
rt = types.SimpleNamespace(host_bytes=lambda ptr: 64 * MiB if ptr in host else 0)
ahead = WeightsAhead(torch, rt)
weights = [Param(0x1000 * (i + 1), 64 * MiB, float(i)) for i in range(4)]
small = Param(0x9000, MiB // 2)  # a bias below _MIN_BYTES
layers = [Linear(f"l{i}", w) for i, w in enumerate(weights)]
layers[1]._parameters["bias"] = small
model = Model(torch, layers)
host.update({0x1000, 0x2000, 0x4000, 0x9000})  # the third layer's weight is on the GPU

# The first pass records the order of the layers and copies nothing.
seen = run(ahead, model)
check("the first pass records the layers' order and copies nothing",
      LOG == [] and [r() for r in ahead.orders[id(model)][1]] == layers and
      all(s[0] is w.data for s, w in zip(seen, weights)))

# The next pass copies the host's weights ahead, on the copy stream after the
# job's as it is at each layer that queues copies, into tensors made on the
# job's stream, and runs each layer on its copy: the job waits for the copy's
# event, and the weight's own data is back after the layer.
ahead_module._AHEAD_BYTES = 100 * MiB  # two weights in flight at most
own = [w.data for w in weights]
seen = run(ahead, model)
check("each layer ran on a copy of its weight where it lay on the host, on its own data else",
      [type(s[0]).__name__ for s in seen] == ["Copy", "Copy", "Tensor", "Copy"] and
      [s[0].value for s in seen] == [0.0, 1.0, 2.0, 3.0] and seen[2][0] is own[2])
check("a weight under the least size is read where it lies", seen[1][1] is small.data)
check("each weight's own data is back after its layer", [w.data for w in weights] == own)
check("copies ahead within the bytes allowed, each turn's after the job's work queued before "
      "them (their allocations included), the job waiting for each before its layer",
      LOG == [("job", "alloc"), ("job", "alloc"),
              ("copy1", "wait job"), ("copy1", "copy 0x1000"), ("copy1", "record"),
              ("copy1", "copy 0x2000"), ("copy1", "record"),
              ("job", "wait event of copy1"),
              ("job", "alloc"), ("copy1", "wait job"), ("copy1", "copy 0x4000"), ("copy1", "record"),
              ("job", "wait event of copy1"),
              ("job", "wait event of copy1")])
# Made on the copy stream and marked used by the job's, a copy freed under
# PyTorch's cudaMallocAsync backend makes the job's next allocation of its
# memory wait for every copy queued by then.
check("each copy is made on the job's stream, which lets it go, and marked used by no other",
      all(s[0].made_on == "job" and s[0].recorded == []
          for s in seen if type(s[0]).__name__ == "Copy"))
check("the bytes copied ahead are counted", ahead.copied == 3 * 64 * MiB)
check("and those that crossed the link: all of each, whole on the host",
      ahead.link_bytes == 3 * 64 * MiB)

# A weight only partly on the host is copied whole; only its host part crosses the link.
partly = types.SimpleNamespace(host_bytes=lambda ptr: 16 * MiB if ptr == 0x1000 else
                               (64 * MiB if ptr in host else 0))
ahead = WeightsAhead(torch, partly)
run(ahead, model)
run(ahead, model)
for w, data in zip(weights, own):
    w.data = data
check("a weight partly on the host counts its host part as crossing the link",
      ahead.copied == 3 * 64 * MiB and ahead.link_bytes == 16 * MiB + 2 * 64 * MiB)

# A layer run on another stream than the one current where its copy was made
# marks the copy used by its own: the stream it was made on, which lets it
# go, never waited for that layer.
ahead = WeightsAhead(torch, rt)
run(ahead, model)
side = Stream("side")
p = ahead.begin(model)
p.pre(layers[0])
first = layers[0]._parameters["p0"].data
p.post(layers[0])
with torch.cuda.stream(side):
    p.pre(layers[1])
    second = layers[1]._parameters["p0"].data
    p.post(layers[1])
p.end()
check("a copy read on the stream it was made on is not marked; one read on another is, by it",
      first.recorded == [] and second.recorded == ["side"] and second.made_on == "job")

# Layers in another order: the rest of the pass reads them where they lie,
# stderr says so once, the next pass records the order again, and the one
# after copies in the new order.
LOG.clear()
swapped = [layers[0], layers[2], layers[1], layers[3]]
text = said(lambda: run(ahead, model, swapped))
check("another order: the rest of the pass reads the weights where they lie, said once",
      "another order" in text and id(model) not in ahead.orders and
      [w.data for w in weights] == own)
LOG.clear()
text = said(lambda: run(ahead, model, swapped))
check("the pass after records the new order, copying nothing",
      text == "" and LOG == [] and [r() for r in ahead.orders[id(model)][1]] == swapped)
text = said(lambda: run(ahead, model, swapped))
check("the next one copies again, in the new order, and says nothing more",
      text == "" and [w for s, w in LOG if w.startswith("copy 0x")] ==
      ["copy 0x1000", "copy 0x2000", "copy 0x4000"])

# A layer that sets its weight's .data itself while running on a copy keeps it.
LOG.clear()
ahead = WeightsAhead(torch, rt)
run(ahead, model)
p = ahead.begin(model)
p.pre(layers[0])
mine = Tensor(0x7000, 64 * MiB, 7.0)
weights[0].data = mine
p.post(layers[0])
p.end()
check("a .data the job set while its layer ran stays", weights[0].data is mine)
weights[0].data = own[0]

# A pass that raises inside a layer: the package's end puts the weights back.
ahead = WeightsAhead(torch, rt)
run(ahead, model)
p = ahead.begin(model)
p.pre(layers[0])
p.pre(layers[1])
LOG.clear()
p.end()
check("a pass ended early puts every weight back", [w.data for w in weights] == own)
check("and the job's stream waits for the copies no layer ran on before letting them go",
      len(LOG) == 1 and LOG[0][0] == "job" and LOG[0][1].startswith("wait event of copy")
      and not p.copies)

# Modules that are not Linear layers are neither recorded nor copied.
emb = torch.nn.Embedding()
emb._parameters = {"weight": Param(0x8000, 256 * MiB)}
host.add(0x8000)
ahead = WeightsAhead(torch, rt)
run(ahead, Model(torch, [emb]))
check("an Embedding is not a layer copied ahead", id(model) not in ahead.orders and not ahead.orders)

# Left at auto: nothing until the runtime has evicted for the budget, then the usual passes.
evicted = [False]
ahead = WeightsAhead(torch, rt, when=lambda: evicted[0])
LOG.clear()
check("at auto, before any eviction, a pass is not followed (nothing recorded, nothing copied)",
      ahead.begin(model) is None and not ahead.orders and LOG == [])
evicted[0] = True
text = said(lambda: run(ahead, model))
check("at the first pass after one it says it is on, once, and records the order",
      text.count("weights ahead: on") == 1 and ahead.orders and LOG == [])
text = said(lambda: run(ahead, model))
check("and the pass after copies ahead, saying nothing more", text == "" and ahead.copied > 0)

# The recomputation in backward: only where the step in backward will update
# a weight from its copy in this pass (handoff says which), weights ahead has
# begun and a backward pass runs on this thread. Then each Linear's weights
# that lie on the host are copied on the job's stream as the layer begins, up
# to _AHEAD_BYTES held, the layer runs on its copy, the weight's own data is
# back as the layer returns, and the copy is kept for the weight's update
# (take: once), with the bytes that lay on the host; a weight on the GPU, or
# one no update of the pass takes, is read where it lies; the pass's end lets
# go of what no update took.
ahead_module._AHEAD_BYTES = 512 << 20  # the package's own
ahead = WeightsAhead(torch, rt, when=lambda: False)
ahead.handoff = lambda p: True
check("no recomputation copies before weights ahead has begun", ahead.recompute(model) is None)
ahead = WeightsAhead(torch, rt)
check("nor where no update takes them", ahead.recompute(model) is None)
ahead.handoff = lambda p: p is not weights[1]
torch._C = types.SimpleNamespace(_current_graph_task_id=lambda: -1)
check("nor on a thread that runs no backward pass", ahead.recompute(model) is None)
torch._C = types.SimpleNamespace(_current_graph_task_id=lambda: 7)
own = [w.data for w in weights]
LOG.clear()
r = ahead.recompute(model)
seen, back = [], []
for layer in layers:
    r.pre(layer)
    seen.append(layer._parameters["p0"].data)
    r.post(layer)
    back.append(layer._parameters["p0"].data)
r.end()
check("the recomputation runs each layer on a copy of its weights on the host that an update "
      "takes, made and filled on the job's stream",
      [type(x).__name__ for x in seen] == ["Copy", "Tensor", "Tensor", "Copy"] and
      [x.value for x in seen] == [0.0, 1.0, 2.0, 3.0] and seen[1] is own[1] and seen[2] is own[2]
      and LOG == [("job", "alloc"), ("job", "copy 0x1000"), ("job", "alloc"), ("job", "copy 0x4000")])
check("each weight's own data is back as its layer returns", back == own)
got = ahead.take(weights[0])
check("the copy is kept for the weight's update, once, with its bytes on the host",
      got is not None and got[0] is seen[0] and got[1].name == "job" and got[2] == 64 * MiB and
      ahead.take(weights[0]) is None and ahead.take(weights[2]) is None)
check("and counted as crossing the link, and as taken",
      ahead.kept_bytes == 2 * 64 * MiB and ahead.taken_bytes == 64 * MiB)
ahead.let_go()
check("the pass's end lets go of the copies no update took", not ahead.kept and
      ahead.take(weights[3]) is None and ahead.held == 0)
ahead_module._AHEAD_BYTES = 100 * MiB  # one 64 MiB copy held at most
r = ahead.recompute(model)
seen = []
for layer in layers:
    r.pre(layer)
    seen.append(type(layer._parameters["p0"].data).__name__)
    r.post(layer)
r.end()
check("past the bytes allowed, the recomputation reads the rest where it lies",
      seen == ["Copy", "Tensor", "Tensor", "Tensor"] and len(ahead.kept) == 1)
ahead.let_go()

# A GPU with no room for a copy: the layers without one read their weights
# where they lie, in the pass ahead and in the recomputation; said once; the
# job's pass goes on, and nothing is held for copies never made.
ahead_module._AHEAD_BYTES = 512 << 20
ahead = WeightsAhead(torch, rt)
run(ahead, model)  # records the order
room["left"] = 1
text = said(lambda: seen.extend(run(ahead, model)))
seen = seen[-len(layers):]
check("no room for a copy ahead: that layer and the rest read their weights where they lie, said once",
      [type(s[0]).__name__ for s in seen] == ["Copy", "Tensor", "Tensor", "Tensor"] and
      text.count("no GPU memory for a copy") == 1 and [w.data for w in weights] == own)
room["left"] = 0
text = said(lambda: run(ahead, model))
check("and again in the next pass, without saying it again", text == "" and
      [w.data for w in weights] == own)
ahead.handoff = lambda p: True
r = ahead.recompute(model)
room["tries"] = 0
seen = []
text = said(lambda: [(r.pre(layer), seen.append(type(layer._parameters["p0"].data).__name__),
                      r.post(layer)) for layer in layers])
r.end()
check("no room in the recomputation: its layers read their weights where they lie, "
      "holding no bytes, tried once (each failed allocation costs the allocator a sync)",
      seen == ["Tensor"] * 4 and ahead.held == 0 and not ahead.kept and room["tries"] == 1)
room["left"] = None
