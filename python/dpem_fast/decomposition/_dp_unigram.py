"""The trivial private topic model: the unigram word distribution, released once.

It is the utility floor of :class:`~dpem_fast.decomposition.DPLatentDirichletAllocation`
(issue 23): a private topic model that is worse than the word distribution the same
(ε, δ) buys in one release has paid for nothing.  The LDA fit spends a share of its own
budget on this release and shrinks its topics towards it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._engine import PrivacyRecord, PrivateRun, StatSpec, make_plan
from .._engine._specs import float64_exact_sum_factor
from .._engine._estimator import PrivateEstimator, check_ledger
from .._engine._groups import bound_mask, bounding_key, check_groups
from .._rng import derive_key, make_key
from .._threads import effective_n_threads
from .._validation import check_delta, interval, validate_params
from .._kernels.lda_docs import _cap_documents, _check_counts, _clipped_count_sum
from ._lda_math import default_clip_norm, unigram_distribution

__all__ = ["PrivateUnigram", "private_unigram", "unigram_spec"]

#: :func:`private_unigram`'s parameters: the common ones as every private estimator's
_CONSTRAINTS = {**PrivateEstimator._parameter_constraints, "max_doc_length": [interval("int", 1)],
                "clip_norm": [None, interval("real", 0, None, "neither")],
                "pseudo_count": [interval("real", 0, None, "neither")]}


def unigram_spec(V, clip, n_public=None):
    """The released statistic ``u = Σ_d clip(c_d)``, (V,): Δ₂ = C under add/remove, √2 C under
    replace (derivation in :func:`private_unigram`), both widened by the float rounding of its
    exact per-word sums (:func:`~dpem_fast._engine._specs.float64_exact_sum_factor` at the public
    document count ``n_public`` of a document-level replace-one release, else at the public cap
    ``ROUNDING_ROW_CAP``)."""
    C = float(clip) * float64_exact_sum_factor(n_public)
    return StatSpec("unigram", (int(V),), {"add_remove": C, "replace": math.sqrt(2.0) * C})


@dataclass(frozen=True)
class PrivateUnigram:
    """A released unigram model.

    Attributes
    ----------
    distribution_ : ndarray of shape (n_features,)
        The word distribution (strictly positive, sums to 1): post-processing of the noisy
        clipped word counts.
    privacy_ : PrivacyRecord or None
        None for ``epsilon=inf``.
    """

    distribution_: np.ndarray
    privacy_: PrivacyRecord | None

    def score(self, X):
        """Total log-likelihood ``Σ_d Σ_v c_dv log p_v`` of the count matrix X: exact (the model has
        no latent variables), so it compares with :meth:`DPLatentDirichletAllocation.plugin_score
        <dpem_fast.decomposition.DPLatentDirichletAllocation.plugin_score>` (the same quantity for
        one topic), not with the LDA ``score`` (scikit-learn's variational bound)."""
        X = _as_counts(X, self.distribution_.size)
        return float(X.data @ np.log(self.distribution_[X.indices]))

    def perplexity(self, X):
        """Per-token perplexity ``exp(-score(X) / number of tokens)``: the floor that
        :meth:`DPLatentDirichletAllocation.plugin_perplexity
        <dpem_fast.decomposition.DPLatentDirichletAllocation.plugin_perplexity>` is compared with
        (not the LDA ``perplexity``, scikit-learn's bound)."""
        X = _as_counts(X, self.distribution_.size)
        n = X.data.sum()
        if n <= 0:
            raise ValueError("X: no tokens (perplexity is per token)")
        return float(np.exp(-self.score(X) / n))


def _as_counts(X, V=None):
    X = sp.csr_matrix(X, dtype=np.float64)
    if V is not None and X.shape[1] != V:
        raise ValueError(f"X has {X.shape[1]} columns, the model has {V} words")
    if not np.all(np.isfinite(X.data)):
        raise ValueError("X: counts must be finite (found NaN or inf)")
    _check_counts(X.data)
    X.eliminate_zeros()
    X.sort_indices()
    return X


def private_unigram(X, *, epsilon, delta=1e-5, neighbouring="add_remove", max_doc_length=500, clip_norm=None,
                    pseudo_count=0.5, accountant="rdp", budget=None, random_state=None, n_threads=None,
                    groups=None, max_rows_per_group=None):
    """Release the word distribution of a corpus with one Gaussian release.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_documents, n_terms)
        Term counts over a public vocabulary.
    epsilon : float
        ``numpy.inf``: the exact (capped, clipped) word frequencies, no privacy.
    delta : float, default=1e-5
    neighbouring : {"add_remove", "replace"}, default="add_remove"
        LDA's relation is add/remove; "replace" is offered for comparisons.
    max_doc_length : int, default=500
        N: documents longer than N tokens are cut to N tokens drawn without replacement
        (data-independent randomness), as in the LDA fit.
    clip_norm : float or None, default=None
        C: each document's count vector is scaled to L2 norm at most C.  Default
        ``N / sqrt(min(N, V))`` (:func:`~dpem_fast.decomposition._lda_math.default_clip_norm`):
        a document of N distinct terms is never clipped.
    pseudo_count : float, default=0.5
        Added to every word after the noise is thresholded (Jeffreys' prior).
    accountant : str, default="rdp"
    budget : BudgetLedger or None
        Charged before the statistic is computed.
    random_state : int, Generator or None
    n_threads : int or None
    groups : array-like of shape (n_documents,) or None
        Author-level privacy: the author of each document (with ``max_rows_per_group`` m, each
        author keeps at most m documents, chosen with the key; Δ₂ = m C, or m √2 C under
        replace; :mod:`dpem_fast._engine._groups`).

        .. versionadded:: 0.1 (issue 27)
    max_rows_per_group : int or None

    Returns
    -------
    PrivateUnigram

    Notes
    -----
    Released statistic: ``u = Σ_d clip(c_d)`` with ``c_d`` the capped count vector and
    ``clip(c) = c min(1, C / ‖c‖₂)``.  Adding or removing one document changes u by
    ``clip(c_d)``, of norm at most C: **Δ₂ = C under add/remove**.  Replacing one changes it
    by ``clip(c) − clip(c')`` with both non-negative, so ``‖·‖² ≤ ‖clip(c)‖² + ‖clip(c')‖² ≤
    2C²``: **Δ₂ = √2 C under replace** (tight for disjoint documents).  Each word's clipped
    counts are summed exactly and rounded once; the declared Δ₂ carries the float rounding that
    leaves (:func:`unigram_spec`; a release whose document count is private refuses more than
    ``ROUNDING_ROW_CAP`` documents before the charge).  Noise N(0, (zC)²) per
    word with z calibrated to (ε, δ) for one Gaussian release.  Post-processing (public
    constants only): hard threshold at ``sqrt(2 ln V)`` noise sds, the mass removed spread
    uniformly, plus ``pseudo_count``, normalised
    (:func:`~dpem_fast.decomposition._lda_math.unigram_distribution`).
    """
    validate_params(_CONSTRAINTS, {"epsilon": epsilon, "delta": delta, "neighbouring": neighbouring,
                                   "max_doc_length": max_doc_length, "clip_norm": clip_norm,
                                   "pseudo_count": pseudo_count, "budget": budget, "n_threads": n_threads,
                                   "random_state": random_state, "max_rows_per_group": max_rows_per_group})
    N, eps, m, pseudo = int(max_doc_length), float(epsilon), max_rows_per_group, float(pseudo_count)
    private = not math.isinf(eps)
    if private:
        check_delta(delta, "delta")               # the public δ policy: refuse or warn
    if (groups is None) != (m is None):
        raise ValueError("groups and max_rows_per_group go together: author-level privacy needs both")
    if groups is not None and not private:
        raise ValueError("groups: a non-private release (epsilon=inf) has no privacy unit")
    n_threads = effective_n_threads(n_threads)
    check_ledger(budget, private, neighbouring, "row" if m is None else "group")
    X = _as_counts(X)
    grouping = check_groups(groups, X.shape[0]) if groups is not None else None
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X: need at least one document and one term, got shape {X.shape}")
    V = X.shape[1]
    C = default_clip_norm(N, V) if clip_norm is None else float(clip_norm)
    key = make_key(random_state)
    if not private:
        Xc, _ = _cap_documents(X, derive_key(key, "unigram", "cap"), N)
        return PrivateUnigram(unigram_distribution(_clipped_count_sum(Xc, C), 0.0, pseudo), None)
    public_n = neighbouring == "replace" and m is None        # the document count is public
    spec = unigram_spec(V, C, X.shape[0] if public_n else None)
    plan = make_plan([spec], 1, epsilon=eps, delta=delta, neighbouring=neighbouring, accountant=accountant,
                     max_rows_per_group=m)
    # the one-shot path: a private count refused above the cap, then the charge, before the statistic
    run = PrivateRun(plan, derive_key(key, "unigram"), n_threads, budget=budget, label="private_unigram", delta=delta,
                     private_count=None if public_n else X.shape[0])
    if grouping is not None:              # at most m documents per author, after the charge
        X = X[np.flatnonzero(bound_mask(grouping, bounding_key(key), m, n_threads))]
    Xc, _ = _cap_documents(X, derive_key(key, "unigram", "cap"), N)
    r = plan.releases["unigram"]
    noisy, record = run.once(
        {"unigram": _clipped_count_sum(Xc, C)}, epsilon=eps,
        mechanism="unigram word distribution, one Gaussian release of per-document clipped counts",
        data_domain={"source": "token cap N and per-document clip C", "radius": r.sensitivity},
        notes=(f"clip norm C = {C:.6g}, token cap N = {N}",))
    return PrivateUnigram(unigram_distribution(noisy["unigram"], r.noise_scale, pseudo), record)
