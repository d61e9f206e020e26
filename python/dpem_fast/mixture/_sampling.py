"""Fast exact pieces of :meth:`DPMixedMixture.sample <dpem_fast.DPMixedMixture.sample>` (issue 37,
"``sample(1e6)`` in under a second"): post-processing of public values only.

Each function returns exactly what its straightforward form returns (the same floats, bit for
bit, for the same draws), only without a binary search or a row-by-category matrix per row:

* :func:`by_component`: the rows of each latent class, in row order (``np.flatnonzero(y == k)``
  for every k, from one stable sort);
* :func:`mixture_cdf`: each column's marginal CDF under the mixture, interpolated on a uniform
  grid (``np.interp``, its bracket found by arithmetic on the uniform grid and corrected against
  the grid's own values, then numpy's formula);
* :func:`search_right`: ``np.searchsorted(F, u, side="right")`` for ``u`` in [0, 1] through a
  table of :data:`TABLE_CELLS` cells of [0, 1] (a binary search only for the rows whose cell
  holds a knot of ``F``);
* :func:`draw_categories`: a category per row from its class's probabilities (the inverse CDF of
  the class's cumulative probabilities at ``u``, per class rather than per row).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.special import ndtr

__all__ = ["by_component", "cdf_grids", "mixture_cdf", "column_cdf", "parallel_map", "search_right", "draw_categories", "GRID", "CHUNK", "TABLE_CELLS"]

#: Points of the uniform grid the mixture's marginal CDFs are interpolated on.
GRID = 4097
#: Rows the column maps handle at a time (their temporaries stay in cache).
CHUNK = 1 << 16
#: Cells of [0, 1] in the table of :func:`search_right` (a power of two: ``u · cells`` is exact).
TABLE_CELLS = 4096


def by_component(y, K):
    """``[rows of class k, in increasing order] for k < K`` (one stable sort)."""
    order = np.argsort(y, kind="stable")
    ends = np.searchsorted(y[order], np.arange(K + 1), side="left")
    return [order[ends[k]:ends[k + 1]] for k in range(K)]


def _interp_uniform(x, xp, fp):
    """``np.interp(x, xp, fp)`` for ``x`` not NaN and a grid ``xp = np.linspace(xp[0], xp[-1],
    len(xp))`` (increasing): the bracket ``xp[j] <= x < xp[j + 1]`` by arithmetic, corrected by
    one step against ``xp`` itself, then numpy's ``slope_j (x − xp[j]) + fp[j]``."""
    m = xp.size
    h = (xp[-1] - xp[0]) / (m - 1)
    j = np.minimum(np.maximum(np.floor((x - xp[0]) / h), 0), m - 2).astype(np.intp)
    j -= (j > 0) & (x < xp[j])
    j += (j < m - 2) & (x >= xp[j + 1])
    slope = (fp[1:] - fp[:-1]) / (xp[1:] - xp[:-1])
    with np.errstate(invalid="ignore"):         # 0 · ∞ beyond the grid: set below
        out = slope[j] * (x - xp[j]) + fp[j]
    out[x < xp[0]] = fp[0]
    out[x >= xp[-1]] = fp[-1]
    return out


def cdf_grids(weights, means, sd, grid=GRID):
    """Each column's grid ``(z, G(z))`` of its marginal CDF under the mixture, ``G(z) = Σ_k π_k
    Φ((z − μ_kj)/σ_kj)`` on ``grid`` uniform points over ±9 σ about the components' means."""
    out = []
    for j in range(means.shape[1]):
        s = np.maximum(sd[:, j], 1e-12)
        zg = np.linspace(np.min(means[:, j] - 9 * s), np.max(means[:, j] + 9 * s), grid)
        out.append((zg, ndtr((zg[:, None] - means[None, :, j]) / s[None, :]) @ weights))
    return out


def mixture_cdf(Z, weights, means, sd, grid=GRID):
    """Each column's value of its marginal CDF under the mixture (:func:`cdf_grids`, linearly
    interpolated), clipped to [0, 1]; :data:`CHUNK` rows at a time (in cache)."""
    U = np.empty_like(Z)
    for j, (zg, G) in enumerate(cdf_grids(weights, means, sd, grid)):
        U[:, j] = column_cdf(np.ascontiguousarray(Z[:, j]), zg, G)
    return U


def column_cdf(z, zg, G):
    """One column's values ``z`` through its grid ``(zg, G)`` of :func:`cdf_grids` (as
    :func:`mixture_cdf`)."""
    u = np.empty_like(z)
    for a in range(0, z.size, CHUNK):
        u[a:a + CHUNK] = np.minimum(np.maximum(_interp_uniform(z[a:a + CHUNK], zg, G), 0.0), 1.0)
    return u


def parallel_map(fn, items, n_threads):
    """``[fn(x) for x in items]`` on up to ``n_threads`` threads (numpy's loops release the GIL),
    in order: the same results whatever the thread count, for ``fn`` without shared state."""
    items = list(items)
    if n_threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(min(int(n_threads), len(items))) as pool:
        return list(pool.map(fn, items))


def search_right(F, u, cells=TABLE_CELLS):
    """``np.searchsorted(F, u, side="right")`` for a nondecreasing ``F`` and ``u`` in [0, 1]:
    ``u`` in cell ``i = ⌊u · cells⌋`` starts from the answer at ``i / cells``; only the rows
    whose cell holds a knot of ``F`` (the answer moves inside it) are searched."""
    edges = np.arange(cells + 1) / cells
    table = np.searchsorted(F, edges, side="right")
    inside = (u >= 0.0) & (u <= 1.0)            # else (NaN too) searched
    i = np.minimum((np.where(inside, u, 0.0) * cells).astype(np.intp), cells - 1)
    out = table[i]
    moves = np.flatnonzero((table[i + 1] != out) | ~inside)
    if moves.size:
        out[moves] = np.searchsorted(F, u[moves], side="right")
    return out


def draw_categories(probs, groups, r, C):
    """The slot of each row from its uniform ``r`` in [0, 1): row i of class k takes the first
    slot s with ``r[i] · cdf_k[-1] < cdf_k[s]`` (``cdf_k`` the cumulative sum of ``probs[k]``: a
    draw from ``probs[k]`` renormalised), at most ``C``; ``groups`` the rows of each class
    (:func:`by_component`)."""
    slot = np.empty(r.size, dtype=np.int64)
    for k, rows in enumerate(groups):
        if rows.size:
            cdf = np.cumsum(probs[k])
            slot[rows] = np.minimum(np.searchsorted(cdf, r[rows] * cdf[-1], side="right"), C)
    return slot
