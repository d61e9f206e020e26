"""Differentially private gradient EM for Gaussian mixtures: DG-EM and the clipped baseline."""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from .._dpcore import _contract
from .._dpcore import _rng as _core_rng
from ..accounting import NoiseDominatedWarning
from .._engine import PrivateEM, StatSpec
from .._engine._specs import count_for_update, row_count
from .._kernels.psi import PSI_MAX, expected_psi_sup
from .._preprocess import cube_corners
from .._rng import derive_key
from .._threads import effective_n_threads
from .._validation import BOOLEAN, FINITE, interval, options
from ._common import MixtureInferenceMixin
from .._kernels.gradem import gradem_loglik, gradem_stats, symmetric_psi_bias

__all__ = ["DPGradientEM", "DEFAULT_SCALE_RATIO", "SUP_MARGIN", "MAX_ABS_VALUE", "ROW_BOUND_RANGE",
           "MAX_COMPONENT_VARIANCE", "MIN_MULTIPLIER_PRECISION"]

#: the default truncation scale s over sigma = sqrt(component_variance) (see truncation_scale)
DEFAULT_SCALE_RATIO = 0.5
#: relative margin added to the numerically found sup M(beta_m) of E psi (see Privacy)
SUP_MARGIN = 1e-6
#: largest |value| accepted in X (each gradient term and its square stay finite; the
#: kernel handles sums of squares that overflow, see Privacy)
MAX_ABS_VALUE = 1e150
#: accepted range of the per-coordinate bound of one row's contribution, ``s M(beta_m)``
#: (truncated) or ``C`` (clipped): far from the subnormal range, where rounding is absolute
#: and could exceed the bound, and from overflow of sums over rows and of the noise
ROW_BOUND_RANGE = (1e-250, 1e250)
#: largest component_variance accepted: sigma <= MAX_ABS_VALUE (2 sigma^2 and 2 pi sigma^2
#: overflow from about 3e307)
MAX_COMPONENT_VARIANCE = 1e300
#: smallest multiplier_precision accepted: below it beta_m / 2 leaves the normal range and
#: the numerical sup M(beta_m) is no longer reliable
MIN_MULTIPLIER_PRECISION = 1e-300
_ESTIMATORS = ("truncated", "clipped")
GRAD, COUNT = "grad", "count"


def _bounded_rows(X):
    """Refuse values whose gradient terms would overflow."""
    big = float(np.max(np.abs(X))) if X.size else 0.0
    if big > MAX_ABS_VALUE:
        raise ValueError(f"X: values up to {big:.3g} exceed {MAX_ABS_VALUE:.0e}; the gradient terms "
                         "would overflow (rescale the data)")
    return X


def _gradem_statistics(X, params, domain, n_threads, *, component_variance, symmetric, estimator, scale,
                       multiplier_precision):
    """The gradient statistics kernel; a Dask task holds it with the model's public
    hyperparameters bound (``estimator``: the robust estimator's name, used by a private fit)."""
    est = estimator if params["private"] else "raw"
    return gradem_stats(X, params["means"], component_variance, symmetric=symmetric, estimator=est,
                        scale=scale, beta_m=multiplier_precision, n_threads=n_threads)


class DPGradientEM(MixtureInferenceMixin, PrivateEM):
    """Gaussian mixture with known covariance fitted by differentially private gradient EM.

    ``estimator="truncated", noise="discrete_gaussian"`` is DG-EM (Wu 2021, Algorithm 1,
    on the robust gradient of Wang et al. 2020, Algorithm 2); ``estimator="clipped",
    noise="gaussian"`` is the clipped DP gradient-EM baseline (per-sample gradient
    clipping, DG-EM Sec. 4.1); ``epsilon=inf`` is plain gradient EM (Balakrishnan,
    Wainwright & Yu 2017, eq. (2.4)).

    Models (covariance ``component_variance * I`` known, weights equal):

    * ``symmetric=True`` (``n_components=2``): ``y = z beta* + e``, ``z = +-1``,
      ``e ~ N(0, sigma^2 I)``.  Gradient EM step (BWY Sec. 3.1; Wang et al. eq. (8)), with
      ``g_i(beta) = tanh(<beta, y_i>/sigma^2) y_i - beta = sigma^2 grad_beta q_i(beta | beta)``::

          beta_{t+1} = beta_t + eta * (1/n) sum_i g_i(beta_t)

      (``eta = 1`` is the EM update).  ``means_ = [beta, -beta]``.
    * ``symmetric=False``: K means, ``g_ik = gamma_ik (y_i - mu_k)`` (m = K d coordinates),
      ``mu_{t+1} = mu_t + eta (1/n) sum_i g_i``.

    Parameters
    ----------
    n_components : int, default=2
    epsilon, delta : float
        Target (ε, δ) of the whole fit; ``epsilon=inf``: plain gradient EM, no noise.
    estimator : {"truncated", "clipped"}, default="truncated"
    noise : {"discrete_gaussian", "gaussian"}, default="discrete_gaussian"
        Exact discrete Gaussian on an integer lattice (the engine's, accounted under zCDP)
        or continuous Gaussian (exact GDP accounting by default).
    component_variance : float, default=1.0
        sigma^2, public (the model's known covariance).
    symmetric : bool, default=True
    step_size : float, default=1.0
        eta.
    max_iter : int, default=20
        T, the number of iterations (data-independent: no early stopping).
    truncation_scale : float or None, default=None
        s of the Catoni-Giulini estimator (public, in the units of the gradient).  None:
        ``DEFAULT_SCALE_RATIO * sigma = sigma / 2`` from the public ``component_variance``
        (so fitting X/c with sigma^2/c^2 gives the model of X scaled by 1/c).  Measured in the
        paper's Sec. 4 protocol with the bias correction (``bench/dgem_bias.py --scale-only``,
        10 seeds, sigma = 1): s = 0.5 has a smaller final error than s = 1 (the default before
        issue 23) in all five configurations (n = 10^3..10^4, d = 10..50, epsilon = 0.2..1),
        e.g. 0.048 against 0.059 at n = 10^4, d = 10, epsilon = 0.5; s = 0.25 is better still
        where the noise is largest (n = 10^3; d = 50) and worse elsewhere.
    multiplier_precision : float, default=1.0
        beta_m: the multiplicative noise is ``1 + eps``, ``eps ~ N(0, 1/beta_m)``.
    clip_norm : float, default=1.0
        C of the clipped baseline (l2 norm of each per-sample gradient).
    bias_correction : {"auto", True, False}, default="auto"
        DG-EM only (``estimator="truncated"``): subtract, in every update, the bias
        ``h(beta_t)`` that the truncated estimator has when the data follow the model at the
        released ``beta_t`` (see Bias correction).  Post-processing; ``False`` is the paper's
        uncorrected update.  ``"auto"``: on for the symmetric model, off for
        ``symmetric=False`` (no correction is implemented there; ``True`` with it is a
        ValueError).  Ignored by the clipped baseline and by plain gradient EM.
    means_init : array-like of shape (d,) or (1, d) (symmetric) or (K, d), optional
        Public starting parameters; default: data-independent draws from the fit's own
        stream (beta_0 uniform on the sphere of radius sigma; mu_k ~ N(0, sigma^2 I)).
    neighbouring : {"replace", "add_remove"}, default="replace"
    accountant, n_threads, random_state, budget, verbose : as the other estimators.

    max_rows_per_group : int or None, default=None
        Person-level privacy with ``fit(X, groups=...)``: at most this many rows per group,
        as in :class:`~dpem_fast.DPGaussianMixture`.

        .. versionadded:: 0.1 (issue 27)

    Attributes
    ----------
    means_ : ndarray of shape (n_components, n_features)
    beta_ : ndarray of shape (n_features,) (symmetric model only)
    weights_ : ndarray of shape (n_components,), all 1/K (known)
    privacy_ : PrivacyRecord or None
    diagnostics_ : dict (not private)

    Privacy
    -------
    Neighbouring relation ``neighbouring`` (default: replace one row).  Each iteration releases one
    statistic of the per-row gradients at the current (released) parameters: the truncated sum,
    ℓ2 sensitivity ``s M(beta_m) sqrt(m)`` add/remove and twice that under replace (M the tight
    bound of the integrated truncation, not the paper's 2√2/3), or the clipped sum, C and 2C; the
    row count is released under add/remove (1).  The bias correction, the trivial-model fallback
    (beta = 0 with a ``NoiseDominatedWarning`` where one step's noise exceeds any signal) and the
    lattice rounding of ``noise="discrete_gaussian"`` are post-processing or accounted in the plan.
    No data domain is needed (truncation bounds every row); rows above ``MAX_ABS_VALUE`` and public
    parameters whose bounds cannot be computed reliably are refused before any charge.
    Derivations and the kernel's guards at the extremes: the documentation page, "Privacy analysis
    in full".
    """

    _domain_kind = "fixed"

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line;
    #: the row count is fitting state (kept only under replace-one, where it is public)
    _cli_name = "gradient-em"
    _saved = ("weights_", "means_", "beta_", "n_iter_", "n_features_in_", "_means_param")
    _parameter_constraints = {
        "n_components": [interval("int", 1)],
        "estimator": [options(*_ESTIMATORS)],
        **{name: [interval("real", 0, None, "neither")] for name in ("step_size", "multiplier_precision", "clip_norm")},
        "component_variance": [interval("real", 0, MAX_COMPONENT_VARIANCE, "right", hint="sigma above MAX_ABS_VALUE "
                                        "overflows the model's constants; rescale the data")],
        "symmetric": [BOOLEAN],
        "truncation_scale": [None, interval("real", 0, None, "neither")],
        "bias_correction": [options("auto"), BOOLEAN],
        "means_init": [None, FINITE],
    }

    def __init__(self, n_components=2, *, epsilon=1.0, delta=1e-5, estimator="truncated",
                 noise="discrete_gaussian", component_variance=1.0, symmetric=True, step_size=1.0,
                 max_iter=20, truncation_scale=None, multiplier_precision=1.0, clip_norm=1.0,
                 bias_correction="auto", means_init=None, neighbouring="replace", accountant=None,
                 n_threads=None, random_state=None, budget=None, verbose=0, max_rows_per_group=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.estimator = estimator
        self.noise = noise
        self.component_variance = component_variance
        self.symmetric = symmetric
        self.step_size = step_size
        self.max_iter = max_iter
        self.truncation_scale = truncation_scale
        self.multiplier_precision = multiplier_precision
        self.clip_norm = clip_norm
        self.bias_correction = bias_correction
        self.means_init = means_init
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.n_threads = n_threads
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group

    # ------------------------------------------------------------ model hooks
    def _rows_task(self):
        return _bounded_rows

    def _block_rows(self, n_rows, d):
        """Rows per block of the gradient kernel (``_gradem.block_count``: partials of 2 m + 2
        doubles, m = d symmetric or K d) for a call on at most ``n_rows`` rows: the ``b`` of the
        float64 rounding bound (:mod:`~dpem_fast._engine._specs`, "Rounding")."""
        m = d if self.symmetric else int(self.n_components) * d
        return _contract.max_block_rows(int(n_rows), 2 * m + 2)

    def _check_model_params(self, n_samples, n_features):
        K = self.n_components
        if self.symmetric and K != 2:
            raise ValueError(f"n_components must be 2 for the symmetric model, got {K}")
        super()._check_model_params(n_samples, n_features)     # n_samples >= K where public
        if self.bias_correction is True and not self.symmetric and self.estimator == "truncated":
            raise ValueError("bias_correction=True is implemented for the symmetric model only; "
                             "use bias_correction='auto' or False with symmetric=False")
        self._check_extremes()
        if self.means_init is not None:
            m = np.asarray(self.means_init, dtype=np.float64)
            shape = (1, n_features) if self.symmetric else (K, n_features)
            if m.size != shape[0] * shape[1] or (not self.symmetric and m.shape != shape):
                raise ValueError(f"means_init must have shape {shape if not self.symmetric else (n_features,)}, "
                                 f"got {m.shape}")
            if not np.all(np.isfinite(m)) or np.max(np.abs(m)) > MAX_ABS_VALUE:
                raise ValueError("means_init must be finite (and below 1e150 in absolute value)")

    def _check_extremes(self):
        """Refuse public parameters whose sensitivity bound cannot be computed reliably
        (see Privacy: at the extremes); each is already in its declared interval."""
        lo, hi = ROW_BOUND_RANGE
        if self.estimator == "clipped":
            C = float(self.clip_norm)
            if not lo <= C <= hi:
                raise ValueError(f"clip_norm={C!r} is outside [{lo:.0e}, {hi:.0e}]: the sensitivity C cannot be "
                                 "guaranteed in floating point there (rescale the data)")
            return
        beta_m = float(self.multiplier_precision)
        if beta_m < MIN_MULTIPLIER_PRECISION:
            raise ValueError(f"multiplier_precision={beta_m!r} is below {MIN_MULTIPLIER_PRECISION:.0e}: the sup "
                             "M(beta_m) of the truncated estimator is not computed reliably there")
        bound = self._s() * expected_psi_sup(beta_m)[0] * (1.0 + SUP_MARGIN)
        if not lo <= bound <= hi:
            raise ValueError(f"truncation_scale={self._s()!r} with multiplier_precision={beta_m!r} "
                             f"gives a per-coordinate bound s M(beta_m) = {bound:.3g} outside [{lo:.0e}, {hi:.0e}]: "
                             "the sensitivity cannot be guaranteed in floating point there (rescale the data)")

    def _m(self, d):
        return d if self.symmetric else self.n_components * d

    def _row_bound(self, d):
        """sup over rows of the ℓ2 norm of one row's contribution (add/remove Δ)."""
        m = self._m(d)
        if self.estimator == "clipped":
            return float(self.clip_norm)
        M = expected_psi_sup(float(self.multiplier_precision))[0] * (1.0 + SUP_MARGIN)
        return self._s() * min(M, PSI_MAX) * math.sqrt(m)

    def _s(self):
        """s: ``truncation_scale``, or ``DEFAULT_SCALE_RATIO * sigma`` where it is None (public)."""
        if self.truncation_scale is None:
            return DEFAULT_SCALE_RATIO * math.sqrt(float(self.component_variance))
        return float(self.truncation_scale)

    def _statistic_specs(self, n_features):
        m = self._m(n_features)
        b = self._row_bound(n_features)
        specs = (StatSpec(GRAD, (m,), l2={"add_remove": b, "replace": 2.0 * b}),)
        if self._count_private():
            # row-level replace: 1.0 is a (loose) bound of the true 0 and the count is public,
            # never released; person-level replace: a group's count changes by up to m
            specs = specs + (row_count(COUNT),)
        return specs

    def _shares(self):
        return {GRAD: 1.0, COUNT: 0.1} if self._count_private() else None

    def _describe(self):
        if self.estimator == "truncated":
            mech = ("DG-EM (Wu 2021, Algorithm 1): per-coordinate Catoni-Giulini truncated gradient with the "
                    "multiplicative noise integrated out (Wang et al. 2020, Algorithm 2)")
        else:
            mech = "clipped DP gradient EM: per-sample gradients clipped to l2 norm C"
        return mech + f", {self.noise} noise", (
            "initialisation: data-independent (or public means_init)",
            "stopping: after max_iter iterations (data-independent)",
            "no sample splitting: every iteration reads all rows; T releases composed")

    def _initial_parameters(self, summary, domain, key, private):
        d = summary.n_features
        sig = math.sqrt(float(self.component_variance))
        if self.means_init is not None:
            m = np.asarray(self.means_init, dtype=np.float64)
            means = m.reshape(1, d) if self.symmetric else m.copy()
        else:
            k = 1 if self.symmetric else self.n_components
            g = np.empty(k * d)
            _core_rng.fill_normal(derive_key(key, "init", "means"), 0, 1.0, g, 1)
            means = g.reshape(k, d) * sig
            if self.symmetric:
                nrm = float(np.linalg.norm(means))
                means = means / nrm * sig if nrm > 0 else np.full((1, d), sig / math.sqrt(d))
        return {"means": np.ascontiguousarray(means), "private": bool(private)}

    def _statistics_task(self):
        return functools.partial(_gradem_statistics, component_variance=float(self.component_variance),
                                 symmetric=bool(self.symmetric), estimator=str(self.estimator),
                                 scale=self._scale(), multiplier_precision=float(self.multiplier_precision))

    def _scale(self):
        return self._s() if self.estimator == "truncated" else float(self.clip_norm)

    def _extreme_rows(self, n_features, key):
        """Rows far out along the axes and the cube's diagonals, at 3, 10 and 100 component
        standard deviations (the rows are unbounded: truncation or clipping bounds each row's
        contribution, which saturates there; public: sigma² alone)."""
        sig = math.sqrt(float(self.component_variance))
        eye = np.eye(n_features)
        dirs = np.vstack([eye, -eye, cube_corners(n_features, key) / math.sqrt(n_features)])
        return np.vstack([c * sig * dirs for c in (3.0, 10.0, 100.0)])

    def _step(self, params, mean_grad):
        means = params["means"] + float(self.step_size) * mean_grad.reshape(params["means"].shape)
        return {"means": means, "private": params["private"]}

    def _corrects_bias(self):
        return (self.estimator == "truncated" and bool(self.symmetric)
                and (isinstance(self.bias_correction, str) or bool(self.bias_correction)))

    def _update(self, noisy, params, ctx):
        """A gradient step on the released statistic, less the truncation's bias at the
        released parameters where ``bias_correction`` (post-processing)."""
        n = count_for_update(noisy[COUNT][0] if COUNT in noisy else None, ctx.releases.get(COUNT), ctx.n_public)
        mean_grad = noisy[GRAD] / n
        if self._corrects_bias() and np.all(np.isfinite(params["means"])):
            mean_grad = mean_grad - symmetric_psi_bias(params["means"][0], float(self.component_variance),
                                                       self._s(), float(self.multiplier_precision))
        out = self._step(params, mean_grad)
        if self.symmetric and ctx.t == self._n_release_rounds() - 1:
            tau = float(self.step_size) * float(ctx.releases[GRAD].noise_scale) / n
            out["means"] = self._trivial_if_noise_driven(out["means"], tau)
        return out

    def _trivial_if_noise_driven(self, means, tau):
        """beta = 0 and a NoiseDominatedWarning where one step's noise is at least the largest signal
        (``kappa >= 1``, see Trivial model; public values only)."""
        d = means.shape[1]
        kappa = tau * math.sqrt(d) / (float(self.step_size) * self._row_bound(d))
        if kappa < 1.0:
            return means
        warnings.warn(
            f"{type(self).__name__}: the noise of one step ({tau * math.sqrt(d):.3g} in norm) is at least the largest "
            f"gradient any data could give ({float(self.step_size) * self._row_bound(d):.3g}; ratio {kappa:.3g}), so the "
            "fit cannot beat the trivial model; returning beta = 0. Declare a larger epsilon or fit more rows.",
            NoiseDominatedWarning, stacklevel=2)
        return np.zeros_like(means)

    def _exact_update(self, stats, params):
        """Plain gradient EM: the exact mean gradient."""
        return self._step(params, stats["raw"] / float(stats[COUNT][0]))

    def _set_fitted(self, params, domain, dtype):
        m = params["means"]
        self._means_param = m.copy()
        if self.symmetric:
            self.beta_ = m[0].astype(dtype, copy=False)
            self.means_ = np.vstack([m[0], -m[0]]).astype(dtype, copy=False)
        else:
            self.means_ = m.astype(dtype, copy=False)
        K = self.means_.shape[0]
        self.weights_ = np.full(K, 1.0 / K)

    # ------------------------------------------------------------- inference
    def _log_resp(self, X):
        X = self._check_X(X)
        ll, resp = gradem_loglik(X, self._means_param, float(self.component_variance), symmetric=bool(self.symmetric),
                                 n_threads=effective_n_threads(self.n_threads))
        with np.errstate(divide="ignore"):
            return np.log(resp), ll
