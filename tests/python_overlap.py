#!/usr/bin/env python3
"""umpol._overlap (the optimizer's step in backward) over a fake torch: no
PyTorch, no GPU. Each check names what a job would see go wrong.

Run by tests/python_overlap.sh with PYTHONPATH on the package; prints one
line a check and exits non-zero on the first failure."""
import contextlib
import types

from python_fakes import Float32, check, said, stream_api

from umpol._overlap import StepInBackward


class Stream:
    def __init__(self, name):
        self.name, self.waited = name, []

    def wait_stream(self, other):
        self.waited.append(other.name)

    def wait_event(self, event):
        self.waited.append(f"event of {event.stream}")


class Event:
    done = True  # what query() says: the work before it has run

    def __init__(self):
        self.stream = None

    def record(self, stream):
        self.stream = stream.name

    def query(self):
        return Event.done


class Tensor:
    """A state tensor (at PTR, on the host when the fake runtime says so), a
    view of the ring, or the ring itself: copies record the stream they ran on."""

    def __init__(self, ptr, numel, value=0.0, current=None):
        self.ptr, self.n, self.value, self.current = ptr, numel, value, current
        self.shape, self.dtype, self.is_cuda = (numel,), "float32", True
        self.copies, self.recorded = [], []

    def numel(self):
        return self.n

    def element_size(self):
        return 4 if self.dtype == "float32" else 1

    def is_contiguous(self):
        return True

    def untyped_storage(self):
        return Storage(self.ptr)

    def data_ptr(self):
        return self.ptr

    def record_stream(self, stream):
        self.recorded.append(stream.name)

    def __getitem__(self, part):  # the ring's bytes [start, stop)
        view = Tensor(("ring", part.start), part.stop - part.start, current=self.current)
        view.dtype = self.dtype
        return view

    def view(self, shape_or_dtype):
        if isinstance(shape_or_dtype, str):
            self.n, self.dtype = self.n // 4, shape_or_dtype
        return self

    def copy_(self, src, non_blocking=False):
        self.value = src.value
        self.copies.append((self.current["stream"].name, src.ptr))
        COPIES.append((self.current["stream"].name, src.ptr, self.ptr))
        return self


COPIES = []  # (stream, from, to) of every copy


class Grad:
    def __init__(self, value, sparse=False):
        self.value, self.recorded, self.is_sparse = value, [], sparse

    def numel(self):
        return 1000

    def element_size(self):
        return 4

    def record_stream(self, stream):
        self.recorded.append(stream.name)


class Storage:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


class Param:
    def __init__(self, ptr, value, device="cuda:0"):
        self.ptr, self.value, self.grad = ptr, value, None
        self.is_cuda, self.is_sparse, self.requires_grad, self.device = True, False, True, device
        self.hooks, self.n = [], 1000

    @property
    def shape(self):
        return (self.n,)

    def numel(self):
        return self.n

    def element_size(self):
        return 4

    def untyped_storage(self):
        return Storage(self.ptr)

    def register_post_accumulate_grad_hook(self, fn):
        self.hooks.append(fn)
        return types.SimpleNamespace(remove=lambda: self.hooks.remove(fn))

    def accumulate(self, g, sparse=False):
        """What autograd does: accumulate, then run the post-accumulate hooks."""
        if self.grad is None:
            self.grad = self.made = Grad(g, sparse)
        else:
            self.grad.value += g
        for fn in list(self.hooks):
            fn(self)


def make_torch(world=1):
    torch = types.SimpleNamespace()
    current, stream, new_stream = stream_api(Stream, "main", "side")
    main = current["stream"]

    def empty(n, dtype, device):
        ring = Tensor(("ring", 0), n, current=current)
        ring.dtype, ring.device = "uint8", device
        torch.rings.append(ring)
        return ring

    torch.rings = []
    torch.uint8 = "uint8"
    torch.empty = empty
    torch.cuda = types.SimpleNamespace(Stream=new_stream, stream=stream, Event=Event,
                                       device=lambda device: contextlib.nullcontext(),
                                       current_stream=lambda device=None: current["stream"])
    torch.main = main
    torch.current = current

    class Optimizer:
        def __init__(self, params, lr):
            self.param_groups = [{"params": list(params), "lr": lr}]
            self.state = {}
            self._optimizer_step_pre_hooks = {}
            self.steps_run = []  # (params of the groups it saw, the stream it ran on)

        def step(self):
            seen = []
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    seen.append(p)
                    st = self.state.setdefault(p, {})
                    st["step"] = st.get("step", 0) + 1
                    p.value -= group["lr"] * p.grad.value
                    if "m" in st:  # a moment: written in place, where it lies
                        st["m"].value += p.grad.value
                        st["m"].copies.append((current["stream"].name, "update"))
                        st.setdefault("added", st["step"])
            self.steps_run.append(([p.ptr for g in self.param_groups for p in g["params"]],
                                   current["stream"].name, [p.ptr for p in seen]))

    class AdamW(Optimizer):
        pass

    class LBFGS(Optimizer):
        pass

    class MyAdamW(AdamW):
        pass

    torch.optim = types.SimpleNamespace(AdamW=AdamW, LBFGS=LBFGS, MyAdamW=MyAdamW,
                                        optimizer=types.SimpleNamespace(
                                            _global_optimizer_pre_hooks={}))
    torch.distributed = types.SimpleNamespace(is_available=lambda: True,
                                              is_initialized=lambda: world > 1,
                                              get_world_size=lambda: world)
    return torch


class Auto:
    """The parts of _torch.Auto the step in backward calls."""

    def __init__(self, streaming=False):
        self.streaming = streaming
        self.phases = []
        self.rt = types.SimpleNamespace(written_ptrs=[], host=set())
        self.rt.written = lambda ptrs: self.rt.written_ptrs.extend(ptrs)
        self.rt.on_host = lambda ptr: ptr in self.rt.host

    def compiling(self):
        return False

    def bounded(self, name, fn, *args, **kwargs):
        self.phases.append(name)
        return fn(*args, **kwargs)


def job(cls="AdamW", world=1, streaming=False, n=3):
    torch = make_torch(world)
    auto = Auto(streaming)
    sib = StepInBackward(torch, auto)
    params = [Param(0x1000 * (i + 1), 10.0 * (i + 1)) for i in range(n)]
    opt = getattr(torch.optim, cls)(params, lr=0.5)
    sib.optimizer_made(opt)
    return torch, auto, sib, params, opt


def backward(sib, params, grads):
    """One backward pass as the package wraps it: the last parameter first."""
    sib.backward_begin()
    for p, g in reversed(list(zip(params, grads))):
        p.accumulate(g)
    sib.backward_end()


# Armed at the first backward pass: each parameter updated once, alone in its
# group, its gradient freed. The first update of each makes its state inside
# the optimizer's phase on the job's own stream; later ones run on the side
# stream after the job's, their gradients freed once it has read them, and
# the job's stream waits once backward returns. The job's own step then
# updates nothing, and its groups are never swapped.
torch, auto, sib, params, opt = job()
groups = opt.param_groups
text = said(lambda: backward(sib, params, [1.0, 2.0, 4.0]))
check("arms at the first backward pass and says so", "on: 3 parameters of AdamW" in text)
check("each parameter updated as the job's step would", [p.value for p in params] == [9.5, 19.0, 28.0])
check("one parameter per update, the last layer's first; the first ones on the job's stream",
      [(ptrs, s) for ptrs, s, _ in opt.steps_run] == [([0x3000], "main"), ([0x2000], "main"),
                                                    ([0x1000], "main")])
check("the first updates make the state inside the optimizer's phase",
      auto.phases == ["optimizer.step"] * 3)
check("gradients gone", all(p.grad is None for p in params))
check("the job's groups are its own, never swapped",
      opt.param_groups is groups and groups[0]["params"] == params)
opt.step()
sib.step_post()
check("the job's step finds no gradient", opt.steps_run[-1][2] == [])
backward(sib, params, [1.0, 1.0, 1.0])
lane = sib.lanes["cuda:0"]
update, copy_out, copy_in = lane.update.name, lane.copy_out.name, lane.copy_in.name
check("later updates in one call over the parameters complete one after another in the "
      "last pass, once the last is, on the side stream, in no phase",
      opt.steps_run[4:] == [([0x3000, 0x2000, 0x1000], update, [0x3000, 0x2000, 0x1000])] and
      auto.phases == ["optimizer.step"] * 3 and sib.calls == 4)
# Marked used by the side stream (record_stream), a gradient freed under
# PyTorch's cudaMallocAsync backend makes the job's stream wait for its update.
check("their gradients let go by the job's stream with nothing marked, the job's stream "
      "made to wait for no update before the pass ends",
      all(p.grad is None and p.made.recorded == [] for p in params))
check("the side stream follows the stream each gradient was accumulated on; the job's waits "
      "for it and for the copies out",
      lane.update.waited == ["main"] * 3 and torch.main.waited == [copy_in, update, copy_out])
check("no state on the host: nothing staged, no ring", torch.rings == [] and
      lane.copy_in.waited == [] and lane.copy_out.waited == [])
check("state counts one update a step", all(opt.state[p]["step"] == 2 for p in params))
# A job whose backward returns with one stream current and which steps on
# another: the stream it steps on follows the updates too, once.
other = torch.cuda.Stream("cuda:0")
with torch.cuda.stream(other):
    sib.step_pre(opt)
    sib.step_pre(opt)
check("the stream the job steps on waits for the pass's updates, once",
      other.waited == ["event of main"])

def moments_job():
    """A job armed by its first pass, each parameter with a moment m of 10.0,
    the i-th at 0x9000 + i of 4000 * (i + 1) bytes (all on the GPU until the
    test puts some on the host)."""
    torch, auto, sib, params, opt = job()
    said(lambda: backward(sib, params, [1.0] * 3))
    sib.step_post()
    moments = [Tensor(0x9000 + i, 1000 * (i + 1), 10.0, torch.current) for i in range(3)]
    for p, m in zip(params, moments):
        opt.state[p]["m"] = m
    return torch, auto, sib, params, opt, moments


# State that lies on the host (a `memory host` class) is staged: copied into
# the ring on the copy-in stream, updated there on the side stream, copied
# back on the copy-out stream; state on the GPU is updated where it lies.
torch, auto, sib, params, opt, moments = moments_job()
auto.rt.host.update({0x9000, 0x9002})  # the second parameter's moment lies on the GPU
backward(sib, params, [1.0, 2.0, 4.0])
lane = sib.lanes["cuda:0"]
c_in, update, c_out = lane.copy_in.name, lane.update.name, lane.copy_out.name
check("each moment updated once, where the optimizer keeps it",
      [m.value for m in moments] == [11.0, 12.0, 14.0] and
      all(opt.state[p]["m"] is m for p, m in zip(params, moments)))
check("the host's moments copied in, updated in the ring, copied back; the GPU's updated there",
      COPIES == [(c_in, 0x9002, ("ring", 0)), (c_out, ("ring", 0), 0x9002),
                 (c_in, 0x9000, ("ring", 12288)), (c_out, ("ring", 12288), 0x9000)] and
      moments[1].copies == [(update, "update")])
check("what an update adds to the state stays in the optimizer's",
      all(opt.state[p]["added"] == 2 for p in params))
ring = torch.rings[0]
check("one ring, as large as the staged state (less than the least ring size), marked used "
      "by no other stream", len(torch.rings) == 1 and ring.n == 4096 + 12288 and
      ring.recorded == [])
check("one batch in two calls, each staging at most half the ring: the third parameter's "
      "moment alone, then the second's (on the GPU) with the first's",
      [(ptrs, s) for ptrs, s, _ in opt.steps_run[3:]] == [([0x3000], update),
                                                          ([0x2000, 0x1000], update)])
check("copies in after the job's stream once a pass; the update after the job's (at each "
      "gradient), then after each part's copies in; each part's copies out after its update",
      lane.copy_in.waited == ["main"] and lane.update.waited == ["main"] * 3 + [c_in, c_in]
      and lane.copy_out.waited == [update, update])
check("the job's stream waits for the copies out", torch.main.waited[-3:] == [c_in, update, c_out])
check("the ring is freed at the end of the pass, the room the forward pass has",
      lane.ring is None and lane.ring_bytes == ring.n)
sib.step_post()
backward(sib, params, [1.0, 1.0, 1.0])
check("the next pass makes it again, as large", len(torch.rings) == 2 and torch.rings[1].n == ring.n)
check("a new pass starts from a free ring (its copies in follow the job's stream, which "
      "waited for the last pass's copies out)", lane.copy_in.waited == ["main", "main"])
check("the moments after two staged updates", [m.value for m in moments] == [12.0, 13.0, 15.0])
sib.step_post()
auto.rt.host.add(0x9001)  # the state a resumed job loaded: all of it on the host now
sib.state_loaded()
backward(sib, params, [1.0, 1.0, 1.0])
check("a loaded state: the ring is sized again, for all three moments",
      len(torch.rings) == 3 and torch.rings[2].n == 4096 + 8192 + 12288 and
      [m.value for m in moments] == [13.0, 14.0, 16.0])

# The ring is let go once the pass has staged every parameter whose state
# lies on the host: the rest of the pass has its room. Here only the
# parameter updated first has state there; the other two are updated after
# it, in a call of their own, with no ring held. Should more lie on the host
# than when the ring was sized, it is made again in that pass, sized again.
torch, auto, sib, params, opt, moments = moments_job()
auto.rt.host.add(0x9002)
held = []  # (the parameters a call updates, whether the lane held a ring then)
plain_step = type(opt).step


def spying_step(self):
    lane = sib.lanes.get("cuda:0")
    held.append(([p.ptr for p in self.param_groups[0]["params"]], lane is not None and lane.ring is not None))
    plain_step(self)


type(opt).step = spying_step
backward(sib, params, [1.0] * 3)
check("the ring let go after the last state on the host is staged: the later call holds none",
      held == [([0x3000], True), ([0x2000, 0x1000], False)] and len(torch.rings) == 1 and
      [m.value for m in moments] == [11.0] * 3)
check("and the job's stream waits for none of its copies before the pass ends",
      torch.main.waited == [sib.lanes["cuda:0"].copy_in.name, sib.lanes["cuda:0"].update.name,
                            sib.lanes["cuda:0"].copy_out.name])
sib.step_post()
held.clear()
auto.rt.host.add(0x9000)  # the first parameter's state lies on the host now too
lane = sib.lanes["cuda:0"]
waits = len(lane.copy_in.waited)
backward(sib, params, [1.0] * 3)
check("more on the host than when sized: made again in the pass, sized for both, and all updated",
      len(torch.rings) == 3 and torch.rings[2].n == 4096 + 12288 and
      held == [([0x3000], True), ([0x2000, 0x1000], True)] and
      [m.value for m in moments] == [12.0] * 3)
check("the copies in follow the job's stream at the pass's start and again once the ring is made "
      "again (it was allocated on the job's stream)", lane.copy_in.waited[waits:] == ["main", "main"])
type(opt).step = plain_step

# State that lies on the host but does not fit the ring, sized before it did
# (here the moment of the parameter updated first, larger than the one the
# ring was sized for): updated where it lies this pass, and the next pass's
# ring is sized again and stages it.
torch, auto, sib, params, opt, moments = moments_job()
auto.rt.host.add(0x9001)
backward(sib, params, [1.0] * 3)
sib.step_post()
auto.rt.host.add(0x9002)  # 12288 bytes, in a ring of 8192
copies = len(COPIES)
backward(sib, params, [1.0] * 3)
c_in = sib.lanes["cuda:0"].copy_in.name
check("a state larger than the ring: updated where it lies, the other staged",
      [c[1] for c in COPIES[copies:] if c[0] == c_in] == [0x9001] and
      moments[2].copies[-1][1] == "update" and [m.value for m in moments] == [12.0] * 3)
sib.step_post()
copies = len(COPIES)
backward(sib, params, [1.0] * 3)
check("the next pass sizes the ring again and stages both",
      torch.rings[-1].n == 8192 + 12288 and
      sorted(c[1] for c in COPIES[copies:] if c[0] == c_in) == [0x9001, 0x9002] and
      [m.value for m in moments] == [13.0] * 3)


# Batches, made from the last pass's order: on each GPU, parameters of one
# group complete one after another, up to _BATCH_BYTES. A batch is updated,
# in one call, once its last member is complete, in whatever order they come;
# one whose members did not all get a gradient is updated when backward
# returns; one cut short by something the updates cannot follow leaves its
# gradients to the job's step.
import umpol._overlap as overlap  # noqa: E402
torch, auto, sib, params, opt = job(n=6)
opt.param_groups = [{"params": params[:4], "lr": 0.5}, {"params": params[4:], "lr": 0.25}]
params[3].n = overlap._BATCH_BYTES // 4  # a batch of its own
said(lambda: backward(sib, params, [1.0] * 6))  # the last first: p5 p4 | p3 | p2 p1 p0
sib.step_post()
ptr = [p.ptr for p in params]
calls, runs = sib.calls, len(opt.steps_run)
backward(sib, params, [1.0] * 6)
lane = sib.lanes["cuda:0"]
update = lane.update.name
check("batches of one group each, up to the batch's bytes, in the last pass's order",
      [(ptrs, s) for ptrs, s, _ in opt.steps_run[runs:]] ==
      [([ptr[5], ptr[4]], update), ([ptr[3]], update), ([ptr[2], ptr[1], ptr[0]], update)] and
      sib.calls == calls + 3)
check("each batch with its group's hyperparameters",
      [p.value for p in params] == [9.0, 19.0, 29.0, 39.0, 49.5, 59.5])
sib.step_post()
runs = len(opt.steps_run)
sib.backward_begin()
for i in (0, 5, 2):
    params[i].accumulate(1.0)
check("a batch waits for its last member, in whatever order they come",
      len(opt.steps_run) == runs and params[0].grad is not None and params[2].grad is not None)
params[4].accumulate(1.0)
params[3].accumulate(1.0)  # the second parameter gets no gradient this pass
check("updated once complete", [ptrs for ptrs, _, _ in opt.steps_run[runs:]] ==
      [[ptr[5], ptr[4]], [ptr[3]]])
Event.done = False  # the updates still run when the pass returns
hooked = [params[i].made for i in (5, 4, 3)]
rest = [params[i].made for i in (2, 0)]
sib.backward_end()
Event.done = True
check("at the pass's end the gradients updated from their hooks go unmarked; those of the rest, "
      "updated after it returned (the stream they were made on not known), are marked",
      all(g.recorded == [] for g in hooked) and all(g.recorded == [update] for g in rest))
check("when backward returns, the rest of a batch whose members did not all get a gradient",
      [ptrs for ptrs, _, _ in opt.steps_run[runs:]] == [[ptr[5], ptr[4]], [ptr[3]], [ptr[0], ptr[2]]]
      and all(p.grad is None for p in params) and params[1].value == 19.0)
sib.step_post()
backward(sib, params, [1.0] * 6)  # batches as in the second pass again for the next
sib.step_post()
sib.backward_begin()
params[2].accumulate(1.0)
text = said(lambda: params[1].accumulate(1.0, sparse=True))
check("cut short, a batch's gradients are left to the job's step, which applies them",
      "off: a parameter's gradient is sparse" in text and params[2].grad is not None)
sib.backward_end()
opt.step()
check("applied once", params[2].value == 27.5 and params[1].value == 18.0)


# Incomplete batches hold at most _HELD_BYTES of gradients on a GPU: past
# it, the oldest is updated as it stands, and its other members later, alone
# or together; each parameter once.
torch, auto, sib, params, opt = job(n=10)
for p in params:
    p.n = (30 << 20) // 4  # 30 MiB: two to a batch
said(lambda: backward(sib, params, [1.0] * 10))  # p9 p8 | p7 p6 | ... | p1 p0
sib.step_post()
runs = len(opt.steps_run)
sib.backward_begin()
for i in (9, 7, 5, 3):  # four incomplete batches: 120 MiB held
    params[i].accumulate(1.0)
check("incomplete batches wait within the bytes they may hold", len(opt.steps_run) == runs)
params[1].accumulate(1.0)  # 150 MiB: the oldest goes
check("past the bytes incomplete batches may hold, the oldest is updated as it stands",
      [ptrs for ptrs, _, _ in opt.steps_run[runs:]] == [[params[9].ptr]] and
      params[9].grad is None and sib.held["cuda:0"] == 120 << 20)
for i in (8, 6, 4, 2, 0):
    params[i].accumulate(1.0)
sib.backward_end()
check("its other member later, alone; every parameter updated once",
      [ptrs for ptrs, _, _ in opt.steps_run[runs:]] ==
      [[params[9].ptr], [params[8].ptr]] + [[params[i].ptr, params[i - 1].ptr] for i in (7, 5, 3, 1)]
      and [p.value for p in params] == [10.0 * (i + 1) - 1.0 for i in range(10)])

# A batch in parts (its state on the host, more than half the ring) whose
# second part raises: the first part's gradients are gone, so the job's step
# does not apply them again; the pass fails and leaves the rest to the job.
torch, auto, sib, params, opt = job()
said(lambda: backward(sib, params, [1.0] * 3))
sib.step_post()
for i, p in enumerate(params):
    opt.state[p]["m"] = Tensor(0x9000 + i, 1000 * (3 - i), 10.0, torch.current)
    auto.rt.host.add(0x9000 + i)
calls = []


def second_part_raises(self):
    calls.append([p.ptr for p in self.param_groups[0]["params"]])
    if len(calls) == 2:
        raise RuntimeError("out of memory")
    for p in self.param_groups[0]["params"]:
        p.value -= self.param_groups[0]["lr"] * p.grad.value


type(opt).step = second_part_raises
raised = False
try:
    sib.backward_begin()
    for p in reversed(params):
        p.accumulate(1.0)
except RuntimeError:
    raised = True
    text = said(lambda: sib.backward_end(failed=True))
del type(opt).step
opt.step()
check("a later part raises: the earlier part keeps its one update, the rest the job's step applies",
      raised and len(calls) == 2 and len(calls[0]) < 3 and "off: the backward pass raised" in text and
      [p.value for p in params] == [9.0, 19.0, 29.0])

# A pass that raises with a batch incomplete: it is not updated, its
# gradients are the job's; and an update that finds the optimizer disarmed
# by another GPU's thread goes on with the optimizer it began with.
torch, auto, sib, params, opt = job()
said(lambda: backward(sib, params, [1.0] * 3))
sib.step_post()
sib.backward_begin()
params[2].accumulate(1.0)
text = said(lambda: sib.backward_end(failed=True))
check("a failed pass leaves an incomplete batch's gradients to the job",
      "off: the backward pass raised" in text and params[2].grad is not None and
      params[2].value == 29.5)
torch, auto, sib, params, opt = job()
said(lambda: backward(sib, params, [1.0] * 3))
sib.step_post()
for i, p in enumerate(params):  # a batch in two parts, as above
    opt.state[p]["m"] = Tensor(0x9000 + i, 1000 * (3 - i), 10.0, torch.current)
    auto.rt.host.add(0x9000 + i)
step = type(opt).step


def disarmed_meanwhile(self):  # at the first part
    if sib.state == "armed":
        said(lambda: sib._disarm("another GPU's thread"))
    step(self)


type(opt).step = disarmed_meanwhile
sib.backward_begin()
for p in reversed(params):
    p.accumulate(1.0)
sib.backward_end()
del type(opt).step
check("disarmed by another thread during a batch's first part: its second completes with "
      "the optimizer it began with",
      sib.state == "off" and opt.steps_run[-1][0] != [p.ptr for p in params] and
      [p.value for p in params] == [9.0, 19.0, 29.0] and all(p.grad is None for p in params))


def staged_job():
    """Armed, one step taken, each parameter's moment "m" on the host."""
    torch, auto, sib, params, opt = job()
    said(lambda: backward(sib, params, [1.0] * 3))
    sib.step_post()
    for i, p in enumerate(params):
        opt.state[p]["m"] = Tensor(0x9000 + i, 1000, 10.0, torch.current)
        auto.rt.host.add(0x9000 + i)
    return torch, auto, sib, params, opt


# A staged update that replaces a staged tensor and removes a key: the
# optimizer's state follows; the replaced tensor is not freed before its copy
# in is done, and nothing is copied back into it.
torch, auto, sib, params, opt = staged_job()
for p in params:
    opt.state[p]["gone"] = 1
old = [opt.state[p]["m"] for p in params]


def replacing(self):
    for group in self.param_groups:
        for p in group["params"]:
            st = self.state[p]
            st["m"] = Tensor(0xA000 + p.ptr, 1000, 99.0, torch.current)
            del st["gone"]


type(opt).step = replacing
copies = len(COPIES)
counted = sib.staged_bytes()
backward(sib, params, [1.0] * 3)
lane = sib.lanes["cuda:0"]
check("a replaced staged tensor counts its copy in and no copy out",
      [b - a for a, b in zip(counted, sib.staged_bytes())] == [3 * 4000, 0])
check("a replaced staged tensor and a removed key: the optimizer's state follows",
      all(opt.state[p]["m"].ptr == 0xA000 + p.ptr and "gone" not in opt.state[p] for p in params))
check("the replaced tensor waits for its copy in; nothing is copied back into it",
      all(m.recorded == [lane.copy_in.name] for m in old) and
      [c[0] for c in COPIES[copies:]] == [lane.copy_in.name] * 3)
del type(opt).step

# A staged update that raises: the pass fails, the job's stream still waits
# for the lane, and the ring is freed.
torch, auto, sib, params, opt = staged_job()


def raising(self):
    raise RuntimeError("the update failed")


type(opt).step = raising
raised = False
try:
    sib.backward_begin()
    for p in reversed(params):  # the last completes the batch, whose update raises
        p.accumulate(1.0)
except RuntimeError:
    raised = True
    text = said(lambda: sib.backward_end(failed=True))
lane = sib.lanes["cuda:0"]
check("a staged update that raises: the job waits for the lane, the ring is freed, it turns off",
      raised and torch.main.waited[-3:] == [lane.copy_in.name, lane.update.name,
                                            lane.copy_out.name] and
      lane.ring is None and len(torch.rings) == 1 and "off: the backward pass raised" in text)
del type(opt).step

# No room on the GPU for the ring: that pass's updates read the host's memory,
# said once; the next pass tries again.
torch, auto, sib, params, opt = staged_job()
made = torch.empty


def no_room(n, dtype, device):
    raise RuntimeError("CUDA out of memory")


torch.empty = no_room
copies = len(COPIES)
text = said(lambda: backward(sib, params, [1.0] * 3))
text += said(lambda: (sib.step_post(), backward(sib, params, [1.0] * 3)))
lane = sib.lanes["cuda:0"]
check("no room for the ring: updated where the state lies, said once",
      [p.value for p in params] == [8.5, 18.5, 28.5] and
      all(opt.state[p]["m"].value == 12.0 for p in params) and len(COPIES) == copies
      and text.count("no room on cuda:0 for the ring") == 1)
torch.empty = made
sib.step_post()
backward(sib, params, [1.0] * 3)
check("the next pass with room stages again", len(torch.rings) == 1 and
      all(opt.state[p]["m"].value == 13.0 for p in params))

# A streaming policy is told of each weight written outside its write phases.
torch, auto, sib, params, opt = job(streaming=True)
said(lambda: backward(sib, params, [1.0, 1.0, 1.0]))
check("umpol_written for each weight, before its update",
      auto.rt.written_ptrs == [0x3000, 0x2000, 0x1000])

# Gradient accumulation: off before the second pass runs, which then
# accumulates for the job's own step.
torch, auto, sib, params, opt = job()
said(lambda: backward(sib, params, [1.0, 1.0, 1.0]))
text = said(lambda: backward(sib, params, [1.0, 1.0, 1.0]))
check("a second pass before a step turns it off, saying what was lost",
      "off: a second backward pass" in text and all(not p.hooks for p in params))
check("the second pass's gradients are left for the job's step",
      all(p.grad is not None for p in params))
opt.step()
check("the job's step applies them", [p.value for p in params] == [9.0, 19.0, 29.0])

# Clipping after the updates: off, saying the step went unclipped.
torch, auto, sib, params, opt = job()
said(lambda: backward(sib, params, [1.0, 1.0, 1.0]))
text = said(lambda: sib.gradients_read("torch.nn.utils.clip_grad_norm_"))
check("clipping turns it off and says the step went unclipped",
      "clip_grad_norm_ after the gradients were applied" in text and sib.state == "off")

# An optimizer made after arming: off before the next pass.
torch, auto, sib, params, opt = job()
said(lambda: backward(sib, params, [1.0, 1.0, 1.0]))
text = said(lambda: sib.optimizer_made(torch.optim.AdamW(params, lr=0.1)))
check("another optimizer turns it off", "off: the job made another optimizer" in text)

# Never armed (the job keeps its optimizers: they are watched by weak
# reference): two optimizers, a subclass, a non-elementwise optimizer, a
# distributed job, a closure before the first pass.
kept = []
for why, setup in (
        ("two optimizers", lambda t, s, p: kept.append(t.optim.AdamW(p, lr=1)) or
         s.optimizer_made(kept[-1])),
        ("a subclass of AdamW", None),
        ("LBFGS", None),
        ("a distributed job", None),
        ("a closure", lambda t, s, p: s.refuse("the job steps with a closure"))):
    cls = {"a subclass of AdamW": "MyAdamW", "LBFGS": "LBFGS"}.get(why, "AdamW")
    torch, auto, sib, params, opt = job(cls, world=2 if why == "a distributed job" else 1)
    text = said(lambda: setup and setup(torch, sib, params))
    text += said(lambda: backward(sib, params, [1.0, 1.0, 1.0]))
    check(f"off for {why}, saying so",
          "step in backward: off:" in text and sib.state == "off" and not opt.steps_run
          and all(p.grad is not None for p in params))

# An update that raises: the job's groups as they were, and the pass, failed,
# turns it off, saying which parameters were updated.
torch, auto, sib, params, opt = job()


def failing_step():
    raise RuntimeError("the update failed")


type(opt).step = lambda self: failing_step()
raised = False
text = ""
try:
    said(sib.backward_begin)
    params[-1].accumulate(1.0)
except RuntimeError:
    raised = True
    text = said(lambda: sib.backward_end(failed=True))
check("a failed update raises, the groups as they were, and it turns off",
      raised and opt.param_groups[0]["params"] == params and "off: the backward pass raised" in text)
del type(opt).step

# The ring's regions: taken in turn, wrapping to the start where the next
# does not fit; a pass can wrap early, so a region waits for every listed
# region it overlaps (here the fourth, left behind by the third that did not
# reach the end), and a new pass starts from a free ring.
from umpol._overlap import _Lane  # noqa: E402
torch = make_torch()
lane = _Lane(torch, "cuda:0")
lane.ring = Tensor(("ring", 0), 10)
taken, waited = [], []
for i, need in enumerate([4, 4, 2, 6, 5]):
    before = len(lane.copy_in.waited)
    start = lane.take(need)
    waited.append(lane.copy_in.waited[before:])
    event = Event()
    event.record(Stream(f"out{i}"))
    lane.busy.append((start, start + need, event))
    taken.append(start)
check("regions taken in turn, wrapping where the next does not fit",
      taken == [0, 4, 8, 0, 0])
check("each waits for the copies out of every region it overlaps",
      waited == [[], [], [], ["event of out0", "event of out1"], ["event of out3"]])

# What a lane's stream reads and the job's stream lets go is kept until the
# host sees that work done. Past _LAG_BYTES of gradients the oldest goes
# anyway: after the stream it was made on waits for it where that stream is
# the one current, else marked used by its reader (record_stream). At the
# pass's end what the job's stream made and has waited for goes as it is;
# the rest, and a ring made elsewhere, are marked and let go.
torch = make_torch()
lane = _Lane(torch, "cuda:0")
job_stream = Stream("job")
g1, g2, g3, g4, ring = Grad(1.0), Grad(2.0), Grad(3.0), Grad(4.0), Grad(0.0)
lag_bytes, overlap._LAG_BYTES = overlap._LAG_BYTES, 10
Event.done = False
lane.keep(lane.update, [g1], 6, job_stream, job_stream)
lane.keep(lane.copy_out, [ring], 0, job_stream, job_stream)
check("kept while their work runs, under the bytes allowed: the job's stream waits for none",
      [t for _, _, t, _, _ in lane.kept] == [[g1], [ring]] and lane.kept_bytes == 6 and
      job_stream.waited == [] and g1.recorded == [] and ring.recorded == [])
lane.keep(lane.update, [g2], 6, job_stream, job_stream)
check("past them, the job's stream (the one they were made on) waits for the oldest and lets it "
      "go, and no more once within them (a ring counts nothing)",
      [t for _, _, t, _, _ in lane.kept] == [[ring], [g2]] and lane.kept_bytes == 6 and
      job_stream.waited == [f"event of {lane.update.name}"] and g1.recorded == [])
lane = _Lane(torch, "cuda:0")
job_stream = Stream("job")
lane.keep(lane.update, [g3], 6, job_stream, None)  # made on a stream not known (the pass returned)
lane.keep(lane.update, [g2], 6, job_stream, job_stream)
check("one made on a stream not known goes marked used by its reader instead, with no wait",
      [t for _, _, t, _, _ in lane.kept] == [[g2]] and g3.recorded == [lane.update.name] and
      job_stream.waited == [] and g2.recorded == [])
g5 = Grad(5.0)
lane.keep(lane.update, [g5], 1, job_stream, None)
lane.ring = Grad(0.0)
ring = lane.ring
lane.let_go_all(job_stream, True)
check("at the pass's end, the job's stream having waited for the lane, what was made on it goes "
      "as it is; the rest is marked used by its reader, the ring (made elsewhere) by the three "
      "streams", not lane.kept and lane.kept_bytes == 0 and lane.ring is None and
      g2.recorded == [] and g5.recorded == [lane.update.name] and
      ring.recorded == [lane.copy_in.name, lane.update.name, lane.copy_out.name])
g6 = Grad(6.0)
lane.keep(lane.update, [g6], 1, job_stream, job_stream)
lane.let_go_all(job_stream, False)
check("where the job's stream did not wait for the lane, even that is marked",
      g6.recorded == [lane.update.name])
Event.done = True
lane.keep(lane.update, [g4], 6, job_stream, job_stream)
check("what the host sees done is let go with no wait and no mark", not lane.kept and
      lane.kept_bytes == 0 and job_stream.waited == [] and g4.recorded == [])


class CapturedEvent(Event):
    def query(self):
        raise RuntimeError("operation not permitted when stream is capturing")


torch.cuda.is_current_stream_capturing = lambda: True
torch.cuda.Event = CapturedEvent
lane.keep(lane.update, [Grad(5.0)], 6, job_stream, job_stream)
check("while a graph is captured no event is asked (a captured one cannot be): kept",
      len(lane.kept) == 1)
lane.keep(lane.update, [Grad(6.0)], 6, job_stream, job_stream)
check("and past the bytes allowed the oldest goes after a wait, still without asking",
      len(lane.kept) == 1 and len(job_stream.waited) == 1)
overlap._LAG_BYTES = lag_bytes

# In a pass, staged: the gradients and the ring let go before the pass ends
# are kept while their work runs, unmarked, and let go as they are when the
# pass ends, after the job's stream (which made them) waited for the lane.
torch, auto, sib, params, opt = staged_job()
said(lambda: backward(sib, params, [1.0] * 3))
sib.step_post()
Event.done = False
waits = len(torch.main.waited)
counted = sib.staged_bytes()
sib.backward_begin()
for p in reversed(params):
    p.accumulate(1.0)
lane = sib.lanes["cuda:0"]
check("the bytes staged in a pass are counted each way: each parameter's moment in and out",
      [b - a for a, b in zip(counted, sib.staged_bytes())] == [3 * 4000, 3 * 4000])
kept = [t for _, _, ts, _, _ in lane.kept for t in ts]
grads = [p.made for p in params]
rings = [t for t in kept if getattr(t, "dtype", None) == "uint8"]
check("the ring, let go once the pass staged all there was, is kept too, unmarked",
      lane.ring is None and len(rings) == 1 and rings[0].recorded == [])
check("in the pass, the gradients of queued updates are kept, unmarked; the job's stream waits "
      "for none", all(any(g is t for t in kept) for g in grads) and
      all(g.recorded == [] for g in grads) and torch.main.waited[waits:] == [])
sib.backward_end()
Event.done = True
check("at its end, once the job's stream waited for the lane, they and the ring (all made on "
      "that stream) are let go unmarked", not lane.kept and
      all(g.recorded == [] for g in grads) and rings[0].recorded == [] and
      torch.main.waited[waits:] == [lane.copy_in.name, lane.update.name, lane.copy_out.name])

# What the job does that the updates in backward cannot follow, once armed:
# each turns it off before anything else is applied, saying what was lost.
cases = {
    "zero_grad after backward (a skipped batch)": (
        lambda t, s, p, o: (backward(s, p, [1.0] * 3), s.gradients_cleared()),
        "off: the job cleared its gradients after a backward pass"),
    "a hyperparameter changed between backward and step": (
        lambda t, s, p, o: (backward(s, p, [1.0] * 3), o.param_groups[0].update(lr=0.1),
                            s.step_pre(o)),
        "off: the job changed the optimizer's hyperparameters"),
    "a step pre-hook added": (
        lambda t, s, p, o: (o._optimizer_step_pre_hooks.update({1: print}), s.step_pre(o)),
        "off: the optimizer has a step pre-hook"),
    "a sparse gradient": (
        lambda t, s, p, o: (s.backward_begin(), p[0].accumulate(1.0, sparse=True)),
        "off: a parameter's gradient is sparse"),
    "a gradient accumulated twice in one pass": (
        lambda t, s, p, o: (s.backward_begin(), p[0].accumulate(1.0), p[0].accumulate(1.0)),
        "off: a parameter's gradient was accumulated twice"),
    "a parameter taken out of its group": (
        lambda t, s, p, o: (s.backward_begin(), o.param_groups[0]["params"].remove(p[0]),
                            p[0].accumulate(1.0)),
        "off: a parameter left its group"),
    "GradScaler": (
        lambda t, s, p, o: s.refuse("the job scales its loss with GradScaler"),
        "off: the job scales its loss with GradScaler"),
}
for what, (do, want) in cases.items():
    torch, auto, sib, params, opt = job()
    said(lambda: sib.backward_begin() or sib.backward_end())  # armed
    sib.step_post()
    text = said(lambda: do(torch, sib, params, opt))
    check(f"off for {what}, saying so", want in text and sib.state == "off" and
          all(not p.hooks for p in params))

# Never armed for an optimizer with a step pre-hook, or a global one of another's.
torch, auto, sib, params, opt = job()
opt._optimizer_step_pre_hooks[1] = print
text = said(lambda: backward(sib, params, [1.0] * 3))
check("off for a step pre-hook of the job's", "off: the optimizer has a step pre-hook" in text)
torch, auto, sib, params, opt = job()
torch.optim.optimizer._global_optimizer_pre_hooks[1] = print
text = said(lambda: backward(sib, params, [1.0] * 3))
check("off for a global pre-hook not umpol's", "off: a global optimizer step pre-hook" in text)

# Parameters on two GPUs: a side stream each, and the job's stream waits for both.
torch, auto, sib, params, opt = job()
params[1].device = "cuda:1"
said(lambda: backward(sib, params, [1.0] * 3))
sib.step_post()
runs = len(opt.steps_run)
backward(sib, params, [1.0] * 3)
check("a side stream per GPU", sorted(sib.lanes) == ["cuda:0", "cuda:1"] and
      sorted(torch.main.waited) == ["side1", "side2", "side3", "side4", "side5", "side6"])
check("a batch per GPU: the first GPU's two parameters together, though the second's came "
      "between them", [(ptrs, s) for ptrs, s, _ in opt.steps_run[runs:]] ==
      [([0x2000], sib.lanes["cuda:1"].update.name),
       ([0x3000, 0x1000], sib.lanes["cuda:0"].update.name)])


# After the pass that made the state, the part on the host goes to the
# parameters updated first (the last layers), the GPU's to those updated last:
# parameters whose state has one shape trade its memory, each keeping its
# values, through a bounce buffer on the job's stream; the step count stays.
class Elems(Float32):
    """A GPU-addressable tensor of float values at PTR: views share them."""

    def __init__(self, ptr, values, device="cuda:0", base=None, at=0, current=None, contiguous=True):
        self.ptr, self.data, self.at = ptr, values if base is None else base.data, at
        self.n = len(values) if base is None else values
        self.shape, self.dtype, self.device, self.is_cuda = (self.n,), "float32", device, True
        self.value, self.copies, self.contiguous = 0.0, [], contiguous
        self.current = current if base is None else base.current

    def untyped_storage(self):
        return Storage(self.ptr)

    def values(self):
        return self.data[self.at:self.at + self.n]

    def view(self, shape):
        return self

    def __getitem__(self, part):
        start = part.start or 0
        return Elems(self.ptr, part.stop - start, self.device, base=self, at=self.at + start)

    def copy_(self, src, non_blocking=False):
        if isinstance(src, Elems):
            self.data[self.at:self.at + self.n] = src.values()
        TRADES.append((self.current["stream"].name, src.ptr, self.ptr, self.n))
        return self


TRADES = []  # (stream, from, to, elements) of every copy between Elems


def trading_job(host, fail_at=None):
    """Six parameters on cuda:1, updated p5 first; the first update of each
    makes its moments m and v at 0x9000 + i and 0xA000 + i, a value each
    element; HOST: the moments the runtime says lie on the host. p2 has a
    shape of its own; p5 and p1 also hold a non-contiguous tensor of their
    shape. FAIL_AT: the bounce buffer that runs out of memory."""
    torch, auto, sib, params, opt = job(n=6)
    for p in params:
        p.device = "cuda:1"
    params[2].n = 2
    bounces, ring_empty = [], torch.empty
    torch.capturing = False
    torch.cuda.is_current_stream_capturing = lambda: torch.capturing

    def empty(n, dtype, device):
        if dtype == torch.uint8:  # the ring
            return ring_empty(n, dtype, device)
        bounces.append((n, device))
        if len(bounces) == fail_at:
            raise RuntimeError("CUDA out of memory. Tried to allocate 64 MiB\nmore")
        return Elems("bounce", [0.0] * n, device, current=torch.current)

    torch.empty = empty
    step = type(opt).step

    def making(self):  # the optimizer makes a parameter's state at its first update
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and p not in self.state:
                    i = params.index(p)
                    self.state[p] = {k: Elems(base + i, [float(10 * i + j + off) for j in range(p.n)],
                                              "cuda:1", current=torch.current)
                                     for k, base, off in (("m", 0x9000, 0.0), ("v", 0xA000, 0.5))}
                    if i in (1, 5):
                        self.state[p]["nc"] = Elems(0xB000 + i, [0.0] * p.n, "cuda:1",
                                                    current=torch.current, contiguous=False)
        step(self)

    type(opt).step = making
    auto.rt.host.update(host)
    return torch, auto, sib, params, opt, bounces, lambda: setattr(type(opt), "step", step)


# p5 p4 p3 on the GPU; p2 (its own shape) and p1 on the host; p0 half and half.
host = {0x9002, 0xA002, 0x9001, 0xA001, 0x9000}
torch, auto, sib, params, opt, bounces, restore = trading_job(host)
text = said(lambda: backward(sib, params, [1.0] * 6))
values = {i: {k: t.values() for k, t in opt.state[p].items() if isinstance(t, Elems)}
          for i, p in enumerate(params)}
where = [(opt.state[p]["m"].ptr, opt.state[p]["v"].ptr) for p in params]
check("the state on the host went to the parameter updated first, the GPU's to the one "
      "updated last of its shape; one of its own shape, and one half on each side, kept theirs",
      where == [(0x9000, 0xA000), (0x9005, 0xA005), (0x9002, 0xA002), (0x9003, 0xA003),
                (0x9004, 0xA004), (0x9001, 0xA001)])
check("each parameter kept its values, each key its own",
      all(values[i]["m"] == [float(10 * i + j) for j in range(p.n)] and
          values[i]["v"] == [float(10 * i + j + 0.5) for j in range(p.n)]
          for i, p in enumerate(params)))
check("a non-contiguous tensor and the step count stay with their parameter",
      opt.state[params[5]]["nc"].ptr == 0xB005 and opt.state[params[1]]["nc"].ptr == 0xB001 and
      all(opt.state[p]["step"] == 1 for p in params))
check("on the job's stream, through one buffer on the tensors' GPU, in parts of at most "
      "_TRADE_ELEMENTS", bounces == [(1000, "cuda:1")] and
      all(s == "main" for s, _, _, _ in TRADES) and len(TRADES) == 2 * 3)
check("said once, with what it copied",
      "went to the 1 parameters updated first in backward (0.00 GiB copied each way" in text)
sib.step_post()
TRADES.clear()
text = said(lambda: backward(sib, params, [1.0] * 6))
check("once: the next pass stages the state on the host, the first updated's first, and "
      "trades nothing", not bounces[1:] and "went to" not in text and
      [to for _, _, to, _ in TRADES][:2] == [0x9001, 0xA001])
sib.step_post()
sib.state_loaded()
text = said(lambda: backward(sib, params, [1.0] * 6))
check("a loaded state is not traded (its tensors may be the job's own)",
      "went to" not in text and not bounces[1:])
restore()

# Parts, a capture and a failed buffer.
trade_elements, overlap._TRADE_ELEMENTS = overlap._TRADE_ELEMENTS, 600  # 1000 elements: two parts through one buffer
TRADES.clear()
torch, auto, sib, params, opt, bounces, restore = trading_job(host)
torch.capturing = True  # the first pass captured in a CUDA graph: no trade in it
text = said(lambda: backward(sib, params, [1.0] * 6))
check("nothing traded while a graph is captured", not bounces and not sib.arranged)
torch.capturing = False
sib.step_post()
said(lambda: backward(sib, params, [1.0] * 6))
check("the next pass trades, in two parts a tensor, and the ring is sized again for the state "
      "now on the host", sib.arranged and bounces == [(600, "cuda:1")] and
      sum(1 for t in TRADES if t[1] == "bounce") == 2 * 2 and
      sib.lanes["cuda:1"].ring_bytes is None)
restore()
overlap._TRADE_ELEMENTS = trade_elements
torch, auto, sib, params, opt, bounces, restore = trading_job(host | {0xA000}, fail_at=1)
text = said(lambda: backward(sib, params, [1.0] * 6))
check("no room for the buffer: nothing traded, every parameter's state its own, and why",
      "stays with the parameters updated last (0 of 2 pairs traded; CUDA out of memory" in text
      and [opt.state[p]["m"].ptr for p in params] == [0x9000 + i for i in range(6)] and
      sib.arranged and sib.state == "armed")
restore()
torch, auto, sib, params, opt, bounces, restore = trading_job({0x9005, 0xA005, 0x9002, 0xA002})
text = said(lambda: backward(sib, params, [1.0] * 6))
check("where the host's part is the first updated's already, nothing is traded",
      not bounces and "went to" not in text and sib.arranged)
restore()
torch, auto, sib, params, opt, bounces, restore = trading_job(host)
for i, p in enumerate(params):  # a state the job loaded before its first backward pass
    opt.state[p] = {k: Elems(base + i, [0.0] * p.n, "cuda:1", current=torch.current)
                    for k, base in (("m", 0x9000), ("v", 0xA000))}
text = said(lambda: backward(sib, params, [1.0] * 6))
check("a state loaded before the first pass is not traded either", not bounces and "went to" not in text)
restore()

# The recomputation's copies of weights on the host (weights ahead's handoff,
# _ahead._Recompute): armed, the step in backward takes them; an update runs
# on its parameters' copies, which are then copied back to the weights on the
# copy-out stream after it and kept until that is done, unmarked; the weights
# are their own again at once; the copies no update took are let go when the
# pass ends; disarmed, the handoff stops.
class Ahead:
    def __init__(self):
        self.kept, self.handoff, self.lets = {}, None, 0

    def take(self, p):
        kept = self.kept.pop(id(p), None)
        return None if kept is None else kept[1:]

    def let_go(self):
        self.lets += 1
        self.kept.clear()


torch, auto, sib, params, opt = job()
auto.ahead = Ahead()
for p in params:
    p.data = Tensor(p.ptr, 1000, current=torch.current)
asked = []
sib.backward_begin()
asked.append(auto.ahead.handoff(params[0]))  # armed, in the pass that makes the state
for p in reversed(params):
    p.accumulate(1.0)
said(lambda: sib.backward_end())
sib.step_post()
check("armed, the step in backward says which weights it takes the recomputation's copies of: "
      "none in the pass that makes their state, none outside a pass",
      auto.ahead.handoff == sib.takes_copy and asked == [False] and not sib.takes_copy(params[0]))
own = [p.data for p in params]
copies = [Tensor(0xC000 + i, 1000, current=torch.current) for i in range(3)]
for i in (0, 2):  # the first and last parameters' weights lay on the host
    auto.ahead.kept[id(params[i])] = (params[i], copies[i], torch.main, 4000)
ran_on = {}


def recording(self):
    for group in self.param_groups:
        for q in group["params"]:
            ran_on[q.ptr] = q.data.ptr


type(opt).step = recording
lets, out0, copied = auto.ahead.lets, getattr(sib.lanes.get("cuda:0"), "out_bytes", 0), len(COPIES)
Event.done = False
sib.backward_begin()
waits_at = []  # (stream waited for, copies queued by then) of the copy-out stream
lane_out = sib._lane("cuda:0").copy_out
plain_wait = lane_out.wait_stream
lane_out.wait_stream = lambda other: (waits_at.append((other.name, len(COPIES))),
                                      plain_wait(other))
check("in the next pass, it takes those of the parameters it updates",
      all(sib.takes_copy(p) for p in params))
for p in reversed(params):
    p.accumulate(1.0)
lane = sib.lanes["cuda:0"]
kept = [t for _, _, ts, _, _ in lane.kept for t in ts]
check("an update runs on the recomputation's copies where it has them, on the weight else",
      ran_on == {0x1000: 0xC000, 0x2000: 0x2000, 0x3000: 0xC002})
check("the weights are their own again once the update is queued",
      all(p.data is d for p, d in zip(params, own)))
check("each copy is copied back to its weight on the copy-out stream, after the update and "
      "after the stream the copies were made on",
      [c for c in COPIES[copied:]] == [(lane.copy_out.name, 0xC002, 0x3000),
                                       (lane.copy_out.name, 0xC000, 0x1000)] and
      waits_at == [(lane.update.name, copied), ("main", copied)])
check("and kept meanwhile, counted as crossing the link out",
      any(t is copies[0] for t in kept) and any(t is copies[2] for t in kept) and
      lane.out_bytes - out0 == 2 * 4000)
auto.ahead.kept[id(params[1])] = (params[1], copies[1], torch.main, 4000)  # taken by no update
sib.backward_end()
Event.done = True
check("at the pass's end the copies are let go unmarked, and those no update took too",
      all(c.recorded == [] for c in copies) and not auto.ahead.kept and auto.ahead.lets == lets + 1)
# A copy made on another stream than the one the gradient was accumulated on:
# the update follows that stream too. An update that raises: the weights are
# their own again and what it wrote goes back to them all the same.
side = torch.cuda.Stream("cuda:0")
auto.ahead.kept[id(params[2])] = (params[2], copies[2], side, 4000)
sib.step_post()
sib.backward_begin()
lane.update.waited.clear()
for p in reversed(params):
    p.accumulate(1.0)
check("an update follows the stream its copy was made on", side.name in lane.update.waited)
sib.backward_end()
sib.step_post()


def raising(self):
    raise RuntimeError("the update failed")


type(opt).step = raising
sib.backward_begin()
auto.ahead.kept[id(params[1])] = (params[1], copies[1], torch.main, 4000)
copied = len(COPIES)
try:
    for p in reversed(params):
        p.accumulate(1.0)
    raised = False
except RuntimeError:
    raised = True
check("an update that raises: the weight is its own again, its copy copied back all the same",
      raised and params[1].data is own[1] and
      COPIES[copied:] == [(lane.copy_out.name, 0xC001, 0x2000)])
said(lambda: sib.backward_end(failed=True))
del type(opt).step
check("disarmed, the recomputation keeps no copy for the updates", auto.ahead.handoff is None)

# A weight on the host that no recomputation copied (an Embedding's table):
# the lane makes a copy on the job's stream (which lets it go), fills it on
# its copy-in stream once that follows the job's, and the update follows the
# copy in; the copy goes back on the copy-out stream after the update, kept
# meanwhile; both ways counted. Not a weight under 1 MiB or over 512 MiB, nor
# one that is not plain and contiguous, nor while the policy streams or a
# graph is captured. Where there is no room for a copy, that weight and the
# rest of the pass's are updated where they lie, said once; the next pass
# tries again.
MiB = 1 << 20


def staging_job(host, streaming=False, sizes=(4 * MiB,) * 3):
    torch, auto, sib, params, opt = job(streaming=streaming)
    torch.Tensor, torch.strided, torch.contiguous_format = Tensor, "strided", "contiguous"
    torch.no_grad = contextlib.nullcontext
    made = []

    def empty_like(t, memory_format=None):
        copy = Tensor(0xE000 + len(made), t.n, current=torch.current)
        copy.made_on = torch.current["stream"].name
        made.append(copy)
        return copy

    torch.empty_like = empty_like
    torch.made = made
    for p, size in zip(params, sizes):
        p.n = size // 4
        p.layout = "strided"
        p.is_contiguous = lambda: True
        p.data = Tensor(p.ptr, p.n, current=torch.current)
    auto.rt.host_bytes = lambda ptr: 3 * MiB if ptr in host else 0
    backward(sib, params, [1.0] * 3)  # the pass that makes the state
    sib.step_post()
    ran_on.clear()
    type(opt).step = recording
    lane = sib._lane("cuda:0")
    waits = []  # (stream, the stream it waited for, copies queued by then)
    for stream in (lane.copy_in, lane.update, lane.copy_out):
        plain = stream.wait_stream
        stream.wait_stream = lambda other, s=stream, plain=plain: (
            waits.append((s.name, other.name, len(COPIES))), plain(other))
    torch.waits = waits
    return torch, auto, sib, params, opt


torch, auto, sib, params, opt = staging_job({0x2000})
own = [p.data for p in params]
lane = sib._lane("cuda:0")
in0, out0, copied = lane.in_bytes, lane.out_bytes, len(COPIES)
Event.done = False
sib.backward_begin()
for p in reversed(params):
    p.accumulate(1.0)
copy = torch.made[-1] if torch.made else None
kept = [t for _, _, ts, _, _ in lane.kept for t in ts]
check("a weight on the host that no recomputation copied is updated on a copy the lane made",
      len(torch.made) == 1 and ran_on == {0x1000: 0x1000, 0x2000: copy.ptr, 0x3000: 0x3000})
at = COPIES.index((lane.copy_in.name, 0x2000, copy.ptr)) \
    if (lane.copy_in.name, 0x2000, copy.ptr) in COPIES else -1
check("made on the job's stream, filled on the copy-in stream after that followed the job's",
      copy.made_on == "main" and at >= copied and
      (lane.copy_in.name, "main", at) in torch.waits)
check("the update follows the copy in",
      any(w[:2] == (lane.update.name, lane.copy_in.name) and w[2] > at for w in torch.waits))
check("the copy goes back on the copy-out stream after the update, kept meanwhile; the weight "
      "is its own",
      COPIES[at + 1:] == [(lane.copy_out.name, copy.ptr, 0x2000)] and
      (lane.copy_out.name, lane.update.name, at + 1) in torch.waits and
      any(t is copy for t in kept) and all(p.data is d for p, d in zip(params, own)))
check("its bytes on the host are counted both ways",
      lane.in_bytes - in0 == 3 * MiB and lane.out_bytes - out0 == 3 * MiB and
      lane.weights_in == 3 * MiB)
sib.backward_end()
Event.done = True
sib.step_post()
check("at the pass's end the copy is let go as it is (made on the job's stream, which waited)",
      copy.recorded == [])
del type(opt).step

for what, host, streaming, sizes, tweak in (
        ("under 1 MiB", {0x2000}, False, (4 * MiB, MiB // 2, 4 * MiB), None),
        ("over 512 MiB", {0x2000}, False, (4 * MiB, 520 * MiB, 4 * MiB), None),
        ("while the policy streams its weights", {0x2000}, True, (4 * MiB,) * 3, None),
        ("on the GPU", set(), False, (4 * MiB,) * 3, None),
        ("that is not contiguous", {0x2000}, False, (4 * MiB,) * 3, "contiguous"),
        ("that is not a plain tensor (a DTensor, say)", {0x2000}, False, (4 * MiB,) * 3, "sub"),
        ("while a CUDA graph is captured", {0x2000}, False, (4 * MiB,) * 3, "capture")):
    torch, auto, sib, params, opt = staging_job(host, streaming, sizes)
    if tweak == "contiguous":
        params[1].is_contiguous = lambda: False
    elif tweak == "sub":
        params[1].data = type("Sub", (Tensor,), {})(0x2000, params[1].n, current=torch.current)
    elif tweak == "capture":
        torch.cuda.is_current_stream_capturing = lambda: True
    backward(sib, params, [1.0] * 3)
    check(f"a weight {what} is updated where it lies",
          not torch.made and ran_on == {0x1000: 0x1000, 0x2000: 0x2000, 0x3000: 0x3000})
    del type(opt).step


# Something raises after weights were swapped for copies (here the runtime's
# answer for a later one): they are their own again, and written back.
torch, auto, sib, params, opt = staging_job({0x1000, 0x2000, 0x3000})
answers = auto.rt.host_bytes


def failing_answer(ptr):
    if ptr == 0x1000:
        raise OSError("the runtime is gone")
    return answers(ptr)


auto.rt.host_bytes = failing_answer
copied = len(COPIES)
try:
    said(lambda: backward(sib, params, [1.0] * 3))
    raised = False
except OSError:
    raised = True
lane = sib._lane("cuda:0")
check("an error after weights were swapped for copies: they are their own again, written back",
      raised and all(p.data.ptr == p.ptr for p in params) and len(torch.made) == 2 and
      sorted(c[2] for c in COPIES[copied:] if c[0] == lane.copy_out.name) == [0x2000, 0x3000])
del type(opt).step


def no_room_like(t, memory_format=None):
    torch.tries += 1
    raise RuntimeError("CUDA out of memory")


# Three weights of 100 MiB on the host, each a batch of its own: three updates a pass.
torch, auto, sib, params, opt = staging_job({0x1000, 0x2000, 0x3000}, sizes=(100 * MiB,) * 3)
torch.tries, fits = 0, torch.empty_like
torch.empty_like = no_room_like
text = said(lambda: backward(sib, params, [1.0] * 3))
check("where there is no room for a copy, that weight and the rest of the pass's are updated "
      "where they lie, tried once, said once",
      ran_on == {0x1000: 0x1000, 0x2000: 0x2000, 0x3000: 0x3000} and torch.tries == 1 and
      all(p.data.ptr == p.ptr for p in params) and text.count("no room on cuda:0 for a copy") == 1)
sib.step_post()
torch.empty_like = fits
text = said(lambda: backward(sib, params, [1.0] * 3))
check("the next pass copies them again, and says nothing more",
      len(torch.made) == 3 and all(ran_on[p.ptr] != p.ptr for p in params) and "no room" not in text)
del type(opt).step
print("python_overlap: all checks passed")
