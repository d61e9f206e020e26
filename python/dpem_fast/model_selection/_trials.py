"""The parts of the trials of :class:`~dpem_fast.model_selection.PrivateModelSelection` around
the candidate's own fit: the Gaussian-only check of a candidate's plan, the split (public
coins), one trial's ε, each hold-out row's score, its public interval and the exact clipped sum
of the scores (the secret count T and each trial's candidate are the engine's selection loop's,
:mod:`~dpem_fast._engine._selection_loop`).  The proof is in ``docs/model_selection.rst``,
"Privacy analysis in full"."""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import accounting as acc
from .._dpcore import _rng as _core_rng
from .._dpcore import _contract
from .._preprocess import resolve_domain, scale_and_clip
from .._rng import derive_key

#: Smallest covariance eigenvalue of a private mixture in the working units (the M-step's
#: floor is at least this): the log density of a fitted Gaussian mixture is at most
#: ``-(d/2) log(2π · SCORE_FLOOR)`` there.
SCORE_FLOOR = 1e-6


def _gaussian_mu2(event):
    """μ² of a plan's event made of Gaussian mechanisms only (their composition is μ-GDP with
    μ² = Σ 1/z², Dong, Roth & Su 2022, Cor. 2: the exact GDP accountant's); None if it holds
    any other mechanism."""
    try:
        return acc.GDPAccountant(neighbouring=event.neighbouring).compose(event).mu ** 2
    except acc.UnsupportedEventError:
        return None


def _holdout_mask(key, n, share, n_threads):
    """Each row independently in the hold-out part with probability ``share`` (public
    randomness of the fit's key; one uniform per row, whatever the thread count)."""
    u = np.empty(n)
    _core_rng.fill_uniform(derive_key(key, "selection", "split"), 0, u, n_threads)
    return u < share


def _group_holdout_mask(key, grouping, share, n_threads):
    """A person-level selection's split: each group's rows all in the hold-out part or all in
    the training part, one coin per group, probability ``share`` (group g's coin is the first
    word of its stream under the split's sub-key: independent of every other group, of the row
    order and of the thread count)."""
    words = np.empty(grouping.streams.size, dtype=np.uint64)
    _core_rng.fill_keyed_words(derive_key(key, "selection", "split", "groups"), grouping.streams,
                               np.zeros(grouping.streams.size, dtype=np.uint64), words, n_threads)
    return (words < np.uint64(int(share * 2.0 ** 64)))[grouping.codes]


@functools.lru_cache(maxsize=64)
def _trial_epsilon(mu, rel, delta):
    """The ε at ``delta`` of one μ-GDP trial (exact GDP): every candidate's calibration target
    (computed once per selection, not once per trial)."""
    return acc.GDPAccountant(neighbouring=rel).compose(
        acc.NeighbouringEvent(rel, acc.GaussianEvent(1.0 / mu))).get_epsilon(delta)


def score_range(estimator, n_features):
    """The public interval ``[L, U]`` each hold-out row's score is clipped to (working units).

    k-means (a model with ``n_clusters``): minus the squared distance to the nearest centre;
    rows and centres lie in the unit ball, so ``[-4, 0]``.  A density model: its log density
    in the working units (rows mapped into the unit ball by the declared domain); a Gaussian
    mixture whose covariance eigenvalues are at least :data:`SCORE_FLOOR` has log density at
    most ``U = -(d/2) log(2π SCORE_FLOOR)``, and ``L = 2 log u - U`` with ``u`` the uniform
    density on the domain's image (the interval is symmetric about the uniform model's
    score).  Public quantities only: d, the declared domain, a constant.
    """
    if "n_clusters" in estimator.get_params(deep=False):
        return -4.0, 0.0
    d = int(n_features)
    params = estimator.get_params(deep=False)
    domain = resolve_domain(d, params.get("data_norm"), params.get("bounds"))
    if domain.bounds is not None and params.get("data_norm") is None:
        log_u = -d * math.log(2.0 / math.sqrt(d))          # the cube [-1/√d, 1/√d]^d
    else:                                                   # the unit ball
        log_u = math.lgamma(d / 2.0 + 1.0) - (d / 2.0) * math.log(math.pi)
    upper = -(d / 2.0) * math.log(2.0 * math.pi * SCORE_FLOOR)
    return 2.0 * log_u - upper, upper


def row_scores(model, X, domain):
    """Each row's score under a fitted candidate, in the working units of ``domain`` (rows
    clipped into it as a fit clips them): minus the squared distance to the nearest centre,
    or the log density (``score_samples`` in the original units plus ``Σ log s_i``, the
    Jacobian of the public map).  No row, no score: an empty hold-out part (a data outcome,
    not an error) gives an empty array, whose sum is 0."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] == 0:
        return np.zeros(0)
    Z = scale_and_clip(X, domain)[0]
    if hasattr(model, "cluster_centers_"):
        C = domain.to_scaled(np.asarray(model.cluster_centers_, dtype=np.float64))
        sq = np.full(Z.shape[0], np.inf)
        for c in C:
            sq = np.minimum(sq, np.sum((Z - c) ** 2, axis=1))
        return -sq
    return np.asarray(model.score_samples(domain.to_original(Z)), dtype=np.float64) \
        + float(np.sum(np.log(domain.scale)))


def clipped_score_sum(v, bounds):
    """The hold-out score of one trial before its noise: ``Σ_i (clip(v_i, L, U) - (L + U)/2)``
    (NaN counts as L, ±inf as U / L), each term in ``[-(U - L)/2, (U - L)/2]``; 0 for no row.
    The terms are summed exactly and rounded once (``_contract.sum_blocks``, ``math.fsum``'s
    value): the release's float rounding is then bounded by
    :func:`~dpem_fast._engine._specs.float64_exact_sum_factor` (docs/model_selection.rst, Privacy)."""
    lo, hi = bounds
    v = np.clip(np.nan_to_num(np.asarray(v, dtype=np.float64), nan=lo, posinf=hi, neginf=lo), lo, hi)
    return float(_contract.sum_blocks((v - 0.5 * (lo + hi)).reshape(-1, 1))[0])
