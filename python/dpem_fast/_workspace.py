"""Large scratch arrays that the kernel can back with transparent huge pages (issue 41).

numpy asks for huge pages (``madvise``) on allocations from 4 MiB; the kernel backs only the
2 MiB-aligned ranges inside them.  A fit's bases and rows (2.6 MB a d x 80 basis, 13 MB the
(400, 4096) rows) otherwise come back from ``mmap`` on every fit and are faulted in page by
page: ~3,800 faults, 9-10 ms of system time a PCA fit at (400, 4096), measured (~1,600 and
5 ms with these).  Values are unaffected: only where the array lies.
"""
from __future__ import annotations

import numpy as np

__all__ = ["workspace"]

#: a transparent huge page
_HUGE = 1 << 21


def workspace(shape, dtype=np.float64):
    """An uninitialised C-contiguous array of ``shape`` (float64 or ``dtype``) starting on a
    2 MiB boundary of an allocation of at least 4 MiB (module docstring); a plain
    ``np.empty`` below 2 MiB (or for objects)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if n < _HUGE or dtype.hasobject:
        return np.empty(shape, dtype=dtype)
    raw = np.empty(max(n + _HUGE, 2 * _HUGE), dtype=np.uint8)
    start = -raw.ctypes.data % _HUGE
    return raw[start:start + n].view(dtype).reshape(shape)
