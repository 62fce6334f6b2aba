"""What tests/python_overlap.py, tests/python_ahead.py and
tests/python_offload.py share: the CUDA streams of their fake torches (the
current stream, torch.cuda.stream(s) over it, torch.cuda.Stream made in
turn), streams and events that log what is queued on them, a fake float32
tensor's size and layout, the error of a GPU with no room, and their
checks."""
import contextlib
import io
import sys


class OutOfMemoryError(RuntimeError):
    """A fake torch.cuda.OutOfMemoryError: the GPU has no room."""


def stream_api(Stream, first, prefix):
    """(current, stream, new_stream): CURRENT["stream"] is the current stream,
    Stream(FIRST) to begin with; `with stream(s)` makes S current for the
    block; new_stream(device) makes Stream(PREFIX1), Stream(PREFIX2), ..."""
    current = {"stream": Stream(first)}

    @contextlib.contextmanager
    def stream(s):
        previous, current["stream"] = current["stream"], s
        try:
            yield
        finally:
            current["stream"] = previous

    made = []

    def new_stream(device):
        made.append(Stream(f"{prefix}{len(made) + 1}"))
        return made[-1]

    return current, stream, new_stream


def said(fn):
    """What FN wrote on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        fn()
    return err.getvalue()


class Float32:
    """What a fake float32 tensor of N elements answers about its size and
    layout (CONTIGUOUS, true unless set)."""
    contiguous = True

    def numel(self):
        return self.n

    def element_size(self):
        return 4

    def is_contiguous(self):
        return self.contiguous


def check(what, cond):
    """One line a check; the first failure ends the test."""
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        sys.exit(1)


LOG = []  # (stream, what) of every copy, wait and record on the streams below, in order


class Stream:
    def __init__(self, name):
        self.name = name

    def wait_stream(self, other):
        LOG.append((self.name, f"wait {other.name}"))

    def wait_event(self, event):
        LOG.append((self.name, f"wait event of {event.stream}"))


class Event:
    def __init__(self):
        self.stream = None

    def record(self, stream):
        self.stream = stream.name
        LOG.append((stream.name, "record"))
