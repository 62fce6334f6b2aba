"""Run a function once a module has been imported, without importing it.

A finder first on sys.meta_path lets the other finders find the module and
wraps its loader's exec_module; the module's own loader is put back once
it has run."""
import sys


class _Loader:
    def __init__(self, loader, then):
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        try:
            self.loader.exec_module(module)
        finally:
            module.__loader__ = self.loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self.loader
        self.then(module)


class _Finder:
    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once: the module is being imported now
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self.then)
                return spec
        sys.meta_path.insert(0, self)  # not found: watch for a later attempt
        return None


def when_imported(name, then):
    """Call then(module) after the top-level module NAME is imported, or now if it is."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    else:
        sys.meta_path.insert(0, _Finder(name, then))
