"""Weights ahead (UMPOL_WEIGHTS_AHEAD=1): the forward pass's weights that lie
in host memory, copied to the GPU ahead of the layers that read them.

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
the copy engines beside the compute; the values are the weight's own, so the
autograd graph and the losses are the job's.

The copies go into a ring: one device buffer made when the pass begins (a
plain tensor of the forward pass, placed by the class its allocations
match) and let go when it ends, before the loss, taken region after region,
a region taken again once the layer that read it has run. Events order the
two streams and nothing else: a copy made and freed as a tensor of its own
would have the allocator order each new allocation of the job's after the
copy stream's latest work, copies queued since included, and the pass would
wait for the copies after all.

Only training forward passes: the recomputation in backward and eval passes
read the weights where they lie. A pass whose layers come in another order
stops copying for the rest of it, and the next pass records the order again.
Weights under _MIN_BYTES are read where they lie (a copy costs more than the
read); so is everything but a Linear's weight and bias (an Embedding reads a
few rows of its table). Off where the policy streams weights itself (`stream
written`): the stream moves them, and the two would fight. See
umpol-python(7)."""
import sys
import weakref

_MIN_BYTES = 1 << 20     # a layer's parameters copied ahead: this size or more
_AHEAD_BYTES = 256 << 20  # copied ahead of the layer running, at most
_ALIGN = 512             # each copy's offset in the ring


def _say(text):
    print(f"umpol: weights ahead: {text}", file=sys.stderr, flush=True)


class WeightsAhead:
    """The process's weights ahead: the orders of its models' layers, learned."""

    def __init__(self, torch, rt):
        self.torch, self.rt = torch, rt
        self.orders = {}    # id(model) -> (weak reference to it, [weak reference to a layer], ring bytes)
        self.streams = {}   # device -> the copy stream
        self.copied = 0     # bytes copied ahead so far
        self.told = False   # that a pass's order changed, on stderr

    def begin(self, model):
        """A training forward pass of MODEL (the outermost module called)
        begins: the _Pass that follows its layers."""
        known = self.orders.get(id(model))
        if known is None or known[0]() is not model:
            return _Pass(self, model, None, 0)
        return _Pass(self, model, known[1], known[2])

    def weights(self, module):
        """MODULE's parameters that are copied ahead where they lie on the
        host: a Linear's plain, dense, contiguous CUDA tensors of _MIN_BYTES or more."""
        torch = self.torch
        if not isinstance(module, torch.nn.Linear):
            return []
        return [p for p in module._parameters.values()
                if p is not None and type(p.data) is torch.Tensor and p.is_cuda
                and p.layout == torch.strided and p.is_contiguous()
                and p.numel() * p.element_size() >= _MIN_BYTES]

    def stream(self, device):
        s = self.streams.get(device)
        if s is None:
            s = self.streams[device] = self.torch.cuda.Stream(device)
        return s


def _aligned(nbytes):
    return (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN


def _nbytes(p):
    return p.numel() * p.element_size()


class _Ring:
    """The device buffer one pass's copies are made in, taken region after
    region in turn; a region is taken again once the layer that read it has
    run (its event on the job's stream)."""

    def __init__(self, torch, device, nbytes, stream):
        self.buf = torch.empty(nbytes, dtype=torch.uint8, device=device)  # on the job's stream
        self.buf.record_stream(stream)  # let go only once its copies are done too
        self.head = 0
        self.regions = []  # [start, end, event of the read, None until the layer has run]

    def take(self, need, stream):
        """A region of NEED bytes, the next in turn, STREAM waiting for the
        reads of what it held; None while part of it is still to be read."""
        size = self.buf.numel()
        if need > size:
            return None
        start = self.head if self.head + need <= size else 0
        end = start + need
        over = [r for r in self.regions if r[0] < end and start < r[1]]
        if any(r[2] is None for r in over):
            return None
        for r in over:
            stream.wait_event(r[2])
            self.regions.remove(r)
        self.head = end
        region = [start, end, None]
        self.regions.append(region)
        return region


class _Pass:
    """One training forward pass of one model."""

    def __init__(self, ahead, model, order, ring_bytes):
        self.ahead, self.model, self.order, self.ring_bytes = ahead, model, order, ring_bytes
        self.recorded = [] if order is None else None  # the layers as they run, learning
        self.next = 0        # the index in ORDER of the layer expected next
        self.issued = 0      # ORDER[:issued] have had their copies queued (or none needed)
        self.in_flight = 0   # bytes copied ahead of the layer running
        self.copies = {}     # index in ORDER -> (event, [(param, copy)], bytes, region)
        self.running = []    # (layer, [(param, its own data, copy)], region) running on copies
        self.rings = {}      # device -> its _Ring in this pass
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
        event, pairs, nbytes, region = entry
        self.in_flight -= nbytes
        self.ahead.torch.cuda.current_stream(pairs[0][0].device).wait_event(event)
        swapped = []
        for p, copy in pairs:
            swapped.append((p, p.data, copy))
            p.data = copy
        self.running.append((module, swapped, region))

    def post(self, module):
        """MODULE has returned (or raised): its parameters are their own
        again, and its region is free once the job's stream has run it."""
        if self.running and self.running[-1][0] is module:
            _, swapped, region = self.running.pop()
            self._put_back(swapped)
            event = self.ahead.torch.cuda.Event()
            event.record(self.ahead.torch.cuda.current_stream(swapped[0][0].device))
            region[2] = event

    def end(self):
        """The pass is over: what was learned is kept, the rest let go."""
        while self.running:
            self._put_back(self.running.pop()[1])
        self.copies.clear()
        self.rings.clear()
        if self.recorded:
            sizes = [sum(_aligned(_nbytes(p)) for p in self.ahead.weights(r())) for r in self.recorded]
            ring = min(sum(sizes), _AHEAD_BYTES + max(sizes))
            self.ahead.orders[id(self.model)] = (weakref.ref(self.model), self.recorded, ring)

    def _issue(self):
        """Queue the copies of the layers after the one about to run, and its
        own if not yet, as far as _AHEAD_BYTES and the ring's room allow."""
        ahead, torch = self.ahead, self.ahead.torch
        while self.issued < len(self.order) and \
                (self.issued <= self.next or self.in_flight < _AHEAD_BYTES):
            index = self.issued
            module = self.order[index]()
            if module is None:
                self._stop()
                return
            on_host = [p for p in ahead.weights(module)
                       if ahead.rt.host_bytes(p.untyped_storage().data_ptr()) > 0]
            if on_host and not self._copy(index, on_host) and index > self.next:
                return  # no room in the ring yet: again before the next layer
            self.issued += 1

    def _copy(self, index, params):
        """Queue the copies of PARAMS, the weights of layer INDEX that lie on
        the host, into a region of the ring; False where it has no room."""
        ahead, torch = self.ahead, self.ahead.torch
        device = params[0].device
        stream = ahead.stream(device)
        ring = self.rings.get(device)
        if ring is None:  # made on the job's stream: the copy stream follows it from here,
            stream.wait_stream(torch.cuda.current_stream(device))  # after the job's writes
            ring = self.rings[device] = _Ring(torch, device, self.ring_bytes, stream)
        need = sum(_aligned(_nbytes(p)) for p in params)
        region = ring.take(need, stream)
        if region is None:
            return False
        pairs, at = [], region[0]
        with torch.cuda.stream(stream), torch.no_grad():
            for p in params:
                n = _nbytes(p)
                copy = ring.buf[at:at + n].view(p.dtype).view(p.shape)
                copy.copy_(p, non_blocking=True)
                pairs.append((p, copy))
                at += _aligned(n)
        event = torch.cuda.Event()
        event.record(stream)
        nbytes = sum(_nbytes(p) for p in params)
        self.copies[index] = (event, pairs, nbytes, region)
        self.in_flight += nbytes
        ahead.copied += nbytes
        return True

    def _put_back(self, swapped):
        for p, own, copy in swapped:
            if p.data.data_ptr() == copy.data_ptr():  # else the job set it meanwhile: its own stays
                p.data = own

    def _stop(self):
        """The layers run in another order than recorded: the rest of this
        pass reads them where they lie, and the next pass records again."""
        self.stopped = True
        self.copies.clear()
        self.ahead.orders.pop(id(self.model), None)
        if not self.ahead.told:
            self.ahead.told = True
            _say("a forward pass ran its layers in another order than the one before: it read "
                 "them where they lie, and the order is recorded again (said once)")
