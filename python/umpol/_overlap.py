"""The optimizer's step inside the backward pass (UMPOL_STEP_IN_BACKWARD=1).

An elementwise optimizer (AdamW, Adam, SGD, ...) updates a parameter from its
own gradient and state alone, and autograd knows when a parameter's gradient
is complete. From the job's first backward pass on, each parameter is updated
as soon as autograd has accumulated its gradient, on a side stream of its
GPU, and its gradient is freed there. The update of the
last layers then overlaps the backward pass of the first ones, and the step's
gradients are never all on the card at once. The job's optimizer.step() finds
no gradients left and does nothing; its learning-rate schedule, state and
state_dict are the optimizer's own, unchanged.

The arithmetic is the optimizer's own, run on one parameter at a time, so
the losses are those of the job as written. The order is not: anything that
reads the gradients between backward() and step() would read nothing. So
the job asks for it (the variable), it arms only for one elementwise
torch.optim optimizer in one process, and it disarms, saying what the step
it could not follow lost, when the job steps after more than one backward
pass, clears its gradients before stepping, clips or unscales them, changes
the optimizer's hyperparameters between backward and step, or steps with a
closure. It arms before the first backward pass so that the step's peak, the
first step's included, never holds all the gradients. See umpol-python(7)."""
import sys
import threading
import weakref

# torch.optim classes whose update of a parameter reads only that parameter's
# gradient and state (step() not overridden by a subclass).
ELEMENTWISE = ("Adam", "AdamW", "SGD", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
               "RMSprop")


def _say(text):
    print(f"umpol: step in backward: {text}", file=sys.stderr, flush=True)


class StepInBackward:
    """Watches the job's steps; once armed, updates each parameter in its backward hook."""

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
        self.sides = {}           # device -> side stream
        self.queued = set()       # devices with updates queued in this backward
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

    def backward_end(self, failed=False):
        """The pass has returned, its hooks have queued their updates: the job's
        stream waits for them before anything it queues next."""
        for device in self.queued:
            self.torch.cuda.current_stream(device).wait_stream(self.sides[device])
        self.queued.clear()
        if failed and self.state == "armed":
            self._disarm("the backward pass raised: the parameters whose gradients were "
                         "complete by then were updated; the optimizer steps after backward "
                         "from now on")

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

    def refuse(self, why):
        """The job does something the updates in backward cannot follow."""
        if self.state == "armed":
            self._disarm(why)
        elif self.state == "waiting":
            self.state = "off"
            _say(f"off: {why}")

    def step_pre(self, optimizer):
        """The job's optimizer.step() begins."""
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
        module = getattr(self.torch.optim, "optimizer", None)
        hooks = getattr(module, "_global_optimizer_pre_hooks", None) or {}
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
        _say(f"on: {len(self.handles)} parameters of {type(optimizer).__name__} are updated in "
             "backward, on a side stream")

    def _disarm(self, why):
        for h in self.handles:
            h.remove()
        self.handles, self.group, self.hyper = [], {}, None
        self.optimizer = None
        self.state = "off"
        _say(f"off: {why}")

    # ---- one parameter's update, from autograd's hook ----

    def _side(self, device):
        with self.lock:
            side = self.sides.get(device)
            if side is None:
                side = self.sides[device] = self.torch.cuda.Stream(device)
            return side

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
        torch, device = self.torch, p.device
        if self.auto.streaming:  # its pieces the stream brought leave only once copied back
            self.auto.rt.written([p.untyped_storage().data_ptr()])
        # The optimizer's own step over a group of this one parameter, through a
        # shim that shares its state: the optimizer's groups stay as they are for
        # the other GPUs' threads, and no step hook runs per parameter.
        shim = object.__new__(type(optimizer))
        shim.__dict__.update(optimizer.__dict__)
        one = dict(optimizer.param_groups[index])
        one["params"] = [p]
        shim.param_groups = [one]
        step = type(optimizer).step
        step = getattr(step, "__wrapped__", step)  # torch's hook-running wrapper, taken off
        if id(p) not in self.updated:
            # Its first update makes its state: in the optimizer's phase, so that the
            # policy's classes place it, and on the job's own stream, since closing
            # that phase copies the `stream written` pieces back after that stream.
            self.auto.bounded("optimizer.step", step, shim)
            self.updated.add(id(p))
            p.grad = None
            return
        side = self._side(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            step(shim)
        p.grad.record_stream(side)  # freed once the update has read it
        p.grad = None
        with self.lock:
            self.queued.add(device)


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
