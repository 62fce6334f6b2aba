"""Saved activations to host memory (UMPOL_SAVED_TO_HOST=1).

Under gradient checkpointing the tensors a training forward pass saves for
backward are mostly each checkpointed segment's inputs (a layer's hidden
states), held from the forward pass until the backward pass reaches that
layer. They are all on the GPU at once at the step's peak, the loss, and
under a tight budget the room they take is paid for by weights sent to the
host, which are then read across the link in every pass and written by every
update. Here they go to the host instead, while the forward pass leaves the
link idle, and come back just ahead of the backward pass's use, in the
reverse order they left (the order in which a backward pass reads them).

Through the default saved-tensor hooks the Python package pushes for each
training forward pass (_torch.Auto._pack): a saved CUDA tensor of _MIN_BYTES
or more that owns its whole storage, is contiguous and is no parameter is
kept on the GPU while it is among the newest saved (the newest one, and
_KEEP_BYTES beside it: what the loss saves is read first by backward and
would only cross the link twice); once older, it is copied to pinned host
memory on a copy stream, after the work the job has queued so far, and its
GPU memory is let go at the next copy out (or when backward begins), the
job's stream ordered after the copy, which is done by then. When a backward
pass begins,
the last tensors copied out are copied back on a second copy stream, up to
_AHEAD_BYTES ahead of the one backward reads next; each one read makes room
for the next. A tensor read before its copy came (backward read in another
order) is copied back then, and the job's stream waits for it. The values
are the job's own; the losses are the job's. The copies back are tensors of
the backward pass (the policy's class of its allocations places them).

The copy out is made when a tensor leaves the newest ones, not when it is
saved: a job that changes a saved tensor in place before then (which
autograd forbids) would save the changed values. See umpol-python(7)."""
import collections
import sys
import threading
import weakref

_MIN_BYTES = 16 << 20    # a saved tensor this size or more goes to the host
_KEEP_BYTES = 256 << 20  # the newest saved tensors kept on the GPU beside the newest one
_AHEAD_BYTES = 256 << 20  # copied back ahead of the tensor backward reads next, at most


def _say(text):
    print(f"umpol: saved to host: {text}", file=sys.stderr, flush=True)


def _nbytes(t):
    return t.numel() * t.element_size()


class _Saved:
    """A saved tensor: on the GPU (GPU), or in host memory (HOST, copied out
    once OUT, an event, is done), and maybe back on the GPU (BACK, ready once
    READY, an event, is done)."""
    __slots__ = ("gpu", "host", "out", "back", "ready", "device", "nbytes", "__weakref__")

    def __init__(self, tensor, nbytes):
        self.gpu, self.host, self.out, self.back, self.ready = tensor, None, None, None, None
        self.device, self.nbytes = tensor.device, nbytes


class SavedToHost:
    """The process's saved tensors in host memory, and their copies back."""

    def __init__(self, torch):
        self.torch = torch
        self.lock = threading.RLock()  # packs on the job's thread, unpacks on autograd's
        self.streams = {}             # device -> (copy out, copy in)
        self.newest = collections.deque()  # saved tensors still on the GPU, newest last
        self.newest_bytes = 0
        self.on_gpu = {}              # storage address -> its _Saved among the newest (saved twice)
        self.leaving = collections.deque()  # copied out, GPU memory kept until the next copy out
        self.sent = []                # weak references to those copied out since the last
                                      # backward began (a graph never run back frees its own)
        self.coming = []              # those still to copy back, the next one last
        self.waiting = set()          # those copied back and not read yet,
        self.ahead = 0                # and their bytes
        self.sent_bytes = 0           # so far: copied out,
        self.back_bytes = 0           # copied back ahead,
        self.late = 0                 # and read before their copy back was made
        self.off = False              # host memory ran out: nothing leaves from then on

    def _streams(self, device):
        with self.lock:
            pair = self.streams.get(device)
            if pair is None:
                pair = self.streams[device] = (self.torch.cuda.Stream(device),
                                               self.torch.cuda.Stream(device))
            return pair

    def pack(self, tensor):
        """From the forward pass's pack hook: TENSOR itself, or its _Saved."""
        nbytes = _nbytes(tensor)
        if self.off or nbytes < _MIN_BYTES or type(tensor) is not self.torch.Tensor or \
                tensor.requires_grad and tensor.is_leaf or not tensor.is_contiguous() or \
                tensor.untyped_storage().nbytes() != nbytes:
            return tensor  # small, a parameter or subclass, or part of a block it would not free
        ptr = tensor.untyped_storage().data_ptr()
        with self.lock:
            saved = self.on_gpu.get(ptr)
            if saved is not None:  # saved again by another node: one copy for both
                return saved
            saved = self.on_gpu[ptr] = _Saved(tensor, nbytes)
            self.newest.append(saved)
            self.newest_bytes += nbytes
            older = []
            if self.newest_bytes - self.newest[-1].nbytes > _KEEP_BYTES:
                self._release()
            while self.newest_bytes - self.newest[-1].nbytes > _KEEP_BYTES:
                older.append(self.newest.popleft())
                self.newest_bytes -= older[-1].nbytes
                del self.on_gpu[older[-1].gpu.untyped_storage().data_ptr()]
        for s in older:
            try:
                self._send(s)
            except RuntimeError as e:  # no pinned host memory: the rest stay on the GPU
                self.off = True
                _say(f"off: a saved tensor could not be copied to host memory ({e}); the "
                     "saved tensors stay on the GPU from now on")
                break
        return saved

    def _send(self, saved):
        """Copy SAVED to pinned host memory after the job's work so far; its
        GPU memory is let go at the next copy out, or when backward begins
        (_release)."""
        torch = self.torch
        out, _ = self._streams(saved.device)
        gpu = saved.gpu
        out.wait_stream(torch.cuda.current_stream(saved.device))
        host = torch.empty(gpu.shape, dtype=gpu.dtype, pin_memory=True)
        with torch.cuda.stream(out):
            host.copy_(gpu, non_blocking=True)
            saved.out = torch.cuda.Event()
            saved.out.record(out)
        saved.host = host
        with self.lock:
            self.leaving.append(saved)
            self.sent_bytes += saved.nbytes

    def _release(self):
        """Under the lock: the saved tensors copied out so far let go of their
        GPU memory, the job's stream ordered after their copies. One copy out
        later than it could (not through record_stream, whose free under
        PyTorch's cudaMallocAsync backend makes the job's stream wait at
        once): by then the GPU has run another layer, and its copy is done; a
        copy that is done once the job's thread gets there has none to wait for."""
        while self.leaving:
            s = self.leaving.popleft()
            self.torch.cuda.current_stream(s.device).wait_event(s.out)
            s.gpu = None
            self.sent.append(weakref.ref(s))

    def _fetch(self, saved):
        """Copy SAVED back to the GPU on the copy-in stream, after its copy out."""
        torch = self.torch
        _, back = self._streams(saved.device)
        back.wait_event(saved.out)
        with torch.cuda.stream(back):
            gpu = torch.empty(saved.host.shape, dtype=saved.host.dtype, device=saved.device)
            gpu.copy_(saved.host, non_blocking=True)
            saved.ready = torch.cuda.Event()
            saved.ready.record(back)
        saved.back = gpu

    def _top_up(self):
        """Under the lock: copy back the next saved tensors, up to _AHEAD_BYTES
        ahead of backward's reads (at least one)."""
        while self.coming and (not self.waiting or
                               self.ahead + self.coming[-1].nbytes <= _AHEAD_BYTES):
            s = self.coming.pop()
            self._fetch(s)
            self.waiting.add(s)
            self.ahead += s.nbytes
            self.back_bytes += s.nbytes

    def backward_begin(self):
        """The outermost backward pass begins: the tensors saved since the last
        one are read from now on, the last copied out first."""
        with self.lock:
            self._release()
            self.coming = [s for s in (r() for r in self.sent) if s is not None]
            self.sent = []
            self.newest.clear()
            self.newest_bytes = 0
            self.on_gpu.clear()
            self._top_up()

    def backward_end(self):
        """The pass has returned: copies back it did not read are let go."""
        with self.lock:
            for s in self.waiting:
                s.back = None
            self.coming, self.waiting, self.ahead = [], set(), 0

    def unpack(self, saved):
        """From the backward pass's unpack hook: the tensor SAVED stands for, on the GPU."""
        if saved.gpu is not None:
            return saved.gpu
        job = self.torch.cuda.current_stream(saved.device)
        with self.lock:
            if saved in self.waiting:
                self.waiting.discard(saved)
                self.ahead -= saved.nbytes
            else:  # read out of order, or again: copied back now, the rest as they were
                self.late += 1
                if saved in self.coming:
                    self.coming.remove(saved)
                self._fetch(saved)
            back, saved.back = saved.back, None  # the job's now: its handle keeps no copy
            self._top_up()
        job.wait_event(saved.ready)
        back.record_stream(job)
        return back

    def summary(self):
        gib = 1 << 30
        return (f"{self.sent_bytes / gib:.2f} GiB copied out so far, {self.back_bytes / gib:.2f} "
                f"GiB back ahead of their use, {self.late} read before their copy back")
