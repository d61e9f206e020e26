"""Marginals first (issue 37): the released 1-way histograms of a mixed table and the Gaussian
copula the mixture of :class:`~dpem_fast.DPMixedMixture` lives in.

One release, made once before the EM loop in the fit's one plan (a one-off of
:func:`~dpem_fast._engine._plan.make_plan`, charged with it, recorded in ``privacy_.releases``
as ``"marginals"``): one histogram per column, stacked —

* a numeric column on its :func:`~._atoms.column_cells` public cells (:mod:`._atoms`): the
  atoms "exactly lo" and "exactly hi" of its box (the declared box, or the one released by the
  private domain estimate; a value is clipped to the box first, as the kernel clipped it) and
  :data:`MARGINAL_BINS` equal-width bins between them (as the domain estimate's
  ``refine_histogram``), or, for a column declared an integer dtype whose box holds at most as
  many integers as that, one cell per integer;
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
* a numeric value ``x`` in cell ``b`` at fraction ``t`` of it maps to
  ``z = Φ⁻¹(clip(F_b + t p_b, α, 1 − α))`` (``F`` the released CDF, piecewise linear; an atom's
  or integer's jump at its mid-rank, ``t = 1/2``; α =
  :data:`U_CLIP`): a deterministic function of the row and released values, in the public box
  ``[−z_max, z_max]`` (:data:`Z_MAX`) — the mixture's numeric domain;
* sampling draws ``z`` from the mixture and maps each column back through ``u = G_j(z_j)``,
  ``G_j`` the mixture's own marginal CDF of that column, and the inverse of the released CDF
  (uniform within a bin, an atom's or integer's exact value): each column of the synthetic table has the released 1-way
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
from .._threads import blas_single_thread, effective_n_threads
from .._validation import check_positive_int
from ._atoms import NumericCells, _bins, column_cells, integer_flags
from ._sampling import CHUNK, by_component, cdf_grids, column_cdf, draw_categories, parallel_map, search_right

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


def marginal_counts(num_cols, cells, cat_cols, n_categories, X):
    """The stacked histograms of one block of rows (a pass's kernel: a module function of public
    values): ``cells.n_cells`` per numeric column (:class:`~._atoms.NumericCells`: the atoms at
    the box's edges and its bins, or the integers), ``C_j + 1`` per categorical one (the codes
    ``0 .. C_j - 1``; anything else, a missing value included, in the last: "other")."""
    parts = []
    d = len(num_cols)
    if d:
        c, _ = cells.cells(np.asarray(X[:, list(num_cols)], dtype=np.float64))
        B = cells.n_cells
        parts.append(np.bincount((c + B * np.arange(d)).ravel(), minlength=d * B))
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
    """The released marginals, post-processed: the numeric columns' public cells ``cells``
    (:class:`~._atoms.NumericCells`: box, bins, atoms, integers) and CDFs ``cdf`` (d,
    n_cells + 1) over them; categorical probabilities ``cats`` (one array of ``C_j + 1`` per
    column, "other" last).  Public values only: a Dask task of a pass may hold it."""

    def __init__(self, cells, cdf, cats=()):
        self.cells = cells
        self.cdf = np.asarray(cdf, dtype=np.float64)
        self.cats = [np.asarray(c, dtype=np.float64) for c in cats]

    @classmethod
    def from_counts(cls, counts, layout, cells):
        """The noisy stacked counts post-processed by :func:`projected_tables`, without the
        structurally empty cells (an integer column's beyond its integers: public), which stay 0."""
        d, B = layout.d, cells.n_cells
        counts = np.asarray(counts, dtype=np.float64)
        empty = cells.structural()
        live = np.concatenate([~empty.ravel(), np.ones(counts.size - d * B, dtype=bool)])
        n_live = [int(B - np.count_nonzero(empty[j])) for j in range(d)]
        probs = projected_tables(counts[live], n_live + [int(c) + 1 for c in layout.n_categories])
        cdf = np.ones((d, B + 1))
        for j in range(d):
            cdf[j, 0] = 0.0
            cdf[j, 1:n_live[j] + 1] = np.minimum(np.cumsum(probs[j]), 1.0)
            cdf[j, n_live[j]] = 1.0
        return cls(cells, cdf, probs[d:])

    @property
    def lo(self):
        return self.cells.lo

    @property
    def hi(self):
        return self.cells.hi

    def to_z(self, A):
        """The copula's z-values of numeric rows ``A`` (n, d) in the original units: ``Φ⁻¹`` of
        the released CDF at the value (an atom or integer at its mid-rank)."""
        if not A.shape[1]:
            return A
        c, t = self.cells.cells(A)
        j = np.arange(A.shape[1])
        left, right = self.cdf[j, c], self.cdf[j, c + 1]
        return ndtri(np.clip(left + t * (right - left), U_CLIP, 1.0 - U_CLIP))

    def from_u(self, U, cells=None):
        """Values with probability-integral transforms ``U`` (n, d): the inverse of each released
        CDF, uniform within a bin, an atom's or integer's exact value (``cells``: an (n, d)
        array to write each value's cell in, or None)."""
        out = np.empty_like(U)
        for j in range(U.shape[1]):
            out[:, j] = self.column_from_u(j, np.ascontiguousarray(U[:, j]), None if cells is None else cells[:, j])
        return out

    def column_from_u(self, j, u, cells=None):
        """Column j's values with probability-integral transforms ``u`` (n,), as :meth:`from_u`
        (``cells``: an (n,) array to write the cells in, or None)."""
        out = np.empty_like(u)
        left, width = self.cells.values()
        top = self.cells.n_cells - 1
        F = self.cdf[j]
        p = F[1:] - F[:-1]
        safe = np.where(p > 0, p, 1.0)
        for a in range(0, u.size, CHUNK):             # in cache
            v = u[a:a + CHUNK]
            c = np.minimum(np.maximum(search_right(F, v) - 1, 0), top)
            frac = np.where(p[c] > 0, (v - F[c]) / safe[c], 0.5)
            out[a:a + CHUNK] = left[j, c] + np.minimum(np.maximum(frac, 0.0), 1.0) * width[j, c]
            if cells is not None:
                cells[a:a + CHUNK] = c
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
        cells = lay.d * column_cells(MARGINAL_BINS) + sum(int(c) + 1 for c in lay.n_categories)
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
    def _numeric_cells(self, lo, hi):
        """The numeric columns' public cells on the box ``lo, hi`` (declared or released): the
        integer rule for the columns the fit's schema declares integers (``dtypes``)."""
        schema = self._schema()
        return NumericCells(lo, hi, MARGINAL_BINS, integer_flags(schema.dtypes, schema.layout.num_cols))

    def _count_marginals(self, rows, cells):
        lay = self._layout
        return rows.reduce(functools.partial(marginal_counts, tuple(int(c) for c in lay.num_cols), cells,
                                             tuple(int(c) for c in lay.cat_cols),
                                             tuple(int(c) for c in lay.n_categories)))

    def _release_marginals(self, rows, layer):
        """The marginals' one-off release through ``layer`` (index 0); post-processing after it.
        Returns the rows the mixture sees (numeric columns in the copula's z-values)."""
        if not self._uses_marginals():
            return rows
        lay = self._layout
        lo, hi = self._fit_box if lay.d else (np.zeros(0), np.zeros(0))
        cells = self._numeric_cells(lo, hi)
        noisy = layer.release({MARGINALS: self._count_marginals(rows, cells)}, 0)[MARGINALS]
        self._fit_marginals = Marginals.from_counts(noisy, lay, cells)
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
            cells = self._numeric_cells(lo, hi)
            self._fit_marginals = Marginals.from_counts(self._count_marginals(rows, cells), lay, cells)
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
        if cdf is None:
            return None
        schema = self._fitted_schema()
        cells = NumericCells(self.bounds_[0], self.bounds_[1], MARGINAL_BINS,
                             integer_flags(schema.dtypes, schema.layout.num_cols))
        return Marginals(cells, cdf)

    # ------------------------------------------------------------- sampling
    def sample(self, n_samples=1, *, other="drop", random_state=None):
        """Synthetic rows from the fitted (private) model: post-processing, no extra privacy cost.

        Numeric columns are drawn from the component's Gaussian (with marginals: in the
        copula's space, then mapped through each column's released marginal, so each column has
        its released 1-way distribution) and clipped to ``bounds_`` (integer columns rounded);
        categorical columns from the component's category probabilities.  Calibrated
        (``calibrate="pairs"``): the rows are resampled from at least 65,536 model rows by raking
        weights towards the released pair tables, looked up cell by cell from factors fitted once
        per model (:mod:`dpem_fast.mixture._calibrate`).

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
        schema = self._fitted_schema()
        Z, y, M = self._draw_rows(self._pool_size(n), other, rng)     # calibrated: a pool (else n rows)
        Z, y = self._calibrated(Z, y, M, n, rng, other)     # n of them by their raked weights, if calibrated
        return schema.decode(Z, None if self.bounds_ is None else (self.bounds_[0], self.bounds_[1])), y

    def _draw_rows(self, n, other, rng):
        """``n`` rows (numeric values in the original units, category codes, −1 "other"), their
        latent classes and (with marginals) their numeric values' marginal cells, drawn from the
        model with ``rng``."""
        schema = self._fitted_schema()
        lay = schema.layout
        weights = np.asarray(self.weights_, dtype=np.float64) / np.sum(self.weights_)
        y = rng.choice(self.n_components_, size=n, p=weights)
        groups = by_component(y, self.n_components_)
        Z = np.zeros((n, len(schema.names)))
        M = None
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
            if marg is not None:    # each column through the mixture's CDF and the released one
                sd = np.sqrt(covs[:, np.arange(lay.d), np.arange(lay.d)] if covs.ndim == 3 else covs)
                grids, M = cdf_grids(weights, means, sd), np.empty((lay.d, n), dtype=np.int32)

                def column(j):
                    u = column_cdf(np.ascontiguousarray(draws[:, j]), *grids[j])
                    return marg.column_from_u(j, u, M[j])
                draws = np.column_stack(parallel_map(column, range(lay.d), effective_n_threads(self.n_threads)))
                M = M.T
            Z[:, num] = draws
        for col, probs, C in zip(lay.cat_cols, self.category_probs_, lay.n_categories):
            probs = np.asarray(probs, dtype=np.float64)
            slot = draw_categories(probs[:, :C] if other == "drop" else probs, groups, rng.random(n), C)
            Z[:, col] = np.where(slot < C, slot, -1)
        return Z, y, M

