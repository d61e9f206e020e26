"""Differentially private factor analysis (DP-EM Sec. 6) on the private-EM engine."""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import linalg
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._dpcore import _contract, _moments
from .._dpcore import _rng as _core_rng
from .._engine import PrivateEM
from ..accounting import NoiseDominatedWarning
from .._preprocess import project_into_domain
from .._engine._specs import count_for_update, moments_joint_bound, row_count, second_moments, weighted_sums
from .._rng import derive_key
from .._threads import effective_n_threads
from .._validation import interval, options
from ._fa_em import (SMALL, Covariance, fa_em, fa_noisy, fix_signs, gaussian_loglik, noise_edge, orthomax,
                     subspace_width, uses_subspace, variance_posterior_mean)
from .._kernels.moments import COUNT, SECOND, SUM, second_moment_stats

__all__ = ["DPFactorAnalysis"]

_ROTATIONS = {None: None, "varimax": 1.0, "quartimax": 0.0}


def _fa_statistics(X, params, domain, n_threads):
    """The second-moment kernel (it reads no parameter; a Dask task holds the domain and the
    thread count)."""
    return second_moment_stats(X, domain, n_threads)


class DPFactorAnalysis(ClassNamePrefixFeaturesOutMixin, TransformerMixin, PrivateEM):
    """Factor analysis from one differentially private release of the data's moments.

    ``x = mean + W^T z + e`` with ``z ~ N(0, I_k)`` and ``e ~ N(0, diag(psi))``, as
    scikit-learn's ``FactorAnalysis``.  The data are reduced to their count, sum and second
    moment, released **once** with calibrated noise; the EM iterations, the convergence
    test and the rotation then run on the released values only (post-processing, no
    further privacy cost), so ``tol`` may stop early.

    Parameters
    ----------
    n_components : int
        Number of factors k, 1 <= k <= n_features.
    epsilon, delta : float
        Privacy of the whole fit (ε > 0, δ in (0, 1)); ``epsilon=inf`` fits without
        privacy (no clipping, no noise): the maximum-likelihood FA of the exact covariance.
    data_norm, bounds : as :class:`~dpem_fast.DPGaussianMixture`
        The declared domain; with neither, the domain is estimated privately on 10 % of
        the budget (accounted); ``bounds="from_data"`` is an explicit, non-private opt-in.
    neighbouring : {"replace", "add_remove"}, default="replace"
    max_iter : int, default=1000
        Most iterations on the released matrix (post-processing).
    tol : float, default=1e-2
        ``epsilon=inf``: stop when the log-likelihood (of N rows, as scikit-learn) gains
        less than ``tol``.  Private fits: stop when no noise variance moves by more than
        ``tol`` noise standard deviations of a released covariance entry.
    rotation : {None, "varimax", "quartimax"}
    noise : {"gaussian", "discrete_gaussian"}
    accountant, random_state, n_threads, budget, verbose : as the other estimators.

    max_rows_per_group : int or None, default=None
        Person-level privacy with ``fit(X, groups=...)``: at most this many rows per group,
        as in :class:`~dpem_fast.DPGaussianMixture`.

        .. versionadded:: 0.1 (issue 27)

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Loadings in the original units, ``W diag(s)`` for the working-unit loadings W
        (s: the domain's per-feature scales).  Without a rotation each row's sign makes its
        largest entry in the working units positive, so fitting ``X * c`` gives
        ``components_ * c``.
    noise_variance_ : ndarray of shape (n_features,)
    mean_ : ndarray of shape (n_features,)
    n_iter_ : int
        Iterations run on the released matrix (``privacy_.n_iter`` is the number of
        release rounds: 1).
    n_resolved_ : int
        Rows of ``components_`` that are not zero: the loading directions resolved above
        the release noise (a private fit sets the others to 0).
    loglike_ : list of float
        Log-likelihood of the released covariance under the model after each iteration.
    privacy_ : PrivacyRecord or None
    diagnostics_ : dict  (not private)

    Privacy
    -------
    Neighbouring relation ``neighbouring``; rows are mapped into the unit ball ``‖x‖ ≤ 1``
    by the declared or privately estimated domain (clipped in the kernel), feature by
    feature: with a box (no ``data_norm``) feature i is divided by √d times its half-width,
    so the box becomes the cube [−1/√d, 1/√d]^d inside the ball, and every bound below,
    derived for rows with ‖x‖ ≤ 1, holds unchanged under both relations.  Released,
    once, through the engine's release layer:

    - ``second_moment`` ``S2 = Σ_i x_i x_iᵀ`` (N Λ of DP-EM Sec. 6), symmetric
      Analyze-Gauss noise on the upper triangle (diagonal included).  Add/remove:
      ``‖upper(xxᵀ)‖₂ ≤ ‖xxᵀ‖_F = ‖x‖² ≤ 1``, attained by ``x = e_1``.  Replace:
      ``‖xxᵀ − x'x'ᵀ‖²_F = ‖x‖⁴ + ‖x'‖⁴ − 2(x·x')² ≤ 2``, so ``√2``, attained by
      ``x = e_1, x' = e_2``.  (The paper's generic bound 2/N for a normalised moment,
      Sec. 3, would give 2 here: for PSD rank-one terms the triangle inequality is loose
      by √2.)
    - ``sum`` ``S1 = Σ_i x_i`` (the mean is released, not assumed zero: Sec. 6 takes the
      data centred, which a private fit cannot check): ``‖x‖ ≤ 1`` add/remove, ``‖x − x'‖
      ≤ 2`` replace (x' = −x).
    - ``count`` N, under add/remove only (ℓ2 sensitivity 1).  Under replace N is public
      (it is the same for all neighbours) and is not released — except person-level
      (``groups``, issue 27), where a group's row count changes between neighbours: it is
      released under both relations, with sensitivity m (a group's pairs padded with "no row").

    **Joint accounting** (continuous Gaussian noise): the releases are one Gaussian
    mechanism on the stacked statistic with ``μ² = sup Σ_r ‖δ_r‖²/σ_r²``.  With
    ``a_r = Δ_r²/σ_r²``: under add/remove one row's term is
    ``a_c + a_1‖x‖² + a_2‖upper(xxᵀ)‖²`` ≤ ``a_c + a_1 + a_2`` (x = e_1 attains every
    part: no gain).  Under replace, with p = ‖x‖², q = ‖x'‖², t their cosine and
    v = −√(pq) t, ``a_1‖x − x'‖²/4 + a_2‖xxᵀ − x'x'ᵀ‖²_F/2 = a_1(p+q)/4 + a_2(p²+q²)/2 +
    a_1 v/2 − a_2 v²``; maximised at p = q = 1 (every part is nondecreasing in p, q),
    giving ``a_1/2 + a_2 + φ`` with ``φ = max_{0≤v≤1}(a_1 v/2 − a_2 v²)`` =
    ``a_1²/(16 a_2)`` if ``a_1 ≤ 4 a_2`` else ``a_1/2 − a_2``: below the separate
    ``a_1 + a_2``.  It is attained with the upper triangle too: for x = (c, s, 0, …),
    x' = (−s, −c, 0, …) the difference xxᵀ − x'x'ᵀ is diagonal and v = 2cs.  Person-level
    under replace the count is released too: a pair of two rows leaves it unchanged, a row
    against no row adds ``a_c + a_1/4 + a_2/2``; the bound is the larger of the two
    (:func:`~dpem_fast._engine._specs.moments_joint_bound` with ``count="rows"``).  Lattice
    (``noise="discrete_gaussian"``) releases are composed separately.

    The budget split between the sum and the second moment, ``r = a_1/a_2``, minimises the
    noise edge of the released covariance (step 3 below) with ``‖m‖`` at its public bound 1.
    The released mean's error ``e`` enters the covariance through ``m̃ m̃ᵀ`` as a spike of
    size ``θ ≈ ‖m‖ σ_1 √d / N`` beside the second moment's semicircle edge
    ``τ = 2 σ_2 √d / N``; the edge is ``τ`` while ``θ ≤ τ/2`` and ``θ + τ²/(4θ)`` beyond.
    With ``σ_r = Δ_r/√a_r`` and the joint cost ``f(r) a_2 = μ²``: under replace-one
    (``Δ_1 = 2``, ``Δ_2 = √2``, ``f = 1 + r/2 + r²/16``) the minimum is at ``r ≈ 0.91``
    (within 0.2 % of ``r = 1``, which is used); under add/remove (``Δ_1 = Δ_2 = 1``,
    ``f = 1 + r``) at ``r ≈ 0.5`` (8 % below the edge at ``r = 1``), used.  The count
    (add/remove) only rescales the covariance (relative error ``σ_N/N``) and gets ``1/d`` of
    the second moment's share, which keeps ``σ_N ≈ √d σ_2``.  (Earlier versions split ∝
    √(coordinates), which left the mean so noisy that its error alone exceeded ``τ``.)
    The sensitivities above are unchanged; the split is a function of public quantities.

    Post-processing (every step reads released values and public constants only:
    ``σ_m = σ_1/N`` and ``σ_C = σ_2/N``, the noise sd of a coordinate of the released mean
    and of an entry of the released covariance; under add/remove N is the noisy count
    floored at max(1, 3σ_N)):

    1. the mean ``m̃ = S̃1/N``, clipped into the box's image (each coordinate to [−b_i, b_i],
       b_i = 1/√d for a declared box; so ‖m̃‖ ≤ 1), else projected into the unit ball; the covariance
       ``C̃ = S̃2/N − m̃ m̃ᵀ + σ_m² I`` (the last term removes the plug-in's bias
       ``E[m̃ m̃ᵀ] = m mᵀ + σ_m² I``);
    2. the variances ``v``: the posterior mean of each ``C̃_jj`` given its release noise
       N(0, σ_C²) under a flat prior on ``v_j ≥ 0`` (:func:`~._fa_em.variance_posterior_mean`;
       ≈ ``C̃_jj`` when it is well above σ_C, 0.8 σ_C at 0), at most ``c_i = min(max(b_i²,
       SMALL), 1)`` (a feature in [−b_i, b_i] has variance ≤ b_i², a row in the unit ball ≤ 1);
       these bounds are in the working units, so in original units each feature's floor and
       ceiling are on its own scale (``s_i²`` times them), not the widest feature's;
    3. the noise edge ``τ`` (:func:`~._fa_em.noise_edge`): the semicircle edge ``2 σ_C √d``
       of the Analyze-Gauss noise, moved by the released mean's error where that is large
       enough to show (the BBP transition);
    4. iterated principal factors (:func:`~._fa_em.fa_noisy`): the ``k`` leading eigenpairs of
       ``C̃ − diag(ψ)`` — the loadings plus Wigner noise — each eigenvalue above ``τ``
       shrunk to the size of the spike behind it (the noise bias removed), each below it dropped
       (its loading row is 0), then ``ψ = max(v − Σ W², min(v, σ_C))``, until ψ settles
       (moves by ≤ ``tol · σ_C``) or ``max_iter``;
    5. when no direction clears ``τ`` the model is the diagonal Gaussian (``W = 0``,
       ``ψ = v``), the trivial model of the same release, and a ``NoiseDominatedWarning`` says so;
    6. ``noise_variance_`` adds ``σ_m²``: a new row's distance to the released mean carries
       the mean's noise, so the model's density is the predictive one.

    Initialisation is data-independent (the start basis of the structured eigensolver, used
    above :data:`~._fa_em.DENSE_MAX_D` = 256 features, is drawn from the fit's key).  The
    post-processing never forms a d x d matrix besides the release: the covariance is read
    through products with a block of columns (:class:`~._fa_em.Covariance`), each over
    ``n_threads`` threads with the same bits for every count, and the leading eigenpairs
    come from a warm-started block subspace (:mod:`~._fa_em`; issue 26).
    """

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line;
    #: the row count is fitting state (kept only under replace-one, where it is public)
    _cli_name = "fa"
    _saved = ("components_", "mean_", "noise_variance_", "loglike_", "n_iter_", "n_features_in_")
    _parameter_constraints = {"n_components": [None, interval("int", 1)], "tol": [interval("real", 0)],
                              "rotation": [None, options("varimax", "quartimax")]}

    def __init__(self, n_components=None, *, epsilon=1.0, delta=1e-5, data_norm=None, bounds=None,
                 neighbouring="replace", max_iter=1000, tol=1e-2, rotation=None, noise="gaussian",
                 accountant=None, random_state=None, n_threads=None, budget=None, verbose=0, max_rows_per_group=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.bounds = bounds
        self.neighbouring = neighbouring
        self.max_iter = max_iter
        self.tol = tol
        self.rotation = rotation
        self.noise = noise
        self.accountant = accountant
        self.random_state = random_state
        self.n_threads = n_threads
        self.budget = budget
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group

    # ------------------------------------------------------------ model hooks
    def _n_release_rounds(self):
        return 1

    def _k(self, d):
        return d if self.n_components is None else self.n_components

    def _block_rows(self, n_rows, d):
        """Rows per block of the second-moment kernel for a call on at most ``n_rows`` rows (the
        ``b`` of the float64 rounding bound, :mod:`~dpem_fast._engine._specs`, "Rounding"): its
        "rows" layout (d < ``_moments.TILE_MIN_D``) sums blocks of the contract's plan (partials
        of d² + d doubles); the "tiles" layout one d x d partial per ``_moments.TILE_ROWS`` rows."""
        if d < _moments.TILE_MIN_D:
            return _contract.max_block_rows(int(n_rows), d * d + d)
        return max(1, min(int(n_rows), _moments.TILE_ROWS))

    def _check_model_params(self, n_samples, n_features):
        if self._k(n_features) > n_features:
            raise ValueError(f"n_components={self.n_components} must be <= n_features={n_features}")

    def _statistic_specs(self, n_features):
        d = n_features
        specs = (weighted_sums(SUM, (d,), d), second_moments(SECOND, (d, d)))
        if self._count_private():
            # row-level replace: 1.0 is a (loose) bound of the true 0 and the count is public,
            # never released; person-level replace: a group's count changes by up to m
            specs = (row_count(COUNT),) + specs
        return specs

    def _shares(self):
        # a_1 : a_2 = the split that minimises the noise edge of the released covariance
        # (step 3 of the class docstring's post-processing) with ‖m‖ at its public bound 1:
        # about 1 : 1 under replace-one, 1 : 2 under add/remove (class docstring).  The count
        # (add/remove) only rescales the covariance (relative error σ_N/N): 1/d of a share
        # keeps σ_N ≈ √d σ_2, below the second moment's noise edge.
        d = self.n_features_in_
        shares = {SUM: 0.5, SECOND: 1.0} if self.neighbouring == "add_remove" else {SUM: 1.0, SECOND: 1.0}
        if self._count_private():
            shares[COUNT] = 1.0 / d
        return shares

    def _joint_sensitivity(self, a, neighbouring):
        """sup over neighbours of Σ_r ‖δ_r‖²/σ_r² given ``a[r] = Δ_r²/σ_r²`` (class docstring)."""
        return moments_joint_bound(a[SUM], a[SECOND], a.get(COUNT, 0.0), neighbouring=neighbouring, count="rows")

    def _describe(self):
        return ("DP-EM factor analysis (Park et al. 2017, Sec. 6): one Analyze-Gauss release of the "
                "second moment with the sum (and the count under add/remove), then EM as post-processing",
                ("initialisation: data-independent (psi = 1)",
                 "EM iterations, stopping and rotation read only the released statistics"))

    def _initial_parameters(self, summary, domain, key, private):
        d = summary.n_features
        k = self._k(d)
        start = None
        if uses_subspace(d, k):
            p = subspace_width(d, k)
            g = np.empty(d * p)
            _core_rng.fill_normal(derive_key(key, "init", "subspace"), 0, 1.0, g, 1)
            start = linalg.qr(g.reshape(d, p), mode="economic")[0]
        return {"start": start, "mean": np.zeros(d), "W": np.zeros((k, d)), "psi": np.ones(d), "loglike": [],
                "n_iter": 0}

    def _statistics_task(self):
        return _fa_statistics

    def _update(self, noisy, params, ctx):
        """Factor analysis of the released statistics (post-processing of public values;
        the class docstring's "Post-processing")."""
        n = count_for_update(noisy[COUNT][0] if COUNT in noisy else None, ctx.releases.get(COUNT), ctx.n_public)
        d = noisy[SUM].shape[0]
        k = self._k(d)
        sigma_mean = ctx.releases[SUM].noise_scale / n        # sd of a coordinate of S̃1/N
        sigma_cov = ctx.releases[SECOND].noise_scale / n      # sd of an entry of S̃2/N
        # the data lie in the image of the domain (its box, else the unit ball): so does the mean
        mean = project_into_domain(noisy[SUM] / n, ctx.domain)
        norm = min(float(np.linalg.norm(mean)), 1.0)
        # a feature's variance is at most b_i² (b: the box image's half-widths), at most 1
        box = None if ctx.domain is None else ctx.domain.box_image
        ceiling = 1.0 if box is None else np.clip(np.minimum(box, 1.0) ** 2, SMALL, 1.0)
        # S̃2/N − m̃ m̃ᵀ + σ_m² I (E[m̃ m̃ᵀ] = m mᵀ + σ_m² I): read through its products, not formed
        C = Covariance(noisy[SECOND], n, mean, sigma_mean * sigma_mean, effective_n_threads(self.n_threads))
        edge = noise_edge(sigma_cov, sigma_mean, norm, d)
        W, psi, n_resolved, lls, it = fa_noisy(C, k, n, sigma_cov=sigma_cov, edge=edge, max_iter=self.max_iter,
                                               tol=self.tol, ceiling=ceiling, start=params["start"])
        if n_resolved == 0:
            warnings.warn(
                f"{type(self).__name__}: no loading direction is resolved above the release noise (the noise "
                f"edge of the released covariance is {edge:.3g} in unit-ball units): the fitted model is the "
                "diagonal Gaussian (components_ are zero).  Declare a tighter domain (data_norm or bounds), "
                "raise epsilon, or fit more rows.", NoiseDominatedWarning, stacklevel=4)
        # the predictive density of a new row: its distance to the released mean also carries
        # the mean's noise, σ_m² per coordinate (a public constant)
        psi = psi + sigma_mean * sigma_mean
        if n_resolved:
            self._warn_if_below_uniform(C, W, psi, sigma_cov, ctx.domain, d)
        return {"start": params["start"], "mean": mean, "W": W, "psi": psi, "loglike": lls, "n_iter": it,
                "n_resolved": n_resolved}

    def _warn_if_below_uniform(self, C, W, psi, sigma_cov, domain, d):
        """A ``NoiseDominatedWarning`` when the fitted Gaussian's mean log-density on the rows,
        estimated from the released moments, is below the uniform density on the domain's image
        (the box ``[−b_i, b_i]``: ``−Σ log 2b_i``; without a box the unit ball).

        The estimate is :func:`~._fa_em.gaussian_loglik` per row of the released covariance
        ``C̃`` with its diagonal replaced by the variances' posterior means
        (:func:`~._fa_em.variance_posterior_mean`, as the fit reads them): the plain plug-in is
        optimistic, because ψ is fitted to the same noise — a near-constant feature whose noisy
        variance came out negative would count ``C̃_jj/ψ_j < 0``.  Both densities are in the
        working units, where the map to the original units adds the same log-Jacobian to each,
        so the comparison holds in the user's units.  Released values and public constants only
        (issue 35, item 5)."""
        box = None if domain is None else domain.box_image
        if box is None:
            uniform = -(0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d + 1.0))
        else:
            uniform = -float(np.sum(np.log(2.0 * np.asarray(box, dtype=np.float64))))
        diag = np.array(C.diagonal(), dtype=np.float64)
        shift = variance_posterior_mean(diag, sigma_cov) - diag
        Wr = W[np.any(W != 0, axis=1)]
        precision_diag = 1.0 / psi
        if Wr.shape[0]:
            Wp = Wr / psi
            inner = np.eye(Wr.shape[0]) + Wp @ Wr.T
            precision_diag = precision_diag - np.sum(Wp * linalg.solve(inner, Wp, assume_a="pos"), axis=0)
        estimate = gaussian_loglik(C, W, psi, 1.0) - 0.5 * float(np.dot(precision_diag, shift))
        if not estimate >= uniform:
            warnings.warn(
                f"{type(self).__name__}: by the released moments the fitted density is below the uniform "
                "density on the domain (a model worse than knowing only the box); declare a tighter domain "
                "(bounds or data_norm), raise epsilon, or fit more rows.", NoiseDominatedWarning, stacklevel=5)

    def _exact_update(self, stats, params):
        n = float(stats[COUNT][0])
        mean = stats[SUM] / n
        C = Covariance(stats[SECOND], n, mean, 0.0, effective_n_threads(self.n_threads))
        return self._em(C, n, params, mean, floor=SMALL, ceiling=np.inf)

    def _em(self, C, n, params, mean, floor, ceiling):
        k = self._k(C.shape[0])
        W, psi, lls, it = fa_em(C, k, n, max_iter=self.max_iter, tol=self.tol, floor=floor, ceiling=ceiling,
                                start=params["start"])
        return {"start": params["start"], "mean": mean, "W": W, "psi": psi, "loglike": lls, "n_iter": it}

    def _set_fitted(self, params, domain, dtype):
        """Back to the original units (post-processing): x = center + diag(s) y, so loadings
        ``W diag(s)`` (rows of ``components_``), noise variances ``s² psi``, mean ``c + s m``."""
        s = domain.scale
        big = np.finfo(dtype).max
        with np.errstate(over="ignore"):    # a huge (privately estimated) scale saturates
            # signs fixed in the working units (each row's largest entry there positive), so
            # that they do not depend on the features' units
            W = np.clip(fix_signs(params["W"]) * s[None, :], -big, big)
            psi = np.minimum(s * s * params["psi"], big)
        if self.rotation is not None:
            W = fix_signs(orthomax(W.T, _ROTATIONS[self.rotation]).T)
        self.components_ = W.astype(dtype, copy=False)
        self.noise_variance_ = psi.astype(dtype, copy=False)
        self.mean_ = domain.to_original(params["mean"]).astype(dtype, copy=False)
        self.loglike_ = list(params["loglike"])
        self.n_iter_ = int(params["n_iter"])

    # ------------------------------------------------------------- inference
    def _check_X(self, X):
        check_is_fitted(self, "components_")
        with np.errstate(over="ignore", invalid="ignore"):
            return validate_data(self, X, dtype=[np.float64, np.float32], order="C", reset=False)

    def get_covariance(self):
        """Model covariance ``components_ᵀ components_ + diag(noise_variance_)``."""
        check_is_fitted(self, "components_")
        W = np.asarray(self.components_, dtype=np.float64)
        cov = W.T @ W
        cov.flat[:: cov.shape[0] + 1] += self.noise_variance_
        return cov

    def get_precision(self):
        """Inverse of the model covariance (matrix inversion lemma, k x k solve)."""
        check_is_fitted(self, "components_")
        W = np.asarray(self.components_, dtype=np.float64)
        psi = np.asarray(self.noise_variance_, dtype=np.float64)
        Wp = W / psi
        inner = np.eye(W.shape[0]) + Wp @ W.T
        P = -Wp.T @ linalg.solve(inner, Wp, assume_a="pos")
        P.flat[:: P.shape[0] + 1] += 1.0 / psi
        return (P + P.T) / 2

    def transform(self, X):
        """Posterior means of the factors ``E[z | x]``, shape (n_samples, n_components)."""
        X = self._check_X(X)
        W = np.asarray(self.components_, dtype=np.float64)
        Wp = W / np.asarray(self.noise_variance_, dtype=np.float64)
        cov_z = linalg.inv(np.eye(W.shape[0]) + Wp @ W.T)
        return ((X - self.mean_) @ Wp.T @ cov_z).astype(X.dtype, copy=False)

    def score_samples(self, X):
        """Log-likelihood of each row under the fitted model, shape (n_samples,)."""
        X = self._check_X(X)
        Xr = np.asarray(X, dtype=np.float64) - self.mean_
        P = self.get_precision()
        d = Xr.shape[1]
        sign, logdet = np.linalg.slogdet(P)
        return -0.5 * np.einsum("ij,ij->i", Xr @ P, Xr) - 0.5 * (d * math.log(2.0 * math.pi) - logdet)

    def score(self, X, y=None):
        """Mean log-likelihood per row."""
        return float(np.mean(self.score_samples(X)))

    @property
    def n_resolved_(self):
        """Rows of ``components_`` that are not zero: the loading directions resolved above
        the release noise (post-processing of ``components_``)."""
        check_is_fitted(self, "components_")
        return int(np.count_nonzero(np.any(np.asarray(self.components_) != 0, axis=1)))

    @property
    def _n_features_out(self):
        return self.components_.shape[0]
