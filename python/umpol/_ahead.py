"""Weights ahead (UMPOL_WEIGHTS_AHEAD: 1, or auto once the runtime has evicted
for the budget; _torch._Evicted): the forward pass's weights that lie in host
memory, copied to the GPU ahead of the layers that read them.

Where the policy leaves weights in host memory (pieces of a `memory movable`
class sent off the card, a `memory host` class), the forward pass reads them
across the link where they lie: each layer's first kernel waits for its
weight's bytes on the job's stream, so the pass takes its compute plus all
the reads. The steps repeat, and so does the order of the layers. The first
training forward pass of a model records the order its Linear layers run in;
from the next one on, as each layer begins, the weights of the layers after
it that lie on the host, _AHEAD_BYTES of them at most, are copied to device
memory on a copy stream, and each layer runs on its copy (its parameters'
.data swapped for the call, put back when it returns). The reads then run on
the copy engines beside the compute. A copy is a plain tensor of the forward
pass (the class of the pass's allocations places it), freed once its layer
has run; the values are the weight's own, so the autograd graph and the
losses are the job's. A copy is made on the job's stream, which reads it and
lets it go, and the copy stream follows the job's up to then (a layer that
runs on another stream than the one current where its copy was made marks
the copy used by its own). The copies of one layer's turn are made first,
then queued after one wait. (Made on the copy stream and marked used by the
job's with record_stream, a copy is freed, under PyTorch's cudaMallocAsync
backend, on a stream of PyTorch's that first waits for all the work queued
by then on both, and the job's next allocation of its memory waits for that
stream: for every copy queued by then. The first layer waited for all the
pass's first copies, 8-11 ms at 1.75B.)

Only training forward passes copy ahead; eval passes read the weights where
they lie. Where the optimizer's step runs in backward (_overlap) and will
update a weight from the copy in this pass (handoff), the recomputation in
backward copies each Linear's weights that lie on the host to device memory
as the layer begins, on the job's stream, _AHEAD_BYTES of them held at most,
runs the layer on the copy and keeps the copy for the weight's update, which
then reads and writes it there and copies it back: the link carries the
weight in once for the recomputation and the update, not twice
(_Recompute). A pass whose layers come in another order
stops copying for the rest of it, and the next pass records the order again.
Weights under _MIN_BYTES are read where they lie (a copy costs more than the
read); so is everything but a Linear's weight and bias (an Embedding reads a
few rows of its table). Off where the policy streams weights itself (`stream
written`): the stream moves them, and the two would fight. See
umpol-python(7)."""
import sys
import threading
import weakref

_MIN_BYTES = 1 << 20     # a layer's parameters copied ahead: this size or more
_AHEAD_BYTES = 512 << 20  # copied ahead of the layer running, at most


def _say(text):
    print(f"umpol: weights ahead: {text}", file=sys.stderr, flush=True)


def out_of_memory(torch):
    """The exception a copy's allocation raises when the GPU has no room
    (RuntimeError where PyTorch is older than its OutOfMemoryError)."""
    return getattr(torch.cuda, "OutOfMemoryError", RuntimeError)


class WeightsAhead:
    """The process's weights ahead: the orders of its models' layers, learned."""

    def __init__(self, torch, rt, when=None):
        self.torch, self.rt = torch, rt
        self.when = when    # what says when to begin (None: at once)
        self.orders = {}    # id(model) -> (weak reference to it, [weak reference to a layer])
        self.streams = {}   # device -> the copy stream
        self.copied = 0     # bytes copied ahead so far,
        self.link_bytes = 0  # of which lay on the host (crossed the link)
        self.told = False   # that a pass's order changed, on stderr
        self.told_room = False  # that a copy found no room, on stderr
        # The step in backward, while armed: says which weights it will update from
        # the recomputation's copies in the pass running (wants(p)); None: none.
        self.handoff = None
        self.lock = threading.Lock()  # autograd runs a thread per GPU
        # id(param) -> (param, its copy, the stream it was made on, its bytes on the
        # host, its bytes)
        self.kept = {}
        self.kept_bytes = 0  # the recomputation's copies' bytes that lay on the host, so far,
        self.taken_bytes = 0  # and of them, taken by an update
        self.held = 0        # bytes of the copies kept now

    def no_room(self, error):
        """A copy's allocation found the GPU full: the weights are read where
        they lie, as without a copy; said once."""
        if not self.told_room:
            self.told_room = True
            _say(f"no GPU memory for a copy ({error}): the layers without one read their "
                 f"weights where they lie (said once)")

    def begin(self, model):
        """A training forward pass of MODEL (the outermost module called)
        begins: the _Pass that follows its layers, or None while WHEN says no."""
        when = self.when  # read once: another thread's pass may clear it
        if when is not None:
            if not when():
                return None
            self.when = None
            _say("on (UMPOL_WEIGHTS_AHEAD=auto; 0 keeps it off): the runtime has evicted to the "
                 "host for the budget; the next passes copy the weights that lie there ahead of "
                 "their layers")
        known = self.orders.get(id(model))
        order = known[1] if known is not None and known[0]() is model else None
        return _Pass(self, model, order)

    def recompute(self, module):
        """A recomputation in backward (MODULE, the outermost module called)
        begins: the _Recompute that copies its layers' weights on the host
        for their updates, or None where no update takes them, weights ahead
        has not begun, or this thread runs no backward pass (a forward pass
        on another thread while one runs)."""
        if self.handoff is None or self.when is not None:
            return None
        task = getattr(self.torch._C, "_current_graph_task_id", None) \
            if hasattr(self.torch, "_C") else None
        if task is not None and task() == -1:
            return None
        return _Recompute(self)

    def take(self, p):
        """The recomputation's copy of P, for P's update, which must let it
        go: (copy, the stream it was made on, the bytes of P that lay on the
        host), or None."""
        with self.lock:
            kept = self.kept.pop(id(p), None)
            if kept is None:
                return None
            self.held -= kept[4]
            if kept[0] is not p:
                return None
            self.taken_bytes += kept[3]
        return kept[1:4]

    def let_go(self):
        """The backward pass is over: the copies no update took are let go,
        on the stream they were made on, which alone read them."""
        with self.lock:
            self.kept.clear()
            self.held = 0

    def weights(self, module):
        """MODULE's parameters that are copied ahead where they lie on the
        host: a Linear's plain, dense, contiguous CUDA tensors of _MIN_BYTES or more."""
        torch = self.torch
        if not isinstance(module, torch.nn.Linear):
            return []
        return [p for p in module._parameters.values() if p is not None and copyable(torch, p)]

    def stream(self, device):
        s = self.streams.get(device)
        if s is None:
            s = self.streams[device] = self.torch.cuda.Stream(device)
        return s


class _OnCopies:
    """A pass whose layers may run on copies of their weights: self.running
    holds (layer, [(param, its own data, copy)]) for each layer running on
    copies, and a layer's weights get their own data back as it returns."""

    def __init__(self):
        self.running = []

    def post(self, module):
        """MODULE has returned (or raised): its parameters are their own again."""
        if self.running and self.running[-1][0] is module:
            _put_back(self.running.pop()[1])

    def end(self):
        """The pass is over: every layer still on copies has its weights' own data back."""
        while self.running:
            _put_back(self.running.pop()[1])


class _Pass(_OnCopies):
    """One training forward pass of one model."""

    def __init__(self, ahead, model, order):
        super().__init__()
        self.ahead, self.model, self.order = ahead, model, order
        self.recorded = [] if order is None else None  # the layers as they run, learning
        self.next = 0        # the index in ORDER of the layer expected next
        self.issued = 0      # ORDER[:issued] have had their copies queued
        self.in_flight = 0   # bytes copied ahead of the layer running
        # index in ORDER -> (event, [(param, copy)], bytes, the stream they were made on)
        self.copies = {}
        self.stopped = False

    def pre(self, module):
        """MODULE is about to run."""
        if self.stopped or not self.ahead.weights(module):
            return
        if self.recorded is not None:
            self.recorded.append(weakref.ref(module))
            return
        if self.next >= len(self.order) or self.order[self.next]() is not module:
            self._stop()
            return
        self._issue()
        entry = self.copies.pop(self.next, None)
        self.next += 1
        if entry is None:
            return
        event, pairs, nbytes, made_on = entry
        self.in_flight -= nbytes
        job = self.ahead.torch.cuda.current_stream(pairs[0][0].device)
        job.wait_event(event)
        swapped = []
        for p, copy in pairs:
            if job != made_on:  # freed on MADE_ON, which never waited for this layer
                copy.record_stream(job)
            swapped.append((p, p.data, copy))
            p.data = copy
        self.running.append((module, swapped))

    def end(self):
        """The pass is over: what was learned is kept, what is left is let go."""
        super().end()
        self._let_go()
        if self.recorded:  # a learning pass that met a layer
            self.ahead.orders[id(self.model)] = (weakref.ref(self.model), self.recorded)

    def _issue(self):
        """Queue the copies of the layers after the one about to run, and its
        own if not yet, as far as _AHEAD_BYTES allows."""
        ahead, torch = self.ahead, self.ahead.torch
        planned = []  # (index, [(param, copy)], bytes, the job's stream), made, not yet copied
        while self.issued < len(self.order) and \
                (self.issued <= self.next or self.in_flight < _AHEAD_BYTES):
            index = self.issued
            self.issued += 1
            module = self.order[index]()
            if module is None:
                self._stop()
                return
            pairs, nbytes, link, job = [], 0, 0, None
            try:
                for p in ahead.weights(module):
                    host = ahead.rt.host_bytes(p.untyped_storage().data_ptr())
                    if host <= 0:
                        continue  # on the GPU, or not the runtime's
                    job = torch.cuda.current_stream(p.device)
                    with torch.no_grad():  # on the job's stream, which reads it and lets it go
                        pairs.append((p, torch.empty_like(p, memory_format=torch.contiguous_format)))
                    nbytes += p.numel() * p.element_size()
                    link += min(host, p.numel() * p.element_size())
            except out_of_memory(torch) as e:
                # This layer and the rest of the pass read their weights where they lie.
                self.issued = len(self.order)
                ahead.no_room(e)
                break
            ahead.link_bytes += link
            if pairs:
                planned.append((index, pairs, nbytes, job))
                self.in_flight += nbytes
        # The copy stream follows the job's as it is after those allocations (each of which
        # may have made it wait for its memory's last user), and after the optimizer's writes.
        ordered = set()
        for index, pairs, nbytes, job in planned:
            stream = ahead.stream(pairs[0][0].device)
            if stream not in ordered:
                stream.wait_stream(job)
                ordered.add(stream)
            with torch.cuda.stream(stream), torch.no_grad():
                for p, copy in pairs:
                    copy.copy_(p, non_blocking=True)
                event = torch.cuda.Event()
                event.record(stream)
            self.copies[index] = (event, pairs, nbytes, job)
            ahead.copied += nbytes

    def _let_go(self):
        """The copies no layer ran on: the stream they were made on waits for
        them before letting them go, as the job's does for those it reads."""
        for event, _, _, made_on in self.copies.values():
            made_on.wait_event(event)
        self.copies.clear()

    def _stop(self):
        """The layers run in another order than recorded: the rest of this
        pass reads them where they lie, and the next pass records again."""
        self.stopped = True
        self._let_go()
        self.ahead.orders.pop(id(self.model), None)
        if not self.ahead.told:
            self.ahead.told = True
            _say("a forward pass ran its layers in another order than the one before: it read "
                 "them where they lie, and the order is recorded again (said once)")


class _Recompute(_OnCopies):
    """One recomputation in backward of a checkpointed segment: each Linear's
    weights that lie on the host are copied to device memory on the job's
    stream as the layer begins (where the layer would have read them across
    the link anyway), the layer runs on the copy, and the copy is kept for
    the weight's update in this backward pass (WeightsAhead.take)."""

    def __init__(self, ahead):
        super().__init__()
        self.ahead = ahead
        self.full = False  # a copy found no room: the rest of this recomputation copies none

    def pre(self, module):
        ahead, torch = self.ahead, self.ahead.torch
        if self.full:
            return
        swapped = []
        wants = ahead.handoff
        for p in ahead.weights(module):
            host = ahead.rt.host_bytes(p.untyped_storage().data_ptr())
            if host <= 0 or wants is None or not wants(p):
                continue  # on the GPU, not the runtime's, or no update of this pass takes it
            nbytes = p.numel() * p.element_size()
            with ahead.lock:
                if ahead.held + nbytes > _AHEAD_BYTES:
                    continue  # read where it lies, as before
                ahead.held += nbytes
            job = torch.cuda.current_stream(p.device)
            try:
                with torch.no_grad():
                    copy = torch.empty_like(p, memory_format=torch.contiguous_format)
            except out_of_memory(torch) as e:
                with ahead.lock:
                    ahead.held -= nbytes
                ahead.no_room(e)
                self.full = True  # no retry (each failed allocation costs the allocator a sync)
                break  # read where they lie
            with torch.no_grad():
                copy.copy_(p, non_blocking=True)
            host = min(host, nbytes)
            with ahead.lock:
                ahead.kept_bytes += host
                old = ahead.kept.get(id(p))
                if old is not None:  # a weight recomputed twice: the newer copy serves
                    ahead.held -= old[4]
                ahead.kept[id(p)] = (p, copy, job, host, nbytes)
            swapped.append((p, p.data, copy))
            p.data = copy
        if swapped:
            self.running.append((module, swapped))


def copyable(torch, p):
    """Whether weight P is worth a copy of its own in device memory: a
    plain, dense, contiguous CUDA tensor of _MIN_BYTES or more."""
    return type(p.data) is torch.Tensor and p.is_cuda and p.layout == torch.strided \
        and p.is_contiguous() and p.numel() * p.element_size() >= _MIN_BYTES


def _put_back(swapped):
    """Each weight in SWAPPED, (param, its own data, the copy it ran on), has
    its own data back."""
    for p, own, copy in swapped:
        if p.data.data_ptr() == copy.data_ptr():  # else the job set it meanwhile: its own stays
            p.data = own
