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
    ends = []
    for which, b in zip(("lower", "upper"), bounds):
        try:
            a = np.asarray(b, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"bounds: the {which} bound must be a number or an array of numbers, got {b!r}") from None
        if a.ndim > 1 or (a.ndim == 1 and a.shape[0] != n_features):
            raise ValueError(f"bounds: the {which} bound has shape {a.shape}; expected a scalar or shape "
                             f"({n_features},), one value per feature of X")
        ends.append(np.broadcast_to(a, (n_features,)).copy())
    lo, hi = ends
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("bounds must be finite")
    if np.any(hi <= lo):
        raise ValueError("bounds must satisfy lower < upper for every feature")
    # resolve_domain builds the domain from the width, the midpoint and the half-diagonal
    # of the box (np.linalg.norm, which squares the half-widths): each must be a finite
    # float, else the centre or the radius is inf and the map sends rows to inf, nan or 0.
    with np.errstate(over="ignore"):
        width = hi - lo
        half_diagonal = np.linalg.norm(width / 2)
        mid = lo + hi
    if not (np.all(np.isfinite(width)) and np.isfinite(half_diagonal) and np.all(np.isfinite(mid))):
        raise ValueError(
            "bounds are too wide: upper - lower, lower + upper and the half-diagonal of the box "
            f"must be finite floats (largest width {np.max(width)!r})"
        )
    return lo, hi


def resolve_domain(n_features, data_norm, bounds) -> DataDomain:
    """The public data domain from the declared ``data_norm`` / ``bounds``.

    - ``bounds`` given: rows are clipped to the box, centred at its middle,
      radius ``data_norm`` if given else the half-diagonal of the box.
    - only ``data_norm``: centre 0 (the DP-EM paper's convention, Sec. 3).

    Reads no data.  Without a declaration the engine estimates the domain
    privately (:mod:`dpem_fast._engine._domain`).
    """
    n_features = int(n_features)
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
    """Map rows into the unit ball; return (Z, n_clipped), n_clipped the rows changed by
    either clip (the box or the ball).

    Rows are clipped to ``domain.bounds`` (if any), centred, divided by the
    radius and, if their norm still exceeds 1, rescaled to norm
    :func:`clip_target`.  ``Z`` keeps the dtype of ``X``.

    Every finite row lands in the ball.  A row whose centred, scaled values
    could overflow (a huge finite value) is redone in float64 as the kernel's
    loader does (``dpc_rows.h``): the usual arithmetic while its squared norm
    is finite, else ``t = h / max|h|`` with ``h = a / 2 - center / 2``
    (``a``: the box-clipped row), which has the direction of ``a - center``,
    scaled to norm ``clip_target``.
    """
    Z = np.array(X, dtype=X.dtype, copy=True, order="C") if out is None else out
    boxed = np.zeros(Z.shape[0], dtype=bool)
    if domain.bounds is not None:
        lo, hi = domain.bounds[0].astype(Z.dtype), domain.bounds[1].astype(Z.dtype)
        boxed = np.any((Z < lo) | (Z > hi), axis=1)
        np.clip(Z, lo, hi, out=Z)
    n_features = Z.shape[1]
    center = np.asarray(domain.center, dtype=np.float64)
    inv_scale = 1.0 / domain.radius
    target = clip_target(n_features, Z.dtype)
    # Rows whose arithmetic below could overflow (in Z's dtype, or in the float64 squared
    # norm): kept as float64 copies and redone at the end.
    if Z.dtype == np.float64:
        safe = np.sqrt(np.finfo(np.float64).max / max(n_features, 1)) / 4
    else:
        safe = float(np.finfo(Z.dtype).max) / 4
    with np.errstate(over="ignore"):
        limit = safe / max(inv_scale, 1.0) - np.max(np.abs(center), initial=0.0)
        risk = np.max(np.abs(Z), axis=1, initial=0.0) > limit if Z.size else np.zeros(Z.shape[0], bool)
    risky = np.flatnonzero(risk)
    A = Z[risky].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        Z -= domain.center.astype(Z.dtype)
        Z *= Z.dtype.type(inv_scale)
        norms = np.sqrt(np.einsum("ij,ij->i", Z, Z, dtype=np.float64))
    norms[risky] = 0.0
    over = norms > 1.0
    if over.any():
        Z[over] *= (target / norms[over])[:, None].astype(Z.dtype)
    clipped = boxed | over
    if risky.size:
        with np.errstate(over="ignore", invalid="ignore"):
            V = (A - center) * inv_scale
            s2 = np.einsum("ij,ij->i", V, V)
        huge = s2 == np.inf
        fits = (s2 > 1.0) & ~huge
        V[fits] *= (target / np.sqrt(s2[fits]))[:, None]
        if huge.any():
            H = A[huge] * 0.5 - center * 0.5
            m = np.max(np.abs(H), axis=1)
            with np.errstate(invalid="ignore"):
                T = H / m[:, None]
            inf_rows = np.isinf(m)  # +-inf input with no box: the limiting direction
            T[inf_rows] = np.where(np.isinf(H[inf_rows]), np.sign(H[inf_rows]), 0.0)
            V[huge] = T * (target / np.sqrt(np.einsum("ij,ij->i", T, T)))[:, None]
        Z[risky] = V.astype(Z.dtype)
        clipped[risky[fits | huge]] = True
    return Z, int(np.count_nonzero(clipped))
