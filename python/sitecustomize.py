"""Imported by Python at start-up under `umpol run`, which puts this folder
first on PYTHONPATH: turns on umpol's automatic PyTorch phases (unless
UMPOL_PYTHON=0), then runs the sitecustomize this one shadows, if any."""
import importlib.machinery
import importlib.util
import os
import sys

_MARK = "umpol-sitecustomize-chain"  # found in every copy of this file


def _umpol_start():
    if os.environ.get("UMPOL_PYTHON", "1") == "0":
        return
    try:
        import umpol
        umpol.enable_auto()
    except Exception as e:  # never take the job down
        sys.stderr.write(f"umpol: automatic phases are off: {e!r}\n")


def _chain():
    # Skip every folder whose sitecustomize is umpol's own (this one, and a
    # second copy such as a source tree's python/ also on PYTHONPATH): running
    # another copy would start the phases twice and chain back here forever.
    # Folders are compared resolved, the file itself not followed: a folder
    # may hold a link to umpol's file, and it is that folder that is skipped.
    skip = {_folder(__file__)}
    while True:
        rest = [p for p in sys.path if os.path.realpath(p or ".") not in skip]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        if not _is_umpol(spec.origin):
            break
        folder = _folder(spec.origin)
        if folder in skip:
            return  # found again through a path that resolves elsewhere: stop
        skip.add(folder)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _folder(path):
    return os.path.realpath(os.path.dirname(os.path.abspath(path)))


def _is_umpol(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return _MARK in f.read()
    except OSError:
        return False


_umpol_start()
_chain()
