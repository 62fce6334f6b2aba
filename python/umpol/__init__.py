"""umpol for Python: phases, tags and marks for the umpol runtime.

Under `umpol run` this package is imported at start-up and, once PyTorch is
imported, opens the phases the stock policies match (model.init, forward,
backward, optimizer.step, zero_grad) with no change to the job. For what
cannot be inferred:

    import umpol
    with umpol.phase("load"):          # or @umpol.phase("load")
        ...
    with umpol.tag("kv"):              # allocations on this thread match `tag "kv"`
        cache = torch.empty(...)
    umpol.mark("kv.hot")               # fires `prefetch ... on mark "kv.hot"`
    umpol.memory_stats()               # per class: live, peak, resident, ...

Without the runtime (plain `python`), all of it does nothing and
memory_stats() returns {}. See umpol-python(7)."""
import contextlib
import os
import sys

from umpol._runtime import Runtime

__all__ = ["phase", "tag", "mark", "memory_stats", "active", "steps", "enable_auto"]

_rt = Runtime()
_auto = None


def active():
    """True when the runtime is preloaded with a policy (under `umpol run`)."""
    return _rt.active


class phase(contextlib.ContextDecorator):
    """Open phase NAME for the `with` block or the decorated function.

    Phases are process-wide: allocations made by any thread while it is open
    match `phase "glob"` in the policy. Opening fires `prefetch ... on enter`,
    closing fires `on exit`."""

    def __init__(self, name):
        self.name = name
        _rt._b(name)  # a bad name fails here, not at the first use

    def __enter__(self):
        _rt.enter(self.name)
        return self

    def __exit__(self, *exc):
        _rt.exit(self.name)
        return False


class tag(contextlib.ContextDecorator):
    """Push tag NAME for the `with` block or the decorated function: allocations
    made by this thread meanwhile match `tag "NAME"`."""

    def __init__(self, name):
        self.name = name
        _rt._b(name)

    def __enter__(self):
        _rt.tag_push(self.name)
        return self

    def __exit__(self, *exc):
        _rt.tag_pop()
        return False


def mark(name):
    """Fire mark NAME: `prefetch ... on mark "NAME"` runs now."""
    _rt.mark(name)


def memory_stats():
    """Per class of the policy, in policy order: a dict of counters.

    allocations, frees, live_bytes (in live blocks now), peak_bytes,
    resident_bytes (of the live bytes, on the GPU now), prefetches and
    prefetch_bytes, evictions and evict_bytes, saved and saved_bytes (blocks
    reported as saved for backward). {} when the runtime is not active.
    Under `umpol run`, this replaces torch.cuda.memory_allocated(), which
    reads 0 with the cudaMallocAsync backend (see umpol-python(7))."""
    return _rt.class_stats()


def steps():
    """Optimizer steps seen by the automatic phases (0 when they are off)."""
    return _auto.steps if _auto is not None else 0


def _switch(name):
    """An UMPOL_* switch: True for 1, False for 0, "auto" when unset or auto
    (on once the runtime has evicted a block for the budget)."""
    value = os.environ.get(name, "auto")
    if value not in ("0", "1", "auto"):
        sys.stderr.write(f"umpol: {name}={value!r}: expected 0, 1 or auto; taken as auto\n")
        value = "auto"
    return {"0": False, "1": True}.get(value, "auto")


def _step_in_backward(rt):
    """Whether the optimizer's updates move into backward: UMPOL_STEP_IN_BACKWARD
    where it is 0 or 1, else what the policy says (`update in backward;`)."""
    value = os.environ.get("UMPOL_STEP_IN_BACKWARD")
    if value in ("0", "1"):
        return value == "1"
    if value is not None:
        sys.stderr.write(f"umpol: UMPOL_STEP_IN_BACKWARD={value!r}: expected 0 or 1; the "
                         f"policy decides ({'on' if rt.update_in_backward else 'off'})\n")
    return rt.update_in_backward


def enable_auto():
    """Install the automatic PyTorch phases now, or once torch is imported.

    Done at start-up under `umpol run` unless UMPOL_PYTHON=0. Does nothing
    when the runtime is not active."""
    if not _rt.active:
        return

    def installed(torch):
        global _auto
        try:
            from umpol import _torch
            _auto = _torch.install(torch, _rt, saved=os.environ.get("UMPOL_SAVED", "1") != "0",
                                   step_in_backward=_step_in_backward(_rt),
                                   autocast_cache=os.environ.get("UMPOL_AUTOCAST_CACHE", "1") != "0",
                                   weights_ahead=_switch("UMPOL_WEIGHTS_AHEAD"),
                                   saved_to_host=_switch("UMPOL_SAVED_TO_HOST"))
        except Exception as e:  # runs inside the job's `import torch`: never fail it
            sys.stderr.write(f"umpol: automatic PyTorch phases: installing them failed "
                             f"({type(e).__name__}: {e}); they are off, and torch is left as "
                             f"it was\n")

    from umpol._importhook import when_imported
    when_imported("torch", installed)
