#!/usr/bin/env python3
"""umpol._offload (saved activations in host memory until backward) over a
fake torch: no PyTorch, no GPU. Each check names what a job would see go wrong.

Run by tests/python_offload.sh with PYTHONPATH on the package; prints one
line a check and exits non-zero on the first failure."""
import gc
import threading
import time
import types
import weakref

from python_fakes import LOG, Event, Float32, OutOfMemoryError, Stream, check, said, stream_api

import umpol._offload as offload_module
from umpol._offload import SavedToHost, _Saved

MiB = 1 << 20


class Storage:
    def __init__(self, ptr, nbytes):
        self.ptr, self.n = ptr, nbytes

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return self.n


class Tensor(Float32):
    """A CUDA tensor of NBYTES (float32) at PTR, or a pinned host one; VALUE
    stands for its data. STORAGE_BYTES: of the block it is a view of."""
    made = 0

    def __init__(self, nbytes, value=0.0, device="cuda:0", storage_bytes=None, ptr=None):
        Tensor.made += 1
        self.ptr = ptr if ptr is not None else Tensor.made
        self.n, self.value, self.device = nbytes // 4, value, device
        self.shape, self.dtype = (self.n,), "float32"
        self.storage_bytes = storage_bytes if storage_bytes is not None else nbytes
        self.is_cuda = device != "cpu"
        self.is_leaf, self.requires_grad, self.contiguous = False, False, True
        self.layout = "strided"
        self.recorded = []

    def untyped_storage(self):
        return Storage(self.ptr, self.storage_bytes)

    def record_stream(self, stream):
        self.recorded.append(stream.name)

    def copy_(self, src, non_blocking=False):
        self.value = src.value
        LOG.append((CURRENT["stream"].name, f"copy {src.ptr} -> {self.ptr}"))
        return self


class Parameter(Tensor):
    pass


GPU_ROOM = [None]  # GPU tensors the fake GPU still has room for (None: any number)
GPU_TRIES = [0]    # GPU allocations asked for


def make_torch(pinned_fails=False):
    torch = types.SimpleNamespace()
    current, stream, new_stream = stream_api(Stream, "job", "copy")
    CURRENT.update(current=current)

    def empty(shape, dtype, device="cpu", pin_memory=False):
        if pin_memory and pinned_fails:
            raise RuntimeError("CUDA error: out of memory (pinned)")
        if device != "cpu":
            GPU_TRIES[0] += 1
        if device != "cpu" and GPU_ROOM[0] is not None:
            if GPU_ROOM[0] == 0:
                raise OutOfMemoryError("CUDA out of memory (fake)")
            GPU_ROOM[0] -= 1
        t = Tensor(shape[0] * 4, device=device)
        t.pinned = pin_memory
        t.made_on = current["stream"].name  # the stream a CUDA tensor's memory is freed on
        return t

    torch.Tensor, torch.empty, torch.strided = Tensor, empty, "strided"
    torch.cuda = types.SimpleNamespace(Stream=new_stream, stream=stream, Event=Event,
                                       current_stream=lambda device=None: current["stream"],
                                       is_current_stream_capturing=lambda: CAPTURING[0],
                                       OutOfMemoryError=OutOfMemoryError)
    return torch


class _Current(dict):
    def __getitem__(self, key):
        return dict.__getitem__(self, "current")[key]


CURRENT = _Current()
CAPTURING = [False]


def fresh(**kw):
    LOG.clear()
    torch = make_torch(**kw)
    return torch, SavedToHost(torch)


offload_module._MIN_BYTES = 16 * MiB
offload_module._KEEP_BYTES = 256 * MiB
offload_module._AHEAD_BYTES = 256 * MiB

# ---- what stays as it is ----
torch, off = fresh()
small = Tensor(8 * MiB)
param = Parameter(100 * MiB)
param.is_leaf, param.requires_grad = True, True
strided = Tensor(100 * MiB)
strided.contiguous = False
view = Tensor(100 * MiB, storage_bytes=300 * MiB)
check("a small saved tensor stays as it is", off.pack(small) is small)
check("a parameter stays as it is (it is the model's, not an activation)", off.pack(param) is param)
check("a non-contiguous one stays as it is", off.pack(strided) is strided)
check("a view of a larger block stays (moving it would free nothing)", off.pack(view) is view)
sparse = Tensor(100 * MiB)
sparse.layout = "sparse_coo"
check("a tensor that is not plain strided memory stays as it is", off.pack(sparse) is sparse)
CAPTURING[0] = True
big = Tensor(100 * MiB)
check("a tensor saved while a CUDA graph is captured stays as it is", off.pack(big) is big)
CAPTURING[0] = False
check("nothing was copied for them", not any("copy" in w for _, w in LOG))

# ---- the newest stay on the GPU, older ones go to the host ----
torch, off = fresh()
acts = [Tensor(100 * MiB, value=float(i)) for i in range(5)]
handles = [off.pack(a) for a in acts[:3]]
check("each large saved tensor gets a handle", all(isinstance(h, _Saved) for h in handles))
check("the newest ones (300 MiB: the newest and 200 beside it) stay on the GPU",
      all(h.gpu is a for h, a in zip(handles, acts)) and not any("copy" in w for _, w in LOG))
handles.append(off.pack(acts[3]))
check("past 256 MiB beside the newest, the oldest is copied to pinned host memory",
      handles[0].host is not None and handles[0].host.pinned and handles[1].gpu is acts[1])
copy_at = LOG.index(("copy1", f"copy {acts[0].ptr} -> {handles[0].host.ptr}"))
check("its copy out runs on a copy stream once the job's work up to its save is done (an "
      "event the job's stream recorded then), not after the layers queued since",
      LOG[copy_at - 1] == ("copy1", "wait event of job") and ("copy1", "wait job") not in LOG
      and handles[0].made.stream == "job" and LOG[:copy_at].count(("job", "record")) == 4
      and handles[0].out.stream == "copy1")
check("the copy has the tensor's values", handles[0].host.value == 0.0)
check("its GPU memory is kept while the copy runs, and the job's stream is not made to wait "
      "(no record_stream)", handles[0].gpu is acts[0] and acts[0].recorded == []
      and not any(s == "job" and w.startswith("wait") for s, w in LOG))
LOG.clear()
handles.append(off.pack(acts[4]))
job_waits = [e for e in LOG if e[0] == "job" and e[1].startswith("wait")]
check("at the next copy out it lets the GPU memory go, the job's stream after its copy",
      handles[0].gpu is None and job_waits[:1] == [("job", "wait event of copy1")]
      and LOG.index(("job", "wait event of copy1")) < LOG.index(("copy1", "wait event of job")))
check("a second one is copied out as the next arrives", handles[1].host is not None
      and handles[2].gpu is acts[2] and handles[2].host is None)
check("a tensor saved twice has one handle, and one copy", off.pack(acts[4]) is handles[4]
      and handles[4].packs == 2)

check("the bytes copied out are counted", off.sent_bytes == 200 * MiB)

# ---- backward: the last to leave comes back first, ahead of its read ----
LOG.clear()
off.backward_begin()
check("backward's start lets go of what is copied out", handles[1].gpu is None)
check("backward's start copies back the last to leave first, then the one before, up to 256 MiB",
      handles[1].back is not None and handles[0].back is not None
      and [w for s, w in LOG if w.startswith("copy")] == [
          f"copy {handles[1].host.ptr} -> {handles[1].back.ptr}",
          f"copy {handles[0].host.ptr} -> {handles[0].back.ptr}"])
check("the copies back run on the second copy stream, each after its copy out",
      ("copy2", "wait event of copy1") in LOG and
      all(s == "copy2" for s, w in LOG if w.startswith("copy")))
# Made on the copy stream and marked used by the job's, a copy back freed under
# PyTorch's cudaMallocAsync backend makes the job's next allocation of its
# memory wait for every copy back queued by then.
check("each copy back is made on the job's stream, which lets it go, the copy after that "
      "stream's work up to then",
      handles[1].back.made_on == "job" and handles[0].back.made_on == "job" and
      LOG.index(("copy2", "wait job")) < LOG.index(
          ("copy2", f"copy {handles[1].host.ptr} -> {handles[1].back.ptr}")))
check("the newest are read where they are", off.unpack(handles[4]) is acts[4]
      and off.unpack(handles[2]) is acts[2])
LOG.clear()
back = handles[1].back
got = off.unpack(handles[1])
check("a tensor read comes back with its values", got is back and got.value == 1.0)
check("the job's stream waits for its copy back, which no other stream is marked as using",
      LOG[0] == ("job", "wait event of copy2") and got.recorded == [])
check("the handle keeps no copy once read (backward frees it when done)", handles[1].back is None)
side = Stream("side")
with torch.cuda.stream(side):
    got0 = off.unpack(handles[0])
check("the next one was ready too", got0.value == 0.0 and off.late == 0)
check("read on another stream than the one it was made on, it is marked used by that stream "
      "(the one it was made on lets it go, and never waited for the read)",
      got0.recorded == ["side"] and got.recorded == [])
check("nothing was read before its copy back", off.late == 0 and off.ahead == 0)
off.backward_end()

# ---- many: reads make room for the next copies back ----
torch, off = fresh()
acts = [Tensor(100 * MiB, value=float(i)) for i in range(10)]
hs = [off.pack(a) for a in acts]
sent = [h for h in hs if h.gpu is None]
check("all but the newest three left, the last at the next copy out or backward",
      len(sent) == 6 and hs[6].host is not None)
off.backward_begin()
sent = [h for h in hs if h.gpu is None]
check("backward's start lets go of the last", len(sent) == 7)
check("two are copied back ahead (256 MiB)", [h.back is not None for h in sent] == [False] * 5 + [True] * 2)
off.unpack(sent[6])
check("reading one copies back the next", sent[4].back is not None and sent[3].back is None)
LOG.clear()
got = off.unpack(sent[1])
check("one read out of order is copied back at once, and counted late, with its bytes",
      got.value == 1.0 and off.late == 1 and off.late_bytes == 100 * MiB
      and ("job", "wait event of copy2") in LOG)
check("it is not copied back a second time", sent[1] not in off.coming)
LOG.clear()
off.backward_end()
check("the copies back no read took are let go at the end of the pass, the job's stream "
      "after their copies", sent[4].back is None and sent[5].back is None and not off.waiting
      and not off.coming and LOG == [("job", "wait event of copy2")] * 2)
again = off.unpack(sent[6])
check("a tensor read again (retain_graph) is copied back again", again.value == 6.0 and off.late == 2
      and off.late_bytes == 2 * 100 * MiB)

# ---- no GPU memory to copy back ahead: each read copies its tensor back then ----
torch, off = fresh()
acts = [Tensor(100 * MiB, value=float(i)) for i in range(10)]
hs = [off.pack(a) for a in acts]
GPU_ROOM[0] = 0
GPU_TRIES[0] = 0
text = said(off.backward_begin)
sent = [h for h in hs if h.gpu is None]
check("no room to copy back ahead: backward's start copies nothing back and says so, once",
      all(h.back is None for h in sent) and len(off.coming) == 7 and not off.waiting and
      text.count("no GPU memory to copy a saved tensor back ahead") == 1 and GPU_TRIES[0] == 1)
GPU_ROOM[0] = None
read = []
text = said(lambda: [read.append(off.unpack(h)) for h in (sent[6], sent[5])])
check("the pass's reads copy their tensors back as they come, and nothing is tried ahead "
      "again in that pass (each failed allocation costs the allocator a sync), said no more",
      [t.value for t in read] == [6.0, 5.0] and off.late == 2 and text == "" and
      GPU_TRIES[0] == 3 and all(h.back is None for h in sent[:5]))
off.backward_end()
hs = [off.pack(Tensor(100 * MiB)) for _ in range(6)]
off.backward_begin()
check("the next backward pass copies ahead again", any(h.back is not None for h in hs))
off.backward_end()

# ---- forward passes no backward reads (eval with grad on): their handles do not pile up ----
torch, off = fresh()
offload_module._SENT_LIMIT = off.sent_limit = 8
for _ in range(20):
    hs = [off.pack(Tensor(100 * MiB)) for _ in range(6)]
    del hs  # the graph is dropped
gc.collect()
check("the handles of graphs dropped without a backward pass are let go as they pile up",
      len(off.sent) <= 8 + 6)
kept = [off.pack(Tensor(100 * MiB)) for _ in range(30)]
alive = {id(r()) for r in off.sent if r() is not None}
left = [h for h in kept if h.gpu is None]
check("those of a graph still alive stay, past the limit too",
      len(left) > 8 and all(id(h) in alive for h in left))
offload_module._SENT_LIMIT = 4096
del kept

# ---- the same block in another shape ----
torch, off = fresh()
whole = Tensor(100 * MiB)
flat = Tensor(100 * MiB, ptr=whole.ptr)
flat.shape = (2, flat.n // 2)
h = off.pack(whole)
check("a view of the same block in another shape has a handle of its own, read as itself",
      off.pack(flat) is not h and off.unpack(off.pack(flat)) is flat)

# ---- saved twice, read twice: copied back once ----
torch, off = fresh()
acts = [Tensor(100 * MiB, value=float(i)) for i in range(5)]
hs = []
for a in acts:
    hs.append(off.pack(a))
    off.pack(a)  # a second node saves it too
off.backward_begin()
first, second = off.unpack(hs[1]), off.unpack(hs[1])
check("a tensor saved twice is copied back once for both reads", first is second
      and off.late == 0 and hs[1].back is None and hs[1] not in off.waiting)
off.backward_end()

# ---- a graph never run back frees its handles, and their GPU memory ----
torch, off = fresh()
acts = [Tensor(100 * MiB) for _ in range(5)]
alive = [weakref.ref(a) for a in acts]
hs = [off.pack(a) for a in acts]
del hs, acts, a
gc.collect()
check("the newest tensors' GPU memory goes with the graph, the one being copied out stays",
      [r() is None for r in alive] == [True, False, True, True, True])
off.pack(Tensor(100 * MiB))
off.pack(Tensor(100 * MiB))
gc.collect()
check("the one being copied out goes at the next copy out", alive[1]() is None)
off.backward_begin()
check("handles of a graph that was freed are not copied back", not off.coming and not off.waiting)

# ---- no pinned memory ----
torch, off = fresh(pinned_fails=True)
acts = [Tensor(100 * MiB) for _ in range(5)]
text = said(lambda: [off.pack(a) for a in acts])
hs = [off.pack(a) for a in acts]
check("without pinned host memory it says so, once, and turns off",
      text.count("saved to host: off") == 1 and off.off)
check("the tensors stay on the GPU, readable", acts[0] is not None and
      all(off.unpack(h) is a if isinstance(h, _Saved) else h is a for h, a in zip(hs, acts)))
# ---- left at auto: nothing leaves until the runtime has evicted for the budget ----
evicted = [False]
LOG.clear()
torch = make_torch()
off = SavedToHost(torch, when=lambda: evicted[0])
acts = [Tensor(100 * MiB) for _ in range(6)]
hs = [off.pack(a) for a in acts[:3]]
check("at auto, before any eviction, saved tensors stay as they are and nothing is copied",
      all(h is a for h, a in zip(hs, acts)) and LOG == [] and not off.newest)
evicted[0] = True
text = said(lambda: hs.extend(off.pack(a) for a in acts[3:]))
check("after one it says it is on, once, and what is saved from then on is handled",
      text.count("saved to host: on") == 1 and all(isinstance(h, _Saved) for h in hs[3:]))
check("the tensors saved before stay the job's own", all(h is a for h, a in zip(hs[:3], acts)))

# The switch itself: the runtime's evictions, read until the first is seen.
from umpol._torch import _Evicted  # noqa: E402
reads, changes = [], []
rt = types.SimpleNamespace(evictions=lambda: reads.append(1) or len(reads) - 2,
                           step_changed=lambda: changes.append(len(reads)))
seen = _Evicted(rt)
check("no eviction yet, no switch", not seen() and not seen() and not changes)
check("the first eviction turns it on for good, and the runtime is no longer asked",
      seen() and seen() and len(reads) == 3)
check("when it turns on, the runtime is told the step changes, once", changes == [3])
told = []
slow = types.SimpleNamespace(evictions=lambda: time.sleep(0.05) or 1,
                             step_changed=lambda: told.append(1))
seen_by_two = _Evicted(slow)
threads = [threading.Thread(target=seen_by_two) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("two threads that see the first eviction at once tell the runtime once",
      told == [1] and seen_by_two())
check("an inactive runtime (-1) never turns it on",
      not _Evicted(types.SimpleNamespace(evictions=lambda: -1, step_changed=None))())
from umpol._torch import _when  # noqa: E402
check("install hands auto the switch, and 1 nothing (on at once)",
      _when("auto", seen) is seen and _when(True, seen) is None)
print("python_offload: all checks passed")
