"""The public cells of a numeric column in the marginals of
:class:`~dpem_fast.DPMixedMixture` (issue 37, "atoms"): point masses where a column has them.

A column's released histogram has :func:`column_cells` ``= bins + 4`` cells, fixed by ``bins``
alone (so the plan's shape is known before any box is released):

* **binned** (every column by default): cell 0 is the value *exactly* ``lo`` (the box's lower
  edge, declared or released), then the ``bins`` equal-width public bins of the box, then the
  value exactly ``hi``.  A value is clipped to the box first, so a value at or below ``lo`` is an
  atom there (96 % zero precipitation with ``lo = 0``; a saturated maximum at ``hi``).  Where 0
  lies strictly inside the box, the bin holding it is split into three cells in value order —
  its part below 0, the value **exactly 0** (an atom: sensor readings, balances, counts that are
  mostly zero in the middle of a symmetric box), its part above 0 — so that a column's zeros
  come back as zeros wherever 0 falls; otherwise the two extra cells are structurally empty
  (last, public).  Where 0 is in the box is a function of the public box alone;
* **integer**: a column declared an integer dtype (``dtypes``: the schema, never the values)
  whose box holds ``m`` integers, ``1 <= m <= bins + 2``: cell ``c < m`` is the integer
  ``ceil(lo) + c`` (a value rounded to the nearest integer, then clipped to those), cells ``m ..``
  are structurally empty (no row can fall there: public, and zeroed after the release).

Each value lies in exactly one cell of its column, whatever the rule: the stacked histograms
still add 1 to exactly one cell of each of the ``D`` columns per row, so the sensitivity is
the histograms' (``column_histograms``: ℓ2 √D add/remove, √(2D) replace; person level m times
these).  Which rule a column follows, and every cell's value range, are functions of the
public box, ``bins`` and the declared dtype only.

A cell has a left value and a width: a bin is ``[left, left + width)``, an atom or an integer has
width 0 (its value is exact).  The copula maps a value in a cell at fraction ``t`` of it to the
released CDF ``F_c + t p_c``; an atom or integer (a jump of the CDF) maps to its mid-rank
``t = 1/2``; sampling puts an atom's mass on its exact value.
"""
from __future__ import annotations

import numpy as np

__all__ = ["NumericCells", "column_cells", "integer_flags"]


def column_cells(bins):
    """Cells of a numeric column: ``bins`` bins (one split in two around 0), the two atoms at the
    box's edges and the atom at 0."""
    return int(bins) + 4


def integer_flags(dtypes, num_cols):
    """Which numeric columns are declared integers (the schema's released dtypes; an array's
    schema has none: no integer columns)."""
    if dtypes is None:
        return np.zeros(len(num_cols), dtype=bool)
    out = []
    for c in num_cols:
        try:
            out.append(np.dtype(str(dtypes[c])).kind in "iu")
        except TypeError:
            out.append(False)
    return np.array(out, dtype=bool)


def _bins(A, lo, hi, bins):
    """Bin and fraction inside it of every value of ``A`` (n, d) on ``bins`` equal-width bins of
    the box (values clipped to it first; the top edge in the last bin)."""
    v = np.clip(A, lo, hi)
    pos = (v / 2 - lo / 2) / (hi / 2 - lo / 2) * bins
    b = np.clip(np.floor(pos), 0, bins - 1)
    return b.astype(np.int64), np.clip(pos - b, 0.0, 1.0)


class NumericCells:
    """The cells of the ``d`` numeric columns (public values only: a pass's task may hold it):
    the box ``lo, hi``, ``bins``, and ``n_int[j]`` the integer cells of column j (0: binned)."""

    def __init__(self, lo, hi, bins, integer=None):
        self.lo, self.hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        self.bins = int(bins)
        integer = np.zeros(self.lo.size, dtype=bool) if integer is None else np.asarray(integer, dtype=bool)
        with np.errstate(over="ignore", invalid="ignore"):        # a box near the float range: not integer
            first, m = np.ceil(self.lo), np.floor(self.hi) - np.ceil(self.lo) + 1
        self.n_int = np.where(integer & (m >= 1) & (m <= self.n_cells), m, 0).astype(np.int64)
        self.first = first
        # binned columns with 0 strictly inside the box: the bin b0 holding 0 is split around it
        self.zero = (self.n_int == 0) & (self.lo < 0) & (self.hi > 0)
        with np.errstate(over="ignore", invalid="ignore"):
            b0, _ = _bins(np.zeros((1, self.lo.size)), self.lo, self.hi, self.bins)
        self.b0 = np.where(self.zero, b0[0], -1)

    @property
    def n_cells(self):
        return column_cells(self.bins)

    @property
    def d(self):
        return self.lo.size

    def cells(self, A):
        """Each value's cell (n, d) and its fraction inside it (1/2 in an atom or integer)."""
        A = np.asarray(A, dtype=np.float64)
        v = np.clip(A, self.lo, self.hi)
        b, t = _bins(v, self.lo, self.hi, self.bins)
        at_lo, at_hi = v <= self.lo, v >= self.hi
        hi_cell = np.where(self.zero, self.bins + 3, self.bins + 1)
        cell = np.where(at_lo, 0, np.where(at_hi, hi_cell, b + 1))
        t = np.where(at_lo | at_hi, 0.5, t)
        for j in np.flatnonzero(self.zero):
            self._split_zero(j, v[:, j], b[:, j], cell[:, j], t[:, j], at_lo[:, j] | at_hi[:, j])
        for j in np.flatnonzero(self.n_int):
            cell[:, j] = np.clip(np.rint(v[:, j]) - self.first[j], 0, self.n_int[j] - 1)
            t[:, j] = 0.5
        return cell.astype(np.int64), t

    def _bin_width(self):
        return (self.hi / 2 - self.lo / 2) * (2.0 / self.bins)   # halves: finite for any finite box

    def _split_zero(self, j, v, b, cell, t, edge):
        """Column j's cells and fractions around its atom at 0 (in place; ``edge``: the box's
        atoms, left as they are): bins above 0's bin ``b0`` move up two cells, and ``b0`` becomes
        its part below 0 (cell ``b0 + 1``), 0 itself (``b0 + 2``) and its part above 0 (``b0 + 3``)."""
        b0, w = self.b0[j], self._bin_width()[j]
        left = self.lo[j] + b0 * w
        right = left + w
        inner = ~edge
        above = inner & (b > b0)
        cell[above] += 2
        mid = inner & (b == b0)
        neg, pos = mid & (v < 0), mid & (v > 0)
        cell[mid & (v == 0)], t[mid & (v == 0)] = b0 + 2, 0.5
        cell[pos] = b0 + 3
        if left < 0:
            t[neg] = np.clip((v[neg] - left) / (0.0 - left), 0.0, 1.0)
        if right > 0:
            t[pos] = np.clip(v[pos] / right, 0.0, 1.0)

    def values(self):
        """Each cell's left value and width (d, n_cells): a bin's range, an atom's or an
        integer's exact value with width 0 (an empty integer cell: the last integer)."""
        d, B = self.d, self.bins
        w = self._bin_width()
        left = np.empty((d, self.n_cells))
        width = np.zeros((d, self.n_cells))
        left[:, 0] = self.lo
        left[:, 1:B + 1] = self.lo[:, None] + np.arange(B)[None, :] * w[:, None]
        width[:, 1:B + 1] = w[:, None]
        left[:, B + 1:] = self.hi[:, None]              # the atom at hi; structurally empty after it
        for j in np.flatnonzero(self.zero):             # bins b0 + 1 .. moved up two cells
            b0, lj, wj = self.b0[j], left[j].copy(), width[j].copy()
            start = lj[b0 + 1]
            left[j, b0 + 4:B + 3], width[j, b0 + 4:B + 3] = lj[b0 + 2:B + 1], wj[b0 + 2:B + 1]
            left[j, b0 + 1], width[j, b0 + 1] = start, max(0.0 - start, 0.0)
            left[j, b0 + 2], width[j, b0 + 2] = 0.0, 0.0
            left[j, b0 + 3], width[j, b0 + 3] = 0.0, max(start + wj[b0 + 1], 0.0)
            left[j, B + 3], width[j, B + 3] = self.hi[j], 0.0
        for j in np.flatnonzero(self.n_int):
            m = self.n_int[j]
            left[j] = self.first[j] + np.minimum(np.arange(self.n_cells), m - 1)
            width[j] = 0.0
        return left, width

    def structural(self):
        """Cells no value can fall in (d, n_cells): an integer column's beyond its integers, a
        binned column's two cells after its atom at hi where 0 is not inside its box."""
        out = np.zeros((self.d, self.n_cells), dtype=bool)
        out[~self.zero & (self.n_int == 0), self.bins + 2:] = True
        for j in np.flatnonzero(self.n_int):
            out[j, self.n_int[j]:] = True
        return out
