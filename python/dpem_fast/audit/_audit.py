"""White-box audit of one Gaussian release of a private EM estimator.

What is audited.  A fit releases, every iteration, statistics ``f_r(D; θ)`` plus Gaussian
noise through the release layer; its plan declares each release's ℓ2 sensitivity ``Δ_r``
under the fit's neighbouring relation and its noise ``σ_r``.  The declared sensitivity holds
for *every* parameter value θ, so the audit fixes one public θ (the estimator's own
data-independent private initialisation, from ``random_state``) and audits the release of
iteration 0 on a neighbouring pair:

* ``neighbouring="replace"``: D is the base data with row 0 set to a canary ``x``, D′ the same
  with row 0 set to ``x′``;
* ``neighbouring="add_remove"``: D is the base data with ``x``, D′ the base data without it.

A person-level estimator (``max_rows_per_group`` m, issue 27) is audited at its group-level
plan with a canary *person*: m copies of ``x`` (against m copies of ``x′`` under replace; the
base rows are each their own group), the worst case of a group's bounded contribution.

The canaries are searched over points of the domain's boundary (the unit sphere of the
working units, mapped back to the user's units and into a declared box): ±e_j, the
directions of the initial means and seeded random directions; each candidate's
contribution is computed with the estimator's own kernel on a one-row block, and the pair
with the largest ``‖f_r(D′) − f_r(D)‖ / σ_r`` over the plan's iteration releases is chosen
(the most informative release; ``statistic=`` picks one).  Then ``f_r(D)`` and ``f_r(D′)``
are computed exactly with the kernel on the whole datasets.

Trials.  Every trial goes through :meth:`ReleaseLayer.release` (and so the sampler
:func:`~dpem_fast._engine._release.add_noise`) with the release records of the plan the
estimator calibrates: the trials of a chunk are one release of the plan's record stacked
``n`` times (``shape = (n, *shape)``: i.i.d. noise of the plan's σ, mirrored per trial for a
symmetric statistic, exactly as ``n`` separate releases), by a layer keyed
``derive_key(key, "audit", side, chunk)``.  The auditor projects each noisy output (the noised coordinates — the upper
triangle of a symmetric statistic — each divided by its plan σ, stacked over the audited
releases) on the unit direction ``u`` of ``f(D′) − f(D)`` in the same units, and feeds the
two samples to :func:`gdp_lower_bound` (default) or :func:`threshold_lower_bound`
(threshold at the midpoint of the two exact projections, fixed before any noise is drawn).
The two samples' spread is estimated, not taken from the plan, so a sampler that adds
less noise than the plan says raises the bound.  Results depend on ``random_state`` only,
never on the thread count (the sampler's streams are addressed by key).

The data.  The statistics are additive and computed at fixed public parameters, so
``f(D′) − f(D)`` is the difference of the two canaries' own contributions: the bound does
not depend on the rows of ``X`` (only their count and width), and the audit's result
reveals nothing of them.

What is claimed.  The audited release alone is ``(1/z_r)``-GDP (``z_r = σ_r/Δ_r``, the plan's
multiplier), so ``epsilon_claimed`` is that release's ε at the fit's δ
(``claimed_for="release"``); the whole fit's ε (``plan_epsilon``) is larger.  A lower bound
above ``epsilon_claimed`` means the release leaks more than its plan says.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone

from .._engine import _release
from .._engine._base import PrivateEM
from .._engine._sources._memory import validated_rows
from .._preprocess import resolve_domain
from .._rng import derive_key, make_key
from .._threads import effective_n_threads
from ._bounds import gdp_epsilon, gdp_lower_bound, threshold_lower_bound

__all__ = ["AuditResult", "audit"]

MODES = ("white-box",)
METHODS = ("gdp", "threshold")
SCOPES = ("release", "iteration")
#: trials per side by default: the GDP interval's relative width is about
#: 2.3 √(2/n) / μ, ≈ 0.1 at the per-release μ ≈ 0.04 of a 20-iteration fit at ε = 1
DEFAULT_TRIALS = 1_000_000
_N_BASE = 100           # rows of the synthetic base dataset
_N_RANDOM = 32          # random boundary directions among the canary candidates
_CHUNK = 65_536          # trials drawn per add_noise call
_SHARP = 1e4            # precision (working units) of the sharpened audit parameters


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
        Trials per side (D and D′).
    canary : dict
        ``relation``, ``row`` (x: on D, user units) and ``replacement`` (x′ on D′ under
        replace-one; None under add/remove), ``attained``: ``‖f(D′) − f(D)‖ / Δ``.
    statistic : str
        The audited release.
    mode : str
    method : str
        ``"gdp"`` or ``"threshold"``.
    delta : float
    claimed_for : str
        ``"release"``: one release's ε (its multiplier, via GDP).
    plan_epsilon : float
        ε of the whole fit's plan.
    mu_lower, mu_claimed : float
        The Gaussian-DP parameters behind the two ε (``mu_lower`` is None for the
        threshold method).
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
    mu_claimed: float = math.nan
    notes: tuple = field(default_factory=tuple)

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


def _corners(d, key, limit=256):
    """Sign vectors ``s / √d`` (the corners of a declared box in working units): all of them
    for ``2^d ≤ limit``, else ``±`` the first ``d`` axes' patterns and seeded random ones."""
    if 2 ** d <= limit:
        grid = np.array(np.meshgrid(*[[-1.0, 1.0]] * d, indexing="ij")).reshape(d, -1).T
    else:
        rng = np.random.default_rng(np.frombuffer(derive_key(key, "audit", "corners").tobytes(), dtype=np.uint32))
        grid = rng.choice([-1.0, 1.0], size=(limit, d))
    return grid / math.sqrt(d)


def _candidates(domain, params_means, d, key):
    """Boundary points of the domain (the working unit sphere; a declared box's corners), in
    user units."""
    eye = np.eye(d)
    pts = [eye, -eye]
    if domain.bounds is not None:
        pts.append(_corners(d, key))
    if params_means is not None:
        m = np.asarray(params_means, dtype=np.float64).reshape(-1, d)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        m = m[norms[:, 0] > 0] / norms[norms[:, 0] > 0]
        pts += [m, -m]
    rng = np.random.default_rng(np.frombuffer(derive_key(key, "audit", "canaries").tobytes(), dtype=np.uint32))
    r = rng.standard_normal((_N_RANDOM, d))
    pts.append(r / np.linalg.norm(r, axis=1, keepdims=True))
    w = np.concatenate(pts)
    raw = domain.center + domain.scale * w
    if domain.bounds is not None:
        raw = np.clip(raw, domain.bounds[0], domain.bounds[1])
    return raw


def _sharpened(est, domain, d, key):
    """A copy of ``est`` whose public initial parameters make its posteriors nearly one-hot
    at boundary canaries, or None.  A release's declared sensitivity holds for every
    parameter value the iteration may see (the parameters are public: under adaptive
    composition the adversary may as well have chosen them), so the auditor picks ones at
    which the sensitivity is attained: means on the domain's unit sphere (±e_j, then seeded
    random directions; a declared box's corners) and precisions ``SHARP / scale²``.  Only for a mixture whose
    ``means_init`` and ``precisions_init`` are both unset; the caller checks that the plan is
    unchanged."""
    params = est.get_params()
    if "precisions_init" not in params or params.get("means_init", 0) is not None \
            or params["precisions_init"] is not None \
            or not isinstance(params.get("n_components"), (int, np.integer)):
        return None
    K, ct = int(est.n_components), params.get("covariance_type", "full")
    eye = np.eye(d)
    if domain.bounds is not None:       # a box: its corners are the points of largest norm
        c = _corners(d, key)
        dirs = [v for pair in zip(c, -c) for v in pair]
    else:
        dirs = [v for j in range(d) for v in (eye[j], -eye[j])]
    if K > len(dirs):
        rng = np.random.default_rng(np.frombuffer(derive_key(key, "audit", "means").tobytes(), dtype=np.uint32))
        r = rng.standard_normal((K - len(dirs), d))
        dirs += list(r / np.linalg.norm(r, axis=1, keepdims=True))
    means = domain.center + domain.scale * np.array(dirs[:K])
    p = _SHARP / domain.scale ** 2
    prec = {"full": np.broadcast_to(np.diag(p), (K, d, d)).copy(), "tied": np.diag(p),
            "diag": np.broadcast_to(p, (K, d)).copy(), "spherical": np.full(K, _SHARP / domain.scale[0] ** 2)}
    if ct not in prec:
        return None
    sharp = clone(est).set_params(means_init=means, precisions_init=prec[ct])
    sharp.random_state = est.random_state
    return sharp


def _check(estimator, mode, n_trials, confidence, method, statistic):
    if not isinstance(estimator, PrivateEM):
        raise TypeError(f"estimator: audit() takes a private EM estimator of dpem_fast (DPGaussianMixture, "
                        f"DPKMeans, ...), got {type(estimator).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} (a black-box audit is not implemented yet), got {mode!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, (int, np.integer))
                                 or n_trials < 2):
        raise ValueError(f"n_trials must be an integer >= 2 or None, got {n_trials!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) \
            or not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if statistic is not None and not isinstance(statistic, str):
        raise TypeError(f"statistic must be a release name (str) or None, got {type(statistic).__name__}")
    est = clone(estimator)
    if not est._check_privacy_params():
        raise ValueError("estimator: epsilon=inf is not private; there is nothing to audit")
    if est._domain_kind != "ball":
        raise ValueError(f"estimator: {type(est).__name__} has a fixed domain of its own; the audit covers "
                         "models with a declared domain (data_norm= or bounds=) so far")
    if est._domain_source() != "declared":
        raise ValueError("estimator: the audit needs a declared domain (data_norm= or bounds=); the canaries "
                         "sit on its boundary")
    if est.noise != "gaussian":
        raise ValueError(f"estimator: the audit covers continuous Gaussian releases, got noise={est.noise!r}")
    return est


def audit(estimator, X=None, *, mode="white-box", n_trials=None, confidence=0.95, random_state=None,
          scope="release", statistic=None, method="gdp", n_features=None):
    """An empirical lower bound on the ε of one iteration's release(s) of ``estimator``.

    Parameters
    ----------
    estimator : PrivateEM
        Unfitted, with its privacy parameters and a declared domain (``data_norm`` or
        ``bounds``); it is cloned, never fitted.
    X : array-like of shape (n_samples, n_features), optional
        Base dataset; default 100 rows uniform in the half-radius ball of the domain, with
        ``n_features`` features.
    mode : {"white-box"}
        The auditor sees the audited release(s) themselves.
    n_trials : int, optional
        Trials per side (D and D′); default 1 000 000 (about 2 s per side on 2 cores).
    confidence : float in (0, 1)
    random_state : None, int or SeedSequence
        Seeds the estimator's initialisation, the canary search and every trial's key.
    scope : {"release", "iteration"}
        ``"release"``: one release (``statistic``, default the most informative: the largest
        attained ``‖f(D′) − f(D)‖ / σ``); the claim is that release's ε.  ``"iteration"``:
        every release of iteration 0 jointly (the stacked statistic, each part divided by its
        plan σ); the claim is the iteration's ε (its joint multiplier, or the GDP composition
        ``μ² = Σ_r 1/z_r²`` of its releases).  The whole fit of J iterations composes to
        ``√J`` times the iteration's μ (``plan_epsilon``).
    statistic : str, optional
        With ``scope="release"``: a release of the plan's iterations.
    method : {"gdp", "threshold"}
        ``"gdp"`` (default, Gaussian releases): fit of the Gaussian trade-off curve with a
        valid interval; ``"threshold"``: Clopper–Pearson on a fixed threshold test.
    n_features : int, optional
        Width of the synthetic base dataset (default 2); only without ``X``.

    Returns
    -------
    AuditResult
    """
    est = _check(estimator, mode, n_trials, confidence, method, statistic)
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if statistic is not None and scope != "release":
        raise ValueError("statistic: only with scope='release'")
    n_trials = DEFAULT_TRIALS if n_trials is None else int(n_trials)
    confidence = float(confidence)
    key = make_key(random_state)
    est.random_state = np.random.SeedSequence(np.frombuffer(derive_key(key, "audit", "estimator").tobytes(),
                                                            dtype=np.uint32))
    if n_features is not None and (X is not None or isinstance(n_features, bool)
                                   or not isinstance(n_features, (int, np.integer)) or n_features < 1):
        raise ValueError(f"n_features must be a positive integer, and only without X; got {n_features!r}")
    if X is None:
        d = 2 if n_features is None else int(n_features)
        rng = np.random.default_rng(np.frombuffer(derive_key(key, "audit", "base").tobytes(), dtype=np.uint32))
        w = rng.standard_normal((_N_BASE, d))
        w *= (0.5 * rng.uniform(size=(_N_BASE, 1)) ** (1.0 / d)) / np.linalg.norm(w, axis=1, keepdims=True)
        decl = resolve_domain(d, est.data_norm, est.bounds)
        X = decl.center + decl.scale * w
    rows = validated_rows(est, X, True)
    n, d = rows.n_rows, rows.n_features
    est._check_model_params(n, d)
    est.n_features_in_ = d
    replace = est.neighbouring == "replace"
    n_public = est._public_rows(n)
    # person-level (max_rows_per_group m, issue 27): the canary is a person of m copies of the
    # canary row (the worst case of a group's bounded contribution), against the plan's
    # group-level noise; the base rows are each their own group (already bounded)
    m_rows = est._max_rows_per_group() or 1
    plan, specs, _, domain = est._private_plan(n_public, d)
    if any(r.mechanism != "gaussian" for r in plan.releases.values()):
        raise ValueError("estimator: the audit covers Gaussian releases; this plan has others")
    names = [s.name for s in specs]
    if statistic is not None and statistic not in names:
        raise ValueError(f"statistic must be one of the plan's iteration releases {names}, got {statistic!r}")
    domain = est._working_domain(domain)
    notes = ()
    sharp = _sharpened(est, domain, d, key)
    if sharp is not None:
        sharp.n_features_in_ = d
        sharp._check_model_params(n, d)
        if sharp._private_plan(n_public, d)[0].releases == plan.releases:
            est = sharp
            notes = ("audited at sharpened public initial parameters (means on the domain's sphere, "
                     f"precision {_SHARP:g} in working units): the sensitivity holds for every parameter",)
    params = est._initial_parameters(rows.summary, domain, key, True)     # data-independent (private)
    base = np.asarray(X, dtype=np.float64)
    means = params[1] if isinstance(params, tuple) and len(params) > 1 else None
    cands = _candidates(domain, means if np.ndim(means) == 2 and np.shape(means)[-1] == d else None, d, key)

    def whitened(values, group):
        """The released coordinates of ``group``, each divided by its plan σ, stacked."""
        return np.concatenate([_noised(values[g], plan.releases[g]) / plan.releases[g].noise_scale
                               for g in group])

    def exact_of(block, group):
        s = est._statistics(np.ascontiguousarray(block, dtype=np.float64), params, domain, 1)
        return {g: np.asarray(s[g], dtype=np.float64) for g in group}

    groups = [[nm] for nm in ([statistic] if statistic is not None else names)] if scope == "release" \
        else [names]
    contrib = [exact_of(c[None, :], names) for c in cands]
    best = (-1.0, None)
    for group in groups:
        V = np.stack([whitened(c, group) for c in contrib])
        if replace:
            sq = np.sum(V * V, axis=1)
            dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (V @ V.T), 0.0)
            i, j = np.unravel_index(int(np.argmax(dist)), dist.shape)
            score = float(dist[i, j])
        else:
            norms = np.sum(V * V, axis=1)
            i = j = int(np.argmax(norms))
            score = float(norms[i])
        if score > best[0]:
            best = (score, (group, int(i), int(j)))
    group, i, j = best[1]
    if replace:
        D, D2 = base.copy(), base.copy()
        D[:m_rows], D2[:m_rows] = cands[i], cands[j]
    else:
        D, D2 = np.vstack([base, np.repeat(cands[i][None, :], m_rows, axis=0)]), base
    exact = [exact_of(S, group) for S in (D, D2)]
    f0, f1 = (whitened(e, group) for e in exact)
    diff = f1 - f0
    norm = float(np.linalg.norm(diff))
    if norm == 0.0:
        raise ValueError(f"statistic {group}: no canary on the domain's boundary changes it; nothing to audit")
    u = diff / norm
    samples = [np.empty(n_trials), np.empty(n_trials)]
    n_threads = effective_n_threads(est.n_threads)
    for side in (0, 1):
        for c0 in range(0, n_trials, _CHUNK):
            m = min(_CHUNK, n_trials - c0)
            # the fit's plan with each audited release stacked m times (i.i.d. noise of the
            # plan's σ per trial, mirrored per trial for a symmetric statistic), released
            # through a ReleaseLayer: the code path of every fit
            stacked = {g: dataclasses.replace(plan.releases[g], shape=(m, *tuple(plan.releases[g].shape)))
                       for g in group}
            layer = _release.ReleaseLayer(dataclasses.replace(plan, releases=stacked),
                                          derive_key(key, "audit", side, c0 // _CHUNK), n_threads)
            noisy = layer.release({g: np.broadcast_to(exact[side][g], stacked[g].shape) for g in group}, 0)
            samples[side][c0:c0 + m] = np.concatenate(
                [_noised_rows(noisy[g], plan.releases[g]) / plan.releases[g].noise_scale for g in group],
                axis=1) @ u
    a, b = samples
    if scope == "release":
        mu_claimed = 1.0 / plan.releases[group[0]].noise_multiplier
    elif plan.joint_multiplier is not None:
        mu_claimed = 1.0 / plan.joint_multiplier
    else:
        mu_claimed = math.sqrt(math.fsum(1.0 / plan.releases[g].noise_multiplier ** 2 for g in group))
    if method == "gdp":
        eps_lo, mu_lo = gdp_lower_bound(a, b, est.delta, confidence)
    else:
        eps_lo = threshold_lower_bound(a, b, 0.5 * float(f0 @ u + f1 @ u), est.delta, confidence)
        mu_lo = None
    canary = {"relation": est.neighbouring, "rows_per_group": m_rows, "row": cands[i].copy(),
              "replacement": cands[j].copy() if replace else None, "attained": norm / mu_claimed}
    return AuditResult(
        epsilon_lower=float(eps_lo), epsilon_claimed=gdp_epsilon(mu_claimed, est.delta), confidence=confidence,
        n_trials=n_trials, canary=canary, statistic=group[0] if scope == "release" else "iteration",
        mode=mode, method=method, delta=float(est.delta), claimed_for=scope,
        plan_epsilon=float(plan.epsilon_spent), mu_lower=mu_lo, mu_claimed=mu_claimed, notes=notes,
    )
