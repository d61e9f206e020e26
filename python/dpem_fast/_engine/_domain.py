"""The data domain of a private fit: declared, privately estimated, or (opt-in) from the data.

Sensitivities assume every row lies in the unit ball after the affine map of a
:class:`~dpem_fast._preprocess.DataDomain`.  That map must not be computed from the raw
data.  Three sources:

* **declared** (``bounds`` and/or ``data_norm``): public knowledge, the whole budget goes
  to the model;
* **private estimate** (the default when nothing is declared): a per-feature box found by
  two noisy histograms, and a noisy count of the rows it leaves out, released through the
  release layer on a share of the budget that appears in the plan (:func:`domain_specs`,
  :func:`estimate_domain`);
* **from the data** (``bounds="from_data"``, explicit opt-in): the exact min/max, with a
  :class:`~dpem_fast.accounting.PrivacyLeakWarning`; the record says the fit is not
  private and no budget ledger may be charged.

Private box estimate
--------------------
Nothing in it raises on the data after the budget is charged (issue 35): every feature gets
a box, and the fit warns (:class:`~dpem_fast.accounting.DomainCoverageWarning`, naming
``bounds``) when the releases say the box may not cover the data.  The only refusal is
before the charge (:func:`check_estimable`, replace-one, where n is public).

Stage 1 (scale).  Each value falls in one bin of a data-independent grid that covers every
double: the zero bin, and for each binary exponent e (``2^(e-1) <= |x| < 2^e``, e from
-1073 to 1024) a positive and a negative bin — ``B1 = 4197`` bins per feature.  The
``d x B1`` histogram is released with Gaussian noise σ1.  A feature's core spans its
outermost bins whose noisy count exceeds ``σ1 z1``, with ``z1 = Φ⁻¹(1 - p1 / (B1 d))``: an
empty bin passes with probability at most p1 / (B1 d), so with probability ≥ 1 - p1 no empty
bin widens any box (union bound).  The core is then widened, by post-processing only:

* a one-sided core reaches 0 (the zero bin): its gap to 0 is at most 1/7 of the final box
  (which reaches one exponent beyond the core on each side), so this costs at most a factor
  8/7 in scale, and it keeps the small values and zeros of a skewed feature;
* across 0 if the mirror image of the core (the bins of the same exponents on the other
  side, far from the zero bin in the bin index) is significant as one run;
* at each end over the longest run of m further bins whose summed noisy count exceeds
  ``σ1 √m z1'`` (a sparse tail significant as a whole);
* one bin further out on each side, except past the zero bin.

The run tests (at most 2 B1 d + d of them) have their own ``z1' = Φ⁻¹(1 - p1 / (2 B1 d))``,
so with probability ≥ 1 - 2 p1 in all no empty region widens a box.  A feature with no
passing bin gets the same test on sums of w consecutive bins (public windows of the bin
index, w = 2, 4, 8, ...; about B1 tests per feature, at z1: another p1), the box spanning the
outermost passing windows; with none, the public placeholder box [-1, 1].  Either is named in
the warning and the record.  Under replace-one, where n is public, :func:`check_estimable`
refuses before the budget is charged when even the best case cannot pass: all n rows in one
bin need ``n >= σ1 z1`` for an even chance (``rows_needed``, public: σ1 from the plan).

Stage 2 (the bulk: two private quantiles).  Inside the stage-1 box, ``B2 = 32`` equal-width
bins per feature (rows clipped to the box first, so every row is counted); the ``d x B2``
histogram is released with noise σ2.  With ``P_k`` the noisy count of a feature's k lowest
bins (noise σ2 √k) and ``n_low = Σ_k noisy_k - z2 σ2 √B2`` a lower confidence bound on its
row count, the box starts after the most bins k with ``P_k + z2 σ2 √k <= TAIL n_low``: bins
whose rows are confidently at most a fraction TAIL of the feature's; the same from the top.
So, but for the false-positive probability, each end leaves out at most ``TAIL n`` rows of
the stage-1 box, and the box edges are bin edges (a margin of up to one bin): the **bulk
box**.  Where no cut is confident (few rows against the noise) it is the stage-1 box.
``z2 = Φ⁻¹(1 - p2 / (3 B2 d))`` covers the 2 B2 d prefix tests and the d row-count bounds
(probability ≥ 1 - p2).  The same release also gives the **core box** (the previous rule):
the outermost bins whose noisy count exceeds ``σ2 z2``, extended over significant runs.  It
is tighter where the bulk rule cannot cut empty bins confidently (the prefix noise grows as
√k), but it may cut a diffuse tail that no single bin resolves.  Rows outside the chosen box
are clipped to it, as for a declared box.

Stage 3 (coverage).  Three counts are released with noise σ3: the rows outside the bulk box
(in at least one feature), the rows outside the core box, and the rows.  The fit keeps the
core box when its released outside count plus 2 σ3 is at most :data:`CORE_FRACTION` (1 %)
of the released row count, else the bulk box; the chosen box's released outside fraction is
in the privacy record, and the fit warns when it exceeds the public :data:`OUTSIDE_FRACTION`
(10 %), when σ3 is more than half of that fraction of the released row count (the release
cannot tell), or when stage 1 fell back to summed bins or the placeholder.  A warning, not a
refusal: the budget is spent and the model is returned, with the box and the fraction in
``privacy_.data_domain``.  One count over all features (not one per feature) keeps σ3
independent of d: with 30 features, per-feature counts would need √30 times the noise.

Sensitivity.  Histograms: a row adds exactly one count to one bin of each of the d
features.  Add/remove one row: d entries change by 1, ℓ2 = √d, ℓ1 = d.  Replace one row:
per feature at most two bins change by 1 (−1 and +1), ℓ2 = √(2d), ℓ1 = 2d.  The outside
counts: a row adds 0 or 1 to each of the two outside counts and 1 to the row count.
Add/remove: each entry changes by at most 1, ℓ2 = √3, ℓ1 = 3 (attained by a row outside both
boxes).  Replace: each outside count changes by at most 1 (a row inside replaced by one
outside), the row count not at all, ℓ2 = √2, ℓ1 = 2; declared √3 and 3 as under add/remove,
so that the group-level sensitivity (``make_plan(max_rows_per_group=m)``: m max(Δ_replace,
Δ_add/remove), :mod:`dpem_fast._engine._groups`) is m times the row-level one for every
domain release.  Person-level fits: each of the three releases is scaled by m there, like
every one-off.  The grid of stage 2 depends only on the stage-1 release and the boxes of
stage 3 only on both (adaptive composition; all three are in the plan).

The constants B1 (the whole double range), B2 = 32 (the box resolution: 1/32 of the
stage-1 width), TAIL = 0.25 % per end (at most 0.5 % of a feature's rows clipped when the
noise allows a cut), CORE_FRACTION = 1 %, OUTSIDE_FRACTION = 10 % and the false-positive
probabilities p1 = 1e-6 (stage 1: one empty bin passing can inflate a box by orders of
magnitude) and p2 = 1e-3 (stage 2: at most to the stage-1 box) are public design choices,
not fitted to any dataset.
The estimate costs :data:`DOMAIN_SHARE` of the plan, split by :data:`DOMAIN_SPLIT`: 40 % to
each histogram, 20 % to the outside counts (three numbers that must resolve 1 % of the rows).
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
from ..accounting import DomainCoverageWarning, PrivacyLeakWarning
from ..io import as_row_source
from ._sources._rows import DataSummary, Rows
from ._statistics import StatSpec

__all__ = ["DOMAIN_SHARE", "DOMAIN_SPLIT", "OUTSIDE_FRACTION", "CORE_FRACTION", "TAIL", "domain_specs", "domain_shares",
           "estimate_domain", "coverage_report", "check_estimable", "rows_needed", "domain_from_data",
           "SCALE_BINS", "REFINE_BINS"]

#: Fraction of the whole plan spent on the private domain estimate (all its releases).
DOMAIN_SHARE = 0.1
#: How DOMAIN_SHARE is split between the estimate's releases (fractions of it, summing to 1).
DOMAIN_SPLIT = {"domain_scale": 0.4, "domain_refine": 0.4, "domain_outside": 0.2}
#: Public fraction of rows outside the estimated box above which the fit warns.
OUTSIDE_FRACTION = 0.1
#: Public fraction of a feature's rows that stage 2 may leave out at each end of its box.
TAIL = 0.0025
#: Public fraction of rows the tighter core box may leave out (confidently) to be kept.
CORE_FRACTION = 0.01
#: Placeholder box of a feature that no release resolved (public; the fit warns).
_PLACEHOLDER = (-1.0, 1.0)
#: Bins of stage 1: frexp exponents e in [E_MIN, E_MAX] on each side of the zero bin.
_E_MIN, _E_MAX, _N_EXP, SCALE_BINS = _kernel.E_MIN, _kernel.E_MAX, _kernel.ZERO_BIN, _kernel.SCALE_BINS
REFINE_BINS = 32
_FALSE_POSITIVE = {1: 1e-6, 2: 1e-3}      # per stage: a stage-1 error can inflate the box a lot
_DBL_MAX = np.finfo(np.float64).max


def domain_specs(n_features: int):
    """The statistics of the private domain estimate, in release order: the two histograms
    (stage 1, stage 2) and the count of rows outside the chosen box (stage 3)."""
    d = int(n_features)
    l2 = {"add_remove": math.sqrt(d), "replace": math.sqrt(2.0 * d)}
    l1 = {"add_remove": float(d), "replace": 2.0 * d}
    # stage 3: is the row outside the bulk box, outside the core box; the row count (module
    # docstring: declared √3 under both relations, replace-one padded from √2, so that a
    # group's is m times a row's)
    l2_out = {"add_remove": math.sqrt(3.0), "replace": math.sqrt(3.0)}
    l1_out = {"add_remove": 3.0, "replace": 3.0}
    return (StatSpec("domain_scale", (d, SCALE_BINS), l2, l1, integer=True),
            StatSpec("domain_refine", (d, REFINE_BINS), l2, l1, integer=True),
            StatSpec("domain_outside", (3,), l2_out, l1_out, integer=True))


def domain_shares():
    """The one-off shares of the estimate's releases in a plan (``make_plan``'s
    ``one_off_share`` mapping): :data:`DOMAIN_SPLIT` of :data:`DOMAIN_SHARE`."""
    return {name: DOMAIN_SHARE * f for name, f in DOMAIN_SPLIT.items()}


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


def _outside_counts(lo, hi, columns, X):
    """Stage 3's statistic of one block: the number of rows outside the bulk box ``[lo[0],
    hi[0]]`` (outside it in at least one feature), outside the core box ``[lo[1], hi[1]]``
    (public boxes of the d domain features), and the number of rows."""
    if columns is not None:
        X = X[:, columns]
    out = np.empty(3)
    for i in range(2):
        out[i] = np.count_nonzero(np.any((X < lo[i]) | (X > hi[i]), axis=1))
    out[2] = X.shape[0]
    return out


def _z(stage, n_tests):
    """Gaussian quantile for the stage's false-positive probability over ``n_tests`` tests."""
    return float(ndtri(1.0 - _FALSE_POSITIVE[stage] / n_tests))


def _runs(noisy_row, a, b, sigma, z):
    """(a, b) extended at each end over the longest run of m further bins whose summed noisy
    count exceeds σ √m z (a sparse tail that is significant as a whole)."""
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


def _scale_box(noisy_row, sigma, z, z_run=None):
    """Stage 1: (first, last) bin of the outermost bins whose noisy count exceeds σ z; with
    ``z_run``, extended to the zero bin (a box on one side of 0 reaches it) and then over the
    significant runs beyond each end (:func:`_runs`, threshold ``z_run``); one bin further out
    on each side (their tails are left to stage 2).  None if no bin passes."""
    idx = np.flatnonzero(noisy_row > sigma * z)
    if not idx.size:
        return None
    a, b = int(idx[0]), int(idx[-1])
    if z_run is not None:
        n0 = _N_EXP
        # a one-sided core reaches 0, and the other side of 0 if the mirror image of the core
        # (the bins of the same binary exponents there, far from the zero bin in the index) is
        # significant as one run
        mirror = noisy_row[2 * n0 - b:2 * n0 - a + 1] if (a > n0 or b < n0) else None
        a0, b0 = a, b
        a, b = min(a, n0), max(b, n0)
        if mirror is not None and mirror.sum() > sigma * math.sqrt(mirror.size) * z_run:
            a, b = min(a, 2 * n0 - b0), max(b, 2 * n0 - a0)
        a, b = _runs(noisy_row, a, b, sigma, z_run)
        # one bin further out, but not past the zero bin: the box of a one-sided feature
        # starts (or ends) at 0 exactly
        return (a if a == n0 else max(a - 1, 0)), (b if b == n0 else min(b + 1, noisy_row.size - 1))
    return max(a - 1, 0), min(b + 1, noisy_row.size - 1)


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


def _coarse_box(noisy_row, sigma, z):
    """Stage 1's fallback for a feature none of whose bins passes: the same test on the sums
    of w consecutive bins (public windows of the bin index, w = 2, 4, 8, ...; a sum of w bins
    has noise σ √w), about B1 tests per feature over all w.  The box spans the outermost
    passing windows over every w (each holds rows but for the union-bounded false-positive
    probability), one bin further out on each side; None if no window passes at any w."""
    B = noisy_row.size
    first, last = B, -1
    w = 2
    while w < 2 * B:
        n_win = -(-B // w)
        padded = np.zeros(n_win * w)
        padded[:B] = noisy_row
        sums = padded.reshape(n_win, w).sum(axis=1)
        width = np.minimum(w, B - np.arange(n_win) * w)       # the last window may be short
        idx = np.flatnonzero(sums > sigma * np.sqrt(width) * z)
        if idx.size:
            first, last = min(first, int(idx[0]) * w), max(last, min((int(idx[-1]) + 1) * w, B) - 1)
        w *= 2
    if last < 0:
        return None
    return max(first - 1, 0), min(last + 1, B - 1)


def _core_box(noisy_row, sigma, z):
    """Stage 2's tight candidate: (first, last) bin of the core, the outermost bins whose noisy
    count exceeds σ z, extended over significant runs (:func:`_runs`); the whole stage-1 box if
    no bin passes.  It may cut a diffuse tail: stage 3 keeps it only where its released outside
    count is confidently small (:func:`coverage_report`)."""
    idx = np.flatnonzero(noisy_row > sigma * z)
    if not idx.size:
        return 0, noisy_row.size - 1
    return _runs(noisy_row, int(idx[0]), int(idx[-1]), sigma, z)


def _refine_box(noisy_row, sigma, z):
    """Stage 2: (first, last) bin of the box, the feature's bulk between two private
    quantiles.  ``P_k`` = the noisy count of the k lowest bins (noise σ √k); the box starts
    after the most bins k whose count is confidently at most the tail allowance,
    ``P_k + z σ √k <= TAIL n_low``, with ``n_low = Σ noisy - z σ √B`` a lower confidence bound
    on the feature's row count (every row is counted, clipped to the stage-1 box); the same
    from the top.  The whole stage-1 box where no cut is confident, or where the cuts cross."""
    B = noisy_row.size
    n_low = float(np.sum(noisy_row)) - z * sigma * math.sqrt(B)
    allowance = TAIL * max(n_low, 0.0)
    slack = z * sigma * np.sqrt(np.arange(1, B + 1))

    def cut(counts):            # bins that can be cut from this end
        ok = np.flatnonzero(np.cumsum(counts) + slack <= allowance)
        return int(ok[-1]) + 1 if ok.size else 0

    a, b = cut(noisy_row), B - 1 - cut(noisy_row[::-1])
    return (a, b) if a <= b else (0, B - 1)


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


def estimate_domain(rows, layer, n_threads=1, columns=None, report=None, stacklevel=5):
    """A per-feature box from the noisy releases of :func:`domain_specs`, through ``layer``.

    ``rows`` is the engine's :class:`~dpem_fast._engine._sources._rows.Rows` (one pass per
    release, integer counts summed over superblocks) or a 2-D array.  ``layer``'s plan must
    hold the three :func:`domain_specs` releases (of ``len(columns)`` features).  ``columns``:
    the columns the domain covers (public; None for all).  Returns a :class:`DataDomain` whose
    box and scales depend on the rows only through those releases.  Never raises on the data:
    a feature no release resolves gets a box from the coarser test or a public placeholder,
    and the fit warns (:class:`~dpem_fast.accounting.DomainCoverageWarning`) when the released
    outside count says the box may not cover the data.  ``report``: a dict, filled with the
    released values the privacy record shows (:func:`coverage_report`).
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
    z_run = _z(1, 2 * SCALE_BINS * d)             # the run tests: their own p1 (module docstring)
    lo, hi = np.empty(d), np.empty(d)
    unseen, placeholder = [], []
    for j in range(d):      # post-processing of the release
        box = _scale_box(noisy[j], sigma, z, z_run)
        if box is None:
            unseen.append(j)
            box = _coarse_box(noisy[j], sigma, z)
        if box is None:
            placeholder.append(j)
            lo[j], hi[j] = _PLACEHOLDER
            continue
        lo[j], hi[j] = lower[box[0]], upper[box[1]]
    tiny = np.finfo(np.float64).tiny
    flat = hi <= lo                     # only the zero bin: any box around 0 will do
    lo[flat], hi[flat] = lo[flat] - tiny, hi[flat] + tiny
    # stage 2: refine inside the stage-1 box
    hist = rows.reduce(functools.partial(_histogram, "refine_histogram", n_threads, (d, REFINE_BINS),
                                         (lo, hi), columns=columns))
    noisy2 = layer.release({"domain_refine": hist}, 0)["domain_refine"]
    sigma, z = rel["domain_refine"].noise_scale, _z(2, 3 * REFINE_BINS * d)
    half_step = (hi / 2 - lo / 2) / REFINE_BINS       # edges in halves: no overflow near DBL_MAX
    boxes = {"bulk": (lo.copy(), hi.copy()), "core": (lo.copy(), hi.copy())}
    for j in range(d):
        for kind, rule in (("bulk", _refine_box), ("core", _core_box)):
            a, b = rule(noisy2[j], sigma, z)
            new_lo = 2 * (lo[j] / 2 + a * half_step[j])
            new_hi = hi[j] if b == REFINE_BINS - 1 else 2 * (lo[j] / 2 + (b + 1) * half_step[j])
            if new_hi > new_lo:             # else the box is too narrow to refine in floating point
                boxes[kind][0][j], boxes[kind][1][j] = new_lo, new_hi
    # stage 3: how many rows each candidate box leaves outside (released: public from here on)
    box_lo = np.stack([boxes["bulk"][0], boxes["core"][0]])
    box_hi = np.stack([boxes["bulk"][1], boxes["core"][1]])
    counts = rows.reduce(functools.partial(_outside_counts, box_lo, box_hi, columns))
    noisy3 = layer.release({"domain_outside": counts}, 0)["domain_outside"]
    out = coverage_report(noisy3, rel["domain_outside"].noise_scale, unseen, placeholder)
    lo2, hi2 = boxes[out["box"]]
    _warn_coverage(out, stacklevel + 1)
    if report is not None:
        report.update(out)
    return _box_domain(lo2, hi2, "private estimate")


def coverage_report(noisy_outside, sigma, unseen=(), placeholder=()):
    """What stage 3's release says (post-processing of it), as the privacy record shows it.

    ``noisy_outside``: the released counts of rows outside the bulk box, outside the core box,
    and the row count.  The fit keeps the core box (tighter where the noise keeps the bulk
    rule from cutting empty bins) when its released outside count plus two noise standard
    deviations is at most :data:`CORE_FRACTION` of the released row count; else the bulk box.
    Returns the chosen box (``box``), its released outside count and fraction (clipped to
    [0, 1]), the released row count, the release's noise σ, and the features stage 1 did not
    resolve (``unresolved``: given the coarser box; ``placeholder``: the placeholder box)."""
    bulk, core, n_hat = (float(v) for v in np.asarray(noisy_outside, dtype=np.float64))
    box = "core" if core + 2.0 * sigma <= CORE_FRACTION * max(n_hat, 0.0) else "bulk"
    outside = core if box == "core" else bulk
    return {"box": box, "outside_released": outside, "rows_released": n_hat,
            "outside_fraction": min(max(outside / max(n_hat, 1.0), 0.0), 1.0),
            "outside_noise": float(sigma),
            "unresolved": [int(j) for j in unseen], "placeholder": [int(j) for j in placeholder]}


def _warn_coverage(out, stacklevel):
    """Warn (released values and public constants only) when the box may not cover the data."""
    frac, n_hat, sigma = out["outside_fraction"], out["rows_released"], out["outside_noise"]
    why = []
    if out["placeholder"]:
        why.append(f"no release resolved the range of feature(s) {out['placeholder']}, which were given the "
                   f"public placeholder box {list(_PLACEHOLDER)}")
    if out["unresolved"] and set(out["unresolved"]) - set(out["placeholder"]):
        why.append(f"feature(s) {sorted(set(out['unresolved']) - set(out['placeholder']))} were resolved "
                   "only by summing neighbouring bins (a coarse box)")
    if frac > OUTSIDE_FRACTION:
        why.append(f"by the fit's released count, {100 * frac:.0f} % of the rows lie outside the box in at "
                   f"least one feature (more than {100 * OUTSIDE_FRACTION:g} %; the count's noise: σ = "
                   f"{sigma:.3g} rows); they are clipped to it")
    elif sigma > OUTSIDE_FRACTION * max(n_hat, 0.0) / 2:
        why.append(f"the released count of rows outside the box has noise σ = {sigma:.3g} rows, too much "
                   f"against the released row count ({n_hat:.0f}) to confirm that at least "
                   f"{100 - 100 * OUTSIDE_FRACTION:g} % of the rows are inside it")
    if why:
        warnings.warn("the privately estimated data domain may not cover the data: " + "; ".join(why)
                      + ". Declare bounds=(lower, upper) from public knowledge (the features' known "
                      "ranges); the box and the released outside fraction are in privacy_.data_domain.",
                      DomainCoverageWarning, stacklevel=stacklevel)


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
