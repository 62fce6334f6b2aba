"""The umpol runtime (libumpol.so) as loaded in this process, through ctypes.

`umpol run` preloads libumpol.so, so its symbols are in the process's global
scope. Without it (plain `python`), every call here does nothing."""
import ctypes

_STAT_FIELDS = ("allocations", "frees", "live_bytes", "peak_bytes", "resident_bytes",
                "prefetches", "prefetch_bytes", "evictions", "evict_bytes", "saved",
                "saved_bytes")


class Stats(ctypes.Structure):
    """struct umpol_stats of umpol.h."""
    _fields_ = [(name, ctypes.c_ulonglong) for name in
                ("allocations", "passthrough", "live_bytes", "managed_bytes", "prefetches",
                 "evictions", "cap_refusals")]


class ClassStats(ctypes.Structure):
    """struct umpol_class_stats of umpol.h."""
    _fields_ = [(name, ctypes.c_ulonglong) for name in _STAT_FIELDS]


class Runtime:
    """The runtime's C API; `active` is False when no policy is loaded."""

    def __init__(self, lib=None):
        self.active = False
        self.streaming = False  # a class streams ahead of the uses announced by use()
        self.update_in_backward = False  # the policy says `update in backward;`
        self._names = {}
        try:
            lib = lib if lib is not None else ctypes.CDLL(None)
            self._enter = lib.umpol_phase_enter
            self._exit = lib.umpol_phase_exit
            self._exit_named = lib.umpol_phase_exit_named
            self._tag_push = lib.umpol_tag_push
            self._tag_pop = lib.umpol_tag_pop
            self._mark = lib.umpol_mark
            self._class_count = lib.umpol_class_count
            self._class_name = lib.umpol_class_name
            self._class_stats = lib.umpol_class_stats
            self._note_saved = lib.umpol_note_saved
        except (OSError, AttributeError):
            return
        for fn in (self._enter, self._exit_named, self._tag_push, self._mark):
            fn.argtypes, fn.restype = [ctypes.c_char_p], None
        for fn in (self._exit, self._tag_pop):
            fn.argtypes, fn.restype = [], None
        self._class_count.argtypes, self._class_count.restype = [], ctypes.c_int
        self._class_name.argtypes, self._class_name.restype = [ctypes.c_int], ctypes.c_char_p
        self._class_stats.argtypes = [ctypes.c_int, ctypes.POINTER(ClassStats)]
        self._class_stats.restype = ctypes.c_int
        self._note_saved.argtypes, self._note_saved.restype = [ctypes.c_void_p], ctypes.c_int
        self.active = self._class_count() >= 0
        self._use = getattr(lib, "umpol_use", None)
        self._written = getattr(lib, "umpol_written", None)
        self._on_host = getattr(lib, "umpol_on_host", None)
        if self._on_host is not None:
            self._on_host.argtypes, self._on_host.restype = [ctypes.c_void_p], ctypes.c_int
        self._stats = getattr(lib, "umpol_stats", None)
        if self._stats is not None:
            self._stats.argtypes, self._stats.restype = [ctypes.POINTER(Stats)], ctypes.c_int
        self._step_changed = getattr(lib, "umpol_step_changed", None)
        if self._step_changed is not None:
            self._step_changed.argtypes, self._step_changed.restype = [], ctypes.c_int
        self._host_bytes = getattr(lib, "umpol_host_bytes", None)
        if self._host_bytes is not None:
            self._host_bytes.argtypes, self._host_bytes.restype = [ctypes.c_void_p], ctypes.c_longlong
        update = getattr(lib, "umpol_update_in_backward", None)
        if self.active and update is not None:
            update.argtypes, update.restype = [], ctypes.c_int
            self.update_in_backward = update() == 1
        streaming = getattr(lib, "umpol_streaming", None)
        if self.active and self._use is not None and streaming is not None:
            streaming.argtypes, streaming.restype = [], ctypes.c_int
            self._use.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
            self._use.restype = ctypes.c_int
            if self._written is not None:
                self._written.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                self._written.restype = ctypes.c_int
            self.streaming = streaming() == 1

    def _b(self, name):
        b = self._names.get(name)
        if b is None:
            if not isinstance(name, str):
                raise TypeError(f"umpol: a name must be a str, not {type(name).__name__}")
            b = self._names[name] = name.encode()
        return b

    def enter(self, name):
        if self.active:
            self._enter(self._b(name))

    def exit(self, name=None):
        """Close NAME (the innermost opening of it on this thread), or the innermost phase."""
        if self.active:
            if name is None:
                self._exit()
            else:
                self._exit_named(self._b(name))

    def tag_push(self, name):
        if self.active:
            self._tag_push(self._b(name))

    def tag_pop(self):
        if self.active:
            self._tag_pop()

    def mark(self, name):
        if self.active:
            self._mark(self._b(name))

    def use(self, ptrs, stream=None):
        """The job is about to queue, on STREAM (a cudaStream_t as an int), work that
        reads the blocks at PTRS (addresses)."""
        if self.streaming and ptrs:
            self._use((ctypes.c_void_p * len(ptrs))(*ptrs), len(ptrs), stream)

    def written(self, ptrs):
        """The job is about to queue work that writes the blocks at PTRS outside
        their `stream written` phases (an optimizer's update in backward)."""
        if self.streaming and ptrs and self._written is not None:
            self._written((ctypes.c_void_p * len(ptrs))(*ptrs), len(ptrs))

    def on_host(self, ptr):
        """Does PTR lie in a block of a `memory host` class (pinned host memory
        the GPU reads across the link)?"""
        return self.active and self._on_host is not None and self._on_host(ptr) == 1

    def host_bytes(self, ptr):
        """How many bytes of the block at PTR lie in host memory now; -1 when
        PTR is no block of the runtime's, or it is not active."""
        if not self.active or self._host_bytes is None:
            return -1
        return self._host_bytes(ptr)

    def evictions(self):
        """Blocks (and movable pieces) the runtime has sent to the host for the
        budget so far, all classes together; -1 when it is not active."""
        s = Stats()
        if not self.active or self._stats is None or self._stats(ctypes.byref(s)) != 0:
            return -1
        return s.evictions

    def step_changed(self):
        """The job's step changes from here on (umpol_step_changed): the runtime
        measures a step of the new kind before weights come back, and gives
        back its empty device slabs; -1 when it is not active."""
        if not self.active or self._step_changed is None:
            return -1
        return self._step_changed()

    def note_saved(self, ptr):
        return self._note_saved(ptr) if self.active else -1

    def class_stats(self):
        """{class name: {counter: value}} in policy order; {} when inactive."""
        out = {}
        if not self.active:
            return out
        for i in range(max(self._class_count(), 0)):
            s = ClassStats()
            if self._class_stats(i, ctypes.byref(s)) == 0:
                name = self._class_name(i).decode()
                out[name] = {f: getattr(s, f) for f in _STAT_FIELDS}
        return out
