"""Python face of the mixed-table E-step kernel (``dpem_fast._dpcore._mixed``).

A latent-class mixture over rows with numeric and categorical columns: component k is a
Gaussian over the numeric columns (full or diagonal covariance) times one categorical
distribution per discrete column.  One fused pass gives the additive statistics of the
M-step, named for the engine's :class:`~dpem_fast._engine.Statistics`::

    counts           N_k = Σ_i γ_ik                      (K,)
    first_moments    S1_k = Σ_i γ_ik z_i                 (K, d)
    second_moments   S2_k = Σ_i γ_ik z_i z_iᵀ  (K, d, d), or Σ_i γ_ik z_i² (K, d) for "diag"
    category_counts  T_k[m] = Σ_i γ_ik [slot m is one of row i's categories]     (K, M)

(z: the numeric columns, mapped into the unit ball of a domain when one is given).  They
are *not* private: noise is added only by the engine's release layer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._dpcore import _contract, _mixed
from .._engine import Statistics
from .._preprocess import clip_target
from .._threads import effective_n_threads
from .._validation import as_kernel_rows
from .gmm import COUNTS, FIRST, SECOND, log_normalizers, log_normalizers_diag

__all__ = ["CATEGORIES", "MixedLayout", "mixed_stats", "mixed_log_resp"]

#: Name of the per-component category sums.
CATEGORIES = "category_counts"


@dataclass(frozen=True)
class MixedLayout:
    """Which columns of the rows are numeric and which hold category codes (public).

    ``num_cols`` and ``cat_cols`` index the D columns of the rows; ``n_categories[j]`` is
    the number of declared categories C_j of column ``cat_cols[j]``.  Column j owns the slots
    ``offset[j] .. offset[j] + C_j`` of the flat category axis (M slots in all); the last is
    "other": a value that is not an integer code in ``[0, C_j)`` (an unknown or missing
    category) falls there.
    """

    num_cols: tuple
    cat_cols: tuple
    n_categories: tuple

    def __post_init__(self):
        for name in ("num_cols", "cat_cols", "n_categories"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        if len(self.cat_cols) != len(self.n_categories):
            raise ValueError("cat_cols and n_categories must have the same length")
        if any(c < 1 for c in self.n_categories):
            raise ValueError("every categorical column needs at least one declared category")

    @property
    def d(self):
        return len(self.num_cols)

    @property
    def offset(self):
        """``(J + 1,)``: the first slot of each categorical column, and M."""
        return np.concatenate([[0], np.cumsum(np.asarray(self.n_categories, dtype=np.intp) + 1)]).astype(np.intp)

    @property
    def n_slots(self):
        return int(self.offset[-1])

    def arrays(self):
        return (np.asarray(self.num_cols, dtype=np.intp), np.asarray(self.cat_cols, dtype=np.intp), self.offset)


def _params(X, layout, weights, means, prec, log_theta, covariance_type):
    X = as_kernel_rows(X)
    K, d, M = np.shape(weights)[0], layout.d, layout.n_slots
    means = np.ascontiguousarray(np.reshape(means, (K, d)), dtype=np.float64)
    diag = covariance_type == "diag"
    P = np.asarray(prec, dtype=np.float64)
    if P.shape != ((K, d) if diag else (K, d, d)):
        raise ValueError(f"precision factors must have shape {(K, d) if diag else (K, d, d)}, got {P.shape}")
    log_theta = np.ascontiguousarray(log_theta, dtype=np.float64)
    if log_theta.shape != (K, M):
        raise ValueError(f"log category probabilities must have shape {(K, M)}, got {log_theta.shape}")
    if max(layout.num_cols + layout.cat_cols, default=-1) >= X.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns; the layout names column "
                         f"{max(layout.num_cols + layout.cat_cols)}")
    if diag:
        log_const = log_normalizers_diag(weights, P)
        flat, upper = np.ascontiguousarray(P), True
    else:
        upper = not np.any(np.tril(P, -1))
        log_const = log_normalizers(weights, P, upper)
        flat = np.ascontiguousarray(P.reshape(K, d * d))
    return X, means, flat, diag, upper, log_const, log_theta


def mixed_stats(X, layout, weights, means, prec, log_theta, covariance_type="full", n_threads=None,
                domain=None) -> Statistics:
    """One fused E-step pass of the mixed mixture over ``X``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, D), float32 or float64
        Numeric values and category codes in the columns ``layout`` names.
    layout : MixedLayout
    weights : ndarray of shape (K,)
    means : ndarray of shape (K, d)
    prec : ndarray of shape (K, d, d) or (K, d)
        Precision Cholesky factors (``precision_k = P_k P_kᵀ``), or for
        ``covariance_type="diag"`` the diagonal factors (1 / standard deviations).
    log_theta : ndarray of shape (K, M)
        Log category probabilities per component, over the layout's slots.
    covariance_type : {"full", "diag"}
    n_threads : int or None
        OpenMP threads; the result is bit-identical for every value.
    domain : DataDomain or None
        If given, the numeric columns are mapped into its unit ball as they are loaded (the
        parameters are then in those units).

    Returns
    -------
    Statistics
        ``counts``, ``first_moments``, ``second_moments`` (exactly symmetric for "full"),
        ``category_counts``; ``n_rows``, ``loglik`` and ``n_clipped`` as diagnostics.

    Notes
    -----
    Equivalent to :func:`dpem_fast._reference.mixed.mixed_stats_reference`.
    """
    X, means, P, diag, upper, log_const, log_theta = _params(X, layout, weights, means, prec, log_theta,
                                                             covariance_type)
    n = X.shape[0]
    K, d, M = means.shape[0], layout.d, layout.n_slots
    nt = effective_n_threads(n_threads)
    nb = _mixed.block_count(n, d, K, M, diag)
    part_nk = np.empty((nb, K))
    part_s1 = np.empty((nb, K, d))
    part_s2 = np.empty((nb, K, d if diag else d * d))
    part_cat = np.empty((nb, K, M))
    part_ll = np.empty(nb)
    kw = {}
    if domain is not None and d > 0:
        kw = dict(domain=domain.loader_array(), clip_target=clip_target(d, np.float64),
                  part_clipped=np.zeros(nb, dtype=np.int64))
    _mixed.mixed_stats(X, *layout.arrays(), means, P, diag, upper, log_const, log_theta,
                       part_nk, part_s1, part_s2, part_cat, part_ll, nt, **kw)
    # exact (sum_blocks: every entry the correctly rounded sum of its blocks; issue 34)
    nk = _contract.sum_blocks(part_nk, nt)
    s1 = _contract.sum_blocks(part_s1, nt)
    s2 = _contract.sum_blocks(part_s2, nt)
    cat = _contract.sum_blocks(part_cat, nt)
    if not diag:      # mirror the upper triangle (as the GMM's compute_stats: bit for bit)
        s2 = s2.reshape(K, d, d)
        dg = np.diagonal(s2, axis1=1, axis2=2).copy()
        s2 += s2.transpose(0, 2, 1)
        s2.reshape(K, d * d)[:, :: d + 1] = dg
    loglik = float(np.add.reduce(part_ll)) if nb else 0.0
    n_clipped = int(kw["part_clipped"].sum()) if kw else 0
    return Statistics({COUNTS: nk, FIRST: s1, SECOND: s2, CATEGORIES: cat}, int(n), loglik, n_clipped)


def mixed_log_resp(X, layout, weights, means, prec, log_theta, covariance_type="full", n_threads=None):
    """Log responsibilities (n, K) and per-row log-likelihood (n,) in the dtype of ``X``
    (rows and parameters in the same units; no domain map)."""
    X, means, P, diag, upper, log_const, log_theta = _params(X, layout, weights, means, prec, log_theta,
                                                             covariance_type)
    n, K = X.shape[0], means.shape[0]
    out = np.empty((n, K), dtype=X.dtype)
    ll = np.empty(n, dtype=X.dtype)
    _mixed.mixed_log_resp(X, *layout.arrays(), means, P, diag, upper, log_const, log_theta, out, ll,
                          effective_n_threads(n_threads))
    return out, ll
