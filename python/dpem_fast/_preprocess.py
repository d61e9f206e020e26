"""Declared data bounds: centre, scale to the unit ball, clip.

Everything here uses only what the user declared (``data_norm`` and/or
``bounds``).  Undeclared domains are estimated privately, or taken from the
data only on explicit request, by :mod:`dpem_fast._engine._domain`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DataDomain", "resolve_domain", "scale_and_clip", "clip_target"]


@dataclass(frozen=True)
class DataDomain:
    """Affine map x -> (x - center) / radius and the unit-ball clip after it.

    Attributes
    ----------
    center : ndarray of shape (n_features,)
    radius : float
        After the map every (clipped) row has Euclidean norm <= 1.
    bounds : tuple of two ndarrays or None
        Per-feature box the rows are clipped to before centring, if declared.
    from_data : bool
        True when the domain was computed from the data (not private).
    """

    center: np.ndarray
    radius: float
    bounds: tuple | None
    from_data: bool


def _as_bounds(bounds, n_features):
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise ValueError("bounds must be a pair (lower, upper) of scalars or arrays of shape (n_features,)")
    lo = np.broadcast_to(np.asarray(bounds[0], dtype=np.float64), (n_features,)).copy()
    hi = np.broadcast_to(np.asarray(bounds[1], dtype=np.float64), (n_features,)).copy()
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("bounds must be finite")
    if np.any(hi <= lo):
        raise ValueError("bounds must satisfy lower < upper for every feature")
    return lo, hi


def resolve_domain(X, data_norm, bounds) -> DataDomain:
    """The public data domain from the declared ``data_norm`` / ``bounds``.

    - ``bounds`` given: rows are clipped to the box, centred at its middle,
      radius ``data_norm`` if given else the half-diagonal of the box.
    - only ``data_norm``: centre 0 (the DP-EM paper's convention, Sec. 3).

    Reads only the number of features of ``X``.  Without a declaration the
    engine estimates the domain privately (:mod:`dpem_fast._engine._domain`).
    """
    n_features = X.shape[1]
    if bounds is not None:
        lo, hi = _as_bounds(bounds, n_features)
        center = (lo + hi) / 2
        radius = float(np.linalg.norm((hi - lo) / 2)) if data_norm is None else float(data_norm)
        return DataDomain(center, radius, (lo, hi), False)
    if data_norm is not None:
        return DataDomain(np.zeros(n_features), float(data_norm), None, False)
    raise ValueError("resolve_domain needs a declared data_norm or bounds")


def clip_target(n_features: int, dtype) -> float:
    """Norm given to rows beyond the unit ball: a little below 1.

    The float error of the norm and of the product is below (d + 2) eps, so a
    row scaled to this norm can never end up with norm > 1, which the
    sensitivities assume.
    """
    return 1.0 - 8.0 * (n_features + 2) * float(np.finfo(dtype).eps)


def scale_and_clip(X, domain: DataDomain, out=None):
    """Map rows into the unit ball; return (Z, n_clipped).

    Rows are clipped to ``domain.bounds`` (if any), centred, divided by the
    radius and, if their norm still exceeds 1, rescaled to norm 1.  ``Z``
    keeps the dtype of ``X``.
    """
    Z = np.array(X, dtype=X.dtype, copy=True, order="C") if out is None else out
    if domain.bounds is not None:
        np.clip(Z, domain.bounds[0].astype(Z.dtype), domain.bounds[1].astype(Z.dtype), out=Z)
    Z -= domain.center.astype(Z.dtype)
    Z *= Z.dtype.type(1.0 / domain.radius)
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z, dtype=np.float64))
    over = norms > 1.0
    n_clipped = int(np.count_nonzero(over))
    if n_clipped:
        Z[over] *= (clip_target(Z.shape[1], Z.dtype) / norms[over])[:, None].astype(Z.dtype)
    return Z, n_clipped
