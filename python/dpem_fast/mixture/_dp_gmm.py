"""Differentially private EM for Gaussian mixtures (DP-EM, Park et al. 2017) on the private-EM engine.

The estimator: its parameters, privacy analysis, statistic specs and engine hooks.  The M-step it calls
(noisy statistics to parameters: projections, eigenvalue floors, MAP prior) is
:mod:`dpem_fast.mixture._gmm_mstep`.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _contract
from .._engine import PrivateEM
from .._engine._radius import RADIUS_MIN_ROWS
from .._engine._components import check_counts_resolvable, data_box, initial_means, live_components
from .._engine._specs import moments_joint_bound, soft_counts, weighted_sums
from .._engine._start import private_start, start_specs
from .._threads import effective_n_threads
from .._validation import FINITE, check_positive_int, interval, options, positive_numbers, predicate
from ._common import MixtureInferenceMixin, as_frame
from ._gaussian_block import (COVARIANCES, GAUSSIAN_MERGE_REASON, isotropic_factors, set_fitted_gaussian,
                              start_covariances, typed_covariances)
from ._gmm_mstep import (PRIOR_KEYS, exact_m_step, map_prior, private_full_step, private_m_step,
                         warn_if_covariances_unresolved)
from .._kernels.gmm import (COUNTS, FIRST, SECOND, compute_stats, compute_stats_diag, predict_log_resp,
                            predict_log_resp_diag)

__all__ = ["DPGaussianMixture"]


def _gmm_statistics(X, params, domain, n_threads, covariance_type="full", single=False):
    """The E-step statistics kernel (a Dask task's: the current parameters and the public
    covariance type only).  Full and tied run the full kernel (tied: the pooled second moment,
    summed exactly from every component's block partials); diag and spherical run the diagonal
    kernel (O(n K d): counts, first moments and squared sums; spherical: their row sums, summed
    exactly from every feature's block partials), so that each type releases only its own
    second moments, each entry rounded once (:mod:`~dpem_fast._engine._specs`, "Rounding").
    ``single``: float32 rows run the kernels' float32 path (the estimator's ``_float32_path``,
    which widens the plan's sensitivities to match)."""
    weights, means, _, prec_chol = params
    if COVARIANCES[covariance_type].diagonal:
        prec_diag = np.diagonal(prec_chol, axis1=1, axis2=2)      # the factors are diagonal
        return compute_stats_diag(X, weights, means, prec_diag, n_threads=n_threads, domain=domain,
                                  single=single, second=covariance_type)
    return compute_stats(X, weights, means, prec_chol, n_threads=n_threads, domain=domain, single=single,
                         second=covariance_type)


class DPGaussianMixture(MixtureInferenceMixin, PrivateEM):
    """Gaussian mixture fitted by differentially private EM (moment perturbation).

    Each EM iteration computes the expected sufficient statistics of a
    full-covariance Gaussian mixture in one fused pass over the data (Cython,
    OpenMP), releases them with calibrated noise, and maps the noisy
    statistics to parameters.  Everything after the release is
    post-processing of noisy statistics and public constants.

    Parameters
    ----------
    n_components : int or "auto", default=1
        Number of mixture components K.  ``"auto"``: chosen privately among 1 ..
        ``max_components`` within this fit's (ε, δ) by over-provisioning: one fit with
        ``max_components`` components on the whole budget (means from the private start,
        ``means_init="private"``, unless ``means_init`` is given), whose released model keeps
        only the components its noisy counts resolve (the dead-component rule, see Privacy;
        no budget spent on the choice); ``n_components_`` tells how many (measured against
        :class:`dpem_fast.model_selection.PrivateModelSelection` in docs/model_selection.rst).
    covariance_type : {"full", "diag", "tied", "spherical"}, default="full"
        scikit-learn's covariance structures: one full matrix per component, one diagonal per
        component, one full matrix shared by all components, or one variance per component.
        Each type releases only the second moments it needs (see Privacy); ``covariances_``,
        ``precisions_`` and ``precisions_cholesky_`` take scikit-learn's shapes.  ``"spherical"``
        maps every feature with one scale (the largest of the domain's, a public coarsening),
        so that its covariances are spherical in the original units.

        .. versionadded:: 0.1 (issue 24)
    epsilon : float, default=1.0
        Total privacy budget ε of the whole fit (all iterations).  ``inf``
        fits the non-private EM (no clipping, no noise), which reproduces
        scikit-learn's ``GaussianMixture`` given the same initial parameters.
    delta : float, default=1e-5
        Total δ, in (0, 1).
    max_iter : int, default=20
        Number of EM iterations J.  In private mode exactly J iterations run
        (no data-dependent early stopping).
    scenario : {"GGG", "LLG"}, default="GGG"
        Noise for (counts, first moments, second moments): all Gaussian
        (GGG), or Laplace, Laplace, Gaussian (LLG) (DP-EM Sec. 4.2).
    accountant : {"gdp", "rdp", "zcdp", "moments", "advanced", "linear", "pld"} or None
        Composition used to calibrate the noise to the total (ε, δ).  ``None``
        picks the tightest available: exact Gaussian DP (``"gdp"``) for GGG,
        Rényi DP over a fine grid of orders for LLG, zCDP with the tight
        conversion for ``noise="discrete_gaussian"``.  ``"moments"`` is the
        paper's integer-order moments accountant, ``"zcdp"`` its zCDP
        composition; ``"pld"`` is the native privacy-loss-distribution
        accountant (tight numerical composition, an upper bound).
    noise : {"gaussian", "discrete_gaussian"}, default="gaussian"
        ``"discrete_gaussian"`` releases every statistic as exact discrete Gaussian integers on a
        lattice (no floating point enters the noise; sensitivities widened by at most 1 %),
        accounted with the discrete Gaussian's ρ-zCDP bound (CKS 2020, Thm 4), by default with
        ``accountant="zcdp"`` (``"gdp"`` is refused).  Needs ``scenario="GGG"``.
    estimator : {"mle", "map"}, default="mle"
        M-step on noisy statistics: maximum likelihood, or the posterior mode
        under a Dirichlet / Normal-inverse-Wishart prior (DP-EM footnotes 7-8).
    prior : dict or None
        MAP hyperparameters in the scaled units (rows in the unit ball):
        ``alpha`` (Dirichlet, default 1), ``kappa0`` (default 1), ``mean0``
        (default 0), ``nu0`` (default n_features + 2), ``psi0`` (scale matrix,
        default ``0.01 * I``).  Public constants: they do not touch the data.
    data_norm : float or None
        Declared bound on the Euclidean norm of a row (after centring at the
        middle of ``bounds`` if those are given).  Rows beyond it are clipped.
    bounds : tuple (lower, upper), "from_data" or None
        Declared per-feature box; rows are clipped to it, centred at its
        middle and each feature divided by ``sqrt(n_features)`` times its
        half-width (the box becomes a cube inside the unit ball; with
        ``data_norm`` every feature is divided by ``data_norm`` instead).
        Released means end inside the box.  With neither ``data_norm`` nor ``bounds`` (the
        default) the box is **estimated privately** from two noisy histograms on
        ``DOMAIN_SHARE`` (10 %) of the budget (:mod:`dpem_fast._engine._domain`); declared bounds
        leave the whole budget to the mixture and are usually tighter.  ``"from_data"`` uses
        the data's exact bounding box: an explicit opt-in that is **not
        private** — it raises a ``PrivacyLeakWarning``, ``privacy_.private``
        is False and no ``budget`` ledger is accepted.  A declared box without ``data_norm``
        also releases the radius of the rows inside it (one norm histogram on 5 % of the
        plan, :mod:`dpem_fast._engine._radius`): the fit works in the ball of that radius
        (at most 3 % of the rows projected onto it), ``privacy_.data_domain["radius"]``.

        .. versionchanged:: 0.1 (issue 40)
    neighbouring : {"replace", "add_remove"}, default="replace"
        Neighbouring relation: datasets differing by replacing one row, or by
        adding/removing one row.  Every sensitivity below is derived under it.
    budget_split : "auto" or tuple of 3 positive floats, default="auto"
        Relative share of the per-iteration privacy loss given to counts, first moments and
        second moments (of ρ = 1/(2 z²) for Gaussian releases, of ε for Laplace ones).
        ``"auto"``: shares ∝ √m_r, m_r the noised coordinates of each release (the split that
        minimises the total noise variance in sensitivity units; public K, d); with LLG the
        equal split.  ``(1, 1, 1)`` is the paper's equal split.
    averaging : {"tail", "none"}, default="tail"
        ``"tail"``: each of the last ``max_iter // 2`` M-steps uses the mean of the noisy
        statistics released since the tail began (Polyak–Ruppert averaging; post-processing),
        so the final parameters see about ``2 / max_iter`` of one release's noise variance.
        ``"none"``: every M-step uses its own iteration's release (the paper's method).
    weights_init, means_init, precisions_init : array-like or None
        Initial parameters in the original units (public; scikit-learn's
        conventions).  Without them the initialisation is data-independent:
        uniform weights, means drawn uniformly from the ball of radius 1/2 of
        the declared domain (with the fit's own random stream) and moved into
        the box's image, and isotropic covariances ``I / (4 n_features)`` in
        the scaled units (``diag(s_i²) / (4 n_features)`` in original units).
        ``means_init="private"``: the means from the private start (:mod:`dpem_fast._engine._start`:
        two releases in the fit's plan on 20 % of it); the non-private fit treats it as None.
    reg_covar : float, default=1e-6
        Added to the diagonal of covariances (non-private mode, as
        scikit-learn) and lower bound of covariance eigenvalues (private mode).
    n_threads : int or None
        OpenMP threads for the E-step and the noise (``None``: all cores or
        ``OMP_NUM_THREADS``).  Results do not depend on it.
    random_state : None, int, SeedSequence or Generator
        Key of the fit's noise streams.  ``None`` (default) uses OS entropy.
        A fixed seed is for tests and research only: anyone who knows it can
        recompute and subtract the noise, and **every fit with the same seed
        draws identical noise** — cross-validation folds, ``clone`` copies and
        refits on other data then share their noise, so differences between
        such fits are noise-free differences of the data.  Never fix the seed
        of fits whose outputs are published together.
    budget : dpem_fast.accounting.BudgetLedger or None
        If given, the fit's whole plan is charged to it before any statistic of the data is
        computed; a fit that would exceed it raises ``BudgetExceededError``.  The ledger must
        account under the fit's ``neighbouring`` relation; ``epsilon=inf`` and
        ``bounds="from_data"`` fits refuse one.  ``clone`` keeps the very ledger.
    verbose : int, default=0
        ``>= 1``: a progress bar on stderr (tqdm, ``pip install dpem_fast[progress]``; plain
        lines without it) with the seconds of the last iteration and the ε spent so far;
        nothing computed from the data is shown.  0: silent.
    max_components : int, default=10
        Largest K tried by ``n_components="auto"`` (unused otherwise).
    max_rows_per_group : int or None, default=None
        Person-level privacy (issue 27): with ``fit(X, groups=...)`` (one group id per row, e.g.
        a person, or a DataFrame column name) each group keeps at most this many rows, chosen
        uniformly at random with the fit's key, every sensitivity is m times a row's (derived in
        :mod:`dpem_fast._engine._groups`) and the guarantee is for adding/removing or replacing
        one group's rows.  Required with ``groups``; None: row-level privacy.  A public
        constant: choose it near or below the typical number of rows per group (docs: "Person-level
        privacy").

        .. versionadded:: 0.1 (issue 27)

    Attributes
    ----------
    weights_ : ndarray of shape ``(n_components_,)``
    means_ : ndarray of shape ``(n_components_, n_features)``
    covariances_ : ndarray
        Shape ``(n_components_, n_features, n_features)`` for full, ``(n_components_,
        n_features)`` for diag, ``(n_features, n_features)`` for tied, ``(n_components_,)``
        for spherical.
    precisions_cholesky_ : ndarray of the shape of ``covariances_``
    precisions_ : ndarray of the shape of ``covariances_``
    n_components_ : int
        Components of the released model: ``n_components`` less those a private
        fit dropped as dead (see Privacy); the arrays above have this length.
    n_iter_ : int
    converged_ : bool
        Always False in private mode (no convergence test is run on private data).
    n_features_in_ : int
    privacy_ : PrivacyRecord or None
        Mechanism, neighbouring relation, accountant, (ε, δ), per-release
        sensitivities and noise scales and the plan as events.
    diagnostics_ : dict
        Rows clipped and training log-likelihood per iteration.  **Computed
        from the private data: not private, do not publish.**

    Privacy
    -------
    Rows are clipped into the unit ball by the declared (or privately estimated) domain; a row's
    responsibilities depend only on it and on released parameters.  Each iteration releases,
    for all K components at once, the counts ``Σ_i γ_ik``, the first moments ``Σ_i γ_ik x_i``
    and the covariance type's second moments (full ``Σ_i γ_ik x_i x_iᵀ`` with symmetric Gaussian noise,
    σ on the diagonal and σ/√2 above it, diag ``Σ_i γ_ik x_i²``, spherical ``Σ_i γ_ik ‖x_i‖²``, tied
    ``Σ_i x_i x_iᵀ``), with ℓ2 sensitivities √2, 2, √2 under replace-one and 1, 1, 1 under
    add/remove (3 releases instead of the paper's 2K + 1).  Under replace-one an iteration's
    Gaussian releases are accounted as one Gaussian mechanism (``privacy_.joint_multiplier``;
    sup ``a_1/2 + a_2 + max(a_c, φ)`` instead of ``a_c + a_1 + a_2``, attained).  Float32 rows
    (row-level replace-one) widen every sensitivity by the factor ``1 + 2⁻⁸``.  Derivations:
    :mod:`dpem_fast._engine._specs` and the model's documentation page ("Privacy analysis in
    full").

    Post-processing only after the releases: the M-step sees the noisy statistics and the plan's
    public noise scales; tail averaging; components whose final noisy count is at most
    ``max(1, 3σ_N)`` are dropped (``n_components_``, a ``NoiseDominatedWarning`` when most are),
    and under replace-one a fit whose counts cannot be told from noise is refused before the
    charge.  The initialisation is data-independent, the user's public parameters or the private
    start; the iteration count is fixed.  ``diagnostics_`` are read from the data: not private.

    References
    ----------
    M. Park, J. Foulds, K. Chaudhuri and M. Welling, "DP-EM: Differentially Private Expectation
    Maximization", AISTATS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from dpem_fast import DPGaussianMixture
    >>> X = np.random.default_rng(0).normal(size=(20000, 2)).clip(-4, 4)
    >>> gm = DPGaussianMixture(2, epsilon=1.0, delta=1e-5, bounds=(-4, 4),
    ...                        random_state=0).fit(X)
    >>> gm.means_.shape
    (2, 2)
    """

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line
    _cli_name = "gmm"
    _saved = ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_", "converged_",
              "n_iter_", "n_features_in_")
    _parameter_constraints = {
        "n_components": [interval("int", 1), options("auto")],
        "covariance_type": [options(*COVARIANCES)],
        "scenario": [options("GGG", "LLG")],
        "estimator": [options("mle", "map")],
        "prior": [None, predicate(dict, lambda p: set(p) <= PRIOR_KEYS,
                                  f"a dict with keys among {sorted(PRIOR_KEYS)}")],
        "budget_split": [options("auto"), positive_numbers(3)],
        "averaging": [options("tail", "none")],
        "weights_init": [None, FINITE],
        "means_init": [None, options("private"), FINITE],
        "precisions_init": [None, FINITE],
        "reg_covar": [interval("real", 0)],
        "max_components": [interval("int", 1)],
    }

    def __init__(
        self,
        n_components=1,
        *,
        covariance_type="full",
        epsilon=1.0,
        delta=1e-5,
        max_iter=20,
        scenario="GGG",
        accountant=None,
        noise="gaussian",
        estimator="mle",
        prior=None,
        data_norm=None,
        bounds=None,
        neighbouring="replace",
        budget_split="auto",
        averaging="tail",
        weights_init=None,
        means_init=None,
        precisions_init=None,
        reg_covar=1e-6,
        n_threads=None,
        random_state=None,
        budget=None,
        verbose=0,
        max_components=10,
        max_rows_per_group=None,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.epsilon = epsilon
        self.delta = delta
        self.max_iter = max_iter
        self.scenario = scenario
        self.accountant = accountant
        self.noise = noise
        self.estimator = estimator
        self.prior = prior
        self.data_norm = data_norm
        self.bounds = bounds
        self.neighbouring = neighbouring
        self.budget_split = budget_split
        self.averaging = averaging
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.reg_covar = reg_covar
        self.n_threads = n_threads
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose
        self.max_components = max_components
        self.max_rows_per_group = max_rows_per_group

    def fit(self, X, y=None, groups=None):
        """Fit the mixture (see :meth:`PrivateEM.fit`); ``n_components="auto"``: one fit with
        ``max_components`` components, pruned (:func:`dpem_fast.model_selection.fit_auto`,
        ``strategy="prune"``)."""
        if isinstance(self.n_components, str) and self.n_components == "auto":
            from ..model_selection import fit_auto
            return fit_auto(self, "n_components", "max_components", X, strategy="prune",
                            overrides=self._auto_overrides(), groups=groups)
        return super().fit(X, y, groups)

    def _auto_overrides(self):
        """The parameters of the one fit behind ``n_components="auto"`` besides its size
        (``max_components``): the private start unless the user gave means."""
        return {"means_init": "private"} if self.means_init is None else {}

    # ------------------------------------------------------------ model hooks
    def _check_model_params(self, n_samples, n_features):
        K = self.n_components
        super()._check_model_params(n_samples, n_features)     # n_samples >= K where public
        if self.estimator == "map" and self.covariance_type not in ("full", "diag"):
            raise ValueError(f"estimator='map' supports covariance_type 'full' and 'diag' only (no prior is "
                             f"derived for {self.covariance_type!r}); use estimator='mle'")
        self._check_initial_parameters(K, n_features)

    def _statistic_specs(self, n_features):
        """Counts, first moments and the covariance type's second moments, with the
        sensitivities of the class docstring."""
        K, d = self.n_components, n_features
        return (soft_counts(COUNTS, K), weighted_sums(FIRST, (K, d), d), self._ctype.second_moments(K, d))

    def _mechanisms(self):
        if self.scenario == "GGG":
            return None
        return {COUNTS: "laplace", FIRST: "laplace", SECOND: "gaussian"}

    def _shares(self):
        return dict(zip((COUNTS, FIRST, SECOND), map(float, self._split())))

    def _split(self):
        """The budget split; ``"auto"``: ∝ √(noised coordinates) (see ``budget_split``)."""
        if isinstance(self.budget_split, str) and self.scenario == "LLG":
            return (1.0, 1.0, 1.0)
        if isinstance(self.budget_split, str):
            K, d = self.n_components, self.n_features_in_
            return (math.sqrt(K), math.sqrt(K * d), math.sqrt(self._ctype.n_parameters(K, d)))
        return tuple(self.budget_split)

    def _n_averaged(self, n_iter):
        return n_iter // 2 if self.averaging == "tail" else 0

    def _joint_sensitivity(self, a, neighbouring):
        """sup over neighbours of Σ_r ‖δ_r‖²/σ_r² for one iteration's three releases, given
        ``a[r] = Δ_r²/σ_r²`` (derived in :mod:`dpem_fast._engine._specs`, "Joint bound")."""
        return moments_joint_bound(a[FIRST], a[SECOND], a[COUNTS], neighbouring=neighbouring,
                                   second=self.covariance_type)

    def _releases_radius(self, source, n_public):
        """A declared box without ``data_norm`` (public), from ``RADIUS_MIN_ROWS`` rows where n is
        public: the rows' radius in it is released (:mod:`~dpem_fast._engine._radius`, issue 40)
        and the fit works in that ball."""
        return (source == "declared" and self.data_norm is None and self.bounds is not None
                and (n_public is None or n_public >= RADIUS_MIN_ROWS))

    def _public_means(self):
        """The user's public ``means_init`` array, or None (also for ``"private"``)."""
        return None if isinstance(self.means_init, str) else self.means_init

    def _start_specs(self, n_features):
        """The private start's two releases when ``means_init="private"``."""
        if isinstance(self.means_init, str) and self.means_init == "private":
            return start_specs(self.n_components, n_features)
        return ()

    def _private_start(self, rows, layer, domain, key, n_threads):
        """The data-independent (or user-given) weights, the means from the private start
        (:func:`~dpem_fast._engine._start.private_start`; the data-independent means fill in for
        missing candidates) and, unless ``precisions_init`` is given, covariances scaled to the
        start's centres (:func:`~dpem_fast.mixture._gaussian_block.start_covariances`)."""
        weights, means, covs, prec_chol = self._initial_parameters(rows.summary, domain, key, True)
        means = private_start(rows, layer, domain, key, self.n_components, means)
        if self.precisions_init is None:
            covs, prec_chol = start_covariances(self._ctype, means)
        return weights, means, covs, prec_chol

    @property
    def _ctype(self):
        """The covariance type's entry of the Gaussian block's table (a model loaded from an old
        file without ``covariance_type`` is full)."""
        return COVARIANCES[getattr(self, "covariance_type", "full")]

    def _describe(self):
        init = ("private start of the means (noisy random-hyperplane cell counts and sums, 20 % of the plan)"
                if isinstance(self.means_init, str) else "user-supplied public parameters"
                if self.means_init is not None
                else "data-independent (random draw in the domain from the fit's own stream)")
        return (f"DP-EM moment perturbation (Park et al. 2017), scenario {self.scenario}, "
                f"{self.estimator.upper()} M-step"
                + ("" if self.covariance_type == "full" else f", covariance_type={self.covariance_type!r}"),
                ("initialisation: " + init,) + self._components_note())

    def _float32_statistics(self):
        """The E-step kernels have a float32 path (every covariance type); the engine's
        :meth:`_float32_path` says where a fit may use it (row-level replace-one)."""
        return True

    def _block_rows(self, n_rows, d):
        """Rows per block of the E-step kernel the type runs (the table's ``kernel_doubles``: full and
        tied K (d² + d + 1) doubles of partials a block, diag and spherical K (2d + 1)) for a call on
        at most ``n_rows`` rows."""
        if not isinstance(self.n_components, (int, np.integer)):     # "auto": the default bound
            return super()._block_rows(n_rows, d)
        return _contract.max_block_rows(int(n_rows), self._ctype.kernel_doubles(int(self.n_components), d))

    def _statistics_task(self):
        kw = {}
        if self.covariance_type != "full":
            kw["covariance_type"] = str(self.covariance_type)
        if self._float32_path():
            kw["single"] = True
        return functools.partial(_gmm_statistics, **kw) if kw else _gmm_statistics

    def _working_domain(self, domain):
        """Spherical covariances need one scale for every feature (the table's ``working_domain``)."""
        return self._ctype.working_domain(domain)

    def _update(self, noisy, params, ctx):
        if self.covariance_type == "full" and self.estimator == "mle":
            # the same M-step and factors, compiled (the serial part of an iteration; issue 26)
            return private_full_step(noisy[COUNTS], noisy[FIRST], noisy[SECOND], ctx.releases, self.reg_covar,
                                     ctx.domain, ctx.n_threads)
        # MLE or MAP (:mod:`dpem_fast.mixture._gmm_mstep`), means moved into the image of the domain
        prior = map_prior(self.prior, noisy[FIRST].shape[1]) if self.estimator == "map" else None
        weights, means, covs = private_m_step(noisy[COUNTS], noisy[FIRST], noisy[SECOND], ctx.releases, self.reg_covar,
                                              prior, ctx.domain, self.covariance_type, ctx.n_public)
        return weights, means, covs, self._ctype.precision_cholesky(covs, *means.shape)

    def _check_plan(self, plan, n_public, rounds):
        check_counts_resolvable(n_public, plan.releases[COUNTS], self._n_averaged(rounds), type(self).__name__)

    def _finish(self, params, noisy, ctx):
        """Drop the components whose noisy counts are indistinguishable from zero
        (:func:`~dpem_fast._engine._components.live_components`; post-processing)."""
        live = self._keep_live(live_components(noisy[COUNTS], ctx.releases[COUNTS], type(self).__name__,
                                               choosing=getattr(self, "_choosing_k", False),
                                               n_public=ctx.n_public, resolution=GAUSSIAN_MERGE_REASON))
        shared = self._ctype.shared     # one covariance for all K (tied): estimated from all counts
        warn_if_covariances_unresolved(noisy[COUNTS] if shared else noisy[COUNTS][live], ctx.releases, ctx.domain,
                                       type(self).__name__, self.covariance_type, ctx.n_public)
        weights, means, covs, prec_chol = params
        return weights[live] / weights[live].sum(), means[live], covs if shared else covs[live], prec_chol[live]

    def _exact_update(self, stats, params):
        weights, means, covs = self._exact_m_step(stats)
        return weights, means, covs, self._ctype.precision_cholesky(covs, *means.shape)

    def _set_fitted(self, params, domain, dtype):
        """Parameters back to the original units (post-processing; the table's back-map)."""
        set_fitted_gaussian(self, self._ctype, *params, domain, dtype)
        self.converged_ = False

    # -------------------------------------------------------- initialisation
    def _check_initial_parameters(self, K, d):
        """Shapes and definiteness of user-supplied (public) initial parameters (finite: declared)."""
        if self.weights_init is not None:
            weights = np.asarray(self.weights_init, dtype=np.float64)
            if weights.shape != (K,) or np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
                raise ValueError("weights_init must have shape (n_components,), be >= 0 and sum to 1")
        if self.means_init is not None and not isinstance(self.means_init, str):
            if np.shape(self.means_init) != (K, d):
                raise ValueError(f"means_init must have shape ({K}, {d}), got {np.shape(self.means_init)}")
        if self.precisions_init is not None:
            prec = np.asarray(self.precisions_init, dtype=np.float64)
            shape = self._ctype.shape(K, d)
            if prec.shape != shape:
                raise ValueError(f"precisions_init must have shape {shape} for covariance_type="
                                 f"{self.covariance_type!r}, got {prec.shape}")
            if self._ctype.diagonal:
                if np.any(prec <= 0):
                    raise ValueError("precisions_init must be finite and > 0")
                return
            if not np.allclose(prec, np.swapaxes(prec, -1, -2)):
                raise ValueError("precisions_init must be finite symmetric positive-definite matrices")
            for k, p in enumerate(prec.reshape(-1, d, d)):
                if np.linalg.eigvalsh(p).min() <= 0:
                    raise ValueError(f"precisions_init[{k}] is not positive definite" if prec.ndim == 3
                                     else "precisions_init is not positive definite")

    def _initial_parameters(self, summary, domain, key, private):
        """Initial (weights, means, covariances, precision Cholesky factors) in working units.

        Private mode works in the unit ball of the domain; ``summary`` then holds only the
        shape.  The non-private mode works in the original units; without user-supplied
        parameters it starts from the same kind of random draw, placed in the data's
        bounding box (``summary.column_min`` / ``column_max``: reading the data is allowed
        there) mapped per feature as a declared box would be.  The draw: means uniform in
        the ball of radius 1/2 of that geometry, moved into the box's image
        (:func:`~dpem_fast._preprocess.project_into_domain`), covariances ``I / (4 d)`` in
        its units (``diag(s_i²) / (4 d)`` in the original units).
        """
        K, d = self.n_components, summary.n_features
        box = None
        if not private and (self._public_means() is None or self.precisions_init is None):
            box = data_box(summary.column_min, summary.column_max)
        init_dom = domain if box is None else box
        if self.weights_init is not None:
            weights = np.asarray(self.weights_init, dtype=np.float64)
        else:
            weights = np.full(K, 1.0 / K)
        if self._public_means() is not None:
            means = domain.to_scaled(self.means_init)
        else:
            means = initial_means(K, d, key, domain, box)
        if self.precisions_init is not None:
            prec_chol = self._ctype.initial_factors(np.asarray(self.precisions_init, dtype=np.float64), domain.scale,
                                                    K, d)
        else:
            ratio = domain.scale / init_dom.scale       # maps the init geometry -> working units
            prec_chol = isotropic_factors(self._ctype, math.sqrt(4.0 * d) * ratio, K)
        return weights, means, typed_covariances(self._ctype, prec_chol), prec_chol

    def _exact_m_step(self, stats):
        """Non-private M-step, numerically as scikit-learn's (Eq. 11)."""
        return exact_m_step(stats, self.reg_covar, self.covariance_type)

    # ------------------------------------------------------------- inference
    def _log_resp(self, X):
        X = self._check_X(X)
        means = np.asarray(self.means_, dtype=np.float64)
        # the diagonal kernel (O(n K d)) takes (K, d) factors, the full one (K, d, d): a tied one expanded
        prec = self._ctype.kernel_factors(np.asarray(self.precisions_cholesky_, dtype=np.float64), *means.shape)
        predict = predict_log_resp_diag if self._ctype.diagonal else predict_log_resp
        return predict(X, self.weights_, means, prec, n_threads=effective_n_threads(self.n_threads))

    def sample(self, n_samples=1, *, shuffle=True, random_state=None):
        """Synthetic data from the fitted (private) model: post-processing, no extra privacy cost.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features), or a pandas DataFrame with the fitted
            column names when the model was fitted on a DataFrame
        y : ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "means_")
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = np.random.default_rng(random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        ct = self._ctype
        X = np.vstack([ct.draw(rng, m, ct.component(self.covariances_, k), int(c))
                       for k, (m, c) in enumerate(zip(self.means_, counts))])
        y = np.repeat(np.arange(self.n_components_), counts)
        if shuffle:
            perm = rng.permutation(n_samples)
            X, y = X[perm], y[perm]
        return as_frame(self, X), y

    def _n_parameters(self):
        K, d = self.means_.shape
        return int(self._ctype.n_parameters(K, d) + K * d + K - 1)

    def bic(self, X):
        """Bayesian information criterion on X (lower is better)."""
        X = self._check_X(X)
        return -2 * self.score(X) * X.shape[0] + self._n_parameters() * np.log(X.shape[0])

    def aic(self, X):
        """Akaike information criterion on X (lower is better)."""
        X = self._check_X(X)
        return -2 * self.score(X) * X.shape[0] + 2 * self._n_parameters()
