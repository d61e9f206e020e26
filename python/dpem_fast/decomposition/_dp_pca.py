"""Differentially private PCA on the private-EM engine: one release of the second moments
(the release of :class:`~dpem_fast.DPFactorAnalysis`, :mod:`._moment_release`), then the
top-k eigenvectors of the released covariance (post-processing)."""
from __future__ import annotations

import warnings

import numpy as np
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _rng as _core_rng
from .._engine import PrivateEM
from .._engine._specs import count_for_update
from .._kernels.moments import COUNT, SECOND, SUM
from .._preprocess import DataDomain, project_into_domain
from .._rng import derive_key
from .._threads import effective_n_threads
from .._validation import ARRAY_LIKE, interval
from ..accounting import NoiseDominatedWarning
from ._fa_em import DENSE_MAX_D, Covariance, fix_signs, noise_edge, top_dense
from ._krylov import ReleasedCovariance, RowsCovariance, krylov_columns, top_eigenpairs_krylov
from ._moment_release import SecondMomentRelease

__all__ = ["DPPCA"]

#: relative accuracy of the Lanczos eigenpairs (ARPACK's ``tol``), far below any release noise
_LANCZOS_TOL = 1e-10


def scaled_covariance(C, r):
    """``diag(r) C diag(r)`` formed (symmetrised) from a :class:`~._fa_em.Covariance` or a d x d
    ndarray: the covariance in the original units up to one public factor (r: the domain's
    per-feature scales over their largest).  O(d²)."""
    A = C.dense() if isinstance(C, Covariance) else np.array(C, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    A *= r[:, None]
    A *= r[None, :]
    return (A + A.T) / 2


def top_eigenpairs(A, k, v0):
    """The ``k`` algebraically largest eigenpairs of the symmetric d x d ``A``, descending:
    LAPACK's ``syevr`` on the index range where ``v0 is None`` (d ≤ ``DENSE_MAX_D``, or k close
    to d), else implicitly restarted Lanczos (ARPACK, ``which="LA"``) from the data-independent
    start ``v0``, through products ``A v`` only (O(d²) each, no d x d decomposition; a few
    hundred at d = 784).  Deterministic given ``v0``: the engine runs the update with BLAS held
    to one thread, whatever ``n_threads``.  Should ARPACK not converge, the dense decomposition
    answers (nothing may fail after the charge)."""
    d = A.shape[0]
    if v0 is not None:
        try:
            lam, V = eigsh(A, k=k, which="LA", v0=v0, tol=_LANCZOS_TOL, ncv=min(d, max(2 * k + 1, k + 20)),
                           maxiter=50 * d)
            order = np.argsort(lam)[::-1]
            return lam[order], V[:, order]
        except (ArpackNoConvergence, ArpackError):
            pass
    return top_dense(A, k)


def _uses_lanczos(d, k):
    """Public: Lanczos above ``DENSE_MAX_D`` features while ``k`` leaves room for its basis."""
    return d > DENSE_MAX_D and 2 * k + 1 < d


class DPPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SecondMomentRelease, PrivateEM):
    """Principal component analysis from one differentially private release of the second moments.

    scikit-learn's ``PCA`` interface (no whitening).  The rows are reduced to their second
    moment about a centre (and, where the centre is the mean, their sum), released **once**
    with symmetric Gaussian noise (σ on the diagonal, σ/√2 above it: Analyze-Gauss, Dwork et
    al. 2014, with the off-diagonal variance halved at the same Frobenius sensitivity); the components are the top
    ``n_components`` eigenvectors of the released covariance, found without a d x d
    decomposition above 256 features (Lanczos); everything after the release is
    post-processing.

    Matrix-free path (issue 41): where the Krylov basis is small against d (public: at least
    4 ``max(80, 8k)`` features), the row count is public (row-level replace-one) and the rows
    are an in-memory array, the second moment is
    neither formed nor noised as a matrix: the release layer returns it as an operator whose
    products are ``Yᵀ(Y V) + E V`` over the mapped, clipped rows ``Y``, the noise E revealed
    lazily on the queried directions only, with exactly the law of the materialised release
    given what was revealed (its orthogonal invariance; the argument is in
    :mod:`dpem_fast._engine._operator`).  The components are then the top Ritz vectors of a
    block Krylov basis (8 columns a block, at most ``max(80, 8k)`` columns, stopped once the
    top-k residuals are below 10⁻⁸ of the top eigenvalue) and the total variance the released
    trace: in law, what that method outputs on the materialised release.  Cost ``n d m + d m²``
    (m the basis size) instead of ``n d²``.  Memory maps, block sources, person-level fits and
    Dask arrays keep the dense release (the rows are not all in memory).  ``epsilon=inf``
    (centred at the mean) takes the same solver on the exact covariance ``YᵀY/n − m mᵀ``
    through products of the in-memory rows, whatever the neighbouring relation (nothing is
    released): at (400, 4096), k = 10 it answered in 0.02 s where forming ``YᵀY`` and Lanczos on
    it took 0.77 s, the same eigenpairs to 10⁻¹⁵ there; like the dense path's Lanczos start,
    the Krylov start comes from ``random_state``, so unseeded fits agree to the solver's
    tolerance, not bit for bit.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components k, 1 <= k <= n_features (None: n_features).
    center : None, float or array-like of shape (n_features,), default=None
        None: centre at the mean, released privately with the second moment (on a share of
        the budget, below).  A value: a **public** centre (e.g. the middle of a known range):
        the second moment about it is the only release and ``mean_`` is this centre; it
        needs ``data_norm``, the bound on ``‖x − center‖`` (not ``bounds``).
    epsilon, delta : float
        Privacy of the whole fit; ``epsilon=inf`` fits without privacy: scikit-learn's PCA
        of the rows (clipped to a declared domain as a private fit clips them).
    data_norm, bounds : as :class:`~dpem_fast.DPFactorAnalysis`
        The declared domain; with neither, it is estimated privately on 10 % of the budget.
    neighbouring : {"replace", "add_remove"}, default="replace"
    noise, accountant, random_state, n_threads, budget, verbose, max_rows_per_group :
        as :class:`~dpem_fast.DPFactorAnalysis`.
    max_iter : int, default=1
        Accepted for the engine's common parameters; the fit is one release.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows, by decreasing explained variance; each row's entry of largest
        magnitude is positive (scikit-learn's sign convention).
    explained_variance_ : ndarray of shape (n_components,)
        The released covariance's eigenvalues, clipped at 0 (post-processing: a noisy
        eigenvalue may be negative; the top ones are biased upward by the noise).  With the
        mean as centre, scikit-learn's divisor N − 1; with a public centre, N (the second
        moment about it).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``explained_variance_`` over the released total variance (the trace), which is raised
        to their sum where the noise left it below (the ratios sum to at most 1).
    singular_values_ : ndarray of shape (n_components,)
        ``sqrt((N − 1) explained_variance_)`` (N − 1 → N with a public centre), N the public
        or released row count.
    noise_variance_ : float
        The mean of the released variance outside the components (scikit-learn's
        probabilistic-PCA noise), at least one noise standard deviation of an entry of the
        released covariance (in the columns' mean squared scale): the noise pushes the top
        eigenvalues up and can leave the rest near 0, which would make ``score_samples``
        absurdly low; below that floor the residual variance is not resolved.
    mean_ : ndarray of shape (n_features,)
        The released mean (inside the domain), or the public ``center``.
    n_components_ : int
    privacy_ : PrivacyRecord or None
    diagnostics_ : dict  (not private)

    Privacy
    -------
    Rows ``x`` are mapped into the unit ball, ``y = (x − c) / s`` and clipped (the declared or
    privately estimated domain; with a public ``center`` the ball ``‖x − center‖ ≤ data_norm``).
    One release, accounted as one Gaussian mechanism: ``second_moment`` ``Σ y yᵀ`` —
    ``‖y yᵀ‖_F = ‖y‖² ≤ 1`` (add/remove: Δ₂ = 1) and ``‖y yᵀ − y' y'ᵀ‖²_F = ‖y‖⁴ + ‖y'‖⁴ −
    2 (yᵀy')² ≤ 2`` (replace: Δ₂ = √2, orthogonal unit rows attain it) — with symmetric noise on
    its upper triangle; where the centre is the mean, ``sum`` ``Σ y`` (1 / 2); where N is private
    (add/remove, person-level), ``count`` (1).  Their joint bound and the budget split are
    :class:`~dpem_fast.DPFactorAnalysis`'s (the mean's error enters the covariance as a low-rank
    term; the split minimises the noise edge): sum : second moment = 1 : 1 under replace,
    1 : 2 under add/remove, the count 1/d of a share; with a public centre the second moment
    gets the whole budget (and the count 1/d of a share where it is private).  The eigenvectors,
    the clipping of the eigenvalues and the ratios read only the released values and public
    constants (the start vector of Lanczos is drawn from the fit's key, not from the data).
    """

    _cli_name = "pca"
    _saved = ("components_", "explained_variance_", "explained_variance_ratio_", "singular_values_",
              "noise_variance_", "mean_", "n_components_", "n_features_in_", "n_iter_")
    _parameter_constraints = {"n_components": [None, interval("int", 1)], "center": [None, ARRAY_LIKE,
                                                                                     interval("real", None, None)]}

    def __init__(self, n_components=None, *, center=None, epsilon=1.0, delta=1e-5, data_norm=None, bounds=None,
                 neighbouring="replace", max_iter=1, noise="gaussian", accountant=None, random_state=None,
                 n_threads=None, budget=None, verbose=0, max_rows_per_group=None):
        self.n_components = n_components
        self.center = center
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.bounds = bounds
        self.neighbouring = neighbouring
        self.max_iter = max_iter
        self.noise = noise
        self.accountant = accountant
        self.random_state = random_state
        self.n_threads = n_threads
        self.budget = budget
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group

    # ------------------------------------------------------------ model hooks
    def _releases_mean(self):
        return self.center is None

    def _public_center(self, d):
        c = np.asarray(self.center, dtype=np.float64)
        return np.full(d, float(c)) if c.ndim == 0 else c

    def _check_model_params(self, n_samples, n_features):
        if self._k(n_features) > n_features:
            raise ValueError(f"n_components={self.n_components} must be <= n_features={n_features}")
        if self.center is None:
            return
        c = np.asarray(self.center, dtype=np.float64)
        if c.ndim > 1 or (c.ndim == 1 and c.shape[0] != n_features) or not np.all(np.isfinite(c)):
            raise ValueError(f"center: a finite number or {n_features} finite numbers (one per feature), "
                             f"got shape {c.shape}")
        if self.bounds is not None or (self.data_norm is None and np.isfinite(self.epsilon)):
            raise ValueError("center: a public centre needs data_norm (the bound on ||x - center||) and no "
                             "bounds; or leave center=None (the mean, released privately)")

    def _declared_domain(self, n_domain):
        if self.center is None or self.data_norm is None:
            return super()._declared_domain(n_domain)
        return DataDomain(self._public_center(n_domain), np.full(n_domain, float(self.data_norm)), None, False)

    def _describe(self):
        return ("DP-PCA: one symmetric Gaussian release of the second moment (with the sum where the centre is the "
                "mean, the count where it is private), then its top eigenvectors as post-processing",
                ("initialisation: data-independent (the Lanczos start vector, from the fit's key)",
                 "eigenvectors, eigenvalues and ratios read only the released statistics"))

    def _initial_parameters(self, summary, domain, key, private):
        """Data-independent: the Lanczos start vector (from the key) and a placeholder model (the
        first k axes, no variance) that the release's update replaces."""
        d = summary.n_features
        k = self._k(d)
        v0 = None
        if _uses_lanczos(d, k):
            v0 = np.empty(d)
            _core_rng.fill_normal(derive_key(key, "init", "lanczos"), 0, 1.0, v0, 1)
        return {"v0": v0, "krylov": self._krylov_start(d, key, private), "components": np.eye(k, d), "ev": np.zeros(k), "total": 0.0, "noise": 0.0, "dof": 1.0,
                "mean": np.zeros(d), "top": 0.0}

    def _update(self, noisy, params, ctx):
        """The components of the released statistics (post-processing; class docstring)."""
        n = count_for_update(noisy[COUNT][0] if COUNT in noisy else None, ctx.releases.get(COUNT), ctx.n_public)
        d = noisy[SECOND].shape[0]
        nt = effective_n_threads(self.n_threads)
        if self._releases_mean():
            sigma_mean = ctx.releases[SUM].noise_scale / n        # sd of a coordinate of S̃1/N
            mean = project_into_domain(noisy[SUM] / n, ctx.domain)
            norm = min(float(np.linalg.norm(mean)), 1.0)
        else:
            sigma_mean, norm, mean = 0.0, 0.0, np.zeros(d)
        # E[m̃ m̃ᵀ] = m mᵀ + σ_m² I: the plug-in bias removed (a shift of every eigenvalue)
        if isinstance(noisy[SECOND], np.ndarray):
            C = Covariance(noisy[SECOND], n, mean, sigma_mean * sigma_mean, nt)
        else:                                   # the released operator (matrix-free path)
            s = np.asarray(ctx.domain.scale, dtype=np.float64)
            C = ReleasedCovariance(noisy[SECOND], n, mean, sigma_mean * sigma_mean, s / float(np.max(s)))
        # the residual variance is not resolved below one noise sd of an entry of the released
        # covariance (in the original units; the top eigenvalues' upward bias can leave it ~0)
        s2 = np.asarray(ctx.domain.scale, dtype=np.float64) ** 2
        floor = ctx.releases[SECOND].noise_scale / n * float(np.mean(s2))
        out = self._components(C, n, ctx.domain.scale, params, floor)
        edge = noise_edge(ctx.releases[SECOND].offdiagonal_sd / n, sigma_mean, norm, d)
        if not out["top"] > edge:
            warnings.warn(
                f"{type(self).__name__}: no eigenvalue of the released covariance is above its noise edge "
                f"({edge:.3g} in unit-ball units): the components are directions of the noise.  Declare a "
                "tighter domain (data_norm or bounds), raise epsilon, or fit more rows.",
                NoiseDominatedWarning, stacklevel=4)
        return {**out, "mean": mean}

    @property
    def _exact_matrix_free(self):
        """``epsilon=inf`` reads the rows through products where the private fit would (about
        the mean only: a public centre adds a second rank-one term, formed densely)."""
        return self.center is None

    def _exact_update(self, stats, params):
        n = float(stats[COUNT][0])
        d = stats[SECOND].shape[0]
        nt = effective_n_threads(self.n_threads)
        mean = stats[SUM] / n
        if not isinstance(stats[SECOND], np.ndarray):       # the rows held (matrix-free path)
            return {**self._components(RowsCovariance(stats[SECOND], n, mean), n, np.ones(d), params), "mean": mean}
        C = Covariance(stats[SECOND], n, mean, 0.0, nt)
        if not self._releases_mean():
            # the second moment about the public centre c: S/n − m mᵀ + (m − c)(m − c)ᵀ
            c = self._public_center(d)
            C = C.dense()
            C += np.outer(mean - c, mean - c)
            mean = c
        return {**self._components(C, n, np.ones(d), params), "mean": mean}

    def _components(self, C, n, scale, params, floor=0.0):
        """Top-k eigenpairs of ``diag(s) C diag(s)`` (the covariance in the original units) as
        the fitted values; eigenvalues clipped at 0, the mean's ``N/(N − 1)`` where the centre is
        the mean (scikit-learn's divisor); the noise variance at least ``floor`` (original
        units, before the divisor)."""
        d = C.shape[0]
        k = self._k(d)
        s = np.asarray(scale, dtype=np.float64)
        top_s = float(np.max(s))
        if isinstance(C, (ReleasedCovariance, RowsCovariance)):       # already scaled by s / top_s
            lam, V = top_eigenpairs_krylov(C, k, params["krylov"], krylov_columns(k))
            trace = C.trace()
        else:
            A = scaled_covariance(C, s / top_s)
            lam, V = top_eigenpairs(A, k, params["v0"] if _uses_lanczos(d, k) else None)
            trace = float(np.trace(A))
        dof = n - 1.0 if (self._releases_mean() and n > 1.0) else n
        f = top_s * top_s * n / dof
        with np.errstate(over="ignore"):
            ev = np.maximum(lam, 0.0) * f
            total = max(trace * f, float(np.sum(ev)))
        rest = max(total - float(np.sum(ev)), 0.0) / (d - k) if k < d else 0.0
        rest = max(rest, floor * n / dof)
        return {"components": fix_signs(V.T), "ev": ev, "total": total, "noise": rest, "n": n, "dof": dof,
                "top": float(lam[0])}

    def _set_fitted(self, params, domain, dtype):
        ev = np.asarray(params["ev"], dtype=np.float64)
        total = params["total"]
        self.components_ = params["components"].astype(dtype, copy=False)
        self.explained_variance_ = ev.astype(dtype, copy=False)
        ratio = ev / total if total > 0 and np.isfinite(total) else np.zeros_like(ev)
        self.explained_variance_ratio_ = ratio.astype(dtype, copy=False)
        with np.errstate(over="ignore"):
            self.singular_values_ = np.sqrt(ev * max(params["dof"], 0.0)).astype(dtype, copy=False)
        self.noise_variance_ = float(params["noise"])
        self.mean_ = domain.to_original(params["mean"]).astype(dtype, copy=False)
        self.n_components_ = int(ev.shape[0])

    # ------------------------------------------------------------- inference
    def transform(self, X):
        """``(X − mean_) components_ᵀ``, shape (n_samples, n_components)."""
        X = self._check_X(X)
        return ((X - self.mean_) @ self.components_.T).astype(X.dtype, copy=False)

    def inverse_transform(self, X):
        """``X components_ + mean_``: back to the original space, shape (n_samples, n_features)."""
        check_is_fitted(self, "components_")
        Z = np.asarray(X, dtype=self.components_.dtype)
        return Z @ self.components_ + self.mean_

    def _variances(self):
        """``(lam, s2)``: the component variances and the noise variance of the probabilistic PCA
        (scikit-learn's), each at least a tiny share of the total (a clipped or noise-free fit
        would give a singular model)."""
        ev = np.asarray(self.explained_variance_, dtype=np.float64)
        d = self.components_.shape[1]
        total = float(np.sum(ev)) + self.noise_variance_ * (d - ev.size)
        s2 = max(self.noise_variance_, 1e-12 * total, np.finfo(np.float64).tiny)
        return np.maximum(ev, s2), s2

    def get_covariance(self):
        """``components_ᵀ diag(lam − s2) components_ + s2 I``: scikit-learn's probabilistic PCA
        (``lam`` the explained variances, ``s2`` ``noise_variance_``, each kept above a tiny share
        of the total)."""
        check_is_fitted(self, "components_")
        W = np.asarray(self.components_, dtype=np.float64)
        lam, s2 = self._variances()
        cov = (W.T * (lam - s2)) @ W
        cov.flat[:: cov.shape[0] + 1] += s2
        return cov

    def score_samples(self, X):
        """Log-likelihood of each row under :meth:`get_covariance`'s Gaussian at ``mean_``
        (O(n d k): ``components_`` are orthonormal)."""
        X = self._check_X(X)
        W = np.asarray(self.components_, dtype=np.float64)
        lam, s2 = self._variances()
        Xr = np.asarray(X, dtype=np.float64) - self.mean_
        with np.errstate(over="ignore", invalid="ignore"):
            Z = Xr @ W.T
            quad = (np.einsum("ij,ij->i", Xr, Xr) - np.einsum("ij,ij->i", Z, Z)) / s2 + (Z * Z) @ (1.0 / lam)
        d = W.shape[1]
        logdet = float(np.sum(np.log(lam))) + (d - lam.size) * np.log(s2)
        return -0.5 * (quad + d * np.log(2.0 * np.pi) + logdet)

    def score(self, X, y=None):
        """Mean log-likelihood per row (:meth:`score_samples`)."""
        return float(np.mean(self.score_samples(X)))

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

