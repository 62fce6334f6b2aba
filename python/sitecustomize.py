"""Imported by Python at start-up under `umpol run`, which puts this folder
first on PYTHONPATH: turns on umpol's automatic PyTorch phases (unless
UMPOL_PYTHON=0), then runs the sitecustomize this one shadows, if any."""
import importlib.machinery
import importlib.util
import os
import sys


def _umpol_start():
    if os.environ.get("UMPOL_PYTHON", "1") == "0":
        return
    try:
        import umpol
        umpol.enable_auto()
    except Exception as e:  # never take the job down
        sys.stderr.write(f"umpol: automatic phases are off: {e!r}\n")


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_umpol_start()
_chain()
