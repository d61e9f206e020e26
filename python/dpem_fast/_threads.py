"""Thread-count policy and the BLAS limit around OpenMP kernels."""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from numbers import Integral

from ._dpcore import _rng as _core_rng

__all__ = ["effective_n_threads", "blas_single_thread"]

_OPENMP = bool(_core_rng.openmp_enabled())


def _available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def effective_n_threads(n_threads: int | None = None) -> int:
    """Number of OpenMP threads a kernel will use.

    Parameters
    ----------
    n_threads : int or None
        ``None`` means ``OMP_NUM_THREADS`` when it is set, else every CPU this
        process may run on.  A negative value counts back from that maximum
        (``-1`` = all, ``-2`` = all but one).  ``0`` is an error.

    Returns
    -------
    int
        At least 1; always 1 when the core was built without OpenMP.
    """
    if type(n_threads) is int and n_threads > 0:      # the common case, without a system call
        return n_threads if _OPENMP else 1
    if n_threads is not None and (isinstance(n_threads, bool) or not isinstance(n_threads, Integral)):
        raise TypeError(f"n_threads must be an int or None, got {type(n_threads).__name__}")
    if n_threads == 0:
        raise ValueError("n_threads=0 is invalid: use None (all cores), a positive or a negative int")
    if not _OPENMP:
        return 1
    env = os.environ.get("OMP_NUM_THREADS")
    max_threads = _available_cpus()
    if env:
        try:
            max_threads = max(1, int(env.split(",")[0]))
        except ValueError:
            pass
    if n_threads is None:
        return max_threads
    n_threads = int(n_threads)
    if n_threads < 0:
        return max(1, max_threads + 1 + n_threads)
    return n_threads


_controller = None
_held = threading.local()       # this thread's blas_single_thread depth (0 or 1)


class _Unlimited:
    """A context manager that does nothing (cheaper than a generator-based one: it is
    entered on every kernel call)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_UNLIMITED = _Unlimited()


def blas_single_thread(enabled=True):
    """Hold BLAS to one thread while OpenMP kernels run (no oversubscription); a context
    manager.

    ``enabled=False`` does nothing: for kernel paths that call no BLAS, which then skip
    threadpoolctl's round trip (~25 us, more than a small E-step).  Nor does a call inside
    another one of the same thread (a kernel inside the engine's loop, which already holds
    BLAS to one thread): the outer limit stays in force until it ends.
    """
    if not enabled or getattr(_held, "depth", 0):
        return _UNLIMITED
    return _held_limit()


@contextmanager
def _held_limit():
    _held.depth = 1
    try:
        with _blas_limit_one():
            yield
    finally:
        _held.depth = 0


@contextmanager
def _blas_limit_one():
    global _controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        yield
        return
    if _controller is None:
        _controller = ThreadpoolController()
    with _controller.limit(limits=1, user_api="blas"):
        yield
