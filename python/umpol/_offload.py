"""Saved activations to host memory (UMPOL_SAVED_TO_HOST: 1, or auto once the
runtime has evicted for the budget; _torch._Evicted).

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
memory on a copy stream, once the work queued on the stream current when it
was saved is done up to the save (an event recorded then: the copy does not
wait for the layers queued since), and its GPU memory is let go at the next
copy out (or when backward begins), that stream ordered after the copy,
which is done by then.
When a backward pass begins, the last tensors copied out are copied back on
a second copy stream, up to _AHEAD_BYTES ahead of the one backward reads
next; each one read makes room for the next. A tensor read before its copy came (backward read in another
order) is copied back then, and the job's stream waits for it. The values
are the job's own; the losses are the job's. The copies back are tensors of
the backward pass, whose phase is open when they are made (the policy's
class of its allocations places them), on the job's stream, which the copies
follow (_fetch).

A tensor saved by two nodes (the same block, shape and type) has one copy,
read by both. The copy out follows the save, not the work queued since: a
job that changes a saved tensor in place after saving it (which autograd
forbids, but does not check under saved-tensor hooks) races with the copy.
A backward pass reads the tensors of whatever graphs were saved since the
last one. See umpol-python(7)."""
import collections
import sys
import threading
import weakref

from ._ahead import out_of_memory

_MIN_BYTES = 16 << 20    # a saved tensor this size or more goes to the host
_KEEP_BYTES = 256 << 20  # the newest saved tensors kept on the GPU beside the newest one
_AHEAD_BYTES = 256 << 20  # copied back ahead of the tensor backward reads next, at most
_SENT_LIMIT = 4096        # handles copied out, past which those of freed graphs are dropped


def _say(text):
    print(f"umpol: saved to host: {text}", file=sys.stderr, flush=True)


class _Saved:
    """A saved tensor: on the GPU (GPU), or in host memory (HOST, copied out
    once OUT, an event, is done), and maybe back on the GPU (BACK, ready once
    READY, an event, is done, for UNREAD more reads; made on BACK_ON, the
    stream current then). STREAM: the stream that was current when it was
    saved, MADE an event recorded on it then; PACKS: the times it was saved."""
    __slots__ = ("gpu", "host", "out", "back", "ready", "back_on", "device", "nbytes", "stream",
                 "made", "packs", "unread", "__weakref__")

    def __init__(self, tensor, nbytes, stream, made):
        self.gpu, self.host, self.out, self.back, self.ready = tensor, None, None, None, None
        self.back_on = None
        self.device, self.nbytes, self.stream, self.made, self.packs, self.unread = \
            tensor.device, nbytes, stream, made, 1, 0


class SavedToHost:
    """The process's saved tensors in host memory, and their copies back.
    Handles are held weakly but by autograd: a graph the job drops frees
    them, and with them their memory on the GPU and the host."""

    def __init__(self, torch, when=None):
        self.torch = torch
        self.when = when              # what says when to begin (None: at once)
        self.lock = threading.RLock()  # packs on the job's thread, unpacks on autograd's
        self.streams = {}             # device -> (copy out, copy in)
        self.newest = collections.deque()  # (weak _Saved, bytes, key) still on the GPU, newest last
        self.newest_bytes = 0
        self.on_gpu = {}              # (address, shape, dtype) -> weak _Saved among the newest
        self.leaving = collections.deque()  # (weak _Saved, its GPU tensor, copy out's event,
                                            # its stream): kept until the next copy out
        self.sent = []                # weak references to those copied out since the last
                                      # backward began
        self.sent_limit = _SENT_LIMIT  # their count past which the dead ones are dropped
        self.coming = []              # those still to copy back, the next one last
        self.waiting = set()          # those copied back and not read yet,
        self.ahead = 0                # and their bytes
        self.sent_bytes = 0           # so far: copied out,
        self.back_bytes = 0           # copied back ahead,
        self.late = 0                 # and read before their copy back was made,
        self.late_bytes = 0           # copied back when read
        self.told_room = False        # that a copy back ahead found no room, on stderr
        self.full = False             # one did in this backward pass: no more copies ahead
        self.off = False              # host memory ran out: nothing leaves from then on

    def _streams(self, device):
        with self.lock:
            pair = self.streams.get(device)
            if pair is None:
                pair = self.streams[device] = (self.torch.cuda.Stream(device),
                                               self.torch.cuda.Stream(device))
            return pair

    def _kept(self, tensor, nbytes):
        """Whether TENSOR stays as it is: small, a parameter, a subclass, not
        plain strided memory, part of a block it would not free, or saved
        inside a CUDA graph's capture (a copy stream would fork it)."""
        torch = self.torch
        return self.off or nbytes < _MIN_BYTES or type(tensor) is not torch.Tensor or \
            tensor.requires_grad and tensor.is_leaf or tensor.layout is not torch.strided or \
            getattr(tensor, "is_nested", False) or not tensor.is_contiguous() or \
            tensor.untyped_storage().nbytes() != nbytes or torch.cuda.is_current_stream_capturing()

    def pack(self, tensor):
        """From the forward pass's pack hook: TENSOR itself, or its _Saved."""
        nbytes = tensor.numel() * tensor.element_size()
        if self._kept(tensor, nbytes) or not self._begun():
            return tensor
        key = (tensor.untyped_storage().data_ptr(), tuple(tensor.shape), tensor.dtype)
        with self.lock:
            ref = self.on_gpu.get(key)
            saved = ref() if ref is not None else None
            if saved is not None and saved.gpu is not None:  # saved again: one copy for both
                saved.packs += 1
                return saved
            stream = self.torch.cuda.current_stream(tensor.device)
            made = self.torch.cuda.Event()
            made.record(stream)
            saved = _Saved(tensor, nbytes, stream, made)
            ref = self.on_gpu[key] = weakref.ref(saved)
            self.newest.append((ref, nbytes, key))
            self.newest_bytes += nbytes
            older = []
            if self.newest_bytes - nbytes > _KEEP_BYTES:
                self._release()
            while self.newest_bytes - nbytes > _KEEP_BYTES:
                ref, n, k = self.newest.popleft()
                self.newest_bytes -= n
                if self.on_gpu.get(k) is ref:
                    del self.on_gpu[k]
                s = ref()
                if s is not None and s.gpu is not None:
                    older.append(s)
        for s in older:
            try:
                self._send(s)
            except RuntimeError as e:  # no pinned host memory: the rest stay on the GPU
                self.off = True
                _say(f"off: a saved tensor could not be copied to host memory ({e}); the "
                     "saved tensors stay on the GPU from now on")
                break
        return saved

    def _begun(self):
        """Has it begun, or does WHEN say begin now? Said once, when it does.
        WHEN read once into a local: another thread's pack may clear it."""
        when = self.when
        if when is None:
            return True
        if not when():
            return False
        self.when = None
        _say("on (UMPOL_SAVED_TO_HOST=auto; 0 keeps it off): the runtime has evicted to the host "
             "for the budget; from now on the forward passes' large saved tensors wait for "
             "backward in host memory")
        return True

    def _send(self, saved):
        """Copy SAVED to pinned host memory once the work queued on its stream
        before its save is done; its GPU memory is let go at the next copy
        out, or when backward begins (_release)."""
        torch = self.torch
        out, _ = self._streams(saved.device)
        gpu = saved.gpu
        out.wait_event(saved.made)
        host = torch.empty(gpu.shape, dtype=gpu.dtype, pin_memory=True)
        with torch.cuda.stream(out):
            host.copy_(gpu, non_blocking=True)
            saved.out = torch.cuda.Event()
            saved.out.record(out)
        saved.host = host
        with self.lock:
            self.leaving.append((weakref.ref(saved), gpu, saved.out, saved.stream))
            self.sent_bytes += saved.nbytes

    def _release(self):
        """Under the lock: the saved tensors copied out so far let go of their
        GPU memory, the stream they were saved on ordered after their copies.
        One copy out later than it could (not through record_stream, which
        under PyTorch's cudaMallocAsync backend made the job's stream wait
        for each copy as it was queued): by then the GPU has run another
        layer and the copy is done. A tensor made on one stream and saved
        while another is current is not followed there."""
        while self.leaving:
            ref, gpu, out, stream = self.leaving.popleft()
            stream.wait_event(out)
            s = ref()
            if s is not None:
                s.gpu = None
                self.sent.append(ref)
        if len(self.sent) > self.sent_limit:  # forward passes no backward read (eval with grad on)
            self.sent = [r for r in self.sent if r() is not None]
            self.sent_limit = max(_SENT_LIMIT, 2 * len(self.sent))

    def _fetch(self, saved):
        """Copy SAVED back to the GPU on the copy-in stream, after its copy
        out, for as many reads as it was saved. The copy is made on the job's
        stream, which reads it and lets it go (a read on another stream marks
        it used there), and the copy-in stream follows that stream up to here,
        as weights ahead does (_ahead.py): made on the copy stream and marked
        used by the job's, it would be freed after every copy back queued by
        then, and the job's next allocation of its memory would wait for them
        all."""
        torch = self.torch
        _, back = self._streams(saved.device)
        job = torch.cuda.current_stream(saved.device)
        gpu = torch.empty(saved.host.shape, dtype=saved.host.dtype, device=saved.device)
        back.wait_stream(job)
        back.wait_event(saved.out)
        with torch.cuda.stream(back):
            gpu.copy_(saved.host, non_blocking=True)
            saved.ready = torch.cuda.Event()
            saved.ready.record(back)
        saved.back, saved.back_on, saved.unread = gpu, job, saved.packs

    def _top_up(self):
        """Under the lock: copy back the next saved tensors, up to _AHEAD_BYTES
        ahead of backward's reads (at least one)."""
        while not self.full and self.coming and (not self.waiting or
                               self.ahead + self.coming[-1].nbytes <= _AHEAD_BYTES):
            s = self.coming[-1]
            try:
                self._fetch(s)
            except out_of_memory(self.torch) as e:
                # No room to copy ahead: each read copies its tensor back then.
                if not self.told_room:
                    self.told_room = True
                    _say(f"no GPU memory to copy a saved tensor back ahead of its read ({e}): "
                         f"copied back when read for the rest of the pass (said once)")
                self.full = True  # no retry (each failed allocation costs the allocator a sync)
                return
            self.coming.pop()
            self.waiting.add(s)
            self.ahead += s.nbytes
            self.back_bytes += s.nbytes

    def backward_begin(self):
        """The outermost backward pass begins (its phase open): the tensors
        saved since the last one are read from now on, the last copied out
        first."""
        with self.lock:
            self.full = False
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
            for s in self.waiting:  # let go in the order of the stream they were made on,
                s.back_on.wait_event(s.ready)  # after their copies
                s.back = None
            self.coming, self.waiting, self.ahead = [], set(), 0

    def unpack(self, saved):
        """From the backward pass's unpack hook: the tensor SAVED stands for, on the GPU."""
        if saved.gpu is not None:
            return saved.gpu
        job = self.torch.cuda.current_stream(saved.device)
        with self.lock:
            if saved.back is None:  # read out of order, or again: copied back now
                if saved in self.coming:
                    self.coming.remove(saved)
                self._fetch(saved)
                self.late += 1
                self.late_bytes += saved.nbytes
            back, ready, back_on = saved.back, saved.ready, saved.back_on
            saved.unread -= 1
            if saved.unread <= 0:  # the job's now: its handle keeps no copy
                saved.back = None
                if saved in self.waiting:
                    self.waiting.discard(saved)
                    self.ahead -= saved.nbytes
            self._top_up()
        job.wait_event(ready)  # the copy is the job's own from here
        if job != back_on:  # freed on BACK_ON, which never waited for this read
            back.record_stream(job)
        return back

    def summary(self):
        gib = 1 << 30
        return (f"{self.sent_bytes / gib:.2f} GiB copied out so far, {self.back_bytes / gib:.2f} "
                f"GiB back ahead of their use, {self.late} read before their copy back")
