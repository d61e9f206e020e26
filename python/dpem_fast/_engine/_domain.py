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
``d x B1`` histogram is released with Gaussian noise.  Stage 2 (refinement).  Inside the
stage-1 box, ``B2 = 32`` equal-width bins per feature (rows clipped to the box first); the
``d x B2`` histogram is released the same way.  After each stage the box of a feature
spans its outermost bins whose noisy count exceeds ``τ = σ Φ⁻¹(1 - p / (B d))`` with
``p = 0.05``: with no row in a bin its noisy count exceeds τ with probability at most
p / (B d), so with probability ≥ 1 - p no empty bin widens any box (union bound).  If no
bin of a feature passes, stage 1 keeps its most populated noisy bin and stage 2 keeps the
stage-1 box.  Rows outside the box are clipped to it (this is the same clipping as for a
declared box).  All of this is post-processing of the two noisy histograms.

Sensitivity (each histogram).  A row adds exactly one count to one bin of each of the d
features.  Add/remove one row: d entries change by 1, ℓ2 = √d, ℓ1 = d.  Replace one row:
per feature at most two bins change by 1 (−1 and +1), ℓ2 = √(2d), ℓ1 = 2d.  The grid of
stage 2 depends only on the stage-1 release (adaptive composition; both are in the plan).

The constants B1 (the whole double range), B2 = 32 (the box resolution: at most 1/32 of
the stage-1 width is added on each side) and p = 0.05 are public design choices, not
fitted to any dataset.  The estimate costs :data:`DOMAIN_SHARE` of the plan.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.special import ndtri

from ..accounting import PrivacyLeakWarning
from .._preprocess import DataDomain
from ._statistics import StatSpec

__all__ = ["DOMAIN_SHARE", "domain_specs", "estimate_domain", "domain_from_data",
           "scale_bins", "SCALE_BINS", "REFINE_BINS"]

#: Fraction of the whole plan spent on the private domain estimate (both histograms).
DOMAIN_SHARE = 0.1
#: Frexp exponents of non-zero doubles: 2^(e-1) <= |x| < 2^e for e in [_E_MIN, _E_MAX].
_E_MIN, _E_MAX = -1073, 1024
_N_EXP = _E_MAX - _E_MIN + 1                  # 2098
SCALE_BINS = 2 * _N_EXP + 1                   # 4197: negative bins, zero, positive bins
REFINE_BINS = 32
_FALSE_POSITIVE = 0.05
_ROWS_PER_PASS = 1 << 16                      # bounds the temporary memory of a histogram
_DBL_MAX = np.finfo(np.float64).max


def domain_specs(n_features: int):
    """The two histogram statistics of the private domain estimate (stage 1, stage 2)."""
    d = int(n_features)
    l2 = {"add_remove": math.sqrt(d), "replace": math.sqrt(2.0 * d)}
    l1 = {"add_remove": float(d), "replace": 2.0 * d}
    return (StatSpec("domain_scale", (d, SCALE_BINS), l2, l1),
            StatSpec("domain_refine", (d, REFINE_BINS), l2, l1))


def scale_bins(X):
    """Stage-1 bin index of every value: the zero bin is ``_N_EXP``; the bin of a value with
    frexp exponent e is ``_N_EXP ± (e - _E_MIN + 1)`` by its sign."""
    _, e = np.frexp(np.asarray(X, dtype=np.float64))
    off = e.astype(np.int64) - (_E_MIN - 1)
    return _N_EXP + np.sign(X).astype(np.int64) * off


def _scale_edges():
    """Lower and upper edge of every stage-1 bin (the zero bin is [0, 0])."""
    e = np.arange(_E_MIN, _E_MAX + 1, dtype=np.float64)
    up = np.minimum(np.ldexp(1.0, e.astype(np.int64)), _DBL_MAX)   # 2^1024 overflows: cap
    low = np.ldexp(1.0, (e - 1).astype(np.int64))
    lower = np.concatenate([-up[::-1], [0.0], low])
    upper = np.concatenate([-low[::-1], [0.0], up])
    return lower, upper


def _histogram(X, bins_of, n_bins):
    """Per-feature counts ``(d, n_bins)`` of ``bins_of(rows)``, in passes of bounded memory."""
    n, d = X.shape
    counts = np.zeros(d * n_bins, dtype=np.int64)
    offset = np.arange(d, dtype=np.int64) * n_bins
    for r0 in range(0, n, _ROWS_PER_PASS):
        idx = bins_of(X[r0:r0 + _ROWS_PER_PASS]) + offset
        counts += np.bincount(idx.ravel(), minlength=d * n_bins)
    return counts.reshape(d, n_bins).astype(np.float64)


def _passing(noisy, release, n_features):
    """Boolean mask of the bins whose noisy count exceeds the threshold τ."""
    B = noisy.shape[1]
    tau = release.noise_scale * float(ndtri(1.0 - _FALSE_POSITIVE / (B * n_features)))
    return noisy > tau


def _outermost(mask_row, fallback):
    """(first, last) index of True in ``mask_row``, or ``fallback`` when none."""
    idx = np.flatnonzero(mask_row)
    return (int(idx[0]), int(idx[-1])) if idx.size else fallback


def _refine_bins(lo, hi):
    """Stage-2 bin index of rows clipped to [lo, hi]: halves avoid overflow of hi - lo."""
    width = hi / 2 - lo / 2

    def bins_of(rows):
        t = (np.clip(rows, lo, hi) / 2 - lo / 2) / width * REFINE_BINS
        return np.clip(np.floor(t), 0, REFINE_BINS - 1).astype(np.int64)
    return bins_of


def _box_domain(lo, hi, source):
    half = hi / 2 - lo / 2
    m = float(half.max())
    radius = min(m * float(np.linalg.norm(half / m)), _DBL_MAX) if m > 0 else 1.0
    return DataDomain(lo / 2 + hi / 2, radius, (lo, hi), source == "from data")


def estimate_domain(X, layer):
    """A per-feature box from two noisy histograms released through ``layer``.

    ``layer``'s plan must hold the two :func:`domain_specs` releases.  Returns a
    :class:`DataDomain` whose box and radius depend on ``X`` only through those releases.
    """
    n, d = X.shape
    rel = layer.releases
    lower, upper = _scale_edges()
    # stage 1: scale
    noisy = layer.release({"domain_scale": _histogram(X, scale_bins, SCALE_BINS)}, 0)["domain_scale"]
    passing = _passing(noisy, rel["domain_scale"], d)
    lo, hi = np.empty(d), np.empty(d)
    for j in range(d):
        mode = int(np.argmax(noisy[j]))
        a, b = _outermost(passing[j], (mode, mode))
        lo[j], hi[j] = lower[a], upper[b]
    tiny = np.finfo(np.float64).tiny
    flat = hi <= lo                     # only the zero bin: any box around 0 will do
    lo[flat], hi[flat] = lo[flat] - tiny, hi[flat] + tiny
    # stage 2: refine inside the stage-1 box
    bins_of = _refine_bins(lo, hi)
    noisy2 = layer.release({"domain_refine": _histogram(X, bins_of, REFINE_BINS)}, 0)["domain_refine"]
    passing2 = _passing(noisy2, rel["domain_refine"], d)
    half_step = (hi / 2 - lo / 2) / REFINE_BINS       # edges in halves: no overflow near DBL_MAX
    lo2, hi2 = lo.copy(), hi.copy()
    for j in range(d):
        a, b = _outermost(passing2[j], (0, REFINE_BINS - 1))
        lo2[j] = 2 * (lo[j] / 2 + a * half_step[j])
        hi2[j] = hi[j] if b == REFINE_BINS - 1 else 2 * (lo[j] / 2 + (b + 1) * half_step[j])
    return _box_domain(lo2, hi2, "private estimate")


def domain_from_data(X, stacklevel=4):
    """The data's exact bounding box: NOT private (explicit opt-in only)."""
    warnings.warn(
        "bounds='from_data': the domain is the data's exact bounding box, which leaks privacy; the "
        "fit is not differentially private. Declare bounds or data_norm from public knowledge, or "
        "leave both unset to estimate the domain privately.",
        PrivacyLeakWarning,
        stacklevel=stacklevel,
    )
    lo = X.min(axis=0).astype(np.float64)
    hi = X.max(axis=0).astype(np.float64)
    hi = np.where(hi > lo, hi, lo + 1.0)
    return _box_domain(lo, hi, "from data")
