"""Differentially private k-means (DP-EM's k-means and DPLloyd) on the private-EM engine."""
from __future__ import annotations

import math

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _contract
from .._engine import PrivateEM
from .._engine._components import check_counts_resolvable, data_box, initial_means, live_components, noise_std
from .._engine._specs import soft_counts, weighted_sums
from .._engine._start import private_start, start_specs
from .._preprocess import project_into_domain
from .._threads import effective_n_threads
from .._validation import FINITE, interval, options, positive_numbers, validate_table
from .._kernels.kmeans import COUNTS, SUMS, kmeans_assign, kmeans_stats, nicv

__all__ = ["DPKMeans"]

_METHODS = ("dpem", "dplloyd")
#: Rows per slice of ``transform`` (a (rows, K) float64 temporary).
_TRANSFORM_ROWS = 65536


def _kmeans_statistics(X, params, domain, n_threads):
    """The assignment statistics kernel (a Dask task's: the current centres only)."""
    return kmeans_stats(X, params, n_threads=n_threads, domain=domain)


class DPKMeans(TransformerMixin, PrivateEM):
    """k-means clustering fitted by differentially private Lloyd iterations.

    Each iteration assigns every row to its nearest centre (Cython, OpenMP), releases the
    per-cluster counts ``N_k`` and coordinate sums ``S_k`` with calibrated noise, and sets
    each centre to ``S̃_k / Ñ_k``.  Everything after the release is post-processing of
    noisy statistics and public constants.  Two methods share the statistics and differ in
    the noise and the accounting:

    - ``"dpem"`` (Park et al. 2017, Sec. 7, the k-means of Fig. 4): Gaussian noise with the
      sensitivities of DP-EM Eq. 12 and 14 (tight versions below), calibrated by the
      engine's accountant for the total (ε, δ) (exact Gaussian DP by default), with the two
      releases of an iteration accounted jointly under replace-one;
      ``noise="discrete_gaussian"`` releases exact discrete Gaussian integers instead.
    - ``"dplloyd"`` (Blum, Dwork, McSherry & Nissim 2005, as summarised by Su et al. 2016):
      Laplace noise on counts and sums.  ``accountant="linear"`` (the default for this
      method) is the original algorithm's linear composition; ``accountant="zcdp"`` the
      DP-EM paper's second baseline (zCDP composition of the same Laplace releases).

    Parameters
    ----------
    n_clusters : int or "auto", default=8
        Number of clusters K (at most the number of rows).  ``"auto"``: chosen privately
        among 1 .. ``max_clusters`` within this fit's (ε, δ)
        (:func:`dpem_fast.model_selection.select_size`; the declared domain is required);
        ``n_clusters_`` tells which was chosen and ``privacy_`` is the whole selection's.
    epsilon : float, default=1.0
        Total privacy budget ε of the whole fit.  ``inf`` runs plain Lloyd (no clipping,
        no noise), which reproduces scikit-learn's ``KMeans(algorithm="lloyd")`` from the
        same initial centres while no cluster empties.
    delta : float, default=1e-5
        Total δ, in (0, 1).
    method : {"dpem", "dplloyd"}, default="dpem"
    accountant : str or None
        Composition used to calibrate the noise (``dpem_fast.accounting.ACCOUNTANTS``).
        ``None``: exact Gaussian DP (``"gdp"``) for ``"dpem"`` (zCDP with discrete noise);
        ``"linear"`` for ``"dplloyd"`` (the original algorithm).
    max_iter : int, default=10
        Number of Lloyd iterations J.  In private mode exactly J run (no data-dependent
        stopping; ``n_iter_ == max_iter``).
    init : "auto", "private", None or array-like of shape (n_clusters, n_features), default="auto"
        ``"auto"``: ``"private"`` for ``method="dpem"``, ``None`` for ``"dplloyd"`` (the
        published algorithm, one Laplace noise level).  An array: initial centres in the
        original units, **public** parameters (not derived from the private data).  ``None``: data-independent, K points uniform in the ball of radius
        1/2 of the domain (in its unit-ball units), moved into the box's image, drawn from
        the fit's own random stream.  (The non-private fit, ``epsilon=inf``, draws the same
        kind of points in the data's bounding box.)  ``"private"``: a private start on
        :data:`~dpem_fast._engine._start.START_SHARE` (20 %) of the fit's budget: a noisy
        histogram of random-hyperplane cells and noisy sums of its heaviest cells give
        candidate centres, K of them chosen by weighted k-means on the candidates (see Privacy
        and :mod:`dpem_fast._engine._start`).  The non-private fit treats it as ``None``.
        The private start won 33 of 36 comparisons (3 real tables and Google's benchmark, K
        3 / 8 / 16, ε 0.5 / 1 / 4; ``bench/kmeans_start.py``), hence the default.

        .. versionchanged:: issue 24 ``init="private"``, and ``"auto"`` the default (was None)
    data_norm, bounds : as in :class:`~dpem_fast.DPGaussianMixture`
        The declared domain: rows are clipped to ``bounds`` and mapped into the unit ball
        feature by feature (centre the box's middle; feature i divided by ``sqrt(d)`` times
        its half-width, so the box becomes a cube inside the ball, or by ``data_norm`` when
        that is declared).  The private assignment therefore measures distances in these
        per-feature units, and released centres are clipped into the box.  With
        neither (the default) the domain is **estimated privately** on 10 % of the
        budget.  ``bounds="from_data"`` is an explicit, non-private opt-in.
    neighbouring : {"replace", "add_remove"}, default="replace"
    noise : {"gaussian", "discrete_gaussian"}, default="gaussian"
        ``"discrete_gaussian"`` (``"dpem"`` only): exact discrete Gaussian integers; counts
        are integers and need no lattice; sums are rounded onto a lattice (at most 1 %
        wider sensitivity); accounted with ρ-zCDP.
    budget_split : "auto" or tuple of 2 positive floats, default="auto"
        Relative shares of (counts, sums) in each iteration's privacy loss (shares of
        ρ = 1/(2z²) for Gaussian releases, of ε for Laplace).  ``"auto"``: see Privacy.
    random_state : None, int, SeedSequence or Generator
        Key of the fit's noise streams (``None``: OS entropy).  A fixed seed is for tests
        and research: every fit with the same seed draws identical noise.
    n_threads : int or None
        OpenMP threads of the assignment kernel and the noise; results do not depend on it.
    budget : dpem_fast.accounting.BudgetLedger or None
        Charged with the whole plan before any statistic of the data is computed.
    verbose : int, default=0
        ``>= 1``: a progress bar on stderr (tqdm, ``pip install dpem_fast[progress]``; plain
        lines without it) with the seconds of the last iteration and the ε spent so far;
        nothing computed from the data is shown.  0: silent.
    max_clusters : int, default=10
        Largest K tried by ``n_clusters="auto"`` (unused otherwise).

    max_rows_per_group : int or None, default=None
        Person-level privacy with ``fit(X, groups=...)``: at most this many rows per group,
        as in :class:`~dpem_fast.DPGaussianMixture`.

        .. versionadded:: 0.1 (issue 27)

    Attributes
    ----------
    cluster_centers_ : ndarray of shape ``(n_clusters_, n_features)``
        Private centres in the original units (dtype of X).
    n_clusters_ : int
        Live centres: ``n_clusters`` less the dead ones a private fit dropped (see Privacy).
    n_iter_ : int
    n_features_in_ : int
    privacy_ : PrivacyRecord or None
        Method, relation, accountant, (ε, δ), per-release sensitivities and noise scales and
        the plan as events.
    diagnostics_ : dict
        **Computed from the private data: not private, do not publish.**
        ``"train_loglik_per_row"`` holds minus the NICV of each iteration's assignment (in
        the unit-ball units), ``"n_rows_clipped"`` the rows clipped into the domain.

    The training labels and inertia (scikit-learn's ``labels_`` and ``inertia_``) are left
    out: they are functions of the private rows, not of the released centres alone.
    ``predict(X)`` / ``fit_predict(X)`` on the training rows compute them on request; they
    are then as private as X itself (i.e. not at all).

    Privacy
    -------
    Neighbouring relation ``neighbouring`` (one row replaced, or added/removed; a group's rows with
    ``groups``); rows are mapped into the unit ball by the declared or privately estimated domain.
    Each iteration releases the cluster counts (ℓ2 sensitivity 1 add/remove, √2 replace) and the
    cluster sums (1 add/remove, 2 replace), accounted as one Gaussian mechanism with
    ``method="dpem"`` (Laplace with the ℓ1 sensitivities for ``"dplloyd"``).  Small noisy counts keep
    their previous centre; dead clusters are dropped after the last iteration (post-processing).
    The private start spends 20 % of the plan; the iteration count is fixed.  Derivations, the budget
    split and the start: the documentation page, "Privacy analysis in full".
    """

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line
    _cli_name = "kmeans"
    _saved = ("cluster_centers_", "n_iter_", "n_features_in_", "_domain")
    _parameter_constraints = {
        "n_clusters": [interval("int", 1), options("auto")],
        "method": [options(*_METHODS)],
        "init": [options("auto"), options("private"), None, FINITE],
        "budget_split": [options("auto"), positive_numbers(2)],
        "max_clusters": [interval("int", 1)],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        epsilon=1.0,
        delta=1e-5,
        method="dpem",
        accountant=None,
        max_iter=10,
        init="auto",
        data_norm=None,
        bounds=None,
        neighbouring="replace",
        noise="gaussian",
        budget_split="auto",
        random_state=None,
        n_threads=None,
        budget=None,
        verbose=0,
        max_clusters=10,
        max_rows_per_group=None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.accountant = accountant
        self.max_iter = max_iter
        self.init = init
        self.data_norm = data_norm
        self.bounds = bounds
        self.neighbouring = neighbouring
        self.noise = noise
        self.budget_split = budget_split
        self.random_state = random_state
        self.n_threads = n_threads
        self.budget = budget
        self.verbose = verbose
        self.max_clusters = max_clusters
        self.max_rows_per_group = max_rows_per_group

    def fit(self, X, y=None, groups=None):
        """Fit the centres (see :meth:`PrivateEM.fit`); ``n_clusters="auto"`` selects K
        privately first (:func:`dpem_fast.model_selection.fit_auto`)."""
        if isinstance(self.n_clusters, str) and self.n_clusters == "auto":
            from ..model_selection import fit_auto
            return fit_auto(self, "n_clusters", "max_clusters", X, groups=groups)
        return super().fit(X, y, groups)

    # ------------------------------------------------------------ model hooks
    def _check_model_params(self, n_samples, n_features):
        K = self.n_clusters
        if n_samples is not None and n_samples < K:     # None: the count is private
            raise ValueError(f"n_samples={n_samples} should be >= n_clusters={K}")
        if self.method == "dplloyd" and self.noise != "gaussian":
            raise ValueError("noise: method='dplloyd' releases Laplace noise; noise='discrete_gaussian' "
                             "is for method='dpem'")
        if self.init is not None and not isinstance(self.init, str) and np.shape(self.init) != (K, n_features):
            raise ValueError(f"init must have shape ({K}, {n_features}), got {np.shape(self.init)}")

    def _block_rows(self, n_rows, d):
        """Rows per block of the statistics kernel (partials of K (d + 1) + 1 doubles a block,
        its ``block_count``) for a call on at most ``n_rows`` rows (``_specs``, "Rounding")."""
        if not isinstance(self.n_clusters, (int, np.integer)):          # "auto": the default bound
            return super()._block_rows(n_rows, d)
        return _contract.max_block_rows(int(n_rows), int(self.n_clusters) * (d + 1) + 1)
    def _statistic_specs(self, n_features):
        """Counts and sums with the sensitivities of the class docstring."""
        K, d = self.n_clusters, n_features
        return soft_counts(COUNTS, K, integer=True), weighted_sums(SUMS, (K, d), d)

    def _mechanisms(self):
        return {COUNTS: "laplace", SUMS: "laplace"} if self.method == "dplloyd" else None

    def _default_accountant(self, mechanisms, noise):
        if self.method == "dplloyd":
            return "linear"
        return PrivateEM._default_accountant(mechanisms, noise)

    def _shares(self):
        return dict(zip((COUNTS, SUMS), map(float, self._split())))

    def _split(self):
        """The (counts, sums) shares; ``"auto"`` as derived in the class docstring."""
        if not isinstance(self.budget_split, str):
            return tuple(self.budget_split)
        d = self.n_features_in_
        if self.method == "dplloyd":
            return (1.0, math.sqrt(d))
        if self.neighbouring == "replace":
            return (1.0, 2.0) if self.noise == "gaussian" else (1.0, math.sqrt(2.0 * d))
        return (1.0, math.sqrt(d))

    def _joint_sensitivity(self, a, neighbouring):
        """sup over neighbours of Σ_r ‖δ_r‖²/σ_r² for an iteration's two releases, given
        ``a[r] = Δ_r²/σ_r²`` (derivation in the class docstring, "Joint accounting")."""
        a_c, a_s = a[COUNTS], a[SUMS]
        if neighbouring == "add_remove":
            return a_c + a_s
        return max(a_c + a_s / 2.0, a_s)

    def _private_init(self):
        """True when the fit starts privately: ``init="private"``, or ``"auto"`` with ``"dpem"``."""
        return isinstance(self.init, str) and (self.init == "private" or self.method == "dpem")

    def _start_specs(self, n_features):
        """The private start's two releases when it is used (``init``; class docstring)."""
        return start_specs(self.n_clusters, n_features) if self._private_init() else ()

    def _private_start(self, rows, layer, domain, key, n_threads):
        """K centres from the private start (:func:`~dpem_fast._engine._start.private_start`);
        the data-independent points fill in when fewer than K candidates pass."""
        K, d = self.n_clusters, rows.n_features
        return private_start(rows, layer, domain, key, K, initial_means(K, d, key, domain))

    def _describe(self):
        init = ("private start: noisy random-hyperplane cell counts and cell sums (20 % of the plan)"
                if self._private_init() else "user-supplied public centres"
                if self.init is not None and not isinstance(self.init, str)
                else "data-independent (uniform in the ball of radius 1/2 from the fit's own stream)")
        mech = ("DP-EM k-means (Park et al. 2017, Sec. 7): Gaussian noisy counts and sums"
                if self.method == "dpem" else
                "DPLloyd (Blum et al. 2005; Su et al. 2016): Laplace noisy counts and sums")
        return mech, ("initialisation: " + init,
                      "a cluster whose noisy count is <= max(1, 3 noise std) keeps its previous centre",
                      "diagnostics_ (training NICV, clipped rows) are not private")

    def _initial_parameters(self, summary, domain, key, private):
        """Initial centres (K, d) in working units (see ``init``): the user's centres mapped
        per feature, or K points uniform in the ball of radius 1/2 moved into the image of
        the box (the data's bounding box, mapped per feature, in the non-private mode)."""
        K, d = self.n_clusters, summary.n_features
        if self.init is not None and not isinstance(self.init, str):
            return domain.to_scaled(self.init)
        box = None if private else data_box(summary.column_min, summary.column_max)
        return initial_means(K, d, key, domain, box)

    def _statistics_task(self):
        return _kmeans_statistics

    def _update(self, noisy, params, ctx):
        """Centres from the noisy statistics (post-processing; see the class docstring)."""
        nk, sums = noisy[COUNTS], noisy[SUMS]
        tau = max(1.0, 3.0 * noise_std(ctx.releases[COUNTS]))
        keep = nk > tau
        centers = np.array(params, dtype=np.float64, copy=True)
        if np.any(keep):
            # the data lie in the image of the domain (its box, else the unit ball), so do
            # their means: a released centre ends inside the declared box
            centers[keep] = project_into_domain(sums[keep] / nk[keep, None], ctx.domain)
        return centers

    def _check_plan(self, plan, n_public, rounds):
        check_counts_resolvable(n_public, plan.releases[COUNTS], self._n_averaged(rounds), type(self).__name__)

    def _finish(self, params, noisy, ctx):
        """Drop the centres whose last noisy counts are at most τ (see the class docstring)."""
        return params[live_components(noisy[COUNTS], ctx.releases[COUNTS], type(self).__name__,
                                      n_public=ctx.n_public)]

    def _exact_update(self, stats, params):
        """Lloyd's update; an empty cluster keeps its centre."""
        nk, sums = stats[COUNTS], stats[SUMS]
        centers = np.array(params, dtype=np.float64, copy=True)
        full = nk > 0
        centers[full] = sums[full] / nk[full, None]
        return centers

    @property
    def n_clusters_(self):
        """Centres of the fitted model: ``n_clusters`` less the dead ones a private fit dropped."""
        return int(np.shape(self.cluster_centers_)[0])

    def _set_fitted(self, params, domain, dtype):
        self._domain = domain
        self.cluster_centers_ = domain.to_original(params).astype(dtype, copy=False)

    # ------------------------------------------------------------- inference
    def _check_X(self, X):
        check_is_fitted(self, "cluster_centers_")
        with np.errstate(over="ignore", invalid="ignore"):
            return validate_table(self, X, dtype=[np.float64, np.float32], order="C", reset=False)

    def predict(self, X):
        """Index of the nearest centre of each row, shape (n_samples,).

        Post-processing of the released centres applied to ``X``: the labels are as private
        as ``X`` (on the training rows: not private).
        """
        X = self._check_X(X)
        return kmeans_assign(X, self.cluster_centers_, effective_n_threads(self.n_threads))[0]

    def fit_predict(self, X, y=None):
        """Fit, then the nearest centre of each training row (**not private** labels)."""
        return self.fit(X).predict(X)

    def transform(self, X):
        """Euclidean distance of each row to every centre, shape (n_samples, n_clusters)."""
        X = self._check_X(X)
        C = np.asarray(self.cluster_centers_, dtype=np.float64)
        out = np.empty((X.shape[0], C.shape[0]), dtype=X.dtype)
        for s in range(0, X.shape[0], _TRANSFORM_ROWS):
            part = X[s:s + _TRANSFORM_ROWS].astype(np.float64)
            D = np.zeros((part.shape[0], C.shape[0]))
            for i in range(C.shape[1]):
                t = part[:, i, None] - C[None, :, i]
                D += t * t
            out[s:s + _TRANSFORM_ROWS] = np.sqrt(D)
        return out

    def score_samples(self, X):
        """Minus the squared distance of each row to its nearest centre, shape (n_samples,)
        (the per-row terms of :meth:`score`; dtype of X)."""
        X = self._check_X(X)
        return -kmeans_assign(X, self.cluster_centers_, effective_n_threads(self.n_threads))[1]

    def score(self, X, y=None):
        """Opposite of the k-means objective on X, ``-sum_i min_k ‖x_i − c_k‖²`` (scikit-learn's
        convention; reads X: not private)."""
        X = self._check_X(X)
        sq = kmeans_assign(X, self.cluster_centers_, effective_n_threads(self.n_threads))[1]
        return -float(np.add.reduce(sq.astype(np.float64)))

    def nicv(self, X):
        """Normalised intra-cluster variance of X under the fitted centres, in X's own units: the
        k-means objective per row, ``(1/N) Σ_i min_k ‖x_i − c_k‖²``, divided by X's total variance
        ``(1/N) Σ_i ‖x_i − x̄‖²`` — the share of the variance the centres leave (0: every row on
        a centre; 1: no better than one centre at the mean).  Neither the fit's domain nor its
        clipping enters it, nor the unit of X, so it compares fits with different declared or
        estimated domains, and tables.  Reads X: not private.

        The DP-EM paper's NICV (Fig. 4; the rows in the unit ball of one declared domain) is
        :func:`dpem_fast.cluster.nicv` on ``X`` and the centres mapped by that domain.

        .. versionchanged:: 0.1 (issue 39): was the paper's value in the fit's own unit-ball
           units, which moved with the domain at an equal objective (0.007 against 0.016), so it
           could not compare two fits.
        """
        X = self._check_X(X).astype(np.float64, copy=False)
        spread = X - X.mean(axis=0)
        total = float(np.einsum("ij,ij->", spread, spread)) / X.shape[0]
        if not total > 0:
            raise ValueError("X: every row is the same, so its total variance is 0 and the NICV is undefined")
        return nicv(X, self.cluster_centers_, n_threads=self.n_threads) / total
