"""The optimizer's step inside the backward pass (the policy's `update in
backward;`, or UMPOL_STEP_IN_BACKWARD=1).

An elementwise optimizer (AdamW, Adam, SGD, ...) updates a parameter from
its own gradient and state alone, and autograd knows when a parameter's
gradient is complete. From the job's first backward pass on, the parameters
are updated as soon as autograd has accumulated their gradients, on a side
stream of their GPU, and their gradients are let go once that is done. The
update of the last layers then overlaps the backward pass of the first ones,
and the step's gradients are never all on the card at once. They are updated
in batches: the parameters of one group on one GPU whose gradients became
complete one after another in the last pass (the step repeats), up to
_BATCH_BYTES, in one call of the optimizer's step once the last of them is
complete (one call for each part that fits half the ring where their state
is staged), so that the optimizer's Python runs once a batch, not once a
parameter; the first pass, which makes the state, updates each alone.
Incomplete batches (a member with no gradient this pass) are updated when
the pass returns, or earlier, the oldest first, while they hold more than
_HELD_BYTES. The job's optimizer.step() finds no gradients left and does
nothing; its learning-rate schedule, state and state_dict are the
optimizer's own, unchanged. State that lies in host memory is staged through
device memory around each update (_Lane), so the update's kernels leave the
GPU's threads to the backward pass and the link carries both directions
beside it; after the first pass, the part of the state on the host goes to
the parameters updated first (_host_state_first), whose copies then have the
rest of the pass to run beside. A weight that lies on the host and that the
recomputation in backward copied to the GPU (_ahead._Recompute) is updated on
that copy, which is then copied back to it (_take_copies, _Lane.write_back):
the link carries it in once. One that no recomputation copied (an
Embedding's table) is copied in on the lane's copy-in stream for its update
and back on its copy-out stream (_stage_weights), so that the update's
kernels do not read and write the host's memory across the link. The package
makes the job's stream wait for no update until the pass ends: a gradient is
let go once the host sees its update done (_Lane.keep), or, past _LAG_BYTES
of them, after the job's stream waits for the oldest (marked used by the
side stream instead where it was made on another); so the backward pass's
compute runs ahead of the link by that much. (Marked used by the lane's
streams with record_stream, a gradient is freed, under PyTorch's
cudaMallocAsync backend, on a stream of PyTorch's that first waits for the
updates queued by then, and the job's next allocation of its memory waits
for that stream: for its update, and so for its state's copy in, at every
batch.)

The arithmetic is the optimizer's own, run on a few parameters at a time, so
the losses are those of the job as written. The order is not: anything that
reads the gradients between backward() and step() would read nothing. So
the job asks for it (the policy or the variable), it arms only for one elementwise
torch.optim optimizer in one process, and it disarms, saying what the step
it could not follow lost, when the job steps after more than one backward
pass, clears its gradients before stepping, clips or unscales them, changes
the optimizer's hyperparameters between backward and step, or steps with a
closure. It arms before the first backward pass so that the step's peak, the
first step's included, never holds all the gradients. See umpol-python(7)."""
import collections
import sys
import threading
import weakref

from ._ahead import _AHEAD_BYTES, _put_back, copyable, out_of_memory

# A batch's parameters, at most: the gradients its first members hold until
# its last is complete.
_BATCH_BYTES = 64 << 20
# The gradients incomplete batches may hold on a GPU (members that got no
# gradient this pass, as a branch not taken): past it, the oldest is updated
# as it stands, so that the step's gradients are never all on the card.
_HELD_BYTES = 2 * _BATCH_BYTES
# The gradients kept past their queued update, on a GPU: the backward pass
# runs this far ahead of the updates (and their copies) before its stream
# waits for the oldest.
_LAG_BYTES = 4 * _BATCH_BYTES

# torch.optim classes whose update of a parameter reads only that parameter's
# gradient and state (step() not overridden by a subclass).
ELEMENTWISE = ("Adam", "AdamW", "SGD", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
               "RMSprop")


def optimizer_module(torch):
    """torch.optim.optimizer, which holds the global step hooks: torch.optim
    deletes its name after importing from it, so it is looked up by path."""
    module = getattr(torch.optim, "optimizer", None)
    return module if module is not None else sys.modules.get("torch.optim.optimizer")


def _say(text):
    print(f"umpol: step in backward: {text}", file=sys.stderr, flush=True)


class StepInBackward:
    """Watches the job's steps; once armed, updates the parameters from their
    backward hooks, in batches."""

    def __init__(self, torch, auto):
        self.torch, self.auto = torch, auto
        self.state = "waiting"    # for the first backward pass; then "armed", or "off" for good
        self.optimizers = []      # weak references to the optimizers made so far
        self.optimizer = None     # the one optimizer, once armed
        self.backwards = 0        # backward passes since the last step
        self.handles = []         # the parameters' post-accumulate hooks
        self.group = {}           # id of a parameter -> its group's index
        self.updated = set()      # ids of the parameters updated in backward at least once
        self.fired = set()        # ids of the parameters updated in this backward pass
        self.hyper = None         # the groups' hyperparameters the updates of this pass read
        self.lanes = {}           # device -> its _Lane: the streams the updates run on
        self.queued = set()       # devices with updates queued in this backward
        self.done = {}            # device -> an event on the job's stream after the last pass's updates
        self.passes = 0           # backward passes armed so far
        self.order = []           # (id, device, group, bytes) of the parameters updated this pass, in turn
        self.planned = None       # the order the batches were made from
        self.batch_of = {}        # id of a parameter -> its batch (the ids of its members)
        self.pending = {}         # batch -> its members complete this pass, waiting for the rest
        self.ran = {}             # batch -> its members already updated this pass
        self.held = {}            # device -> the bytes of its pending members' gradients
        self.calls = 0            # calls of the optimizer's step in backward passes
        self.arranged = False     # the state on the host went to the parameters updated first
        self.made = set()         # ids of the parameters whose state their first update made
        self.in_pass = False      # inside an armed backward pass (between its begin and end)
        self.lock = threading.Lock()  # autograd runs a thread per GPU

    # ---- what the job does ----

    def optimizer_made(self, optimizer):
        if self.state == "armed":
            self._disarm(f"the job made another optimizer ({type(optimizer).__name__}) after "
                         "the first backward pass; the optimizer steps after backward from now on")
        if self.state == "waiting":
            self.optimizers = [r for r in self.optimizers if r() is not None]
            self.optimizers.append(weakref.ref(optimizer))

    def backward_begin(self):
        self.backwards += 1
        if self.state == "waiting":
            self._arm_or_refuse()
        elif self.state == "armed" and self.backwards > 1:
            self._disarm("a second backward pass ran before optimizer.step() (gradient "
                         "accumulation): the first pass's update was applied alone; the "
                         "optimizer steps after backward from now on")
        if self.state == "armed":
            self.fired.clear()
            self.hyper = self._hyperparameters()
            self.passes += 1
            order, self.order = self.order, []
            with self.lock:
                self.pending, self.ran, self.held = {}, {}, {}
            if order != self.planned:
                self.batch_of, self.planned = _batches(order), order
            self.in_pass = True

    def backward_end(self, failed=False):
        """The pass has returned, its hooks have queued their updates: the
        batches some of whose members got no gradient this pass are updated,
        and the job's stream waits for them before anything it queues next."""
        try:
            optimizer = self.optimizer
            if not failed and self.state == "armed":
                with self.lock:
                    rest = [self._take(batch) for batch in list(self.pending)]
                for index, ps in rest:  # after the pass, which the job's stream follows
                    device = ps[0].device
                    self._lane(device).update.wait_stream(self.torch.cuda.current_stream(device))
                    self._run(optimizer, index, ps, hooked=False)
        except BaseException:
            failed = True
            raise
        finally:
            with self.lock:
                queued, self.queued = list(self.queued), set()
            for device in queued:
                lane = self.lanes[device]
                job = self.torch.cuda.current_stream(device)
                for stream in (lane.copy_in, lane.update, lane.copy_out):
                    job.wait_stream(stream)
                self.done[device] = self.torch.cuda.Event()
                self.done[device].record(job)
            for device, lane in self.lanes.items():  # the forward pass has the room
                lane.let_go_all(self.torch.cuda.current_stream(device), device in queued)
            self.in_pass = False
            ahead = getattr(self.auto, "ahead", None)
            if ahead is not None:  # the recomputation's copies no update took
                ahead.let_go()
            if failed and self.state == "armed":
                self._disarm("the backward pass raised: the parameters updated by then keep "
                             "their update, the gradients not yet applied are left to the "
                             "job's step; the optimizer steps after backward from now on")
        if self.state == "armed" and not self.arranged:
            self._host_state_first()

    def gradients_read(self, what):
        """The job calls WHAT (clipping, unscaling), which reads the gradients,
        between backward and step."""
        if self.state == "armed":
            self._disarm(f"the job called {what} after the gradients were applied: this step "
                         "went unclipped and unscaled; the optimizer steps after backward from now on")

    def gradients_cleared(self):
        """The job's zero_grad: after a backward pass and before its step, a
        batch the job meant to skip."""
        if self.state == "armed" and self.backwards:
            self._disarm("the job cleared its gradients after a backward pass, before "
                         "optimizer.step(): that pass's updates were applied already; the "
                         "optimizer steps after backward from now on")

    def state_loaded(self):
        """The job loaded an optimizer's state: where it lies, and so the
        ring's size, is found again at the next staged update. (Its tensors
        may be the job's own, which no trade may touch: they stay where they
        lie, the parameters' own order, which puts the last updated first.)"""
        for lane in self.lanes.values():
            lane.ring_bytes = None

    def refuse(self, why):
        """The job does something the updates in backward cannot follow."""
        if self.state == "armed":
            self._disarm(why)
        elif self.state == "waiting":
            self.state = "off"
            _say(f"off: {why}")

    def step_pre(self, optimizer):
        """The job's optimizer.step() begins: the stream it runs on follows
        the updates made in backward, as it would follow its own step's, even
        where backward returned with another stream current."""
        done, self.done = self.done, {}
        for device, event in done.items():
            self.torch.cuda.current_stream(device).wait_event(event)
        if self.state != "armed" or optimizer is not self.optimizer:
            return
        why = self._hooked(optimizer)
        if why is None and self.hyper is not None and self.backwards and \
                not _same(self.hyper, self._hyperparameters()):
            why = ("the job changed the optimizer's hyperparameters between backward and step: "
                   "this step's updates used the earlier ones")
        if why is not None:
            self._disarm(why + "; the optimizer steps after backward from now on")

    def step_post(self):
        """The job's optimizer.step() has returned."""
        self.backwards = 0

    # ---- arming ----

    def _arm_or_refuse(self):
        live = [o for o in (r() for r in self.optimizers) if o is not None]
        why = None
        if not live:
            why = "no optimizer was made before the first backward pass"
        elif len(live) > 1:
            why = f"the job made {len(live)} optimizers"
        else:
            why = self._unfit(live[0])
        self.optimizers = []
        if why is not None:
            self.state = "off"
            _say(f"off: {why}")
        else:
            self._arm(live[0])

    def _unfit(self, optimizer):
        """Why OPTIMIZER's updates cannot move into backward, or None."""
        torch = self.torch
        if not any(type(optimizer) is getattr(torch.optim, n, None) for n in ELEMENTWISE):
            return (f"{type(optimizer).__name__} is not one of torch.optim's elementwise "
                    "optimizers")
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized() \
                and dist.get_world_size() > 1:
            return "the job is distributed (gradients are reduced after backward)"
        seen = set()
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in seen:
                    return "a parameter is in two groups"
                seen.add(id(p))
                if not p.is_cuda or p.is_sparse:
                    return "a parameter is not a dense CUDA tensor"
                if not hasattr(p, "register_post_accumulate_grad_hook"):
                    return "this PyTorch has no post-accumulate-grad hooks (2.1 or later)"
        return self._hooked(optimizer)

    def _hooked(self, optimizer):
        """A step pre-hook other than umpol's would run before the job's step, after
        the updates: why that is, or None."""
        if getattr(optimizer, "_optimizer_step_pre_hooks", None):
            return "the optimizer has a step pre-hook of the job's"
        hooks = getattr(optimizer_module(self.torch), "_global_optimizer_pre_hooks", None) or {}
        if any(getattr(h, "__self__", None) is not self.auto for h in hooks.values()):
            return "a global optimizer step pre-hook other than umpol's is registered"
        return None

    def _hyperparameters(self):
        return [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]

    def _arm(self, optimizer):
        for index, group in enumerate(optimizer.param_groups):
            for p in group["params"]:
                if p.requires_grad:
                    self.group[id(p)] = index
                    self.handles.append(p.register_post_accumulate_grad_hook(self._update))
        self.optimizer = optimizer
        self.state = "armed"
        ahead = getattr(self.auto, "ahead", None)
        if ahead is not None:  # the recomputation keeps its copies of weights on the host
            ahead.handoff = self.takes_copy
        _say(f"on: {len(self.handles)} parameters of {type(optimizer).__name__} are updated in "
             "backward, on a side stream")

    def _disarm(self, why):
        for h in self.handles:
            h.remove()
        self.handles, self.group, self.hyper = [], {}, None
        with self.lock:  # an incomplete batch's gradients are left to the job's step
            self.order, self.planned, self.batch_of = [], None, {}
            self.pending, self.ran, self.held = {}, {}, {}
        self.optimizer = None
        self.state = "off"
        ahead = getattr(self.auto, "ahead", None)
        if ahead is not None:
            ahead.handoff = None
            ahead.let_go()
        _say(f"off: {why}")

    # ---- the updates, from autograd's hooks ----

    def _lane(self, device):
        with self.lock:
            lane = self.lanes.get(device)
            if lane is None:
                lane = self.lanes[device] = _Lane(self.torch, device)
            return lane

    def _update(self, p):
        if self.state != "armed" or p.grad is None or self.auto.compiling():
            return
        optimizer = self.optimizer
        index = self.group.get(id(p))
        why = None
        if index is None or index >= len(optimizer.param_groups) or \
                not any(q is p for q in optimizer.param_groups[index]["params"]):
            why = "a parameter left its group of the optimizer"
        elif p.grad.is_sparse:
            why = "a parameter's gradient is sparse"
        elif id(p) in self.fired:
            why = ("a parameter's gradient was accumulated twice in one backward pass (a weight "
                   "shared by reentrant checkpointed segments): it was updated from part of it")
        if why is not None:  # the gradients still there are left to the job's step
            self._disarm(why + "; the optimizer steps after backward from now on")
            return
        self.fired.add(id(p))
        self.order.append((id(p), p.device, index, _nbytes(p)))
        if id(p) not in self.updated:
            # Its first update makes its state: in the optimizer's phase, so that the
            # policy places it, and on the job's own stream, since closing
            # that phase copies the `stream written` pieces back after that stream.
            if self.auto.streaming:
                self.auto.rt.written([p.untyped_storage().data_ptr()])
            if not optimizer.state.get(p):  # not a state the job loaded: its tensors are the optimizer's
                self.made.add(id(p))
            self.auto.bounded("optimizer.step", _step(optimizer), _shim(optimizer, index, [p]))
            self.calls += 1
            self.updated.add(id(p))
            p.grad = None
            return
        # Its gradient was accumulated on the stream current here: its update,
        # run from this hook or from another member's, follows it.
        self._lane(p.device).update.wait_stream(self.torch.cuda.current_stream(p.device))
        batch = self.batch_of.get(id(p))
        runs = [(index, [p])]
        if batch is not None and len(batch) > 1:
            with self.lock:
                runs = self._join(batch, p)
        for index, ps in runs:
            self._run(optimizer, index, ps)

    def _join(self, batch, p):
        """Under the lock: P, complete, joins BATCH. The batches to update now:
        BATCH once its members of this pass are all complete, and the oldest
        incomplete ones on P's GPU while they hold more than _HELD_BYTES."""
        device = p.device
        self.pending.setdefault(batch, []).append(p)
        self.held[device] = self.held.get(device, 0) + _nbytes(p)
        runs = []
        if len(self.pending[batch]) + self.ran.get(batch, 0) == len(batch):
            runs.append(self._take(batch))
        for other in list(self.pending):  # the oldest first
            if self.held[device] <= _HELD_BYTES:
                break
            if self.pending[other][0].device == device:
                runs.append(self._take(other))
        return runs

    def _take(self, batch):
        """Under the lock: BATCH's pending members, to be updated now, and their group."""
        ps = self.pending.pop(batch)
        self.ran[batch] = self.ran.get(batch, 0) + len(ps)
        self.held[ps[0].device] -= sum(_nbytes(q) for q in ps)
        return self.group[id(ps[0])], ps

    def _run(self, optimizer, index, ps, hooked=True):
        """Update PS, parameters of OPTIMIZER's group INDEX on one GPU whose
        gradients are complete, on its lane: one call of the optimizer's step
        for each part of them whose state on the host fits half the ring (a
        state larger than that is a part of its own). HOOKED: from the hook
        of the last of them, where the current stream is the one autograd
        made their gradients on (not so when the pass has returned)."""
        torch = self.torch
        device = ps[0].device
        if self.auto.streaming:  # their pieces the stream brought leave only once copied back
            self.auto.rt.written([p.untyped_storage().data_ptr() for p in ps])
        lane = self._lane(device)
        with self.lock:  # from here on the job's stream waits for this GPU's lane
            self.queued.add(device)
        job = torch.cuda.current_stream(device)
        step = _step(optimizer)
        hosts = [self.host_state(optimizer, p) for p in ps]
        for part in lane.parts(self, optimizer, hosts):
            chunk = [ps[i] for i in part]
            shim = _shim(optimizer, index, chunk)
            staged = lane.stage_in(self, optimizer, [hosts[i] for i in part], job)
            if staged is not None:  # the update reads and writes the copies in the ring
                views, region = staged
                mine = []
                for p, v in zip(chunk, views):
                    mine.append({**optimizer.state[p], **v} if v else optimizer.state[p])
                shim.state = collections.defaultdict(dict, zip(chunk, mine))
            taken = []  # weights swapped for copies: put back and written back whatever happens
            try:
                self._take_copies(chunk, taken)
                self._stage_weights(lane, chunk, job, taken)
                for made_on in {id(t[3]): t[3] for t in taken}.values():
                    if made_on != job:  # the copy was made on another stream than the hook's
                        lane.update.wait_stream(made_on)
                with torch.cuda.stream(lane.update):
                    step(shim)
            finally:
                _put_back([t[:3] for t in taken])  # the weights are their own again
                if taken:  # what the update wrote, even in part, goes back to the weights
                    lane.write_back(taken, job)
            self.calls += 1
            if staged is not None:
                lane.stage_out([optimizer.state[p] for p in chunk], views, mine, region, job)
            grads = []
            for p in chunk:  # applied: should a later part raise, the job's step skips them
                grads.append(p.grad)
                p.grad = None
            lane.keep(lane.update, grads, sum(_nbytes(g) for g in grads), job,
                      job if hooked else None)

    def takes_copy(self, p):
        """Will an update of this backward pass run on the recomputation's
        copy of P's weight (_take_copies)? Not in the pass that makes its
        state (updated alone, on the job's stream), nor for a parameter the
        optimizer does not update, nor outside an armed pass (a forward pass
        that autograd.grad recomputes)."""
        return self.state == "armed" and self.in_pass and id(p) in self.updated and \
            id(p) in self.group

    def _take_copies(self, ps, taken):
        """The recomputation's copies of PS's weights that lay on the host
        (_ahead.WeightsAhead.take), swapped in for their update, each added
        to TAKEN as it is: (param, its own data, copy, the stream the copy
        was made on, the bytes of it that lay on the host)."""
        ahead = getattr(self.auto, "ahead", None)
        if ahead is None or not ahead.kept:
            return
        for p in ps:
            got = ahead.take(p)
            if got is not None:
                copy, made_on, host = got
                taken.append((p, p.data, copy, made_on, host))
                p.data = copy

    def _stage_weights(self, lane, ps, job, taken):
        """The weights of PS that lie on the host, in whole or in part, and
        that no recomputation copied (not in TAKEN: an Embedding's table, a
        Linear outside the checkpointed layers): each copied to device memory
        by the lane (copy_weight) and swapped in for the update, added to TAKEN
        as _take_copies adds, so that the update's kernels read and write
        device memory (a kernel reading the host's memory itself is slower than
        the copy engines and holds the SMs) and write_back copies it back.
        Weights copyable (_ahead) and of _AHEAD_BYTES at most, not while the
        policy streams them (the stream moves them) or a CUDA graph is
        captured; where there is no room for one, the rest of the pass's are
        updated where they lie."""
        torch, rt = self.torch, self.auto.rt
        host_bytes = getattr(rt, "host_bytes", None)
        if host_bytes is None or self.auto.streaming or _capturing(torch, lane.device):
            return
        swapped = {id(t[0]) for t in taken}
        for p in ps:
            if id(p) in swapped:
                continue
            nbytes = _nbytes(p)
            if nbytes > _AHEAD_BYTES or not copyable(torch, p):
                continue
            host = min(host_bytes(p.untyped_storage().data_ptr()), nbytes)
            if host <= 0:
                continue  # on the GPU, or not the runtime's
            copy = lane.copy_weight(self, p, job, host)
            if copy is None:
                return
            taken.append((p, p.data, copy, job, host))
            p.data = copy

    def _host_state_first(self):
        """After the pass that made the state (once its updates are done: the
        job's stream waits for them): where part of it lies on the host (the
        room on the GPU went to the state made first, which backward makes
        for the last layers first), that part goes to the parameters updated
        first, whose copies then run beside the rest of the pass, and the
        GPU's to those updated last, which would have nothing beside theirs.
        Parameters whose state has one shape trade its memory, each keeping
        its own values: nothing moves to another class, the card holds what
        it held. Only state the optimizer made in this process trades (a
        loaded state's tensors may still be the job's); none while a CUDA
        graph is captured (the copies would run at each replay). Should a
        trade fail (no room for its buffer), the pairs traded keep it, the
        rest stay as they are, and stderr says why."""
        torch = self.torch
        capturing = getattr(torch.cuda, "is_current_stream_capturing", None)
        if capturing is not None and capturing():
            return  # at the end of the next pass
        self.arranged = True
        optimizer, rt = self.optimizer, self.auto.rt
        params = {id(p): p for g in optimizer.param_groups for p in g["params"]
                  if id(p) in self.made}
        on_gpu, on_host = {}, {}  # (device, the state's keys, shapes, dtypes) -> [(turn, p)]
        for turn, (pid, _, _, _) in enumerate(self.order):
            p = params.get(pid)
            own = _per_element(optimizer.state.get(p, {}), p) if p is not None else {}
            if not own:
                continue
            where = [rt.on_host(t.untyped_storage().data_ptr()) for t in own.values()]
            kind = (p.device, tuple((k, tuple(t.shape), t.dtype) for k, t in sorted(own.items())))
            if all(where):
                on_host.setdefault(kind, []).append((turn, p))
            elif not any(where):
                on_gpu.setdefault(kind, []).append((turn, p))
        pairs = []  # (updated earlier, state on the GPU; updated later, state on the host)
        for kind, gpu in on_gpu.items():
            host = on_host.get(kind, [])
            while gpu and host and gpu[0][0] < host[-1][0]:
                pairs.append((gpu.pop(0)[1], host.pop()[1]))
        if not pairs:
            return
        for lane in self.lanes.values():  # the largest state on the host may be another's
            lane.ring_bytes = None
        nbytes, traded, bounces = 0, 0, {}
        try:
            for early, late in pairs:
                mine, theirs = optimizer.state[early], optimizer.state[late]
                for key in _per_element(mine, early):
                    _trade(torch, mine[key], theirs[key], bounces)
                    mine[key], theirs[key] = theirs[key], mine[key]
                    nbytes += _nbytes(mine[key])
                traded += 1
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError, a CUDA error
            _say(f"the optimizer state in host memory stays with the parameters updated last "
                 f"({traded} of {len(pairs)} pairs traded; {str(e).splitlines()[0][:160]})")
            return
        _say(f"the optimizer state in host memory went to the {traded} parameters updated "
             f"first in backward ({nbytes / 2**30:.2f} GiB copied each way, once): its copies "
             "run beside the backward pass")

    def staged_bytes(self):
        """(in, out): the state copied in to the lanes' rings and back out
        of them so far, the weights the lanes copied in for their updates,
        and the weights updated on copies copied back (out), in bytes, over
        every GPU."""
        lanes = list(self.lanes.values())
        return sum(lane.in_bytes for lane in lanes), sum(lane.out_bytes for lane in lanes)

    def host_state(self, optimizer, p):
        """P's state tensors in OPTIMIZER that lie in host memory the GPU reads
        across the link (a `memory host` class), {key: tensor}, contiguous ones only."""
        rt, out = self.auto.rt, {}
        for key, t in optimizer.state.get(p, {}).items():
            if getattr(t, "is_cuda", False) and t.is_contiguous() and t.numel() and \
                    rt.on_host(t.untyped_storage().data_ptr()):
                out[key] = t
        return out


def _step(optimizer):
    """The optimizer's own step, without torch's wrapper that runs the step hooks."""
    step = type(optimizer).step
    return getattr(step, "__wrapped__", step)


def _shim(optimizer, index, ps):
    """OPTIMIZER over a group of PS alone, with group INDEX's hyperparameters:
    a copy that shares its state, so that the optimizer's groups stay as they
    are for the other GPUs' threads."""
    shim = object.__new__(type(optimizer))
    shim.__dict__.update(optimizer.__dict__)
    group = dict(optimizer.param_groups[index])
    group["params"] = list(ps)
    shim.param_groups = [group]
    return shim


def _batches(order):
    """Batches from the last pass's ORDER ((id, device, group, bytes) in
    turn): on each GPU, parameters of one group complete one after another,
    up to _BATCH_BYTES; {id: the batch's ids}."""
    batch_of, open_runs = {}, {}  # device -> [group, ids, bytes]

    def close(run):
        batch = tuple(run[1])
        for pid in batch:
            batch_of[pid] = batch

    for pid, device, index, nbytes in order:
        run = open_runs.get(device)
        if run is not None and (run[0] != index or run[2] + nbytes > _BATCH_BYTES):
            close(run)
            run = None
        if run is None:
            run = open_runs[device] = [index, [], 0]
        run[1].append(pid)
        run[2] += nbytes
    for run in open_runs.values():
        close(run)
    return batch_of


def _nbytes(t):
    return t.numel() * t.element_size()


def _mark(tensors, *streams):
    """TENSORS are not handed out again before the work queued on STREAMS
    by now is done, whichever stream lets them go (record_stream)."""
    for t in tensors:
        for stream in streams:
            t.record_stream(stream)


def _capturing(torch, device):
    """Whether DEVICE's current stream is capturing a CUDA graph (no event
    may be queried then). Another thread's capture is not seen."""
    check = getattr(torch.cuda, "is_current_stream_capturing", None)
    if check is None:
        return False
    with torch.cuda.device(device):
        return check()


def _per_element(state, p):
    """P's state in STATE that holds one value per element of P (moments, not
    the step count), {key: tensor}: contiguous GPU-addressable tensors of P's shape."""
    return {k: t for k, t in state.items()
            if getattr(t, "is_cuda", False) and t.numel() and tuple(t.shape) == tuple(p.shape)
            and t.is_contiguous()}


_TRADE_ELEMENTS = 16 << 20  # the bounce buffer of a trade, at most


def _trade(torch, a, b, bounces):
    """Exchange the values of A and B (one shape and dtype) on the current
    stream, through a buffer of _TRADE_ELEMENTS at most, one a dtype and GPU
    (BOUNCES: (dtype, device) -> buffer, made at the first trade that needs it)."""
    flat_a, flat_b = a.view(-1), b.view(-1)
    n = flat_a.numel()
    bounce = bounces.get((a.dtype, a.device))
    if bounce is None or bounce.numel() < min(n, _TRADE_ELEMENTS):
        bounce = bounces[(a.dtype, a.device)] = torch.empty(min(n, _TRADE_ELEMENTS),
                                                            dtype=a.dtype, device=a.device)
    for start in range(0, n, _TRADE_ELEMENTS):
        end = min(n, start + _TRADE_ELEMENTS)
        part = bounce[:end - start]
        part.copy_(flat_a[start:end])
        flat_a[start:end].copy_(flat_b[start:end])
        flat_b[start:end].copy_(part)


def _aligned(nbytes):
    return (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN


def _staged_bytes(host):
    """The ring's bytes for the tensors of HOST, each at an aligned offset."""
    return sum(_aligned(_nbytes(t)) for t in host.values())


_ALIGN = 512             # each staged tensor's offset in the ring
_RING_SPARE = 256 << 20  # the ring beside the largest parameter's state, for the next ones


class _Lane:
    """One GPU's part of the updates in backward. They run on UPDATE. The state
    that lies on the host is copied in on COPY_IN, into a region of RING (one
    device buffer, taken in turn), and out on COPY_OUT, as are weights on the
    host that no recomputation copied, each into a copy of its own
    (copy_weight, write_back): the kernels of an update then read device
    memory, and the link carries both directions at once beside the backward
    pass (a kernel reading the host's memory itself would take the SMs the
    backward pass needs). Copies in run ahead as far as the ring has room; a
    region is taken again once its copy out is done. What the lane's streams
    read and the job's stream lets go (the gradients, a ring let go before the
    pass ends) is kept until the host sees that work done (keep), and not
    marked used by the lane's streams (record_stream) where it was made on the
    job's stream, so that stream waits for none of it before the pass ends
    (let_go_all)."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.update, self.copy_in, self.copy_out = (torch.cuda.Stream(device) for _ in range(3))
        self.ring = None     # the uint8 device buffer, made at a pass's first staged update
        self.ring_bytes = None
        self.no_room = {}    # "ring", "copy" -> the backward pass it could not be made in
        self.told = set()    # of them, those said on stderr
        self.head = 0        # where the next region starts
        self.busy = []       # (start, end, event of its copy out) of this pass's regions
        self.ordered = 0     # the backward pass COPY_IN was last ordered after the job's stream
        self.staged = 0      # parameters whose state was staged, so far
        self.hosts = 0       # parameters on this GPU whose state lay on the host when the ring was sized
        self.pass_staged = 0 # of them, staged in this pass: at HOSTS the ring is let go
        self.let_go = 0      # the backward pass it was last let go in before its end
        self.wraps = 0       # times a pass's regions went round the ring
        self.in_bytes = 0    # state copied in to the ring, and weights to their copies, so far
        self.weights_in = 0  # of them, weights (_stage_weights)
        self.out_bytes = 0   # and back out of it
        # (event, its stream, tensors, bytes, the stream they were made on)
        self.kept = collections.deque()
        self.kept_bytes = 0  # the gradients among them, counted against _LAG_BYTES
        self.kept_lock = threading.Lock()  # a failed pass ends while another GPU's thread may run
        self.ring_made_on = None  # the stream current when the ring was made

    def keep(self, stream, tensors, nbytes, job, made_on):
        """Keep TENSORS, which work just queued on STREAM reads, until the
        host sees it done, and let go of those kept whose work is done. Past
        _LAG_BYTES kept (NBYTES counts against it), the oldest is let go
        anyway: after JOB waits for it, where JOB is the stream it was made on
        (MADE_ON; None: not known), whose next allocations may take it; else
        marked used by its reader (record_stream). While a CUDA graph is
        captured nothing is asked of an event (a captured one cannot be)."""
        torch = self.torch
        event = torch.cuda.Event()
        event.record(stream)
        capturing = _capturing(torch, self.device)
        with self.kept_lock:
            self.kept.append((event, stream, tensors, nbytes, made_on))
            self.kept_bytes += nbytes
            while self.kept:
                event, reader, held, n, owner = self.kept[0]
                if capturing or not event.query():
                    if self.kept_bytes <= _LAG_BYTES:
                        break
                    if owner is not None and owner == job:
                        job.wait_event(event)
                    else:
                        _mark(held, reader)
                self.kept.popleft()
                self.kept_bytes -= n

    def let_go_all(self, job, waited):
        """The pass is over: what is kept, and the ring, are let go. Those
        made on JOB, where JOB WAITED for this lane's streams, go as they are,
        in its order; the rest are marked used by the streams that read them."""
        with self.kept_lock:
            for _, reader, held, _, owner in self.kept:
                if not (waited and owner is not None and owner == job):
                    _mark(held, reader)
            self.kept.clear()
            self.kept_bytes = 0
            ring, self.ring = self.ring, None
            if ring is not None and not (waited and self.ring_made_on == job):
                _mark([ring], self.copy_in, self.update, self.copy_out)

    def parts(self, sib, optimizer, hosts):
        """The indexes of HOSTS (a batch's state on the host, {key: tensor}
        each) in runs whose staged state fits half the ring, so that the next
        run's copies in go on beside this one's update; all of them in one run
        where nothing is staged."""
        everything = [list(range(len(hosts)))]
        if not any(hosts) or not self._ready(sib, optimizer):
            return everything
        half, runs, size = self.ring.numel() // 2, [[]], 0
        for i, host in enumerate(hosts):
            need = _staged_bytes(host)
            if runs[-1] and size + need > half:
                runs.append([])
                size = 0
            runs[-1].append(i)
            size += need
        return runs

    def stage_in(self, sib, optimizer, hosts, job):
        """Copy the state of HOSTS that lies on the host into one region of the
        ring: ([{key: device view} for each], the region), with UPDATE ordered
        after the copies; None when none of it lies on the host, or the GPU
        has no room for the ring this pass, or it does not fit the ring. A
        ring let go earlier in the pass is made again."""
        need = sum(_staged_bytes(host) for host in hosts)
        if not need or not self._ready(sib, optimizer):
            return None
        if need > self.ring.numel():  # more lies on the host than when it was sized:
            self.ring_bytes = None    # the next ring is sized again
            return None
        torch = self.torch
        if self.ordered != sib.passes:  # after the last pass's copies out, which the job waited
            self.copy_in.wait_stream(job)
            self.ordered = sib.passes
            self.busy, self.head = [], 0  # the whole ring is free to COPY_IN
            self.pass_staged = 0
        start = self.take(need)
        views, at = [], start
        with torch.cuda.stream(self.copy_in):
            for host in hosts:
                views.append({})
                for key, t in host.items():
                    n = _nbytes(t)
                    views[-1][key] = self.ring[at:at + n].view(t.dtype).view(t.shape)
                    views[-1][key].copy_(t, non_blocking=True)
                    at += _aligned(n)
                    self.in_bytes += n
        self.update.wait_stream(self.copy_in)
        staged = sum(1 for host in hosts if host)
        self.staged += staged
        self.pass_staged += staged
        return views, (start, start + need)

    def copy_weight(self, sib, p, job, host):
        """A copy of weight P in device memory for its update, or None where
        there is no room for it (then none is tried again in this pass, and
        the update reads and writes the weight where it lies). Made on JOB
        (the stream that lets it go, as weights ahead makes its copies: a
        block freed on COPY_IN and then handed to the job would make the
        job's stream wait for COPY_IN's later copies); filled on COPY_IN
        once that follows JOB (after the last pass's copies back, which the
        job waited for), HOST of its bytes crossing the link; UPDATE, and so
        the copy back, follow the copy in."""
        torch = self.torch
        if self.no_room.get("copy") == sib.passes:
            return None
        try:
            copy = torch.empty_like(p, memory_format=torch.contiguous_format)
        except out_of_memory(torch):
            self._no_room(sib, "copy", f"no room on {self.device} for a copy of a weight on the "
                          f"host ({_nbytes(p) >> 20} MiB) in a backward pass: the update reads "
                          "and writes it across the link, and the rest of that pass's too")
            return None
        self.copy_in.wait_stream(job)
        with torch.cuda.stream(self.copy_in), torch.no_grad():
            copy.copy_(p, non_blocking=True)
        self.update.wait_stream(self.copy_in)
        self.in_bytes += host
        self.weights_in += host
        return copy

    def _no_room(self, sib, what, text):
        """No room on the GPU for WHAT ("ring", "copy") in this pass: not
        tried again in it; TEXT on stderr, once a process."""
        self.no_room[what] = sib.passes
        if what not in self.told:
            self.told.add(what)
            _say(text + " (said once)")

    def _ready(self, sib, optimizer):
        """A ring to stage through, made where there is none (at the pass's
        first staged update, or let go earlier in the pass); False where the
        GPU has no room for one this pass."""
        if self.no_room.get("ring") == sib.passes:
            return False
        return self.ring is not None or self._make_ring(sib, optimizer)

    def take(self, need):
        """The start of a region of NEED bytes of the ring, the next in turn;
        COPY_IN waits for the copies out of what it held. Regions are taken
        in turn, but a pass can wrap early, so any region still listed may
        overlap: each is checked."""
        if self.head + need > self.ring.numel():
            self.head = 0
            self.wraps += 1
        start, end = self.head, self.head + need
        kept = []
        for region in self.busy:
            if region[0] < end and start < region[1]:
                self.copy_in.wait_event(region[2])
            else:
                kept.append(region)
        self.busy = kept
        self.head = end
        return start

    def stage_out(self, states, views, afters, region, job):
        """After an update: copy each view of VIEWS back to its tensor in
        STATES (the optimizer's, one a parameter), and keep in each what the
        update added or replaced (AFTERS: the shim's state of each parameter);
        the region is free once done."""
        torch = self.torch
        for state, staged, after in zip(states, views, afters):
            if after is state:  # none of it was staged: updated in place
                continue
            for key in [k for k in state if k not in after]:  # the update removed it
                self._copied_first(state.pop(key), key in staged)
            for key, value in after.items():
                if staged.get(key) is not value and state.get(key) is not value:
                    if key in state:
                        self._copied_first(state[key], key in staged)
                    state[key] = value
        self.copy_out.wait_stream(self.update)
        with torch.cuda.stream(self.copy_out):
            for state, staged, after in zip(states, views, afters):
                for key, view in staged.items():
                    if after.get(key) is view:
                        state[key].copy_(view, non_blocking=True)
                        self.out_bytes += _nbytes(view)
            event = torch.cuda.Event()
            event.record(self.copy_out)
        self.busy.append((region[0], region[1], event))
        if self.pass_staged >= self.hosts:  # the pass staged all there is: the rest of it has the room
            # Let go once its last copy out is done (which follows every use of it), with the
            # views of this part, which _run drops; meanwhile the pass goes on.
            ring = self.ring  # None where a failed pass's end let it go meanwhile
            if ring is not None:
                self.keep(self.copy_out, [ring], 0, job, self.ring_made_on)
            self.ring, self.busy, self.head = None, [], 0
            self.let_go = self.ordered

    def write_back(self, taken, job):
        """After an update that ran on copies of weights that lie on the host
        (TAKEN: the recomputation's, _take_copies, or the lane's own,
        _stage_weights): each copy is copied back to its weight on COPY_OUT,
        and kept until that is done."""
        torch = self.torch
        self.copy_out.wait_stream(self.update)
        for made_on in {id(t[3]): t[3] for t in taken}.values():
            self.copy_out.wait_stream(made_on)  # made and filled there: an update that
            # raised before following it does not order the copy back after it
        with torch.cuda.stream(self.copy_out):
            for _, own, copy, _, host in taken:
                own.copy_(copy, non_blocking=True)
                self.out_bytes += host
        for _, _, copy, made_on, _ in taken:
            self.keep(self.copy_out, [copy], 0, job, made_on)

    def _copied_first(self, tensor, staged):
        """The optimizer's state no longer holds TENSOR: if it was copied in,
        its memory is not handed out again before that copy is done."""
        if staged:
            tensor.record_stream(self.copy_in)

    def _make_ring(self, sib, optimizer):
        """The largest parameter's state on the host and _RING_SPARE beside it
        (at most all of it), in the class of the backward pass's allocations.
        It lives until the pass has staged every parameter whose state lay on
        the host when it was sized (or to the pass's end, where backward_end
        frees it): the rest of the pass has its room. Made again in the pass
        it was let go in, more lies on the host now: it is sized again. False
        when the GPU has no room for it: this pass's updates read the host's
        memory."""
        if self.let_go == sib.passes:
            self.ring_bytes = None
        if self.ring_bytes is None:
            sizes = [_staged_bytes(sib.host_state(optimizer, q))
                     for g in optimizer.param_groups for q in g["params"]
                     if q.device == self.device]
            self.ring_bytes = min(sum(sizes), max(sizes) + _RING_SPARE)
            self.hosts = sum(1 for size in sizes if size)
        torch = self.torch
        try:
            self.ring = torch.empty(self.ring_bytes, dtype=torch.uint8, device=self.device)
            self.ring_made_on = torch.cuda.current_stream(self.device)
        except RuntimeError:  # torch.cuda.OutOfMemoryError
            self._no_room(sib, "ring", f"no room on {self.device} for the ring the state on the "
                          f"host is staged through ({self.ring_bytes >> 20} MiB) in a backward "
                          "pass: its updates read the host's memory")
            return False
        if self.ordered == sib.passes:  # made again in a pass whose copies in already follow the job's
            self.copy_in.wait_stream(torch.cuda.current_stream(self.device))  # stream: from here on
        return True


def _same(a, b):
    """Hyperparameters unchanged: the same objects, or equal plain values."""
    if a is b:
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if type(a) in (int, float, bool, str, type(None)) and type(b) in (int, float, bool, str, type(None)):
        return a == b
    return False
