"""Make this worktree's ``python/dpem_fast/accounting`` importable.

An editable install of another checkout may own the ``dpem_fast`` name (and
its package root may not be importable while it is being written).  If
``dpem_fast`` imports, our source directory is appended to its path; if it
does not, a bare namespace package pointing at our sources stands in.
"""
import importlib.machinery
import importlib.util
import pathlib
import sys

_SRC = pathlib.Path(__file__).resolve().parents[2] / "python" / "dpem_fast"


def _install():
    try:
        import dpem_fast
    except ImportError:
        for name in [m for m in sys.modules if m.split(".")[0] == "dpem_fast"]:
            del sys.modules[name]
        spec = importlib.machinery.ModuleSpec("dpem_fast", None,
                                              is_package=True)
        dpem_fast = importlib.util.module_from_spec(spec)
        dpem_fast.__path__ = []
        sys.modules["dpem_fast"] = dpem_fast
    if str(_SRC) not in list(dpem_fast.__path__):
        dpem_fast.__path__.append(str(_SRC))


_install()
