"""Marginals first (issue 37): the released 1-way histograms of a mixed table and the Gaussian
copula the mixture of :class:`~dpem_fast.DPMixedMixture` lives in.

One release, made once before the EM loop in the fit's one plan (a one-off of
:func:`~dpem_fast._engine._plan.make_plan`, charged with it, recorded in ``privacy_.releases``
as ``"marginals"``): one histogram per column, stacked —

* a numeric column on :data:`MARGINAL_BINS` equal-width public bins of its box (the declared
  box, or the one released by the private domain estimate; a value is clipped to the box
  first, as the kernel clipped it, and bins as the domain estimate's ``refine_histogram``);
* a categorical column on its declared categories and the "other" slot (unknown or missing).

A row adds 1 to one cell of each of the ``D`` columns:
:func:`~dpem_fast._engine._specs.column_histograms`, ℓ2 √D (add/remove) and √(2D) (replace),
an integer statistic; person level m times these (the engine's group rule).  Its share of the
whole plan is :data:`MARGINAL_SHARE` = 1/3, the fraction MST gives its 1-way marginals (a
public constant, the same for every table and ε, not tuned on one).

Post-processing of the release (public values only from here on):

* each column's noisy counts are projected onto the simplex scaled to the released row count
  (the mean of the columns' noisy totals; "norm-sub": subtract one threshold, clip at 0), so
  noise in empty cells does not become mass;
* a numeric value ``x`` in bin ``b`` at fraction ``t`` of it maps to
  ``z = Φ⁻¹(clip(F_b + t p_b, α, 1 − α))`` (``F`` the released CDF, piecewise linear; α =
  :data:`U_CLIP`): a deterministic function of the row and released values, in the public box
  ``[−z_max, z_max]`` (:data:`Z_MAX`) — the mixture's numeric domain;
* sampling draws ``z`` from the mixture and maps each column back through ``u = G_j(z_j)``,
  ``G_j`` the mixture's own marginal CDF of that column, and the inverse of the released CDF
  (uniform within a bin): each column of the synthetic table has the released 1-way
  distribution exactly (up to sampling), whatever the mixture learned of it;
* the category probabilities are raked (iterative proportional fitting) so that the
  mixture's category marginals are the released ones.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
from scipy.special import ndtri
from sklearn.utils.validation import check_is_fitted

from .._engine._specs import column_histograms
from .._preprocess import box_domain
from .._threads import blas_single_thread
from .._validation import check_positive_int
from ._sampling import CHUNK, by_component, draw_categories, mixture_cdf, search_right

__all__ = ["MARGINALS", "MARGINAL_BINS", "MARGINAL_SHARE", "U_CLIP", "Z_MAX", "Marginals", "marginal_counts",
           "category_cells", "projected_tables", "MarginalsMixin"]

MARGINALS = "marginals"
#: Public bins of a numeric column's box.
MARGINAL_BINS = 64
#: Fraction of the whole plan (μ² in Gaussian units) on the marginals: MST's share of its 1-way ones.
MARGINAL_SHARE = 1.0 / 3.0
#: The copula's uniforms are clipped to [α, 1 − α]: its z-values to the public box [−Z_MAX, Z_MAX].
U_CLIP = 1e-3
Z_MAX = float(ndtri(1.0 - U_CLIP))
_RAKE_ROUNDS = 50
#: Raked category probabilities are at least this (as the fit's own, ``_dp_mixed.PROB_FLOOR``).
PROB_FLOOR = 1e-10


def _bins(A, lo, hi, bins):
    """Bin and fraction inside it of every value of ``A`` (n, d) on ``bins`` equal-width bins of
    the box (values clipped to it first; the top edge in the last bin)."""
    v = np.clip(A, lo, hi)
    pos = (v / 2 - lo / 2) / (hi / 2 - lo / 2) * bins
    b = np.clip(np.floor(pos), 0, bins - 1)
    return b.astype(np.int64), np.clip(pos - b, 0.0, 1.0)


def marginal_counts(num_cols, lo, hi, bins, cat_cols, n_categories, X):
    """The stacked histograms of one block of rows (a pass's kernel: a module function of public
    values): ``bins`` cells per numeric column, ``C_j + 1`` per categorical one (the codes
    ``0 .. C_j - 1``; anything else, a missing value included, in the last: "other")."""
    parts = []
    d = len(num_cols)
    if d:
        b, _ = _bins(np.asarray(X[:, list(num_cols)], dtype=np.float64), lo, hi, bins)
        parts.append(np.bincount((b + bins * np.arange(d)).ravel(), minlength=d * bins))
    for col, C in zip(cat_cols, n_categories):
        parts.append(np.bincount(category_cells(X[:, col], C), minlength=C + 1))
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)


def category_cells(codes, C):
    """A categorical column's cells: the codes ``0 .. C - 1``, and ``C`` ("other") for anything
    else, a missing value included (the marginals' and the pair tables' rule)."""
    codes = np.asarray(codes, dtype=np.float64)
    ok = (codes >= 0) & (codes < C) & (codes == np.floor(codes))
    return np.where(ok, codes, C).astype(np.int64)


def _simplex(h, total):
    """``h`` projected onto ``{p >= 0, Σ p = total}`` (Euclidean: one threshold, then clip)."""
    s = np.sort(h)[::-1]
    css = np.cumsum(s) - total
    k = np.arange(1, s.size + 1)
    rho = np.nonzero(s - css / k > 0)[0]
    tau = css[rho[-1]] / (rho[-1] + 1) if rho.size else css[-1] / s.size
    return np.maximum(h - tau, 0.0)


def projected_tables(counts, sizes):
    """The stacked noisy tables ``counts`` (``sizes[t]`` cells each), each projected onto the
    simplex scaled to the mean noisy total (:func:`_simplex`: noise in empty cells does not become
    mass) and normalised (uniform where nothing is left): the marginals' and the pair tables'
    post-processing."""
    parts = np.split(np.asarray(counts, dtype=np.float64), np.cumsum(sizes)[:-1])
    total = max(float(np.mean([p.sum() for p in parts])), 1.0) if parts else 1.0
    out = []
    for c in parts:
        p = _simplex(c, total)
        out.append(p / p.sum() if p.sum() > 0 else np.full(c.size, 1.0 / c.size))
    return out


class Marginals:
    """The released marginals, post-processed: numeric boxes ``lo, hi`` and CDFs ``cdf`` (d,
    bins + 1) on the public bins; categorical probabilities ``cats`` (one array of ``C_j + 1``
    per column, "other" last).  Public values only: a Dask task of a pass may hold it."""

    def __init__(self, lo, hi, cdf, cats=()):
        self.lo, self.hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        self.cdf = np.asarray(cdf, dtype=np.float64)
        self.cats = [np.asarray(c, dtype=np.float64) for c in cats]

    @classmethod
    def from_counts(cls, counts, layout, lo, hi, bins=MARGINAL_BINS):
        d = layout.d
        probs = projected_tables(counts, [bins] * d + [int(c) + 1 for c in layout.n_categories])
        cdf = np.zeros((d, bins + 1))
        for j in range(d):
            cdf[j, 1:] = np.minimum(np.cumsum(probs[j]), 1.0)
            cdf[j, -1] = 1.0
        return cls(lo, hi, cdf, probs[d:])

    @property
    def bins(self):
        return self.cdf.shape[1] - 1

    def to_z(self, A):
        """The copula's z-values of numeric rows ``A`` (n, d) in the original units."""
        if not A.shape[1]:
            return A
        b, t = _bins(np.asarray(A, dtype=np.float64), self.lo, self.hi, self.bins)
        j = np.arange(A.shape[1])
        left, right = self.cdf[j, b], self.cdf[j, b + 1]
        return ndtri(np.clip(left + t * (right - left), U_CLIP, 1.0 - U_CLIP))

    def from_u(self, U):
        """Values with probability-integral transforms ``U`` (n, d): the inverse of each released
        CDF, uniform within a bin."""
        out = np.empty_like(U)
        w = (self.hi - self.lo) / self.bins
        for j in range(U.shape[1]):
            F = self.cdf[j]
            width = F[1:] - F[:-1]
            safe = np.where(width > 0, width, 1.0)
            col = np.ascontiguousarray(U[:, j])
            for a in range(0, col.size, CHUNK):             # in cache
                u = col[a:a + CHUNK]
                b = np.minimum(np.maximum(search_right(F, u) - 1, 0), self.bins - 1)
                frac = np.where(width[b] > 0, (u - F[b]) / safe[b], 0.5)
                out[a:a + CHUNK, j] = self.lo[j] + (b + np.minimum(np.maximum(frac, 0.0), 1.0)) * w[j]
        return out


def to_model_space(X, layout, marginals):
    """Rows with their numeric columns replaced by the copula's z-values (a new float64 array);
    ``X`` itself without marginals."""
    if marginals is None or not layout.d:
        return X
    Z = np.array(X, dtype=np.float64, copy=True)
    num = list(layout.num_cols)
    Z[:, num] = marginals.to_z(Z[:, num])
    return Z


def clipped_before(stats, X, layout, marginals):
    """``stats`` with the rows whose numeric values the copula's map clipped to the box (outside
    it in some column) counted in its ``n_clipped`` diagnostic (not private)."""
    A = np.asarray(X[:, list(layout.num_cols)], dtype=np.float64)
    out = int(np.count_nonzero(np.any((A < marginals.lo) | (A > marginals.hi), axis=1)))
    return dataclasses.replace(stats, n_clipped=stats.n_clipped + out)


def copula_domain(d):
    """The mixture's numeric domain with marginals: the public box ``[−Z_MAX, Z_MAX]^d``."""
    return box_domain(np.full(d, -Z_MAX), np.full(d, Z_MAX))


def rake(weights, theta, target, rounds=_RAKE_ROUNDS):
    """Category probabilities ``theta`` (K, m) scaled per category and renormalised per
    component until ``weights @ theta`` is ``target`` (iterative proportional fitting)."""
    theta = np.array(theta, dtype=np.float64)
    for _ in range(rounds):
        cur = weights @ theta
        theta *= np.where(cur > 0, target / np.where(cur > 0, cur, 1.0), 0.0)
        theta /= np.maximum(theta.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    return theta


class MarginalsMixin:
    """The marginals-first parts of :class:`~dpem_fast.DPMixedMixture` (the plan with the
    marginals' one-off release, the copula's domain, the exact fit's marginals, ``sample``)."""

    # ------------------------------------------------------------- decisions
    def _uses_marginals(self):
        """Whether a fit releases the marginals (public parameters only): ``marginals="copula"``,
        or ``"auto"`` unless the numeric domain is a ball without a box (``data_norm`` only)."""
        m = self.marginals
        return m == "copula" or (m == "auto" and (self.bounds is not None or self.data_norm is None))

    def _check_marginals(self):
        """``marginals`` with the domain's declaration (before anything is charged; its values are
        declared constraints); resets the fit's released marginals."""
        if self.marginals == "copula" and self.bounds is None and self.data_norm is not None:
            raise ValueError("marginals='copula' needs a box for the numeric columns (bounds, or bounds=None "
                             "without data_norm for the private estimate); data_norm alone declares a ball")
        self._fit_marginals = None
        self._fit_box = None

    def _marginal_specs(self, n_features):
        if not self._uses_marginals():
            return ()
        lay = self._lay(n_features)
        D = lay.d + len(lay.cat_cols)
        cells = lay.d * MARGINAL_BINS + sum(int(c) + 1 for c in lay.n_categories)
        return (column_histograms(MARGINALS, D, cells),)

    # ------------------------------------------------------------------ plan
    def _one_off_releases(self, d):
        """The marginals among the plan's one-off releases (the engine's hook), on
        :data:`MARGINAL_SHARE` of the whole plan."""
        specs = self._marginal_specs(d)
        return specs, ({MARGINALS: MARGINAL_SHARE} if specs else {})

    def _working_domain(self, domain):
        """With marginals the mixture's numeric domain is the copula's public box; the box of
        the original units (declared or released) is kept for the marginals' bins."""
        if not self._uses_marginals() or domain is None or domain.bounds is None:
            return domain
        self._fit_box = (np.array(domain.bounds[0], dtype=np.float64), np.array(domain.bounds[1], dtype=np.float64))
        return copula_domain(domain.center.size)

    def _domain_record(self, domain, source, coverage=None):
        """The record's domain: with marginals, the numeric box in the data's units (declared or
        released: the marginals' bins), beside the copula's public box the mixture works in."""
        box = getattr(self, "_fit_box", None)
        if box is None or domain is None:
            return super()._domain_record(domain, source, coverage)
        out = super()._domain_record(box_domain(*box), source, coverage)
        out["model_space"] = f"Gaussian copula of the released marginals, box [-{Z_MAX:.4g}, {Z_MAX:.4g}] per column"
        return out

    # ------------------------------------------------------------ releases
    def _count_marginals(self, rows, lo, hi):
        lay = self._layout
        return rows.reduce(functools.partial(marginal_counts, tuple(int(c) for c in lay.num_cols), lo, hi,
                                             MARGINAL_BINS, tuple(int(c) for c in lay.cat_cols),
                                             tuple(int(c) for c in lay.n_categories)))

    def _release_marginals(self, rows, layer):
        """The marginals' one-off release through ``layer`` (index 0); post-processing after it.
        Returns the rows the mixture sees (numeric columns in the copula's z-values)."""
        if not self._uses_marginals():
            return rows
        lay = self._layout
        lo, hi = self._fit_box if lay.d else (np.zeros(0), np.zeros(0))
        noisy = layer.release({MARGINALS: self._count_marginals(rows, lo, hi)}, 0)[MARGINALS]
        self._fit_marginals = Marginals.from_counts(noisy, lay, lo, hi)
        if not lay.d or not hasattr(rows, "with_transform"):
            return rows
        return rows.with_transform(functools.partial(to_model_space, layout=lay, marginals=self._fit_marginals))

    def _fit_exact(self, rows, key, n_threads):
        """``epsilon=inf``: the exact marginals on the declared box (else the data's: not
        private), then the engine's exact EM in the copula's space."""
        if self._marginal_specs(rows.n_features):
            lay = self._layout
            lo = hi = np.zeros(0)
            if lay.d:
                num = list(lay.num_cols)
                if self._domain_source() == "declared":
                    lo, hi = self._declared_domain(lay.d).bounds
                else:
                    lo, hi = rows.summary.column_min[num], rows.summary.column_max[num]
                lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
                hi = np.where(hi > lo, hi, lo + 1.0)
            self._fit_marginals = Marginals.from_counts(self._count_marginals(rows, lo, hi), lay, lo, hi)
        return super()._fit_exact(rows, key, n_threads)

    def _set_marginals(self):
        """Fitted attributes of the marginals (post-processing): the numeric CDFs and box, the
        category probabilities raked to the released category marginals."""
        m = self._fit_marginals
        self.marginal_cdf_ = None if m is None else m.cdf.copy()
        if m is None:
            return
        if m.cdf.shape[0]:
            self.bounds_ = np.stack([m.lo, m.hi])
        w = np.asarray(self.weights_, dtype=np.float64)
        raked = [np.maximum(rake(w, p, t), PROB_FLOOR) for p, t in zip(self.category_probs_, m.cats)]
        self.category_probs_ = [p / p.sum(axis=1, keepdims=True) for p in raked]     # log θ stays finite

    def _fitted_marginals(self):
        cdf = getattr(self, "marginal_cdf_", None)
        return None if cdf is None else Marginals(self.bounds_[0], self.bounds_[1], cdf)

    # ------------------------------------------------------------- sampling
    def sample(self, n_samples=1, *, other="drop", random_state=None):
        """Synthetic rows from the fitted (private) model: post-processing, no extra privacy cost.

        Numeric columns are drawn from the component's Gaussian (with marginals: in the
        copula's space, then mapped through each column's released marginal, so each column has
        its released 1-way distribution) and clipped to ``bounds_`` (integer columns rounded);
        categorical columns from the component's category probabilities.  Calibrated
        (``calibrate="pairs"``): the rows are drawn from a larger pool raked towards the released
        pair tables (:mod:`dpem_fast.mixture._calibrate`).

        Parameters
        ----------
        n_samples : int
        other : {"drop", "missing"}, default="drop"
            ``"drop"``: every categorical value is one of the column's declared categories
            (drawn from them, renormalised), so a column the input had no missing values in has
            none.  ``"missing"`` (explicit opt-in): a draw of the "other" slot (unknown or
            missing categories; noise keeps its probability above zero even when the data has
            none) becomes a missing value.

            .. versionchanged:: 0.1 (issue 37) the default was ``"missing"``.
        random_state : None, int or Generator

        Returns
        -------
        X : pandas DataFrame with the fitted columns and dtypes (fitted on a DataFrame), else an
            ndarray of shape (n_samples, n_features) with the category codes (-1: "other")
        y : ndarray of shape (n_samples,)
            The latent class of each row.
        """
        check_is_fitted(self, "category_probs_")
        n = check_positive_int(n_samples, "n_samples")
        if other not in ("missing", "drop"):
            raise ValueError(f"other must be 'drop' or 'missing', got {other!r}")
        rng = np.random.default_rng(random_state)
        n_out, n = n, self._pool_size(n)        # calibrated: a pool to rake (else n itself)
        schema = self._fitted_schema()
        lay = schema.layout
        weights = np.asarray(self.weights_, dtype=np.float64) / np.sum(self.weights_)
        y = rng.choice(self.n_components_, size=n, p=weights)
        groups = by_component(y, self.n_components_)
        Z = np.zeros((n, len(schema.names)))
        if lay.d:
            num = list(lay.num_cols)
            means = np.asarray(self.means_, dtype=np.float64)
            covs = np.asarray(self.covariances_, dtype=np.float64)
            ct = self._ctype
            draws = np.empty((n, lay.d))
            with blas_single_thread():      # (rows, d) @ (d, d): threads only cost (30x on 2 cores)
                for k, rows in enumerate(groups):
                    if rows.size:
                        draws[rows] = ct.draw(rng, means[k], ct.component(covs, k), rows.size)
            marg = self._fitted_marginals()
            if marg is not None:
                sd = np.sqrt(covs[:, np.arange(lay.d), np.arange(lay.d)] if covs.ndim == 3 else covs)
                draws = marg.from_u(mixture_cdf(draws, weights, means, sd))
            Z[:, num] = draws
        for col, probs, C in zip(lay.cat_cols, self.category_probs_, lay.n_categories):
            probs = np.asarray(probs, dtype=np.float64)
            slot = draw_categories(probs[:, :C] if other == "drop" else probs, groups, rng.random(n), C)
            Z[:, col] = np.where(slot < C, slot, -1)
        Z, y = self._calibrated(Z, y, n_out, rng)     # n_out rows by their raked weights, if calibrated
        return schema.decode(Z, None if self.bounds_ is None else (self.bounds_[0], self.bounds_[1])), y

