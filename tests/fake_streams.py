"""CUDA streams for the fake torches of tests/python_overlap.py and
tests/python_ahead.py: the current stream, torch.cuda.stream(s) over it, and
torch.cuda.Stream made in turn."""
import contextlib


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
