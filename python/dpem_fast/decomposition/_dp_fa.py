"""Differentially private factor analysis (DP-EM Sec. 6) on the private-EM engine."""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import linalg
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _rng as _core_rng
from .._engine import PrivateEM
from ..accounting import NoiseDominatedWarning
from .._preprocess import project_into_domain
from .._engine._specs import count_for_update, operator_diagonal_rounding_factor
from .._rng import derive_key
from .._threads import effective_n_threads
from .._validation import interval, options
from ._fa_em import (SMALL, Covariance, fa_em, fa_noisy, fix_signs, gaussian_loglik, noise_edge, orthomax,
                     subspace_width, uses_subspace, variance_posterior_mean)
from .._kernels.moments import COUNT, SECOND, SUM
from ._fa_ritz import fa_noisy_ritz
from ._krylov import ReleasedCovariance, RowsCovariance, krylov_columns
from ._moment_release import SecondMomentRelease

__all__ = ["DPFactorAnalysis"]

_ROTATIONS = {None: None, "varimax": 1.0, "quartimax": 0.0}


class DPFactorAnalysis(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SecondMomentRelease, PrivateEM):
    """Factor analysis from one differentially private release of the data's moments.

    ``x = mean + W^T z + e`` with ``z ~ N(0, I_k)`` and ``e ~ N(0, diag(psi))``, as
    scikit-learn's ``FactorAnalysis``.  The data are reduced to their count, sum and second
    moment, released **once** with calibrated noise; the EM iterations, the convergence
    test and the rotation then run on the released values only (post-processing, no
    further privacy cost), so ``tol`` may stop early.

    Matrix-free path (issue 41; DPPCA's conditions: row-level replace-one, in-memory rows,
    at least 4 ``max(80, 8k)`` features): the second moment is released as an operator
    (:mod:`dpem_fast._engine._operator`), read through a block Krylov basis of ``max(80, 8k)``
    columns from a data-independent start, then through its diagonal
    (:mod:`dpem_fast._engine._diagonal`: the materialised release's law, plus a 10⁻³ σ cover of
    its rounding), and the iterations run on that Krylov space (:mod:`._fa_ritz`).  Cost
    ``n d m + d m²`` instead of ``n d²``; the same single release and record (σ widened by
    ~5·10⁻⁷ wherever the path may run).  ``epsilon=inf`` at that size (in-memory rows, any
    neighbouring relation: nothing is released) runs its exact EM on ``YᵀY/n − m mᵀ`` through
    products of the rows and their diagonal, never formed (the EM's subspace solver reads
    nothing else): at (400, 4096), k = 10, 0.15–0.28 s where forming it took 0.55–0.83 s, the
    same model to 10⁻¹².

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
    Neighbouring relation ``neighbouring`` (rows, or a group's rows with ``groups``); rows are
    mapped into the unit ball by the declared or privately estimated domain.  One release,
    accounted as one Gaussian mechanism: ``second_moment`` ``Σ x xᵀ`` (Δ₂ = 1 add/remove, √2
    replace; symmetric Gaussian noise, σ on the diagonal and σ/√2 off it), ``sum`` ``Σ x`` (1 / 2) and, where N is private,
    ``count`` (1).  Everything after the release (the factoring, ``tol``, the rotation) is
    post-processing; initialisation is data-independent.  Derivations, the budget split and the
    post-processing steps: the documentation page, "Privacy analysis in full".
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
    def _check_model_params(self, n_samples, n_features):
        if self._k(n_features) > n_features:
            raise ValueError(f"n_components={self.n_components} must be <= n_features={n_features}")

    def _describe(self):
        return ("DP-EM factor analysis (Park et al. 2017, Sec. 6): one symmetric Gaussian release of the "
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
        return {"start": start, "krylov": self._krylov_start(d, key, private), "mean": np.zeros(d), "W": np.zeros((k, d)), "psi": np.ones(d), "loglike": [],
                "n_iter": 0}

    #: the operator's columns, then its diagonal (:mod:`dpem_fast._engine._diagonal`)
    _operator_widening = staticmethod(operator_diagonal_rounding_factor)

    def _update(self, noisy, params, ctx):
        """Factor analysis of the released statistics (post-processing of public values;
        the class docstring's "Post-processing")."""
        n = count_for_update(noisy[COUNT][0] if COUNT in noisy else None, ctx.releases.get(COUNT), ctx.n_public)
        d = noisy[SUM].shape[0]
        k = self._k(d)
        sigma_mean = ctx.releases[SUM].noise_scale / n        # sd of a coordinate of S̃1/N
        sigma_cov = ctx.releases[SECOND].noise_scale / n      # sd of a diagonal entry of S̃2/N
        sigma_off = ctx.releases[SECOND].offdiagonal_sd / n   # ... and of one off it (σ/√2)
        # the data lie in the image of the domain (its box, else the unit ball): so does the mean
        mean = project_into_domain(noisy[SUM] / n, ctx.domain)
        norm = min(float(np.linalg.norm(mean)), 1.0)
        # a feature's variance is at most b_i² (b: the box image's half-widths), at most 1
        box = None if ctx.domain is None else ctx.domain.box_image
        ceiling = 1.0 if box is None else np.clip(np.minimum(box, 1.0) ** 2, SMALL, 1.0)
        # S̃2/N − m̃ m̃ᵀ + σ_m² I (E[m̃ m̃ᵀ] = m mᵀ + σ_m² I): read through its products, not formed
        edge = noise_edge(sigma_off, sigma_mean, norm, d)
        if isinstance(noisy[SECOND], np.ndarray):
            C = Covariance(noisy[SECOND], n, mean, sigma_mean * sigma_mean, effective_n_threads(self.n_threads))
            W, psi, n_resolved, lls, it = fa_noisy(C, k, n, sigma_cov=sigma_cov, edge=edge, max_iter=self.max_iter,
                                                   tol=self.tol, ceiling=ceiling, start=params["start"])
        else:       # the released operator (matrix-free path): its Krylov space, then its diagonal
            C = ReleasedCovariance(noisy[SECOND], n, mean, sigma_mean * sigma_mean, np.ones(d))
            W, psi, n_resolved, lls, it, C = fa_noisy_ritz(
                C, k, n, sigma_cov=sigma_cov, edge=edge, max_iter=self.max_iter, tol=self.tol, ceiling=ceiling,
                start=params["krylov"], max_cols=krylov_columns(k))
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
        return {"start": params["start"], "krylov": params["krylov"], "mean": mean, "W": W, "psi": psi,
                "loglike": lls, "n_iter": it, "n_resolved": n_resolved}

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

    #: ``epsilon=inf`` reads the rows through products where the private fit would: the EM's
    #: subspace solver needs only products and the diagonal (``_fa_em``)
    _exact_matrix_free = True

    def _exact_update(self, stats, params):
        n = float(stats[COUNT][0])
        mean = stats[SUM] / n
        if isinstance(stats[SECOND], np.ndarray):
            C = Covariance(stats[SECOND], n, mean, 0.0, effective_n_threads(self.n_threads))
        else:                                   # the rows held (matrix-free path)
            C = RowsCovariance(stats[SECOND], n, mean)
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
