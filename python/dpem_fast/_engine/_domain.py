"""The data domain of a private fit: declared, privately estimated, or (opt-in) from the data.

Sensitivities assume every row lies in the unit ball after the affine map of a
:class:`~dpem_fast._preprocess.DataDomain`.  That map must not be computed from the raw
data.  Three sources:

* **declared** (``bounds`` and/or ``data_norm``): public knowledge, the whole budget goes
  to the model;
* **private estimate** (the default when nothing is declared): a per-feature box found by
  two noisy histograms, released through the release layer on a share of the budget that
  appears in the plan (:func:`domain_specs`, :func:`estimate_domain`);
* **from the data** (``bounds="from_data"``, explicit opt-in): the exact min/max, with a
  :class:`~dpem_fast.accounting.PrivacyLeakWarning`; the record says the fit is not
  private and no budget ledger may be charged.

Private box estimate
--------------------
Stage 1 (scale).  Each value falls in one bin of a data-independent grid that covers every
double: the zero bin, and for each binary exponent e (``2^(e-1) <= |x| < 2^e``, e from
-1073 to 1024) a positive and a negative bin — ``B1 = 4197`` bins per feature.  The
``d x B1`` histogram is released with Gaussian noise σ1.  A feature's stage-1 box spans its
outermost bins whose noisy count exceeds ``σ1 z1``, plus one bin further out on each side
(sparse tails beyond them are left to stage 2), with ``z1 = Φ⁻¹(1 - p1 / (B1 d))``: an empty
bin passes with probability at most p1 / (B1 d), so with probability ≥ 1 - p1 no empty bin
widens any box (union bound).  A feature with no passing bin has no box: the estimate is
refused (:func:`estimate_domain` raises, naming the features and what to declare) rather
than a box built from noise.  Under replace-one, where n is public, :func:`check_estimable`
refuses before the budget is charged when even the best case cannot pass: all n rows in one
bin need ``n >= σ1 z1`` for an even chance (``rows_needed``, public: σ1 from the plan).

Stage 2 (refinement).  Inside the stage-1 box, ``B2 = 32`` equal-width bins per feature
(rows clipped to the box first); the ``d x B2`` histogram is released with noise σ2.  The
core of a feature's box spans its outermost bins whose noisy count exceeds ``σ2 z2``; from
each end of the core the box extends over the longest run of m further bins whose summed
noisy count exceeds ``σ2 √m z2`` — a sparse tail is kept once it is significant as a whole.
``z2 = Φ⁻¹(1 - p2 / (3 B2 d))`` covers the B2 d single-bin tests and the at most 2 B2 d run
tests, so with probability ≥ 1 - p2 no empty region widens a box.  If no bin passes,
the stage-1 box is kept.  Rows outside the box are clipped to it, as for a declared box.
All of this is post-processing of the two noisy histograms.

Sensitivity (each histogram).  A row adds exactly one count to one bin of each of the d
features.  Add/remove one row: d entries change by 1, ℓ2 = √d, ℓ1 = d.  Replace one row:
per feature at most two bins change by 1 (−1 and +1), ℓ2 = √(2d), ℓ1 = 2d.  The grid of
stage 2 depends only on the stage-1 release (adaptive composition; both are in the plan).

The constants B1 (the whole double range), B2 = 32 (the box resolution: 1/32 of the
stage-1 width) and the false-positive probabilities p1 = 1e-6 (stage 1: one empty bin passing
can inflate a box by orders of magnitude) and p2 = 1e-3 (stage 2: at most to the stage-1 box)
are public design choices, not fitted to any dataset.  The estimate costs :data:`DOMAIN_SHARE` of the plan.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy.special import ndtri

from .._dpcore import _domain as _kernel
from .._dpcore._contract import superblock_rows
from .._preprocess import DataDomain, box_domain
from ..accounting import PrivacyLeakWarning
from ..io import as_row_source
from ._sources._rows import DataSummary, Rows
from ._statistics import StatSpec

__all__ = ["DOMAIN_SHARE", "domain_specs", "estimate_domain", "check_estimable", "rows_needed",
           "domain_from_data", "SCALE_BINS", "REFINE_BINS"]

#: Fraction of the whole plan spent on the private domain estimate (both histograms).
DOMAIN_SHARE = 0.1
#: Bins of stage 1: frexp exponents e in [E_MIN, E_MAX] on each side of the zero bin.
_E_MIN, _E_MAX, _N_EXP, SCALE_BINS = _kernel.E_MIN, _kernel.E_MAX, _kernel.ZERO_BIN, _kernel.SCALE_BINS
REFINE_BINS = 32
_FALSE_POSITIVE = {1: 1e-6, 2: 1e-3}      # per stage: a stage-1 error can inflate the box a lot
_DBL_MAX = np.finfo(np.float64).max


def domain_specs(n_features: int):
    """The two histogram statistics of the private domain estimate (stage 1, stage 2)."""
    d = int(n_features)
    l2 = {"add_remove": math.sqrt(d), "replace": math.sqrt(2.0 * d)}
    l1 = {"add_remove": float(d), "replace": 2.0 * d}
    return (StatSpec("domain_scale", (d, SCALE_BINS), l2, l1, integer=True),
            StatSpec("domain_refine", (d, REFINE_BINS), l2, l1, integer=True))


@functools.lru_cache(maxsize=1)
def _scale_edges():
    """Lower and upper edge of every stage-1 bin (the zero bin is [0, 0]); read-only."""
    e = np.arange(_E_MIN, _E_MAX + 1)
    up = np.ldexp(1.0, np.minimum(e, _E_MAX - 1))
    up[-1] = _DBL_MAX                                  # 2^1024 is not a double: the top bin ends at max
    low = np.ldexp(1.0, e - 1)
    lower = np.concatenate([-up[::-1], [0.0], low])
    upper = np.concatenate([-low[::-1], [0.0], up])
    lower.setflags(write=False)
    upper.setflags(write=False)
    return lower, upper


def _counts(fill, X, n_threads, shape, *args):
    """Summed thread partials of a histogram kernel, as float64 ``shape``."""
    partial = np.empty((n_threads,) + shape, dtype=np.int64)
    fill(X, *args, partial, n_threads)
    return partial.sum(axis=0).astype(np.float64)


def _histogram(fill, n_threads, shape, args, X, columns=None):
    """``_counts`` of the compiled kernel named ``fill`` with the block last:
    ``functools.partial(_histogram, fill, n_threads, shape, args, columns=...)`` is a pass's
    kernel — a module function and public values (the kernel's name, the thread count, the
    shape, stage 2's released stage-1 box, the domain's columns), all that a Dask task of the
    pass holds.  (The name, not the compiled function: Cython functions do not pickle by
    reference.)  ``columns``: the block's domain columns only (None: all)."""
    if columns is not None:
        X = np.ascontiguousarray(X[:, columns])
    return _counts(getattr(_kernel, fill), X, n_threads, shape, *args)


def _z(stage, n_tests):
    """Gaussian quantile for the stage's false-positive probability over ``n_tests`` tests."""
    return float(ndtri(1.0 - _FALSE_POSITIVE[stage] / n_tests))


def _scale_box(noisy_row, sigma, z):
    """Stage 1: (first, last) bin of the outermost bins whose noisy count exceeds σ z, one bin
    further out on each side (their tails are left to stage 2); None if no bin passes."""
    idx = np.flatnonzero(noisy_row > sigma * z)
    if not idx.size:
        return None
    return max(int(idx[0]) - 1, 0), min(int(idx[-1]) + 1, noisy_row.size - 1)


_DECLARE = ("declare bounds=(lower, upper) or data_norm from public knowledge (the features' known "
            "ranges), raise epsilon, or fit more rows")


def rows_needed(plan, n_features):
    """σ1 z1: the count one stage-1 bin needs for an even chance of passing its threshold
    (public: the plan's noise scale and the number of features)."""
    return plan.releases["domain_scale"].noise_scale * _z(1, SCALE_BINS * int(n_features))


def check_estimable(plan, n_features, n_public):
    """Refuse, before the budget is charged, a private domain estimate that cannot succeed.

    ``n_public``: the row count where it is public (replace-one), else None (no check: under
    add/remove n is private, and :func:`estimate_domain` refuses after its first release).  The
    best case for a feature is all n rows in one stage-1 bin; with fewer than
    :func:`rows_needed` rows that bin passes with probability below 1/2.
    """
    if n_public is None:
        return
    need = rows_needed(plan, n_features)
    if n_public < need:
        raise ValueError(
            f"n_samples={n_public} is too few rows to estimate the data domain privately at this "
            f"epsilon (a feature's histogram needs about {math.ceil(need)} rows in one bin to be seen "
            f"above the noise): {_DECLARE}")


def _refine_box(noisy_row, sigma, z):
    """Stage 2: (first, last) bin of the box.  The core spans the outermost bins whose noisy
    count exceeds σ z; from each end of the core the box extends over the longest run of m
    further bins whose summed noisy count exceeds σ √m z (a sparse tail that is significant
    as a whole).  The whole stage-1 box if no bin passes."""
    B = noisy_row.size
    idx = np.flatnonzero(noisy_row > sigma * z)
    if not idx.size:
        return 0, B - 1
    a, b = int(idx[0]), int(idx[-1])
    for side in (-1, 1):
        run = noisy_row[:a][::-1] if side < 0 else noisy_row[b + 1:]
        if not run.size:
            continue
        m = np.arange(1, run.size + 1)
        over = np.flatnonzero(np.cumsum(run) > sigma * np.sqrt(m) * z)
        if over.size:
            if side < 0:
                a -= int(over[-1]) + 1
            else:
                b += int(over[-1]) + 1
    return a, b


def _box_domain(lo, hi, source):
    """The per-feature domain of the box (:func:`dpem_fast._preprocess.box_domain`: each
    feature scaled by sqrt(d) times its half-width, the box onto a cube inside the unit ball).

    An estimated box (private, or from the data) may reach far beyond the data's scale (the
    private estimate can return up to the whole double range): its scales are capped at
    2^500, so that every second moment in original units, s_i s_j S_ij with |S_ij| <= 1,
    stays below 2^1000, finite (rows beyond the cap are clipped into the ball as any other
    row; no sensitivity depends on the scale).  It may also be degenerate in one feature (a column
    of one value, or an estimate thrown off by a few huge rows) while others are wide.  Its
    scale is floored at 2^-20 (about 1e-6) times the widest feature's: scales r apart make
    the covariances diag(s) S diag(s) in original units r² worse conditioned than S, and at
    r = 2^20 that alone is 2^40 of float64's 1/eps = 2^52, leaving 2^12 for the model's own
    conditioning; beyond it the model in original units (its precision,
    ``score_samples``) stops being representable.  Post-processing of the released box.
    A declared box is used as declared.
    """
    return box_domain(lo, hi, source == "from data", min_ratio=2.0 ** -20,
                      max_scale=2.0 ** 500)


def estimate_domain(rows, layer, n_threads=1, columns=None):
    """A per-feature box from two noisy histograms released through ``layer``.

    ``rows`` is the engine's :class:`~dpem_fast._engine._sources._rows.Rows` (one pass per histogram,
    integer counts summed over superblocks) or a 2-D array.  ``layer``'s plan must hold the
    two :func:`domain_specs` releases (of ``len(columns)`` features).  ``columns``: the
    columns the domain covers (public; None for all).  Returns a :class:`DataDomain` whose box
    and scales depend on the rows only through those releases.
    """
    rows = _as_rows(rows)
    columns = None if columns is None else np.asarray(columns, dtype=np.intp)
    d = rows.n_features if columns is None else columns.size
    rel = layer.releases
    lower, upper = _scale_edges()
    # stage 1: scale
    hist = rows.reduce(functools.partial(_histogram, "scale_histogram", n_threads, (d, SCALE_BINS), (),
                                         columns=columns))
    noisy = layer.release({"domain_scale": hist}, 0)["domain_scale"]
    sigma, z = rel["domain_scale"].noise_scale, _z(1, SCALE_BINS * d)
    lo, hi = np.empty(d), np.empty(d)
    unseen = []
    for j in range(d):
        box = _scale_box(noisy[j], sigma, z)
        if box is None:
            unseen.append(j)
            continue
        lo[j], hi[j] = lower[box[0]], upper[box[1]]
    if unseen:      # post-processing of the release: which features it did not resolve
        raise ValueError(
            f"the private domain estimate saw no populated bin for feature(s) {unseen} above the "
            f"noise of its release (this fit's budget is spent; no model is returned): {_DECLARE}")
    tiny = np.finfo(np.float64).tiny
    flat = hi <= lo                     # only the zero bin: any box around 0 will do
    lo[flat], hi[flat] = lo[flat] - tiny, hi[flat] + tiny
    # stage 2: refine inside the stage-1 box
    hist = rows.reduce(functools.partial(_histogram, "refine_histogram", n_threads, (d, REFINE_BINS),
                                         (lo, hi), columns=columns))
    noisy2 = layer.release({"domain_refine": hist}, 0)["domain_refine"]
    sigma, z = rel["domain_refine"].noise_scale, _z(2, 3 * REFINE_BINS * d)
    half_step = (hi / 2 - lo / 2) / REFINE_BINS       # edges in halves: no overflow near DBL_MAX
    lo2, hi2 = lo.copy(), hi.copy()
    for j in range(d):
        a, b = _refine_box(noisy2[j], sigma, z)
        new_lo = 2 * (lo[j] / 2 + a * half_step[j])
        new_hi = hi[j] if b == REFINE_BINS - 1 else 2 * (lo[j] / 2 + (b + 1) * half_step[j])
        if new_hi > new_lo:             # else the box is too narrow to refine in floating point
            lo2[j], hi2[j] = new_lo, new_hi
    return _box_domain(lo2, hi2, "private estimate")


def domain_from_data(rows, stacklevel=5, columns=None):
    """The data's exact bounding box (of ``columns``, None for all): NOT private (explicit
    opt-in only)."""
    warnings.warn(
        "bounds='from_data': the domain is the data's exact bounding box, which leaks privacy; the "
        "fit is not differentially private. Declare bounds or data_norm from public knowledge, or "
        "leave both unset to estimate the domain privately.",
        PrivacyLeakWarning,
        stacklevel=stacklevel,
    )
    lo = hi = None
    if hasattr(rows, "column_range"):           # a dask fit: min / max per chunk on the workers
        lo, hi = rows.column_range()
    for block in (() if lo is not None else _as_rows(rows).superblocks()):
        b_lo, b_hi = block.min(axis=0).astype(np.float64), block.max(axis=0).astype(np.float64)
        lo = b_lo if lo is None else np.minimum(lo, b_lo)
        hi = b_hi if hi is None else np.maximum(hi, b_hi)
    if columns is not None:
        lo, hi = lo[columns], hi[columns]
    hi = np.where(hi > lo, hi, lo + 1.0)
    return _box_domain(lo, hi, "from data")


def _as_rows(rows):
    """The engine's Rows, or one built around an in-memory 2-D array (tests, direct calls)."""
    if isinstance(rows, np.ndarray):
        X = np.ascontiguousarray(rows)
        return Rows(as_row_source(X, superblock_rows(X.shape[1])), None, DataSummary(*X.shape))
    return rows
