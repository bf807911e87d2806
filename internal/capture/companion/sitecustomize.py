# ptscope companion bootstrap. `ptscope run` puts this folder first on
# PYTHONPATH, so Python's site module imports this file at start-up in every
# Python process of the launched command. It
#   1. runs the sitecustomize that would have run without ptscope (chaining),
#   2. arms the capture companion, which stays idle until the process
#      initialises CUDA through torch.
# Nothing here may break the user's program: every step is guarded.
import os as _os
import sys as _sys

_PTSCOPE_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _ptscope_chain():
    """Import the next sitecustomize on sys.path (the one we shadow)."""
    import importlib.machinery
    import importlib.util

    def _norm(p):
        try:
            return _os.path.realpath(p or _os.getcwd())
        except Exception:
            return p

    here = _norm(_PTSCOPE_HERE)
    paths = [p for p in _sys.path if _norm(p) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    _sys.modules["sitecustomize"] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as err:  # what site.py prints for a failing sitecustomize
        if _sys.flags.verbose:
            _sys.excepthook(*_sys.exc_info())
        else:
            _sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                "%s: %s\n" % (err.__class__.__name__, err))


try:
    _ptscope_chain()
except Exception as _err:  # never let chaining break start-up
    _sys.stderr.write("ptscope: could not chain to the existing sitecustomize: %r\n" % (_err,))

if _os.environ.get("PTSCOPE_BUNDLE"):
    try:
        import ptscope_companion as _ptscope_companion

        _ptscope_companion.boot()
    except Exception as _err:
        _sys.stderr.write("ptscope: companion failed to start (the command runs without capture): %r\n" % (_err,))
