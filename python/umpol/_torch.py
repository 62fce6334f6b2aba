"""Automatic phases for PyTorch, installed once torch is imported.

Through PyTorch's global hooks where it has them (module forward hooks,
optimizer step hooks, default saved-tensor hooks) and wrappers around the
library's own entry points where it has none (torch.autograd.backward and
grad, Module.to/cuda/to_empty, Optimizer.zero_grad and Module.zero_grad,
Optimizer.load_state_dict, and __init__ of every nn.Module subclass). The job's
own code is not touched. See umpol-python(7) for the phases and their rules.

Phases are per thread in the runtime's stack but process-wide in effect: a
phase opened on the job's thread classifies allocations made on autograd's
threads too. Automatic phases close by name, so the job's own NVTX ranges may
open and close inside them in any order."""
import contextlib
import functools
import sys
import threading
import warnings

from umpol._offload import SavedToHost, _Saved

MODEL_INIT, FORWARD, BACKWARD, STEP, ZERO_GRAD = (
    "model.init", "forward", "backward", "optimizer.step", "zero_grad")
FORWARD_EVAL, FORWARD_RECOMPUTE = "forward.eval", "forward.recompute"
STEP_MARK = "step"


class _Thread(threading.local):
    def __init__(self):
        self.modules = 0        # module calls in progress
        self.lingering = None   # a forward phase left open after its module returned
        self.bounded = {}       # phase -> calls of that kind in progress (outermost opened it)
        self.saved_hooks = None  # the saved-tensor hooks pushed for the open forward
        self.saved_seen = set()  # blocks already reported in this forward
        self.stepping = set()    # optimizers inside step() on this thread
        self.ahead = None        # the training forward pass's weights ahead (_ahead._Pass)


def _top_hooks(C):
    """The (pack, unpack) on top of autograd's default saved-tensor hook stack,
    or None (an older PyTorch's takes no argument)."""
    try:
        return C._top_saved_tensors_default_hooks(False)
    except TypeError:
        return C._top_saved_tensors_default_hooks()


class _Versioned:
    """A tensor saved through our hooks and its version then: unpacked, it
    fails as autograd's own check does if it was changed in place since."""
    __slots__ = ("tensor", "version")

    def __init__(self, tensor, version):
        self.tensor, self.version = tensor, version

    def check(self):
        now = self.tensor._version
        if now != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {self.tensor.type()} {list(self.tensor.shape)} is at version "
                f"{now}; expected version {self.version} instead (the check autograd makes, "
                "kept by umpol's saved-tensor hooks)")
        return self.tensor


class Auto:
    """The automatic phases of one process."""

    def __init__(self, torch, rt, saved=True):
        self.torch, self.rt, self.saved = torch, rt, saved
        self.overlap = None  # the optimizer's step in backward (_overlap), when asked for
        self.ahead = None    # weights ahead of the forward pass's layers (_ahead), when asked for
        self.offload = None  # saved activations to host memory (_offload), when asked for
        self.t = _Thread()
        self.streaming = getattr(rt, "streaming", False)  # umpol_use wanted (stream written)
        self.backwards = 0  # backward passes running, on any thread
        self.steps = 0      # optimizer steps completed
        self.lock = threading.Lock()
        compiler = getattr(torch, "compiler", None)
        self.compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    # ---- opening and closing ----

    def _close_lingering(self):
        t = self.t
        if t.lingering is not None and t.modules == 0:
            self._pop_saved_hooks()
            self.rt.exit(t.lingering)
            t.lingering = None

    def _begin(self, name):
        """A bounded call of kind NAME starts; returns whether it opened the phase."""
        t = self.t
        self._close_lingering()
        n = t.bounded.get(name, 0)
        t.bounded[name] = n + 1
        if n:
            return False
        self.rt.enter(name)
        return True

    def _end(self, name, opened):
        t = self.t
        t.bounded[name] -= 1
        if opened:
            self.rt.exit(name)

    def bounded(self, name, fn, *args, **kwargs):
        opened = self._begin(name)
        try:
            return fn(*args, **kwargs)
        finally:
            self._end(name, opened)

    # ---- forward: global module hooks ----

    def _announce(self, tensors):
        """The module or autograd node about to run reads TENSORS: their storages'
        addresses (the blocks the runtime handed out, also for views), with the
        current stream of each one's GPU."""
        by_device = {}
        for t in tensors:
            if t is not None and t.is_cuda:
                by_device.setdefault(t.device, []).append(t.untyped_storage().data_ptr())
        for device, ptrs in by_device.items():
            self.rt.use(ptrs, self.torch.cuda.current_stream(device).cuda_stream)

    def _announce_module(self, module):
        """Its own parameters; all of them for a compiled module, whose inner
        modules run no hooks."""
        if type(module).__name__ == "OptimizedModule" or \
                getattr(module, "_compiled_call_impl", None) is not None:
            self._announce(list(module.parameters()))
        elif module._parameters:
            self._announce(module._parameters.values())

    def forward_pre(self, module, args):
        if self.compiling():
            return None
        if self.streaming:  # every module that holds parameters, nested ones too
            try:
                self._announce_module(module)
            except (RuntimeError, AttributeError, NotImplementedError):
                pass  # a parameter with no plain storage (sparse, a wrapper subclass)
        t = self.t
        t.modules += 1
        if t.modules > 1:
            if t.ahead is not None:
                t.ahead.pre(module)
            return None
        torch = self.torch
        if self.backwards:
            name = FORWARD_RECOMPUTE
        elif torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
            name = FORWARD
        else:
            name = FORWARD_EVAL
        t.modules -= 1
        self._close_lingering()
        t.modules += 1
        self.rt.enter(name)
        # Inside a bounded call (optimizer closure, model.init) or a recompute,
        # the phase ends with the module; otherwise it stays open until the next
        # phase, so that the loss computed from the output counts as forward.
        # The saved-tensor hooks end with the module either way: pushed and
        # popped around it, they nest with hooks the job pushes after it
        # returns (save_on_cpu, non-reentrant checkpoints, torch.func).
        inside = name == FORWARD_RECOMPUTE or any(t.bounded.values())
        t.lingering = None if inside else name
        if inside:
            t.bounded[name] = t.bounded.get(name, 0) + 1
        # Compiled modules trace their own saved tensors: no hooks around them.
        if name == FORWARD and self.saved and type(module).__name__ != "OptimizedModule" \
                and getattr(module, "_compiled_call_impl", None) is None:
            self._push_saved_hooks()
        if name in (FORWARD, FORWARD_RECOMPUTE) and self.ahead is not None:
            if t.ahead is not None:  # a pass whose end no hook saw (it raised, old PyTorch)
                t.ahead.end()
            t.ahead = self.ahead.begin(module) if name == FORWARD else self.ahead.recompute(module)
            if t.ahead is not None:
                t.ahead.pre(module)
        return None

    def forward_post(self, module, args, output):
        if self.compiling():
            return None
        t = self.t
        if t.modules == 0:
            return None
        t.modules -= 1
        if t.ahead is not None:
            t.ahead.post(module)
        if t.modules:
            return None
        self._pop_saved_hooks()
        if t.ahead is not None:
            t.ahead.end()
            t.ahead = None
        for name in (FORWARD_RECOMPUTE, FORWARD, FORWARD_EVAL):
            if t.bounded.get(name) and t.lingering != name:
                t.bounded[name] -= 1
                self.rt.exit(name)
                break
        return None

    # ---- saved tensors: default saved-tensor hooks while a training forward is open ----

    def _push_saved_hooks(self):
        t = self.t
        C = getattr(self.torch._C, "_autograd", None)
        push = getattr(C, "_push_saved_tensors_default_hooks", None)
        if (t.saved_hooks is not None or push is None
                or not hasattr(C, "_top_saved_tensors_default_hooks")):
            return
        enabled = getattr(C, "_saved_tensors_hooks_is_enabled", None)
        if enabled is not None and not enabled():  # torch.func's transforms refuse hooks
            return
        if _top_hooks(C) is not None:  # the job's own hooks (save_on_cpu, ...) win
            return
        t.saved_seen = set()
        try:
            push(self._pack, self._unpack)
        except RuntimeError:  # hooks disabled in a way the check above missed
            return
        t.saved_hooks = C

    def _pop_saved_hooks(self):
        """Pop our saved-tensor hooks, only when they are on top: hooks the
        job pushed after ours are its own to pop (we retry at the next call).
        True if they were popped."""
        t = self.t
        if t.saved_hooks is None or _top_hooks(t.saved_hooks) != (self._pack, self._unpack):
            return False
        t.saved_hooks._pop_saved_tensors_default_hooks()
        t.saved_hooks = None
        return True

    def wrap_disable_hooks(self, disable):
        """torch.autograd.graph.disable_saved_tensors_hooks, through which
        torch.func's transforms (grad, vjp, jacrev, ...) refuse a hook stack
        that holds any: ours step aside while the region runs (the tensors
        saved in it are not reported) and come back after it, so a transform
        inside a training forward runs as without umpol."""
        @contextlib.contextmanager
        def disable_saved_tensors_hooks(error_message):
            t = self.t
            C = t.saved_hooks
            lifted = self._pop_saved_hooks()
            try:
                with disable(error_message):
                    yield
            finally:
                # Back only where they were on top and nothing else is now.
                if lifted and t.saved_hooks is None and _top_hooks(C) is None:
                    C._push_saved_tensors_default_hooks(self._pack, self._unpack)
                    t.saved_hooks = C
        functools.update_wrapper(disable_saved_tensors_hooks, disable)
        disable_saved_tensors_hooks.__umpol_wrapped__ = True
        return disable_saved_tensors_hooks

    def _pack(self, tensor):
        if self.compiling():
            return tensor
        if tensor.is_cuda:
            try:
                ptr = tensor.untyped_storage().data_ptr()
            except (RuntimeError, AttributeError):
                return tensor
            seen = self.t.saved_seen
            if ptr and ptr not in seen:
                seen.add(ptr)
                self.rt.note_saved(ptr)
            if self.offload is not None:
                packed = self.offload.pack(tensor)
                if packed is not tensor:
                    return packed
        # Autograd checks a saved tensor's version only where no hooks are
        # pushed: ours keep that check, so an in-place change still fails
        # backward as it does without umpol.
        # Kept detached: a saved output held as itself would hold its own
        # grad_fn, a cycle that keeps the graph (and its GPU memory) alive
        # when no backward runs through it; the storage and version counter
        # are the same.
        try:
            return _Versioned(tensor.detach() if tensor.grad_fn is not None else tensor,
                              tensor._version)
        except (RuntimeError, AttributeError):  # no version counter (inference tensors)
            return tensor

    def _unpack(self, tensor):
        if isinstance(tensor, _Versioned):  # compiled autograd traces no data-dependent check
            tensor = tensor.tensor if self.compiling() else tensor.check()
        if isinstance(tensor, _Saved):  # an activation in host memory (_offload)
            return self.offload.unpack(tensor)
        # A tensor saved for backward (a weight, without autocast's copy) is
        # read by the node about to run: announced, so that streaming leaves it be.
        if self.streaming and tensor.is_cuda and not self.compiling():
            try:
                self._announce((tensor,))
            except (RuntimeError, AttributeError):
                pass
        return tensor

    # ---- backward: torch.autograd.backward and grad ----

    def wrap_backward(self, fn, accumulates=False):
        """FN runs a backward pass; ACCUMULATES: into the parameters' .grad
        (torch.autograd.backward, not grad)."""
        auto = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if auto.compiling():
                return fn(*args, **kwargs)
            with auto.lock:
                # Not a reentrant checkpoint's inner pass, nor one inside a
                # forward (a torch.func transform's, a gradient penalty's).
                outermost = auto.backwards == 0 and auto.t.modules == 0
                auto.backwards += 1
            overlap = auto.overlap if accumulates and outermost else None
            offload = auto.offload if outermost else None
            failed = True

            def run(*a, **kw):
                if offload is not None:  # its copies back are the backward phase's
                    offload.backward_begin()
                return fn(*a, **kw)
            try:
                if overlap is not None:
                    overlap.backward_begin()
                out = auto.bounded(BACKWARD, run, *args, **kwargs)
                failed = False
                return out
            finally:
                with auto.lock:
                    auto.backwards -= 1
                if offload is not None:
                    offload.backward_end()
                if overlap is not None:
                    overlap.backward_end(failed)
        wrapper.__umpol_wrapped__ = True
        return wrapper

    # ---- optimizer.step: global optimizer hooks; zero_grad ----

    def step_pre(self, optimizer, args, kwargs):
        overlap = self.overlap
        t = self.t
        if id(optimizer) in t.stepping:  # its last step raised before the post hook
            t.stepping.clear()
            if t.bounded.get(STEP):
                t.bounded[STEP] = 0
                self.rt.exit(STEP)
        t.stepping.add(id(optimizer))
        self._begin(STEP)
        # A closure (LBFGS, Lightning's automatic optimization) runs the
        # forward and backward passes inside step(): they get their own
        # phases, with optimizer.step closed while the closure runs.
        # torch's global hooks get step()'s arguments with the optimizer first.
        at = 1 if args and args[0] is optimizer else 0
        positional = len(args) > at and callable(args[at])
        closure = args[at] if positional else kwargs.get("closure")
        if not callable(closure):
            closure = None
        if overlap is not None:
            if closure is not None:
                overlap.refuse("the job steps with a closure (backward runs inside step)")
            overlap.step_pre(optimizer)
        if closure is None:
            return None
        if positional:
            return tuple(args[:at]) + (self._closure(closure),) + tuple(args[at + 1:]), kwargs
        return args, dict(kwargs, closure=self._closure(closure))

    def _closure(self, closure):
        auto = self

        @functools.wraps(closure)
        def wrapper(*a, **kw):
            t = auto.t
            depth = t.bounded.get(STEP, 0)
            if depth:
                t.bounded[STEP] = 0
                auto.rt.exit(STEP)
            try:
                return closure(*a, **kw)
            finally:
                if depth:
                    auto._close_lingering()
                    t.bounded[STEP] = depth
                    auto.rt.enter(STEP)
        return wrapper

    def step_post(self, optimizer, args, kwargs):
        overlap = self.overlap
        t = self.t
        t.stepping.discard(id(optimizer))
        if not t.bounded.get(STEP):
            return
        outermost = t.bounded[STEP] == 1
        self._end(STEP, outermost)
        if outermost:
            self.steps += 1
            self.rt.mark(STEP_MARK)
            if overlap is not None:
                overlap.step_post()

    def wrap_method(self, fn, name, when=None):
        auto = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if auto.compiling() or (when is not None and not when()):
                return fn(*args, **kwargs)
            return auto.bounded(name, fn, *args, **kwargs)
        wrapper.__umpol_wrapped__ = True
        return wrapper

    # ---- model.init: Module subclasses' __init__, Module.to/cuda/to_empty ----

    def init_allowed(self):
        """model.init opens outside forward, backward and optimizer steps only."""
        t = self.t
        return (t.modules == 0 and not t.bounded.get(BACKWARD) and not t.bounded.get(STEP)
                and not self.backwards)


def for_subclasses(base, fn, changes):
    """Call fn(cls) for BASE and its subclasses, now and when one is defined
    (BASE's __init_subclass__ set through CHANGES)."""
    pending, seen = [base], set()
    while pending:
        cls = pending.pop()
        if cls not in seen:
            seen.add(cls)
            fn(cls)
            pending.extend(cls.__subclasses__())
    previous = base.__dict__.get("__init_subclass__")

    def __init_subclass__(cls, **kwargs):
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        fn(cls)
    changes.set(base, "__init_subclass__", classmethod(__init_subclass__))


def _watch_gradient_readers(torch, overlap, changes):
    """What reads or clears the gradients between backward and step (clipping,
    GradScaler, zero_grad): the optimizer's step in backward must know."""
    def wrap(owner, name, tell):
        fn = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if fn is None or getattr(fn, "__umpol_wrapped__", False):
            return

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            tell(*args)
            return fn(*args, **kwargs)
        wrapper.__umpol_wrapped__ = True
        changes.set(owner, name, wrapper)

    utils = torch.nn.utils
    clip = getattr(utils, "clip_grad", None)
    for name in ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_"):
        for owner in (utils, clip):
            if owner is not None:
                wrap(owner, name, lambda *a, what=f"torch.nn.utils.{name}": overlap.gradients_read(what))
    # A GradScaler scales the loss before backward: its gradients are scaled
    # (and maybe not finite) until unscale_, so the updates cannot run in backward.
    def scale(scaler, *rest):
        if getattr(scaler, "_enabled", True):
            overlap.refuse("the job scales its loss with GradScaler (its gradients stay scaled "
                           "until unscale_)")
    for amp in (getattr(torch, "amp", None), getattr(torch.cuda, "amp", None)):
        scaler = getattr(amp, "GradScaler", None) if amp is not None else None
        if isinstance(scaler, type):
            wrap(scaler, "scale", scale)
            wrap(scaler, "unscale_", lambda *a: overlap.gradients_read("GradScaler.unscale_"))
    for owner in (torch.optim.Optimizer, torch.nn.Module):
        wrap(owner, "zero_grad", lambda *a: overlap.gradients_cleared())


class _Evicted:
    """Has the runtime sent a block to the host for the budget yet? What turns
    on the weights ahead and the saved tensors in host memory when they are
    left at "auto": until then the budget holds the step, and they would
    only add copies. Once true, true for good. When it turns true, the
    runtime is told the step changes: the steps before held their saved
    tensors on the GPU, and the slabs their peak made, and the weights that
    peak sent out, would otherwise stay so (umpol_step_changed)."""

    def __init__(self, rt):
        self.rt, self.seen = rt, False
        self.lock = threading.Lock()  # autograd's threads (one a GPU) ask too: told once

    def __call__(self):
        if not self.seen:
            with self.lock:
                if not self.seen and self.rt.evictions() > 0:
                    self.rt.step_changed()
                    self.seen = True  # after: a thread that reads it true finds the runtime told
        return self.seen


def _when(switch, evicted):
    """What starts a mechanism whose switch is SWITCH (True, or "auto"):
    EVICTED (an _Evicted) at auto, nothing (None: at once) when on."""
    return evicted if switch == "auto" else None


class _Changes:
    """What install changed in torch, taken back in reverse order when a
    later part of it fails: a failed install leaves torch as it found it."""

    def __init__(self):
        self.undo = []  # None once the install succeeded: nothing more to remember

    def set(self, owner, name, value):
        """setattr(OWNER, NAME, VALUE), remembering OWNER's own entry or its
        absence (a class's inherited attribute is not its own)."""
        own = vars(owner)
        missing, old = name not in own, own.get(name)
        setattr(owner, name, value)
        self.on_failure(lambda: delattr(owner, name) if missing else setattr(owner, name, old))

    def added(self, handle):
        """A hook registered: its handle's remove() takes it back."""
        self.on_failure(handle.remove)
        return handle

    def on_failure(self, fn):
        if self.undo is not None:
            self.undo.append(fn)

    def done(self):
        """The install succeeded: later changes (the __init__ of a Module
        subclass defined later) are kept for good, and no class is held."""
        self.undo = None

    def take_back(self):
        for fn in reversed(self.undo):
            try:
                fn()
            except Exception:  # take back the rest all the same
                pass
        self.undo = []


def install(torch, rt, saved=True, step_in_backward=False, autocast_cache=True,
            weights_ahead=False, saved_to_host=False):
    """Install the automatic phases into TORCH (once); returns the Auto or None.
    STEP_IN_BACKWARD: move the optimizer's updates into backward (_overlap).
    AUTOCAST_CACHE False: autocast regions the job opens without saying
    cache_enabled keep no casts of the weights. WEIGHTS_AHEAD: copy the
    forward pass's weights that lie on the host ahead of their layers
    (_ahead). SAVED_TO_HOST: keep the training forward pass's large saved
    tensors in host memory until backward (_offload). Those two are True,
    False or "auto": on once the runtime has evicted a block for the budget
    (_Evicted). See umpol-python(7)."""
    if getattr(torch, "_umpol_auto", None) is not None:
        return torch._umpol_auto
    # A PyTorch without that setting keeps autocast's casts: nothing to turn off or say.
    no_casts = not autocast_cache and hasattr(torch, "set_autocast_cache_enabled")
    changes = _Changes()
    try:
        auto = _install(torch, rt, changes, saved, step_in_backward, no_casts,
                        weights_ahead, saved_to_host)
    except BaseException:
        changes.take_back()
        raise
    changes.done()
    if no_casts:
        sys.stderr.write("umpol: autocast keeps no casts of the weights (UMPOL_AUTOCAST_CACHE=0)\n")
    # Our hooks count depth, so an extra firing for torch.compile's wrapper is harmless.
    warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
    torch._umpol_auto = auto
    return auto


def _install(torch, rt, changes, saved, step_in_backward, no_casts, weights_ahead,
             saved_to_host):
    if no_casts:
        # torch.autocast reads this default when made, and puts it back on exit.
        before = torch.is_autocast_cache_enabled()
        torch.set_autocast_cache_enabled(False)
        changes.on_failure(lambda: torch.set_autocast_cache_enabled(before))
    nn_module = torch.nn.modules.module
    Module = torch.nn.Module
    Optimizer = torch.optim.Optimizer
    auto = Auto(torch, rt, saved)
    evicted = _Evicted(rt)
    if weights_ahead:
        why = None
        if auto.streaming:
            why = "the policy streams its weights itself (stream written)"
        elif getattr(rt, "_host_bytes", None) is None:
            why = "the runtime has no umpol_host_bytes"
        if why is None:
            from umpol._ahead import WeightsAhead
            auto.ahead = WeightsAhead(torch, rt, when=_when(weights_ahead, evicted))
        elif weights_ahead is True:  # asked for: say why not (left at auto: nothing to say)
            sys.stderr.write(f"umpol: weights ahead: off: {why}\n")
    if saved_to_host:
        if saved:
            auto.offload = SavedToHost(torch, when=_when(saved_to_host, evicted))
        elif saved_to_host is True:
            sys.stderr.write("umpol: saved to host: off: UMPOL_SAVED=0 turns off the saved-tensor "
                             "hooks it works through\n")
    if step_in_backward:
        from umpol._overlap import StepInBackward
        auto.overlap = StepInBackward(torch, auto)
        _watch_gradient_readers(torch, auto.overlap, changes)
        made = Optimizer.__init__

        @functools.wraps(made)
        def optimizer_init(self, *args, **kwargs):
            made(self, *args, **kwargs)
            auto.overlap.optimizer_made(self)
        changes.set(Optimizer, "__init__", optimizer_init)

    # What can fail for a PyTorch this package does not know, before any hook is in.
    from umpol._overlap import optimizer_module
    optim_module = optimizer_module(torch)
    reg = getattr(optim_module, "register_optimizer_step_pre_hook", None)

    # Not once torch.compile has listed the context managers it knows: it
    # would no longer know this one.
    graph = getattr(torch.autograd, "graph", None)
    disable = getattr(graph, "disable_saved_tensors_hooks", None)
    if saved and disable is not None and "torch._dynamo.variables.torch" not in sys.modules:
        changes.set(graph, "disable_saved_tensors_hooks", auto.wrap_disable_hooks(disable))

    changes.added(nn_module.register_module_forward_pre_hook(auto.forward_pre))
    try:
        changes.added(nn_module.register_module_forward_hook(auto.forward_post, always_call=True))
    except TypeError:  # PyTorch < 2.1: no always_call; an exception in forward
        changes.added(nn_module.register_module_forward_hook(auto.forward_post))  # leaves it open
    changes.set(torch.autograd, "backward", auto.wrap_backward(torch.autograd.backward, accumulates=True))
    changes.set(torch.autograd, "grad", auto.wrap_backward(torch.autograd.grad))

    if reg is not None:
        changes.added(reg(auto.step_pre))
        changes.added(optim_module.register_optimizer_step_post_hook(auto.step_post))
    else:  # PyTorch < 2.0: no global optimizer hooks; wrap every step()
        def wrap_step(cls):
            step = cls.__dict__.get("step")
            if step is None or getattr(step, "__umpol_wrapped__", False):
                return

            @functools.wraps(step)
            def wrapper(self, *args, **kwargs):
                changed = auto.step_pre(self, args, kwargs)
                if changed is not None:
                    args, kwargs = changed
                out = step(self, *args, **kwargs)
                auto.step_post(self, args, kwargs)
                return out
            wrapper.__umpol_wrapped__ = True
            changes.set(cls, "step", wrapper)
        for_subclasses(Optimizer, wrap_step, changes)
    changes.set(Optimizer, "zero_grad", auto.wrap_method(Optimizer.zero_grad, ZERO_GRAD))
    # A resumed job's optimizer state is made by load_state_dict (copied to the
    # parameters' device there): in optimizer.step, so the policy places it as
    # the state its steps make.
    loaded = auto.wrap_method(Optimizer.load_state_dict, STEP)

    @functools.wraps(loaded)
    def load_state_dict(self, *args, **kwargs):
        out = loaded(self, *args, **kwargs)
        if auto.overlap is not None:
            auto.overlap.state_loaded()
        return out
    load_state_dict.__umpol_wrapped__ = True
    changes.set(Optimizer, "load_state_dict", load_state_dict)
    changes.set(Module, "zero_grad", auto.wrap_method(Module.zero_grad, ZERO_GRAD))

    for method in ("to", "cuda", "to_empty"):
        if hasattr(Module, method):
            changes.set(Module, method, auto.wrap_method(getattr(Module, method), MODEL_INIT,
                                                        auto.init_allowed))

    # model.init around __init__ of every Module subclass: those defined so far
    # (torch's own, such as nn.Linear and DistributedDataParallel) and, through
    # __init_subclass__, those defined later (the job's, transformers').
    def wrap_init(cls):
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "__umpol_wrapped__", False):
            changes.set(cls, "__init__", auto.wrap_method(init, MODEL_INIT, auto.init_allowed))

    for_subclasses(Module, wrap_init, changes)
    return auto
