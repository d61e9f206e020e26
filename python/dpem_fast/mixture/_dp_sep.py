r"""DP-SEP: differentially private stochastic expectation propagation for a Gaussian mixture.

The model (Vinaroz & Park, Sec. 4; Li, Hernández-Lobato & Turner 2015, Sec. 5.1), the moment
matching, the damped and batched SEP update, the working units, the posterior's noise floor, the
privacy proof (replace one row, N public; person-level over G m slots) and the rounding bound are
derived in full in the model page's "Privacy analysis in full" (``docs/models/stochastic_ep.rst``).
The maths the fit and the audit share (the event, the default clip norm, the rounding factor,
the posterior) is in :mod:`dpem_fast.mixture._sep_math`.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _rng as _core_rng
from .._kernels import sep as _sep
from .. import accounting as acc
from ..accounting import NoiseDominatedWarning
from .._engine import EventRelease, PrivateEstimator, PrivateRun, make_event_plan
from .._engine._groups import bound_mask, bounding_key, check_groups
from .._engine._sources._dask import is_dask_array
from .._preprocess import _as_bounds
from .._progress import Progress, plan_spent
from .._rng import derive_key, make_key
from .._threads import effective_n_threads
from .._validation import ARRAY_LIKE, FINITE, interval, options, predicate, validate_table
from ._sep_math import (_Setup, _margin, _posterior, _posterior_noise, _to_raw, default_clip_norm,
                        sep_event, sep_rounding_factor)

__all__ = ["DPStochasticEP", "sep_event"]

#: steps per call of the compiled loop (bounds the bulk noise array's memory)
_CHUNK = 1 << 16
#: releases per epoch of the default batch size ceil(N / 4) (the model page)
_RELEASES_PER_EPOCH = 4
#: without bounds, the box the prior implies: prior means ± 3 (prior sd + component sd)
_PRIOR_SPREAD = 3.0


def _default_accountant(sampling):
    return "gdp" if sampling == "shuffle" else "rdp"


class DPStochasticEP(PrivateEstimator):
    """Differentially private stochastic EP (Vinaroz & Park, Algorithm 3) for the means of a
    Gaussian mixture with known isotropic component variance and known weights.

    Parameters
    ----------
    n_components : int
    epsilon : float, default=1.0
        Target ε; ``float('inf')`` runs plain (non-private) SEP or EP.
    delta : float in (0, 1), default=1e-5
    bounds : tuple (lower, upper) or None, default=None
        Declared per-feature box (scalars or arrays of shape (n_features,)): rows are clipped
        to it, the fit runs in its units (centre 0, half-diagonal 1), means end inside it,
        and it gives the default prior (centre, ``diag(half-width / 2)²``).  None: the box
        the prior implies (prior means ± 3 (prior sd + s) per feature).
    clip_norm : float or "auto", default="auto"
        C, in the box's units: bound on the ℓ2 norm of the intermediate and of the shared
        factor's natural parameters (private mode only).  "auto": ``sqrt(d + 1) R² / s²``
        (R the box's half-diagonal), the norm of one fully responsible site of a row in the
        box (the model page).
    damping : float in (0, 1], default=1.0
        γ; each row's site enters the factor with weight γ/N.
    n_epochs : int, default=10
        T: passes over the data (each row in T releases).
    batch_size : int or "auto", default="auto"
        B: rows per release (their sites share one cavity).  "auto": ``ceil(N / 4)``, four
        releases per epoch; 1 is the paper's one release per step; capped at N.
    sampling : {"shuffle", "uniform"}, default="shuffle"
        ``"shuffle"``: a fresh random order each epoch; ``"uniform"``: every step draws a row
        uniformly at random.  The accounting follows (the model page).
    method : {"sep", "ep"}, default="sep"
        ``"ep"``: full EP (one site per row, non-private only; for comparison).
    prior_mean : array of shape (d,) or (J, d), default the box's centre (zeros without bounds)
    prior_covariance : float or array of shape (d, d), default ``diag(half-width / 2)²`` of the
        box (``component_variance`` times the identity without bounds)
    component_variance : float, default=1.0
        s² of every component (known), in the units of X.  Every default is in the units of X
        (the box's, or without bounds this variance's): a fit on ``c X`` with whatever is
        declared of the bounds, the prior and s² scaled by c (c²) is the fit on X with its means
        scaled by c (up to rounding), for the same seed.

        .. versionchanged:: 0.1 (issue 40): the default prior without bounds is s² I (it was I,
           whatever the unit of X); fits with ``bounds=None`` and s² != 1 change.
    weights : array of shape (J,), default uniform
        Known mixing weights (positive, summing to 1).
    accountant : str, default "gdp" for shuffle, "rdp" for uniform
    budget : BudgetLedger or None, default=None
        Ledger (``neighbouring="replace"``) charged with the whole plan before any step reads
        a row; a refused charge raises :class:`~dpem_fast.BudgetExceededError` and the fit
        reads nothing.  Refused for a non-private fit (``epsilon=inf``).
    random_state : None, int, SeedSequence or Generator
    n_threads : int or None
        Threads of the noise draws (results do not depend on it; the loop is sequential).
    verbose : int, default=0
        ``>= 1`` (``method="sep"``): a progress bar over the epochs on stderr (tqdm,
        ``pip install dpem_fast[progress]``; plain lines without it) with the seconds of the
        last epoch and the ε spent so far (public; nothing computed from the data is
        shown).  0: silent.

    Notes
    -----
    ``fit`` refuses a ``dask.array.Array`` (TypeError): each step reads one row, in a secret
    order, and moves the shared factor that the next step reads, so there are no additive
    per-chunk statistics to compute on the workers, and taking rows one at a time from a
    cluster would gather the whole array on the client anyway.

    max_rows_per_group : int or None, default=None
        Person-level privacy with ``fit(X, groups=...)``: at most this many rows per group, the
        factor running over G m slots ("Person-level" on the model page); the guarantee is
        for replacing one group's rows.  Required with ``groups``; None: row-level privacy.

        .. versionadded:: 0.1 (issue 27)

    Attributes
    ----------
    means_ : ndarray (J, d)
        Posterior means of the component means.
    means_covariance_ : ndarray (J, d, d)
        Their posterior covariances.
    natural_parameters_ : ndarray (J, d + d*d)
        The posterior's ``[η_j, vec Λ_j]``.
    factor_ : ndarray (J, d + d*d) or None
        SEP's shared factor (last released, projected value in private mode).
    privacy_ : PrivacyRecord or None
    n_steps_ : int
        Site updates (rows read), ``N T`` for 'shuffle'.
    n_skipped_ : int
        Non-private: steps skipped for a non-PD cavity (diagnostic).  Private: steps whose
        f_n overflowed and was replaced by 0 (not private, do not publish).

    Privacy
    -------
    Neighbouring relation: **replace one row**, with N public (``neighbouring="add_remove"``
    is refused: the schedule depends on N, so the releases of neighbouring datasets do not
    pair up).  Release r publishes the shared factor's natural parameters
    ``(1 - γ b_r/N) θ̂_f + (γ/N) Σ_{i in batch r} clip_C(θ_{f_n}(u_i)) + N(0, σ² I)``, where
    ``θ̂_f`` is the projected previous release and every site of the batch is computed
    against it; replacing one row changes one clipped site of one release per epoch, so the
    ℓ2 sensitivity is ``2γC/N`` whatever the batch size (Prop. 1, which holds for the
    factor; the posterior's ``θ_0 + N θ_f`` has N times that sensitivity under the same
    mechanism).  ``sampling="shuffle"``: each row enters exactly T releases, composed
    adaptively as T Gaussian mechanisms (``sqrt(T)/z``-GDP), without credit for the secret
    order.  ``sampling="uniform"``: T ceil(N/B) releases, each a Gaussian mechanism on B
    rows drawn uniformly without replacement, accounted with the RDP bound of Wang, Balle &
    Kasiviswanathan (2019, Thm 9).  The clipping bounds every row's contribution whatever
    the rows; the box (declared or implied by the prior) sets the units, the default C and
    where the means may land.  The posterior is post-processing: eigenvalues of ``N Λ_f``
    below ``3 sqrt(d) τ`` (τ the public noise scale) are dropped, so a component with no
    signal is the prior; a plan whose factor could never exceed that threshold is refused
    before the budget is charged.  The full derivation is on the model's documentation page
    ("Privacy analysis in full").
    """

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line;
    #: n_skipped_ is computed from the raw data
    _cli_name = "sep"
    _saved = ("weights_", "means_", "means_covariance_", "natural_parameters_", "factor_", "component_variance_",
              "n_steps_", "n_features_in_")
    _not_saved = ("n_skipped_",)
    _relations = ("replace",)             # N is public: the sensitivity 2 gamma C / N uses it
    _loop = "sequential"
    _parameter_constraints = {
        "n_components": [interval("int", 1)],
        "bounds": [None, ARRAY_LIKE],
        "clip_norm": [options("auto"), interval("real", 0, None, "neither")],
        "damping": [interval("real", 0, 1, "right")],
        "n_epochs": [interval("int", 1)],
        "batch_size": [interval("int", 1), options("auto")],
        "sampling": [options("shuffle", "uniform")],
        "method": [options("sep", "ep")],
        "prior_mean": [None, FINITE],
        "prior_covariance": [None, FINITE],
        "component_variance": [interval("real", 0, None, "neither")],
        "weights": [None, FINITE],
        "accountant": [None, options(*acc.ACCOUNTANTS),
                       predicate(type, lambda a: issubclass(a, acc.PrivacyAccountant), "a PrivacyAccountant class")],
    }

    def __init__(self, n_components=1, *, epsilon=1.0, delta=1e-5, bounds=None, clip_norm="auto",
                 damping=1.0, n_epochs=10, batch_size="auto", sampling="shuffle", method="sep",
                 prior_mean=None, prior_covariance=None, component_variance=1.0, weights=None,
                 accountant=None, budget=None, random_state=None, n_threads=None, verbose=0, max_rows_per_group=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.clip_norm = clip_norm
        self.damping = damping
        self.n_epochs = n_epochs
        self.batch_size = batch_size
        self.sampling = sampling
        self.method = method
        self.prior_mean = prior_mean
        self.prior_covariance = prior_covariance
        self.component_variance = component_variance
        self.weights = weights
        self.accountant = accountant
        self.budget = budget
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group

    # ------------------------------------------------------------ validation
    def _check_params(self, d):
        """The declared constraints and the common checks (:meth:`_validate_params`), then the
        checks that read d or join several parameters; the parameters as the fit uses them."""
        self._validate_params()               # the constraints, the relation, the ledger
        J, eps = int(self.n_components), float(self.epsilon)
        if self.method == "ep" and math.isfinite(eps):
            raise ValueError("method='ep' is non-private (one site per row): use epsilon=float('inf')")
        C = None if isinstance(self.clip_norm, str) else float(self.clip_norm)
        B = None if isinstance(self.batch_size, str) else int(self.batch_size)
        s2 = float(self.component_variance)
        box = None if self.bounds is None else _as_bounds(self.bounds, d)
        if self.prior_mean is None:
            m0 = np.zeros((J, d)) if box is None else np.tile((box[0] + box[1]) / 2, (J, 1))
        else:
            m0 = np.asarray(self.prior_mean, dtype=np.float64)
        if m0.shape == (d,):
            m0 = np.tile(m0, (J, 1))
        if m0.shape != (J, d):
            raise ValueError(f"prior_mean must have shape ({d},) or ({J}, {d}), got {m0.shape}")
        if self.prior_covariance is None:
            # without bounds the component variance is the one scale declared: the prior in its units
            S0 = s2 * np.eye(d) if box is None else np.diag(((box[1] - box[0]) / 4) ** 2)
        else:
            S0 = np.asarray(self.prior_covariance, dtype=np.float64)
        if S0.ndim == 0:
            S0 = float(S0) * np.eye(d)
        if S0.shape != (d, d) or not np.allclose(S0, S0.T):
            raise ValueError(f"prior_covariance must be a scalar or a symmetric ({d}, {d}) matrix")
        if np.linalg.eigvalsh(S0).min() <= 0:
            raise ValueError("prior_covariance must be positive definite")
        w = np.full(J, 1.0 / J) if self.weights is None else np.asarray(self.weights, dtype=np.float64)
        if w.shape != (J,) or np.any(w <= 0) or abs(w.sum() - 1.0) > 1e-8:
            raise ValueError(f"weights must be {J} positive numbers summing to 1, got {self.weights!r}")
        acct = self.accountant if self.accountant is not None else _default_accountant(self.sampling)
        if box is None:                       # the box the prior implies (public, the model page)
            half = _PRIOR_SPREAD * (math.sqrt(float(np.linalg.eigvalsh(S0).max())) + math.sqrt(s2))
            box = (m0.min(axis=0) - half, m0.max(axis=0) + half)
        return (J, eps, float(self.delta), C, float(self.damping), int(self.n_epochs), B, s2, m0, S0, w / w.sum(), acct,
                box)

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None, groups=None):
        """Run (DP-)SEP or EP on ``X`` (n_samples, n_features).

        ``groups``: person-level DP-SEP (with ``max_rows_per_group`` m; ``sampling="shuffle"``):
        the shared factor runs over G m slots, each group's at most m kept rows and empty slots
        for the rest (see "Person-level" on the model page).

        .. versionadded:: 0.1 (issue 27): ``groups``
        """
        if is_dask_array(X):
            raise TypeError("X: DPStochasticEP does not take a dask array: DP-SEP is sequential over the "
                            "rows (each noisy step reads one row, in a secret order, and the shared factor "
                            "the next step reads), so it cannot be split into per-chunk statistics on "
                            "the workers; fit it on an in-memory array")
        eps_in = self.epsilon
        X, groups = self._resolve_groups(X, groups, not (isinstance(eps_in, (int, float, np.number))
                                                         and not isinstance(eps_in, (bool, np.bool_))
                                                         and math.isinf(eps_in)))
        X = validate_table(self, X, dtype=np.float64, order="C", ensure_min_samples=1)   # feature_names_in_
        n, d = X.shape
        grouping = check_groups(groups, n) if groups is not None else None
        m = self._max_rows_per_group()
        slots = None
        if grouping is not None:
            if self.sampling != "shuffle":
                raise ValueError("sampling: a person-level DP-SEP fit takes sampling='shuffle' (the amplification "
                                 "of sampling without replacement is stated for one record, not a group)")
            slots = grouping.streams.size * m       # public under replace-one-group (the model page)
        key = make_key(self.random_state)
        st = self._setup(n, d, key, slots)
        n = st.n
        J, eps, delta, C, gamma, T, B, acct = st.J, st.eps, st.delta, st.C, st.gamma, st.T, st.B, st.acct
        s2u, m0u, log_w, centre, R, lo_u, hi_u = st.s2u, st.m0u, st.log_w, st.centre, st.R, st.lo_u, st.hi_u
        theta0, theta_f = st.theta0, st.theta_f
        private = math.isfinite(eps)
        U = st.working(X)
        n_threads = effective_n_threads(self.n_threads)
        P = d + d * d
        sizes = self._batch_sizes(n, T, B)
        order = self._order(key, n, T, B)
        self.privacy_ = None
        tau = 0.0
        if self.method == "ep":
            sites = np.tile(theta_f, (n, 1, 1))
            q = theta0 + theta_f * n
            skipped = _sep.ep_loop(U, order, sites, q, log_w, s2u, gamma)
            self.factor_ = None
            data_part = None
        else:
            plan = self._calibrated_plan(n, T, B, sizes, J, P, d, eps, delta, C, gamma, acct, m) if private else None
            loop = PrivateRun.of(self, plan, key, n_threads)   # the whole plan, before any step reads a row
            if private:
                tau = _posterior_noise(plan.releases["factor"].noise_scale, sizes, gamma, n)
                if grouping is not None:        # after the charge: the slots' rows (-1: empty)
                    order = self._slots(grouping, key, m, n_threads)[order]
            _sep.project_factor(theta_f, d, C if private else math.inf, lo_u, hi_u)
            offsets = np.concatenate([[0], np.cumsum(sizes)])    # the first step of each release

            def step(a, b, noise):                  # releases a .. b - 1 in one call of the compiled loop
                return _sep.sep_loop(U, order[offsets[a]:offsets[b]], theta_f, theta0, log_w, s2u, float(n),
                                     gamma / n, C if private else math.inf, noise, B, lo_u, hi_u)

            # the engine's sequential loop: one release per batch, its noise in bulk; ε after t epochs
            spent = plan_spent(plan, T, delta, T if self.sampling == "shuffle" else len(sizes)) if private else None
            skipped = loop.sequence("factor", T, len(sizes) // T, max(1, _CHUNK // B), step,
                                    Progress(self.verbose, T, type(self).__name__, spent, delta, unit="epoch"))
            if private:
                self.privacy_ = self._fit_record(loop, B, C, eps, len(sizes), m)
            q = None
            data_part = n * theta_f
            self.factor_ = _to_raw(theta_f, centre, R, d)
        means, covs, lam_q, fell = _posterior(theta0, m0u, data_part, q, d, tau, lo_u, hi_u)
        if private and 2 * len(fell) > J:
            warnings.warn(
                f"DPStochasticEP: the released factor of component(s) {fell} of {J} is indistinguishable from "
                f"its noise (posterior noise scale {tau:.3g} in units of the declared domain), so those "
                "means are the prior mean. Declare tighter `bounds` (a smaller domain), a larger "
                "`epsilon`, fewer `n_epochs` or `n_components`, or fit more rows.", NoiseDominatedWarning, stacklevel=2)
        self.means_ = centre + R * means
        self.means_covariance_ = R * R * covs
        lam_raw = lam_q / (R * R)
        self.natural_parameters_ = np.concatenate(
            [np.einsum("jab,jb->ja", lam_raw, self.means_), lam_raw.reshape(J, d * d)], axis=1)
        self.weights_ = st.w
        self.component_variance_ = st.s2
        self.n_steps_ = int(sum(sizes))
        self.n_skipped_ = int(skipped)
        self.n_features_in_ = d
        return self

    def _setup(self, n, d, key, slots=None):
        """Everything of a fit on n rows of d features before it reads a row, from public
        quantities only (the parameters, n — public under replace-one —, d and the key): the
        checked parameters in the working units (the box's centre at 0, its half-diagonal R
        at 1), the prior ``theta0`` and the data-independent initial factor ``theta_f`` (its
        means drawn from the prior, precision Λ0/N).  The fit and the audit
        (:mod:`dpem_fast.audit`) call it.  Returns a :class:`_Setup`."""
        J, eps, delta, C, gamma, T, B, s2, m0, S0, w, acct, box = self._check_params(d)
        if slots is not None:            # person-level: the loop runs over G m slots
            n = int(slots)
        if J > n:                        # n: the rows under replace-one, else the G m slots (public)
            raise ValueError(f"n_components={J} must be <= n_samples={n}")
        lo, hi = box
        centre = (lo + hi) / 2
        R = float(np.linalg.norm((hi - lo) / 2))
        s2u = s2 / R ** 2
        m0u = (m0 - centre) / R
        S0u = S0 / R ** 2
        if C is None:
            C = default_clip_norm(d, s2u)
        if B is None:
            B = -(-n // _RELEASES_PER_EPOCH)
        B = min(B, n)                            # so gamma * B <= N: the damped update stays convex
        lam0 = np.linalg.inv(S0u)
        theta0 = np.concatenate([m0u @ lam0, np.tile(lam0.ravel(), (J, 1))], axis=1)
        z = np.empty(J * d)
        _core_rng.fill_normal(derive_key(key, "init"), 0, 1.0, z, 1)
        mu0 = m0u + z.reshape(J, d) @ np.linalg.cholesky(S0u).T
        theta_f = np.concatenate([mu0 @ lam0 / n, np.tile(lam0.ravel() / n, (J, 1))], axis=1)
        return _Setup(n, J, eps, delta, C, gamma, T, B, acct, lo, hi, centre, R, (lo - centre) / R, (hi - centre) / R,
                      s2, s2u, m0u, S0u, w, np.log(w), theta0, theta_f)

    def _batch_sizes(self, n, T, B):
        """Steps of every release, epoch after epoch (public: n, T, B): 'shuffle' cuts each
        epoch's permutation into ceil(n / B) batches (the last one shorter); 'uniform' draws
        ceil(n / B) batches of exactly B rows per epoch."""
        k = -(-n // B)
        if self.sampling == "uniform":
            return [B] * (k * T)
        return ([B] * (k - 1) + [n - (k - 1) * B]) * T

    def _order(self, key, n, T, B):
        """Row of every step: a fresh permutation per epoch cut into batches ('shuffle'), or, per
        batch, B distinct rows drawn uniformly ('uniform')."""
        u = np.empty(n)
        if self.sampling == "uniform":
            sizes = self._batch_sizes(n, T, B)
            out = np.empty(int(sum(sizes)), dtype=np.int64)
            pos = 0
            for r, b in enumerate(sizes):
                _core_rng.fill_uniform(derive_key(key, "order", r), 0, u, 1)
                out[pos:pos + b] = np.argsort(u, kind="stable")[:b]
                pos += b
            return out
        order = np.empty(n * T, dtype=np.int64)
        for t in range(T):
            _core_rng.fill_uniform(derive_key(key, "order", t), 0, u, 1)
            order[t * n:(t + 1) * n] = np.argsort(u, kind="stable")
        return order

    def _slots(self, grouping, key, m, n_threads):
        """Row of each of the G m slots of a person-level fit (-1: empty): groups in the order of
        their stream ids (from their ids alone), each with its at most m kept rows
        (:func:`~dpem_fast._engine._groups.bound_mask`) in row order, then its empty slots.
        Nothing depends on how the groups are numbered or on the order of rows across groups."""
        keep = np.flatnonzero(bound_mask(grouping, bounding_key(key), m, n_threads))
        G = grouping.streams.size
        pos = np.empty(G, dtype=np.int64)
        pos[np.lexsort((np.arange(G), grouping.streams))] = np.arange(G)
        c = grouping.codes[keep]
        by_group = np.argsort(c, kind="stable")
        cs = c[by_group]
        starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
        within = np.arange(cs.size) - np.repeat(starts, np.diff(np.r_[starts, cs.size]))
        slots = np.full(G * m, -1, dtype=np.int64)
        slots[pos[cs] * m + within] = keep[by_group]
        return slots

    def _fit_record(self, loop, B, C, eps, n_releases, m):
        """The record of a private fit that ran ``loop`` (person-level: over G m slots; the model page)."""
        scheme = ("each row in exactly T releases (one per epoch); T-fold adaptive composition, "
                  "no amplification" if self.sampling == "shuffle" else
                  "each release B distinct uniformly drawn rows; the Gaussian mechanism on a "
                  "size-B subsample without replacement (Wang et al. 2019), composed")
        r = loop.plan.releases["factor"]
        return loop.record(
            mechanism="gaussian", epsilon=eps, n_iter=n_releases,
            data_domain={"source": "the intermediate factor's natural parameters are clipped to norm "
                                   f"{C:.6g} in the domain's units (rows clipped to the box)",
                         "radius": None},
            notes=(f"sampling={self.sampling!r}: {scheme}",
                   (f"sensitivity 2 gamma C / N = {r.sensitivity:.4g} of the shared factor (Prop. 1), " if m is None
                    else f"sensitivity 2 m gamma C / N = {r.sensitivity:.4g} of the shared factor over N = G m "
                         "slots, ")
                   + f"batch_size={B}"))

    def _plan_for(self, d, n_public):
        """The plan of :meth:`~dpem_fast._engine._estimator.PrivateEstimator.privacy_plan`: the
        row count n is public under replace-one and sets the batches and the sensitivity."""
        if self._max_rows_per_group() is not None:
            raise ValueError("max_rows_per_group: a person-level DP-SEP plan depends on the number of groups; "
                             "privacy_plan covers row-level fits (the fit's privacy_ records a person-level one)")
        if n_public is None:
            raise ValueError("n_samples: DP-SEP's plan depends on the row count (public under replace-one); "
                             "pass n_samples")
        st = self._setup(n_public, d, make_key(0))     # the key seeds the initial factor only
        sizes = self._batch_sizes(st.n, st.T, st.B)
        return self._calibrated_plan(st.n, st.T, st.B, sizes, st.J, d + d * d, d, st.eps, st.delta, st.C, st.gamma,
                                     st.acct)

    def _calibrated_plan(self, n, T, B, sizes, J, P, d, eps, delta, C, gamma, acct, m=None):
        """The calibrated :class:`~dpem_fast._engine._plan.Plan` (one release ``"factor"``, the
        plan's event :func:`sep_event`), refusing a hopeless one from public quantities; no
        charge, no record (the audit calls it too).  ``m``: a person-level fit's rows per group."""
        unit = "row" if m is None else "group"
        # Prop. 1's 2 γ C / N (m times per group), widened by the float rounding of the release
        sens = 2.0 * gamma * C / n * (1 if m is None else m) * sep_rounding_factor(B, 1 if m is None else m, J * P)

        def make_event(z):
            return sep_event(z, n, T, self.sampling, B, unit)

        # the engine calibrates z for sep_event and records the one release (the event seam)
        plan = make_event_plan(make_event, [EventRelease("factor", sens, (J, P), len(sizes), J * P)],
                               epsilon=eps, delta=delta, neighbouring="replace", accountant=acct,
                               max_rows_per_group=m)
        tau = _posterior_noise(plan.releases["factor"].noise_scale, sizes, gamma, n)
        margin = _margin(d, tau)
        if n * C <= margin:                     # public: decided before the budget is charged
            raise ValueError(
                f"n_samples={n} is too small for epsilon={eps:g} with n_epochs={T} and batch_size={B}: "
                f"the released factor's noise (threshold {margin:.3g}) exceeds the largest signal it can "
                f"carry (n_samples * clip_norm = {n * C:.3g}), so the fit could only return the prior. "
                "Raise epsilon, lower n_epochs, raise batch_size, or fit more rows.")
        return plan

    # ------------------------------------------------------------ inference
    def _log_joint(self, X):
        check_is_fitted(self, "means_")
        X = validate_table(self, X, dtype=np.float64, reset=False)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model {self.n_features_in_}")
        d = X.shape[1]
        out = np.empty((X.shape[0], self.means_.shape[0]))
        for j, (m, V) in enumerate(zip(self.means_, self.means_covariance_)):
            A = V + self.component_variance_ * np.eye(d)
            L = np.linalg.cholesky(A)
            u = np.linalg.solve(L, (X - m).T)
            out[:, j] = (math.log(self.weights_[j]) - 0.5 * (d * math.log(2 * math.pi)
                         + 2 * np.log(np.diag(L)).sum()) - 0.5 * (u * u).sum(axis=0))
        return out

    def score_samples(self, X):
        """Log posterior-predictive density of each row."""
        lj = self._log_joint(X)
        top = lj.max(axis=1, keepdims=True)
        return (top + np.log(np.exp(lj - top).sum(axis=1, keepdims=True)))[:, 0]

    def score(self, X, y=None):
        """Mean log posterior-predictive density."""
        return float(self.score_samples(X).mean())

    def predict_proba(self, X):
        """Probability of each component for each row: ``w_j N(x; m_j, V_j + s² I)``, normalised."""
        lj = self._log_joint(X)
        lj -= lj.max(axis=1, keepdims=True)
        p = np.exp(lj)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Most probable component of each row."""
        return self.predict_proba(X).argmax(axis=1)

