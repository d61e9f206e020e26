"""Audit of a private estimator's releases: an empirical lower bound on ε.

What is audited (white-box).  A fit releases statistics ``f_r(D; θ)`` plus noise through the
release layer; its plan declares each release's sensitivity ``Δ_r`` under the fit's
neighbouring relation and its noise.  The declared sensitivity holds for *every* parameter
value θ the fit may reach (under adaptive composition the adversary may as well have chosen
θ), so the audit fixes one public θ (the estimator's data-independent initialisation, from
``random_state``; for a mixture, sharpened so that the sensitivity is attained) and runs the
release path on a neighbouring pair:

* ``neighbouring="replace"``: D is the base data with row 0 set to a canary ``x``, D′ the same
  with row 0 set to ``x′``;
* ``neighbouring="add_remove"``: D is the base data with ``x``, D′ the base data without it.

The canaries are searched over the boundary of the domain (:mod:`~dpem_fast.audit._targets`):
each candidate's contribution is computed with the estimator's own kernel, and the pair with
the largest ``‖f(D′) − f(D)‖`` (each release's coordinates divided by its noise scale) is
chosen; then ``f(D)`` and ``f(D′)`` are computed with the kernel on the whole datasets.

Scopes.  ``"release"``: one release (by default the most informative); the claim is that
release's own ε.  ``"iteration"``: every release of one round, jointly; the claim is the
round's ε (its joint multiplier, or the composition of its releases).  ``"fit"``: every
round's releases, ``J`` rounds at the fixed parameters (the worst case that the composition
theorem covers); the claim is the accountant's ε for the plan's iteration part
(``SelfComposedEvent(step, J)``: the whole plan's ε when the plan has no one-off releases, so
the accountant's arithmetic is audited too).  A subsampled plan (LDA's Poisson minibatches)
has no fit scope: with the canary in every batch the amplification the plan counts on is
gone, so the audit would exceed a correct claim (also DP-SEP's ``sampling="uniform"``).

Trials.  Every trial goes through :meth:`ReleaseLayer.release` (and so the sampler
:func:`~dpem_fast._engine._release.add_noise`) with the release records of the plan the
estimator calibrates: the trials of a chunk are one release of the plan's record stacked
``m`` times (``shape = (m, *shape)``: i.i.d. noise of the plan's scale, mirrored per trial for
a symmetric statistic, rounded onto the lattice for a discrete one — exactly as ``m``
separate releases), by the layer of a run (no ledger) keyed ``derive_key(key, "audit", side, chunk)``.
The auditor projects each noisy output (the noised coordinates — the upper triangle of a symmetric
statistic — each divided by its noise scale, stacked over the audited releases and summed
over the rounds) on the unit direction ``u`` of ``f(D′) − f(D)`` in the same units.  The two
samples go to :func:`gdp_lower_bound` (default for continuous Gaussian releases; the samples'
spread is estimated, not taken from the plan, so a sampler that adds less noise than the plan
says raises the bound) or :func:`threshold_lower_bound` (distribution-free, the only method
for Laplace or discrete Gaussian releases; the threshold is chosen on the first third of each
side's trials — the one whose bound is largest there — and the bound is computed on the other
two thirds, which never saw it).  Results depend on ``random_state`` only, never
on the thread count (the sampler's streams are addressed by key).

Black-box mode.  The auditor sees only the fitted model: ``n_trials`` whole fits per side
(each with its own seed) on the same canary pair, and the score the fitted model gives the
canary (``score_samples``, else ``score``) as the statistic; the threshold test is chosen and
judged as the white-box threshold method's.  The claim is the whole fit's ε.  Much weaker than the
white-box audit (the final parameters are a lossy post-processing of the releases); its use
is an end-to-end check that needs nothing of the estimator's internals but ``fit``.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone

from .. import accounting as acc
from .._engine._loops import PrivateRun
from .._engine._plan import stacked_plan
from .._engine._base import PrivateEM
from .._engine._estimator import PrivateEstimator
from .._rng import derive_key, make_key
from .._threads import effective_n_threads
from ._bounds import cp_upper, gdp_epsilon, gdp_lower_bound, threshold_lower_bound
from ._targets import EMTarget, LDATarget, SEPTarget

__all__ = ["AuditResult", "audit"]

MODES = ("white-box", "black-box")
METHODS = ("gdp", "threshold")
SCOPES = ("release", "iteration", "fit")
#: trials per side by default (white-box): the GDP interval's relative width is about
#: 2.3 √(2/n) / μ, ≈ 0.1 at the per-release μ ≈ 0.04 of a 20-iteration fit at ε = 1
DEFAULT_TRIALS = 1_000_000
#: ... and for scope="fit", whose μ is the whole fit's (≈ 0.27 at ε = 1, δ = 1e-5): ≈ 0.04
DEFAULT_FIT_TRIALS = 100_000
#: whole fits per side by default (black-box)
DEFAULT_FITS = 500
_CHUNK = 65_536          # trials drawn per add_noise call


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`.

    Attributes
    ----------
    epsilon_lower : float
        Lower bound on ε at ``delta``, valid with probability ``confidence``.
    epsilon_claimed : float
        What the plan claims for what was audited (``claimed_for``).
    confidence : float
    n_trials : int
        Trials per side (D and D′): noisy releases (white-box) or whole fits (black-box).
    canary : dict
        ``relation``, ``rows_per_group`` (m copies of the row make a person-level canary; 1 at
        the row level), ``row`` (x: on D, user units; for LDA the canary document's counts) and
        ``replacement`` (x′ on D′ under replace-one; None under add/remove), ``attained``:
        ``‖f(D′) − f(D)‖`` in noise units over the claim's μ (1: the worst case is reached).
    statistic : str
        The audited release, ``"iteration"``, ``"fit"``, or ``"score"`` (black-box).
    mode : str
    method : str
        ``"gdp"`` or ``"threshold"``.
    delta : float
    claimed_for : str
        ``"release"``, ``"iteration"`` or ``"fit"``.
    plan_epsilon : float
        ε of the whole fit's plan.
    mu_lower, mu_claimed : float or None
        The Gaussian-DP parameters behind the two ε (``mu_lower`` is None for the threshold
        method; ``mu_claimed`` None where the claim is not a Gaussian one).
    notes : tuple of str
    """

    epsilon_lower: float
    epsilon_claimed: float
    confidence: float
    n_trials: int
    canary: dict
    statistic: str
    mode: str
    method: str
    delta: float
    claimed_for: str = "release"
    plan_epsilon: float = math.nan
    mu_lower: float | None = None
    mu_claimed: float | None = math.nan
    notes: tuple = field(default_factory=tuple)

    @property
    def audited(self):
        """What was audited, in words: ``"release 'counts'"``, ``"one iteration (all its releases)"``,
        ``"the whole fit"`` or ``"the whole fit, black-box (the canary's score)"``."""
        if self.mode == "black-box":
            return "the whole fit, black-box (the canary's score)"
        if self.claimed_for == "fit":
            return "the whole fit"
        if self.claimed_for == "iteration":
            return "one iteration (all its releases)"
        return f"release {self.statistic!r}"

    @property
    def violated(self):
        """True when the lower bound exceeds the claim (a privacy bug, at ``confidence``)."""
        return self.epsilon_lower > self.epsilon_claimed


def _noised(value, release):
    """The released coordinates of ``value``: the upper triangle of a symmetric statistic."""
    v = np.asarray(value, dtype=np.float64)
    if release.symmetric:
        d = v.shape[-1]
        iu = np.triu_indices(d)
        return v.reshape(-1, d, d)[:, iu[0], iu[1]].ravel()
    return v.ravel()


def _noised_rows(values, release):
    """:func:`_noised` of each trial (the first axis), as rows."""
    m = values.shape[0]
    if release.symmetric:
        d = values.shape[-1]
        iu = np.triu_indices(d)
        return values.reshape(m, -1, d, d)[:, :, iu[0], iu[1]].reshape(m, -1)
    return values.reshape(m, -1)


def _check(estimator, mode, n_trials, confidence, method, statistic, scope):
    if not isinstance(estimator, PrivateEstimator):
        raise TypeError(f"estimator: audit() takes a private estimator of dpem_fast (DPGaussianMixture, "
                        f"DPKMeans, DPLatentDirichletAllocation, ...), got {type(estimator).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {METHODS} or None, got {method!r}")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, (int, np.integer))
                                 or n_trials < 2):
        raise ValueError(f"n_trials must be an integer >= 2 or None, got {n_trials!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) \
            or not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if statistic is not None and not isinstance(statistic, str):
        raise TypeError(f"statistic must be a release name (str) or None, got {type(statistic).__name__}")
    if statistic is not None and scope != "release":
        raise ValueError("statistic: only with scope='release'")
    if mode == "black-box" and (statistic is not None or scope != "release" or method == "gdp"):
        raise ValueError("mode='black-box' audits the whole fit from its final model with a threshold test: "
                         "give no statistic, scope or method='gdp'")
    est = clone(estimator)
    if isinstance(est, PrivateEM):
        if not est._validate_params():
            raise ValueError("estimator: epsilon=inf is not private; there is nothing to audit")
        if est._domain_kind == "ball" and est._domain_source() != "declared":
            raise ValueError("estimator: the audit needs a declared domain (data_norm= or bounds=); the "
                             "canaries sit on its boundary")
    elif est.epsilon is not None and math.isinf(float(est.epsilon)):
        raise ValueError("estimator: epsilon=inf is not private; there is nothing to audit")
    return est


def _claim(target, group, scope):
    """``(epsilon_claimed, mu_claimed)`` of what is audited (module docstring)."""
    plan, delta = target.plan, float(target.est.delta)
    releases = [plan.releases[g] for g in group]
    if scope == "fit":
        inner = plan.event.event if isinstance(plan.event, acc.NeighbouringEvent) else plan.event
        parts = inner.events if isinstance(inner, acc.ComposedEvent) else (inner,)
        it = [e for e in parts if isinstance(e, acc.SelfComposedEvent) and e.count == target.rounds]
        eps = _epsilon_of(plan, it[0] if it else inner, delta)
        mu = None
        if all(r.mechanism == "gaussian" for r in releases):
            mu = math.sqrt(target.rounds) * _claim(target, group, "iteration")[1]
        return float(eps), mu
    if all(r.mechanism == "gaussian" for r in releases):
        if scope == "release":
            mu = 1.0 / releases[0].noise_multiplier
        elif plan.joint_multiplier is not None:
            mu = 1.0 / plan.joint_multiplier
        else:
            mu = math.sqrt(math.fsum(1.0 / r.noise_multiplier ** 2 for r in releases))
        return gdp_epsilon(mu, delta), mu
    return _epsilon_of(plan, acc.ComposedEvent([r.event() for r in releases]), delta), None


def _epsilon_of(plan, inner, delta):
    """ε of ``inner`` under the plan's accountant, tagged as the plan's event is (its relation,
    and whatever else the plan's tags carry)."""
    event = dataclasses.replace(plan.event, event=inner) if isinstance(plan.event, acc.NeighbouringEvent) \
        else acc.NeighbouringEvent(plan.neighbouring, inner)
    return float(acc.get_accountant(plan.accountant, plan.neighbouring)().compose(event).get_epsilon(delta))


def _search(target, groups):
    """The release group and canary pair ``(group, i, j)`` with the largest whitened
    ``‖f(D′) − f(D)‖``."""
    plan = target.plan
    names = sorted({g for group in groups for g in group})
    contrib = [target.contribution(c, names) for c in range(_n_candidates(target))]
    best = (-1.0, None)
    for group in groups:
        V = np.stack([np.concatenate([_noised(c[g], plan.releases[g]) / plan.releases[g].noise_scale
                                      for g in group]) for c in contrib])
        sq = np.sum(V * V, axis=1)
        if target.relation == "replace":
            dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (V @ V.T), 0.0)
            i, j = np.unravel_index(int(np.argmax(dist)), dist.shape)
            score = float(dist[i, j])
        else:
            i = j = int(np.argmax(sq))
            score = float(sq[i])
        if score > best[0]:
            best = (score, (group, int(i), int(j)))
    return best[1]


def _n_candidates(target):
    return target.candidates.shape[0]


def _trials(target, group, exact, u, n_trials, rounds, key, n_threads):
    """Projections on ``u`` of ``n_trials`` noisy releases of ``group`` (summed over ``rounds``
    release indices) on each side, every one through the release layer."""
    plan = target.plan
    samples = [np.empty(n_trials), np.empty(n_trials)]
    for side in (0, 1):
        for c0 in range(0, n_trials, _CHUNK):
            m = min(_CHUNK, n_trials - c0)
            # the fit's plan with each audited release stacked m times (i.i.d. noise of the
            # plan's scale per trial): the code path of every fit
            stacked = stacked_plan(plan, group, m)
            layer = PrivateRun(stacked, derive_key(key, "audit", side, c0 // _CHUNK), n_threads).layer
            total = np.zeros(m)
            for t in range(rounds):
                noisy = layer.release({g: np.broadcast_to(exact[side][g], stacked.releases[g].shape)
                                       for g in group}, t)
                total += np.concatenate([_noised_rows(noisy[g], plan.releases[g]) / plan.releases[g].noise_scale
                                         for g in group], axis=1) @ u
            samples[side][c0:c0 + m] = total
    return samples


def _target(est, X, key, n_features):
    if n_features is not None and (X is not None or isinstance(n_features, bool)
                                   or not isinstance(n_features, (int, np.integer)) or n_features < 1):
        raise ValueError(f"n_features must be a positive integer, and only without X; got {n_features!r}")
    # the target is the loop's (an estimator declares the loop it runs: ``_loop``), never the
    # model's class: the audit imports no model
    target = _TARGETS.get(getattr(est, "_loop", None)) if isinstance(est, PrivateEstimator) else None
    if target is None:
        raise ValueError(f"estimator: {type(est).__name__} has no audit target")
    return target(est, X, key, n_features)


#: The audit target of each loop of the engine (``PrivateEstimator._loop``).
_TARGETS = {"full_pass": EMTarget, "minibatch": LDATarget, "sequential": SEPTarget}


def audit(estimator, X=None, *, mode="white-box", n_trials=None, confidence=0.95, random_state=None,
          scope="release", statistic=None, method=None, n_features=None):
    """An empirical lower bound on the ε of a private estimator's releases.

    Parameters
    ----------
    estimator : PrivateEstimator
        Unfitted, with its privacy parameters: a private EM model (DPGaussianMixture, DPKMeans,
        DPFactorAnalysis, DPBernoulliMixture, DPPoissonMixture, DPGradientEM; one with a
        declared domain, ``data_norm`` or ``bounds``, or a fixed domain of its own) or
        DPLatentDirichletAllocation (with ``total_samples``).  It is cloned, never fitted
        (black-box mode fits clones).
    X : array-like of shape (n_samples, n_features), optional
        Base dataset (documents for LDA); default 100 synthetic rows (documents) inside the
        domain, with ``n_features`` features (terms).
    mode : {"white-box", "black-box"}
        ``"white-box"``: the auditor sees the audited releases themselves.  ``"black-box"``:
        only the fitted model (module docstring).
    n_trials : int, optional
        Trials per side: default 1 000 000 releases (white-box; 100 000 rounds of J releases for
        ``scope="fit"``) or 500 fits (black-box).
    confidence : float in (0, 1)
    random_state : None, int or SeedSequence
        Seeds the estimator's initialisation, the canary search and every trial's key.
    scope : {"release", "iteration", "fit"}
        What is audited and claimed (module docstring): one release, one round's releases
        jointly, or every round's.
    statistic : str, optional
        With ``scope="release"``: one of the plan's releases (default: the most informative).
    method : {"gdp", "threshold"}, optional
        ``"gdp"`` (the default for continuous Gaussian releases): fit of the Gaussian trade-off
        curve with a valid interval; ``"threshold"`` (the default otherwise): Clopper–Pearson
        on a fixed threshold test.
    n_features : int, optional
        Width of the synthetic base dataset (default 2; 20 terms for LDA); only without ``X``.

    Returns
    -------
    AuditResult
    """
    est = _check(estimator, mode, n_trials, confidence, method, statistic, scope)
    confidence = float(confidence)
    key = make_key(random_state)
    est.random_state = np.random.SeedSequence(np.frombuffer(derive_key(key, "audit", "estimator").tobytes(),
                                                            dtype=np.uint32))
    target = _target(est, X, key, n_features)
    plan = target.plan
    if mode == "black-box":
        return _black_box(estimator, target, key, DEFAULT_FITS if n_trials is None else int(n_trials), confidence)
    if n_trials is None:
        n_trials = DEFAULT_FIT_TRIALS if scope == "fit" else DEFAULT_TRIALS
    n_trials = int(n_trials)
    names = list(target.iteration) + list(target.one_off)
    if statistic is not None and statistic not in names:
        raise ValueError(f"statistic must be one of the plan's releases {names}, got {statistic!r}")
    if scope == "fit" and target.sampled:
        raise ValueError("scope='fit': the plan's rounds are random subsamples (Poisson minibatches, or "
                         "uniform batches), and a canary in every round would audit a mechanism without the "
                         "amplification the plan counts on; audit scope='release' or 'iteration' (each "
                         "round's release without amplification)")
    if scope == "release":
        groups = [[statistic]] if statistic is not None else [[g] for g in names]
    else:
        groups = [list(target.iteration)]
    group, i, j = _search(target, groups)
    mechanisms = {plan.releases[g].mechanism for g in group}
    gaussian = mechanisms == {"gaussian"}
    if method is None:
        method = "gdp" if gaussian else "threshold"
    elif method == "gdp" and not gaussian:
        raise ValueError(f"method='gdp' fits a Gaussian trade-off curve; the audited releases are "
                         f"{sorted(mechanisms)}: use method='threshold'")
    rounds = target.rounds if scope == "fit" else 1
    D, D2 = target.datasets(i, j)
    exact = [target.exact(S, group) for S in (D, D2)]

    def whitened(values):
        return np.concatenate([_noised(values[g], plan.releases[g]) / plan.releases[g].noise_scale for g in group])

    f0, f1 = whitened(exact[0]), whitened(exact[1])
    diff = f1 - f0
    norm = float(np.linalg.norm(diff))
    if norm == 0.0:
        raise ValueError(f"statistic {group}: no canary on the domain's boundary changes it; nothing to audit")
    u = diff / norm
    a, b = _trials(target, group, exact, u, n_trials, rounds, key, effective_n_threads(est.n_threads))
    eps_claimed, mu_claimed = _claim(target, group, scope)
    if method == "gdp":
        eps_lo, mu_lo = gdp_lower_bound(a, b, est.delta, confidence)
    else:
        eps_lo = _split_threshold_bound(a, b, est.delta, confidence)
        mu_lo = None
    attained = norm * math.sqrt(rounds) / mu_claimed if mu_claimed else math.nan
    canary = {"relation": target.relation, "rows_per_group": getattr(target, "m_rows", 1), "row": target.describe(i),
              "replacement": target.describe(j) if target.relation == "replace" else None, "attained": attained}
    return AuditResult(
        epsilon_lower=float(eps_lo), epsilon_claimed=float(eps_claimed), confidence=confidence,
        n_trials=n_trials, canary=canary, statistic=group[0] if scope == "release" else scope,
        mode=mode, method=method, delta=float(est.delta), claimed_for=scope,
        plan_epsilon=float(plan.epsilon_spent), mu_lower=mu_lo, mu_claimed=mu_claimed, notes=target.notes,
    )


def _score(model, canary):
    """The fitted model's score of the canary: ``score_samples``, else ``score``."""
    if hasattr(model, "score_samples"):
        return float(np.asarray(model.score_samples(canary)).ravel()[0])
    return float(model.score(canary))


def _black_box(estimator, target, key, n_trials, confidence):
    """Whole fits on the white-box search's iteration canary pair; the canary's score."""
    group, i, j = _search(target, [list(target.iteration)])
    D, D2 = target.datasets(i, j)
    canary = target.canary(i)
    scores = [np.empty(n_trials), np.empty(n_trials)]
    for side, data in enumerate((D, D2)):
        for t in range(n_trials):
            est = clone(estimator)
            est.random_state = np.random.SeedSequence(np.frombuffer(
                derive_key(key, "audit", "black-box", side, t).tobytes(), dtype=np.uint32))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")      # small noisy fits warn about utility by design
                est.fit(data)
            scores[side][t] = _score(est, canary)
    # a = on D′ (the canary absent or replaced), b = on D
    eps_lo = _split_threshold_bound(scores[1], scores[0], target.est.delta, confidence)
    plan = target.plan
    canary = {"relation": target.relation, "row": target.describe(i),
              "replacement": target.describe(j) if target.relation == "replace" else None, "attained": math.nan}
    return AuditResult(
        epsilon_lower=float(eps_lo), epsilon_claimed=float(plan.epsilon_spent), confidence=confidence,
        n_trials=n_trials, canary=canary, statistic="score", mode="black-box", method="threshold",
        delta=float(target.est.delta), claimed_for="fit", plan_epsilon=float(plan.epsilon_spent), mu_lower=None,
        mu_claimed=None, notes=target.notes + ("black-box: the canary's score under each fitted model; threshold "
                                                "chosen on the first third of the fits, bound on the rest",),
    )


def _choose_threshold(a, b, delta, confidence):
    """The threshold, among 1999 quantiles of the pooled samples, whose Clopper–Pearson bound
    (:func:`threshold_lower_bound`, either direction) is largest on ``a``, ``b``: the samples
    that *choose* it, never those that are then judged with it."""
    pool = np.concatenate([a, b])
    cand = np.unique(np.quantile(pool, np.linspace(0.0, 1.0, 2001)[1:-1]))
    level = 1.0 - (1.0 - confidence) / 2.0
    k_fp = a.size - np.searchsorted(np.sort(a), cand, side="right")      # a > t
    k_fn = np.searchsorted(np.sort(b), cand, side="right")               # b <= t
    fp, fn = cp_upper(k_fp, a.size, level), cp_upper(k_fn, b.size, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.maximum(np.log(np.maximum(1.0 - delta - fn, 0.0) / fp), np.log(np.maximum(1.0 - delta - fp, 0.0) / fn))
    return float(cand[int(np.argmax(np.nan_to_num(v, nan=-np.inf)))])


def _split_threshold_bound(a, b, delta, confidence):
    """``threshold_lower_bound`` with the threshold chosen on the first third of each sample
    (:func:`_choose_threshold`) and the bound computed on the other two thirds."""
    k = max(1, min(a.size, b.size) // 3)
    if min(a.size, b.size) - k < 2:
        raise ValueError(f"n_trials must be at least 3 for the threshold method, got {min(a.size, b.size)}")
    thr = _choose_threshold(a[:k], b[:k], delta, confidence)
    return threshold_lower_bound(a[k:], b[k:], thr, delta, confidence)
