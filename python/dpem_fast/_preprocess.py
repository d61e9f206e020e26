"""Declared data bounds: centre, scale each feature into the unit ball, clip.

Everything here uses only what the user declared (``data_norm`` and/or
``bounds``).  Undeclared domains are estimated privately, or taken from the
data only on explicit request, by :mod:`dpem_fast._engine._domain`.

The map is per feature (issue 23): ``z_i = (a_i - c_i) / s_i`` with ``a`` the
box-clipped row, then the unit-ball clip.  With a box and no ``data_norm``,
``s_i = sqrt(d) * half_width_i``: the box maps onto the cube
``[-1/sqrt(d), 1/sqrt(d)]^d``, which lies inside the unit ball (its corners on the
sphere), so every sensitivity derived for rows in the unit ball holds unchanged,
under either neighbouring relation: a replaced row moves a statistic by at most the
diameter bound of the ball, an added/removed row by at most its radius bound, and
the image of the domain is still a subset of that ball.  Each feature then keeps its
own declared width: noise, floors and projections after the release are in units of
that width, not of the widest feature's.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._rng import derive_key
from ._workspace import workspace

__all__ = ["DataDomain", "resolve_domain", "box_domain", "usable_box", "scale_and_clip", "clip_target",
           "project_into_domain", "cube_corners", "MIN_BOX_RATIO", "MIN_HALF_WIDTH"]

#: The narrowest feature of an estimated (or data-derived) box, relative: its half-width is at
#: least this fraction of the box's widest half-width and of the magnitude of its own centre
#: (:func:`usable_box`).  The same ratio as the estimated scales' floor
#: (:func:`dpem_fast._engine._domain._box_domain`: scales 2^20 apart already cost 2^40 of
#: float64's 2^52 in the covariances' conditioning), and 2^-20 of a centre is far above its
#: rounding (2^-52 of it), so the box's two ends are distinct doubles.
MIN_BOX_RATIO = 2.0 ** -20
#: The narrowest feature of an estimated box, absolute (a box around 0 of a column of zeros,
#: when every feature is one value): 2^-200, so that variances ``s² v`` and precisions
#: ``1 / (s² v)`` in the original units (working variances v in [1e-6, 1]) stay far inside
#: float64's normal range (2^±1022), as the estimated scales' cap 2^500 does at the other end.
#: Also the narrowest box image a declared box with ``data_norm`` may have (half-width over
#: ``data_norm``; :func:`resolve_domain` refuses a narrower one before anything is charged).
MIN_HALF_WIDTH = 2.0 ** -200


@dataclass(frozen=True)
class DataDomain:
    """Affine map x -> (x - center) / scale (per feature) and the unit-ball clip after it.

    Attributes
    ----------
    center : ndarray of shape (n_features,)
    scale : ndarray of shape (n_features,)
        Positive, finite per-feature scales ``s_i``.  After the map every (clipped) row
        has Euclidean norm <= 1.  A box without ``data_norm``: ``sqrt(d)`` times each
        feature's half-width (the box becomes the cube of half-width ``1/sqrt(d)``,
        inside the ball); ``data_norm``: that norm bound for every feature.
    bounds : tuple of two ndarrays or None
        Per-feature box the rows are clipped to before centring, if declared
        (or privately estimated, or taken from the data on explicit request).
    from_data : bool
        True when the domain was computed from the data (not private).
    """

    center: np.ndarray
    scale: np.ndarray
    bounds: tuple | None
    from_data: bool

    def __post_init__(self):
        c = np.asarray(self.center, dtype=np.float64)
        s = np.asarray(self.scale, dtype=np.float64)
        if s.ndim == 0:                        # a uniform scale (a norm bound)
            s = np.full(c.shape, float(s))
        if s.shape != c.shape or c.ndim != 1:
            raise ValueError(f"DataDomain: scale has shape {s.shape}, center {c.shape}; expected "
                             "two vectors of n_features values")
        with np.errstate(divide="ignore", over="ignore"):
            ok = np.all(np.isfinite(s)) and np.all(s > 0) and np.all(np.isfinite(1.0 / s))
        if not ok:
            raise ValueError("DataDomain: every scale must be finite and > 0 (with a finite inverse)")
        object.__setattr__(self, "center", c)
        object.__setattr__(self, "scale", s)

    @property
    def box_image(self):
        """Per-feature half-width of the box's image ``(hi - lo) / (2 s)`` (shape (d,), read-only),
        or None without a box: the image of the box is ``[-box_image, box_image]``
        (the box is centred at ``center`` whenever it exists).  Computed once per domain (an
        M-step reads it every iteration)."""
        if self.bounds is None:
            return None
        cached = self.__dict__.get("_box_image")
        if cached is None:
            lo, hi = self.bounds
            with np.errstate(over="ignore"):
                cached = (hi / 2 - lo / 2) / self.scale
            cached.setflags(write=False)
            self.__dict__["_box_image"] = cached      # derived from the fields (frozen): a cache
        return cached

    def to_scaled(self, X):
        """``(X - center) / scale`` in float64 (no clip): original units -> working units."""
        return (np.asarray(X, dtype=np.float64) - self.center) / self.scale

    def to_original(self, Z):
        """``center + scale * Z``: working units -> original units (a huge, privately
        estimated scale may saturate to +-inf, as the old single radius did)."""
        with np.errstate(over="ignore"):
            return self.center + self.scale * np.asarray(Z, dtype=np.float64)

    def loader_array(self):
        """The (4, d) float64 array the kernels' row loader takes (``dpc_rows.h``): lower,
        upper (+-inf without a box), center and the per-feature inverse scale (read-only,
        computed once per domain: every pass reads it)."""
        cached = self.__dict__.get("_loader_array")
        if cached is None:
            d = self.center.shape[0]
            lo, hi = self.bounds if self.bounds is not None else (np.full(d, -np.inf), np.full(d, np.inf))
            cached = np.ascontiguousarray(np.stack([lo, hi, self.center, 1.0 / self.scale]), dtype=np.float64)
            cached.setflags(write=False)
            self.__dict__["_loader_array"] = cached
        return cached


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
    # resolve_domain builds the domain from the width, the midpoint and the per-feature
    # scale sqrt(d) * half-width of the box: each must be a finite float with a finite
    # inverse, else the centre or a scale is inf or 0 and the map sends rows to inf, nan or 0.
    with np.errstate(over="ignore", divide="ignore"):
        width = hi - lo
        scale = np.sqrt(n_features) * (hi / 2 - lo / 2)
        mid = lo + hi
        inv = 1.0 / scale
    if not (np.all(np.isfinite(width)) and np.all(np.isfinite(scale)) and np.all(np.isfinite(mid))
            and np.all(np.isfinite(inv))):
        raise ValueError(
            "bounds are too wide or too narrow: upper - lower, lower + upper and sqrt(n_features) "
            "times each half-width (and its inverse) must be finite floats "
            f"(widths from {np.min(width)!r} to {np.max(width)!r})"
        )
    return lo, hi


def box_domain(lo, hi, from_data=False, data_norm=None, min_ratio=0.0, max_scale=None) -> DataDomain:
    """The domain of the box ``[lo, hi]`` (finite arrays of shape (d,), ``lo < hi``).

    Centre the box's middle; without ``data_norm`` the per-feature scale
    ``s_i = sqrt(d) * (hi_i - lo_i) / 2``, so the box maps onto the cube
    ``[-1/sqrt(d), 1/sqrt(d)]^d`` inside the unit ball; with ``data_norm`` the user's
    norm bound, uniform around the box's middle (rows are clipped to the box, then to
    that ball).  ``max_scale``: every scale is at most this; then ``min_ratio``: every
    scale is at least ``min_ratio`` times the largest (an estimated box's guards, see
    :func:`dpem_fast._engine._domain._box_domain`).  A
    product of public quantities (d, the box, the norm bound).
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    d = lo.shape[0]
    center = lo / 2 + hi / 2
    if data_norm is not None:
        scale = np.full(d, float(data_norm))
    else:
        # clamped to the normal doubles: a (privately estimated) box up to the whole double
        # range, or a few ulps wide, still has a finite scale with a finite inverse
        fin = np.finfo(np.float64)
        with np.errstate(over="ignore"):
            scale = np.clip(np.sqrt(d) * (hi / 2 - lo / 2), fin.tiny, fin.max)
        if max_scale is not None:
            scale = np.minimum(scale, float(max_scale))
        if min_ratio > 0 and scale.size:
            scale = np.maximum(scale, min_ratio * scale.max())
    return DataDomain(center, scale, (lo, hi), bool(from_data))


def resolve_domain(n_features, data_norm, bounds) -> DataDomain:
    """The public data domain from the declared ``data_norm`` / ``bounds``.

    - ``bounds`` given: rows are clipped to the box and centred at its middle; each
      feature is divided by ``sqrt(d)`` times its half-width (the box becomes the cube of
      half-width ``1/sqrt(d)``, inside the unit ball), or, with ``data_norm``, every
      feature by ``data_norm`` (the user's norm bound, uniform around the box's middle).
    - only ``data_norm``: centre 0 (the DP-EM paper's convention, Sec. 3), scale
      ``data_norm`` for every feature.

    Reads no data.  Without a declaration the engine estimates the domain
    privately (:mod:`dpem_fast._engine._domain`).
    """
    n_features = int(n_features)
    if bounds is not None:
        lo, hi = _as_bounds(bounds, n_features)
        domain = box_domain(lo, hi, False, data_norm)
        if data_norm is not None:
            # each feature's box image [-b_i, b_i] (b_i = half-width / data_norm) bounds its
            # variance in working units by b_i²: below 2^-200 its square and the eigenvalue floor
            # times it leave float64's normal range, and no covariance of the feature is
            # representable (it was numpy's LinAlgError after the charge; issue 35)
            narrow = np.flatnonzero(~(domain.box_image >= MIN_HALF_WIDTH))
            if narrow.size:
                raise ValueError(
                    f"bounds: feature(s) {narrow.tolist()} have a half-width below 2^-200 of "
                    f"data_norm={float(data_norm)!r}, too narrow for any covariance in the ball's units; "
                    "declare a data_norm closer to the box's size, or leave data_norm unset (each feature "
                    "is then scaled by its own width)")
        return domain
    if data_norm is not None:
        return DataDomain(np.zeros(n_features), np.full(n_features, float(data_norm)), None, False)
    raise ValueError("resolve_domain needs a declared data_norm or bounds")


def usable_box(domain):
    """The estimated (or data-derived) ``domain`` with every feature's box made usable: no
    feature narrower than a public minimum, in the box's own units.

    A privately estimated box can be degenerate in a feature: a column of zeros (or of one
    value) gets a box a few ulps wide, or of width 0, while its scale is floored at 2^-20 of
    the widest feature's; the box's image ``[-b_i, b_i]`` in working units is then ~0, every
    variance cap ``b_i²`` underflows and the M-step's covariances are singular (numpy's
    ``LinAlgError`` after the budget was charged), and k-means centres and the box itself
    come out as denormals (±1e-323).  Here each feature's half-width ``h_i`` is raised to

        max(s_i / sqrt(d),  MIN_BOX_RATIO |c_i|,  MIN_HALF_WIDTH)

    (``s_i`` its scale, ``c_i`` its centre: the first term is the half-width the feature's own
    working unit implies, which for a scale at its floor is 2^-20 of the widest feature's
    half-width; the others guard a box whose every feature is one value), around the same
    centre; its scale is then at least ``sqrt(d) h_i`` (the box maps into the cube of
    half-width 1/sqrt(d), inside the unit ball: every sensitivity holds) and at least 2^-20 of
    the largest.  A feature that needs none of this is unchanged, so a healthy box is the same
    domain, bit for bit.  Rows of a widened feature lie inside its old box, so no row is
    clipped that was not before.  Post-processing of the released box with public constants;
    a declared box is used as declared (never passed here).
    """
    if domain.bounds is None:
        return domain
    lo, hi = domain.bounds
    c, s = domain.center, domain.scale
    d = c.shape[0]
    if d == 0:
        return domain
    root = np.sqrt(d)
    fin = np.finfo(np.float64)
    with np.errstate(over="ignore"):
        half = hi / 2 - lo / 2
        need = np.maximum(np.maximum(s / root, MIN_BOX_RATIO * np.abs(c)), MIN_HALF_WIDTH)
    if not np.any(half < need):
        return domain
    half = np.maximum(half, need)
    scale = np.maximum(s, np.minimum(root * half, fin.max))
    scale = np.maximum(scale, MIN_BOX_RATIO * scale.max())
    half = np.maximum(half, scale / root)
    short = half > hi / 2 - lo / 2
    with np.errstate(over="ignore"):
        lo2 = np.where(short, np.clip(c - half, -fin.max, fin.max), lo)
        hi2 = np.where(short, np.clip(c + half, -fin.max, fin.max), hi)
    return DataDomain(c, scale, (lo2, hi2), domain.from_data)


def project_into_domain(M, domain):
    """Rows of ``M`` (working units) moved into the image of the domain (post-processing).

    With a box: each coordinate clipped to the box's image ``[-b_i, b_i]``
    (:attr:`DataDomain.box_image`), then, if the row's norm still exceeds 1 (a box with a
    ``data_norm`` ball), scaled onto the unit sphere — towards the centre, so it stays in
    the box image.  Without a box (or ``domain`` None): onto the unit ball.  The rows of
    the data lie in that set and so do their means: a released mean or centre ends inside
    the declared (or estimated) box.  Returns a new float64 array.
    """
    M = np.array(M, dtype=np.float64, copy=True)
    b = None if domain is None else domain.box_image
    if b is not None:
        np.clip(M, -b, b, out=M)
    norms = np.sqrt(np.einsum("...i,...i->...", M, M))
    over = norms > 1.0
    if np.any(over):
        M[over] /= norms[over][..., None]
    return M


def cube_corners(n_features, key, limit=256):
    """Corners ``s ∈ {−1, 1}^d`` of the cube, as rows: all of them where ``2^d ≤ limit``, else
    ``limit`` seeded random ones (from ``derive_key(key, "corners")``: public randomness).
    A box's points farthest from its centre; the audit's canaries and sharpened means."""
    d = int(n_features)
    if 2 ** d <= limit:
        return np.array(np.meshgrid(*[[-1.0, 1.0]] * d, indexing="ij")).reshape(d, -1).T
    rng = np.random.default_rng(np.frombuffer(derive_key(key, "corners").tobytes(), dtype=np.uint32))
    return rng.choice([-1.0, 1.0], size=(int(limit), d))


@functools.lru_cache(maxsize=64)
def clip_target(n_features: int, dtype) -> float:
    """Norm given to rows beyond the unit ball: a little below 1.

    The float error of the norm and of the product is below (d + 2) eps, so a
    row scaled to this norm can never end up with norm > 1, which the
    sensitivities assume.
    """
    return 1.0 - 8.0 * (n_features + 2) * float(np.finfo(dtype).eps)


def scale_and_clip(X, domain: DataDomain, out=None, sq_out=None):
    """Map rows into the unit ball; return (Z, n_clipped), n_clipped the rows changed by
    either clip (the box or the ball).

    Rows are clipped to ``domain.bounds`` (if any), centred, divided feature by feature
    by ``domain.scale`` and, if their norm still exceeds 1, rescaled to norm
    :func:`clip_target`.  ``Z`` keeps the dtype of ``X``.

    Every finite row lands in the ball.  A row whose centred, scaled values
    could overflow (a huge finite value) is redone in float64 as the kernel's
    loader does (``dpc_rows.h``): the usual arithmetic while its squared norm
    is finite, else ``t = h / max|h|`` with
    ``h_i = (a_i / 2 - center_i / 2) * (inv_i / max_j inv_j)`` (``a``: the box-clipped
    row, ``inv = 1 / scale``; no factor exceeds 1, so nothing overflows), which has the
    direction of ``(a - center) / scale``, scaled to norm ``clip_target``.

    ``sq_out`` (float64, one per row): filled with the returned rows' squared norms, each a
    float64 sum of its d squares (the clip's own for the rows it left as they were, summed again
    for the others): the released operator's trace reads them (issue 41).
    """
    # one new array (none with ``out``) and few passes: the box clip, or else the centring,
    # writes it; the overflow test reads the global extremes first (per row only past them)
    src = X if out is None else out
    boxed = np.zeros(src.shape[0], dtype=bool)
    if domain.bounds is not None:
        lo, hi = domain.bounds[0].astype(src.dtype), domain.bounds[1].astype(src.dtype)
        boxed = np.any((src < lo) | (src > hi), axis=1)
        src = np.clip(src, lo, hi, out=out)
    n_features = src.shape[1]
    center = np.asarray(domain.center, dtype=np.float64)
    inv_scale = 1.0 / np.asarray(domain.scale, dtype=np.float64)
    target = clip_target(n_features, src.dtype)
    # Rows whose arithmetic below could overflow (in Z's dtype, or in the float64 squared
    # norm): kept as float64 copies and redone at the end.
    if src.dtype == np.float64:
        safe = np.sqrt(np.finfo(np.float64).max / max(n_features, 1)) / 4
    else:
        safe = float(np.finfo(src.dtype).max) / 4
    risk = np.zeros(src.shape[0], dtype=bool)
    with np.errstate(over="ignore"):
        limit = safe / max(float(np.max(inv_scale, initial=0.0)), 1.0) - np.max(np.abs(center), initial=0.0)
        if src.size and not (np.max(src) <= limit and -np.min(src) <= limit):   # NaN, inf: per row
            risk = np.max(np.abs(src), axis=1, initial=0.0) > limit
    if src.dtype != np.float64:
        # a float32 scale or inverse scale may itself round to 0 or inf: all rows in float64
        with np.errstate(over="ignore", under="ignore"):
            s32, i32 = np.asarray(domain.scale).astype(src.dtype), inv_scale.astype(src.dtype)
        if not (np.all(np.isfinite(i32)) and np.all(i32 > 0) and np.all(np.isfinite(s32))):
            risk[:] = True
    risky = np.flatnonzero(risk)
    A = src[risky].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        Z = src if (out is not None or src is not X) else workspace(src.shape, src.dtype)
        if np.any(center):                      # x − 0 is x: no pass for a centre at the origin
            np.subtract(src, domain.center.astype(src.dtype), out=Z)
            src = Z
        np.multiply(src, inv_scale.astype(Z.dtype), out=Z)
        sq = np.einsum("ij,ij->i", Z, Z, dtype=np.float64, out=sq_out)
        norms = np.sqrt(sq)
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
            ratio = inv_scale / np.max(inv_scale)
            with np.errstate(invalid="ignore"):
                H = np.where(np.isinf(H), H, H * ratio)
            m = np.max(np.abs(H), axis=1)
            with np.errstate(invalid="ignore"):
                T = H / m[:, None]
            inf_rows = np.isinf(m)  # +-inf input with no box: the limiting direction
            T[inf_rows] = np.where(np.isinf(H[inf_rows]), np.sign(H[inf_rows]), 0.0)
            V[huge] = T * (target / np.sqrt(np.einsum("ij,ij->i", T, T)))[:, None]
        Z[risky] = V.astype(Z.dtype)
        clipped[risky[fits | huge]] = True
    if sq_out is not None:
        redo = np.flatnonzero(over | risk)
        sq_out[redo] = np.einsum("ij,ij->i", Z[redo], Z[redo], dtype=np.float64)
    return Z, int(np.count_nonzero(clipped))
