"""2-way calibration of :class:`~dpem_fast.DPMixedMixture` (issue 37, ``calibrate="pairs"``):
noisy 2-way tables of column pairs released once before EM, and ``sample`` raked towards them.

One more one-off release in the fit's one plan (charged with it, recorded in
``privacy_.releases`` as ``"pairs"``), made right after the marginals: for each of the ``P``
column pairs of :func:`column_pairs` (a public rule: every pair of up to :data:`MAX_COLUMNS`
columns, else the pairs of columns at most ``w`` apart in the table's order, ``w`` the largest
that keeps ``P`` at most ``MAX_COLUMNS (MAX_COLUMNS − 1)/2``) the table of counts on a public
grid of cells per column —

* a numeric column: :data:`PAIR_BINS` equal-width public bins of its box (the marginals' box,
  declared or released; values clipped to it first);
* a categorical column: its declared categories and the "other" slot.

A row adds 1 to exactly one cell of each of the ``P`` tables, so the stacked tables are
:func:`~dpem_fast._engine._specs.column_histograms` over ``P`` "columns": ℓ2 √P (add/remove)
and √(2P) (replace), an integer statistic; person level m times these (the engine's group
rule).  Its share of the whole plan is :data:`PAIR_SHARE` (a public constant, the same for
every table and ε), taken from the same budget: the plan's ε is unchanged, the EM rounds get
less.

Post-processing (public values only): each table is projected onto the simplex scaled to the
mean noisy total and normalised (as the marginals, ``_marginals.projected_tables``).
``sample(n)`` draws a pool of :data:`POOL_MIN` rows from the model, weights them by truncated
raking (iterative proportional fitting over the ``P`` tables, :data:`RAKE_ROUNDS` sweeps, each
weight kept within a factor :data:`WEIGHT_CAP` of the mean) so that the pool's weighted pair
tables approach the released ones (each sweep ends with the columns' released 1-way
distributions, the marginals', less noisy than the pair tables), and resamples ``n`` rows by
those weights (systematic resampling, in a random order; a row's later copies get numeric
values drawn afresh within its cells), so the cost of raking does not grow with ``n``: per-cell raking factors fitted on one pool and looked up for fresh rows were measured
and do not transfer (flights at ε = 10: 2-way TVD .14 against the raked pool's .044; the
factors of a few pool rows in a rare cell grow without bound).
"""
from __future__ import annotations

import functools

import numpy as np

from .._engine._specs import column_histograms
from ._atoms import _bins
from ._marginals import category_cells, projected_tables

__all__ = ["PAIRS", "PAIR_BINS", "PAIR_SHARE", "MAX_COLUMNS", "POOL_MIN", "column_pairs", "pair_counts",
           "pair_tables", "rake_weights", "CalibrationMixin"]

PAIRS = "pairs"
#: Public bins of a numeric column's box in a pair table (the marginals' 64 merged four to one).
PAIR_BINS = 16
#: Fraction of the whole plan on the pair tables: MST's 2-way share less its selection's.
PAIR_SHARE = 1.0 / 3.0
#: Every pair of columns up to this many columns (66 pairs); a band of neighbours beyond.
MAX_COLUMNS = 12
#: Rows of the pool ``sample`` rakes (at least; ``n`` when more).
POOL_MIN = 1 << 16
#: Sweeps over the pair tables.
RAKE_ROUNDS = 20
#: Each raked weight stays within this factor of the mean weight.
WEIGHT_CAP = 20.0


def column_pairs(D):
    """The released pairs ``(a, b)``, ``a < b``, of ``D`` columns (public: ``D`` only)."""
    limit = MAX_COLUMNS * (MAX_COLUMNS - 1) // 2
    w = D - 1
    while w > 1 and sum(D - k for k in range(1, w + 1)) > limit:
        w -= 1
    return tuple((a, b) for a in range(D) for b in range(a + 1, min(D, a + w + 1)))


def _sizes(layout):
    """Cells per column, in the table's column order."""
    sizes = np.empty(layout.d + len(layout.cat_cols), dtype=np.int64)
    sizes[list(layout.num_cols)] = PAIR_BINS
    for col, C in zip(layout.cat_cols, layout.n_categories):
        sizes[col] = int(C) + 1
    return sizes


def _cells(X, num_cols, lo, hi, cat_cols, n_categories):
    """Each value's cell (n, D): a numeric value's public bin of its box, a category's code
    (anything else, a missing value included, in the last slot: "other")."""
    X = np.asarray(X, dtype=np.float64)
    out = np.empty(X.shape, dtype=np.int64)
    if len(num_cols):
        out[:, list(num_cols)] = _bins(X[:, list(num_cols)], lo, hi, PAIR_BINS)[0]
    for col, C in zip(cat_cols, n_categories):
        out[:, col] = category_cells(X[:, col], C)
    return out


def pair_counts(num_cols, lo, hi, cat_cols, n_categories, pairs, sizes, X):
    """The stacked pair tables of one block of rows (a pass's kernel: a module function of public
    values): for each pair ``(a, b)`` the ``sizes[a] × sizes[b]`` counts, row-major."""
    cells = _cells(X, num_cols, lo, hi, cat_cols, n_categories)
    parts = [np.bincount(cells[:, a] * sizes[b] + cells[:, b], minlength=int(sizes[a] * sizes[b]))
             for a, b in pairs]
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)


def pair_tables(noisy, pairs, sizes):
    """The released tables, post-processed: each projected onto the simplex scaled to the mean
    noisy total, then normalised (a list of ``(sizes[a], sizes[b])`` probability tables)."""
    probs = projected_tables(noisy, [int(sizes[a] * sizes[b]) for a, b in pairs])
    return [q.reshape(int(sizes[a]), int(sizes[b])) for (a, b), q in zip(pairs, probs)]


def rake_weights(index, targets, rounds=RAKE_ROUNDS, cap=WEIGHT_CAP):
    """Weights of ``n`` pool rows whose weighted tables approach ``targets``: ``index[t]`` (n,)
    the cell of each row in table ``t``, ``targets[t]`` its probabilities (truncated iterative
    proportional fitting, the tables in order each sweep; mean weight 1, each in ``[1/cap, cap]``)."""
    n = index[0].size if index else 0
    w = np.ones(n)
    for _ in range(rounds):
        for i, t in zip(index, targets):
            cur = np.bincount(i, w, minlength=t.size)
            cur /= cur.sum()
            ratio = np.where(cur > 0, t / np.where(cur > 0, cur, 1.0), 1.0)
            new = w * ratio[i]
            total = new.sum()
            if total > 0:           # else the table's mass lies where the pool has none: skipped
                w = np.clip(new * (n / total), 1.0 / cap, cap)
    return w / w.sum()


class CalibrationMixin:
    """The ``calibrate="pairs"`` parts of :class:`~dpem_fast.DPMixedMixture` (the plan's pair
    release, the released tables, the raked sample); placed before ``MarginalsMixin``."""

    def _calibrates(self):
        """Whether a fit releases the pair tables (public parameters only): ``"pairs"``, or
        ``"auto"`` whenever the fit releases the marginals."""
        c = self.calibrate
        return c == "pairs" or (c == "auto" and self._uses_marginals())

    def _check_marginals(self):
        """``calibrate`` with ``marginals`` (declared values only, before the charge); resets the
        fit's released tables."""
        super()._check_marginals()
        if self.calibrate == "pairs" and not self._uses_marginals():
            raise ValueError("calibrate='pairs' needs the marginals (marginals='auto' with a box, or 'copula'): "
                             "its numeric cells are public bins of their box")
        self.pair_tables_ = None

    def _pair_specs(self, n_features):
        if not (self._calibrates() and self._uses_marginals()):
            return ()
        lay = self._lay(n_features)
        sizes = _sizes(lay)
        pairs = column_pairs(sizes.size)
        if not pairs:
            return ()
        return (column_histograms(PAIRS, len(pairs), int(sum(sizes[a] * sizes[b] for a, b in pairs))),)

    def _one_off_releases(self, d):
        """The marginals and, calibrated, the pair tables (on :data:`PAIR_SHARE` of the plan)."""
        specs, shares = super()._one_off_releases(d)
        pair = self._pair_specs(d)
        return tuple(specs) + pair, {**shares, **({PAIRS: PAIR_SHARE} if pair else {})}

    def _count_pairs(self, rows, lo, hi):
        lay = self._layout
        sizes = _sizes(lay)
        kernel = functools.partial(pair_counts, tuple(int(c) for c in lay.num_cols), lo, hi,
                                   tuple(int(c) for c in lay.cat_cols), tuple(int(c) for c in lay.n_categories),
                                   column_pairs(sizes.size), tuple(int(s) for s in sizes))
        return rows.reduce(kernel)

    def _release_marginals(self, rows, layer):
        """The pair tables' one-off release through ``layer`` (index 0) on the original rows,
        then the marginals' (post-processing after each)."""
        if self._pair_specs(rows.n_features):
            lay = self._layout
            lo, hi = self._fit_box if lay.d else (np.zeros(0), np.zeros(0))
            noisy = layer.release({PAIRS: self._count_pairs(rows, lo, hi)}, 0)[PAIRS]
            sizes = _sizes(lay)
            self.pair_tables_ = pair_tables(noisy, column_pairs(sizes.size), sizes)
        return super()._release_marginals(rows, layer)

    def _fit_exact(self, rows, key, n_threads):
        """``epsilon=inf``: the exact pair tables on the marginals' box, after the exact fit."""
        out = super()._fit_exact(rows, key, n_threads)
        m = getattr(self, "_fit_marginals", None)
        if self._pair_specs(rows.n_features) and m is not None:
            sizes = _sizes(self._layout)
            self.pair_tables_ = pair_tables(self._count_pairs(rows, m.lo, m.hi), column_pairs(sizes.size), sizes)
        return out

    # ------------------------------------------------------------- sampling
    def _table_cells(self, Z, M):
        """Each row's cell in every column's grids, ``G`` (D + d, n) int32: rows ``0 .. D - 1`` a
        column's pair-table cell (a numeric column's bin of :data:`PAIR_BINS`, the midpoint's
        of its marginal cell ``M``: the marginals' 64 bins merged four to one, an atom or integer
        in its value's bin; a category's code, "other" last), rows ``D + j`` numeric column j's
        marginal cell (``M``: the draw's own)."""
        lay = self._fitted_schema().layout
        D = lay.d + len(lay.cat_cols)
        G = np.empty((D + lay.d, Z.shape[0]), dtype=np.int32)
        if lay.d:
            cells = self._fitted_marginals().cells
            left, width = cells.values()
            mid = _bins((left + width / 2).T, cells.lo, cells.hi, PAIR_BINS)[0].T      # (d, n_cells)
            for j, col in enumerate(lay.num_cols):
                G[lay.d + len(lay.cat_cols) + j] = M[:, j]
                G[col] = mid[j][M[:, j]]
        for col, C in zip(lay.cat_cols, lay.n_categories):
            G[col] = category_cells(Z[:, col], C)
        return G

    def _tables(self):
        """The calibration tables in raking order: the pair tables ``(a, b, size of b, target)``,
        then each column's released 1-way distribution ``(a, None, 0, target)`` (less noisy:
        last in each sweep): a numeric column's marginal cells, a categorical column's
        categories under the model's raked probabilities; ``a, b`` rows of :meth:`_table_cells`."""
        lay = self._fitted_schema().layout
        D = lay.d + len(lay.cat_cols)
        out = [(a, b, t.shape[1], t.ravel()) for (a, b), t in zip(column_pairs(D), self.pair_tables_)]
        if lay.d:
            cdf = self._fitted_marginals().cdf
            out += [(D + j, None, 0, np.diff(cdf[j])) for j in range(lay.d)]
        w = np.asarray(self.weights_, dtype=np.float64)
        for col, probs in zip(lay.cat_cols, self.category_probs_):
            out.append((col, None, 0, (w / w.sum()) @ np.asarray(probs, dtype=np.float64)))
        return out

    def _pool_size(self, n):
        return POOL_MIN if getattr(self, "pair_tables_", None) is not None else n

    def _calibrated(self, Z, y, M, n, rng, other):
        """``n`` rows resampled from the pool ``Z`` (numeric values in the original units,
        category codes, −1 "other"; ``M`` their numeric columns' marginal cells) by its raked
        weights (the identity without calibration).  A pool row drawn more than once: its later
        copies' numeric values are drawn afresh, uniformly within its marginal cells (an atom's or
        integer's exact value), so copies differ."""
        if getattr(self, "pair_tables_", None) is None:
            return Z, y
        G = self._table_cells(Z, M)
        tables = self._tables()
        w = rake_weights([_index(G, a, b, s) for a, b, s, _ in tables], [t for *_, t in tables])
        pick, copies = _systematic(w, n, rng)
        out = np.take(Z, pick, axis=0)
        if M is not None:
            rows = np.flatnonzero(copies)
            left, width = self._fitted_marginals().cells.values()
            for j, col in enumerate(self._fitted_schema().layout.num_cols):
                c = M[pick[rows], j]
                out[rows, col] = left[j][c] + rng.random(rows.size) * width[j][c]
        return out, np.take(y, pick)


def _systematic(w, n, rng):
    """``n`` row indices by the weights ``w`` — systematic resampling (one uniform, ``n`` evenly
    spaced points on the weights' cumulative sum: row i appears ``⌊n p_i⌋`` or ``⌈n p_i⌉``
    times), in a random order — and which of them repeat an index drawn before them in the
    sorted draw (every copy but one of each row)."""
    c = np.cumsum(w)
    c /= c[-1]
    pick = np.minimum(np.searchsorted(c, (np.arange(n) + rng.random()) / n, side="right"), w.size - 1)
    copies = np.zeros(n, dtype=bool)
    copies[1:] = pick[1:] == pick[:-1]
    order = rng.permutation(n)
    return pick[order], copies[order]


def _index(G, a, b, size_b):
    """The cells of table ``(a, b)`` (one column's, ``b`` None) from the grid cells ``G``."""
    return G[a] if b is None else G[a] * size_b + G[b]
