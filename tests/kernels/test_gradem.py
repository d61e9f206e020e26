"""Gradient-EM kernel: numpy twin, thread invariance, psi and its closed-form expectation
against direct integration, the gradient against finite differences, and the truncated /
clipped statistics' sensitivities by brute force over neighbouring datasets."""
import itertools
import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import integrate
from scipy.optimize import brentq
from scipy.special import expit

from dpem_fast import DPGradientEM
from dpem_fast._reference import gradem as R
from dpem_fast.mixture._dg_em import MAX_ABS_VALUE
from dpem_fast._kernels.gradem import expected_psi, gradem_loglik, gradem_stats


def _data(n, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, d)) * rng.choice([0.3, 3.0, 30.0], size=(n, 1))).astype(dtype)


CASES = [(True, 1, "truncated", 1.5), (True, 1, "clipped", 2.0), (False, 3, "truncated", 0.7),
         (False, 3, "clipped", 1.0), (False, 1, "truncated", 1.0), (True, 1, "raw", 1.0)]


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-11), (np.float32, 1e-5)])
@pytest.mark.parametrize("n", [1, 255, 1000, 4099])
@pytest.mark.parametrize("symmetric, K, estimator, scale", CASES)
def test_kernel_equals_numpy_twin_and_is_thread_invariant(dtype, tol, n, symmetric, K, estimator, scale):
    d = 5
    X = _data(n, d, dtype)
    means = np.random.default_rng(1).normal(size=(K, d))
    a = gradem_stats(X, means, 1.7, symmetric=symmetric, estimator=estimator, scale=scale, beta_m=2.5, n_threads=1)
    b = gradem_stats(X, means, 1.7, symmetric=symmetric, estimator=estimator, scale=scale, beta_m=2.5, n_threads=2)
    for name in a:
        assert_array_equal(a[name], b[name])
    assert (a.loglik, a.n_clipped) == (b.loglik, b.n_clipped)
    ref = R.gradem_stats_reference(X.astype(np.float64), means, 1.7, symmetric=symmetric,
                                   estimator="truncated" if estimator == "raw" else estimator, scale=scale,
                                   beta_m=2.5)
    scale_of = np.abs(X.astype(np.float64)).sum() + 1.0
    assert_allclose(a["raw"], ref["raw"], rtol=tol, atol=tol * scale_of)
    if estimator != "raw":
        assert_allclose(a["grad"], ref["grad"], rtol=tol, atol=tol * n * scale)
        assert a.n_clipped == ref["n_clipped"]
    else:
        assert_array_equal(a["grad"], 0.0)
    assert a.loglik == pytest.approx(ref["loglik"], rel=tol)
    assert a["count"][0] == n


def test_empty_rows_and_loglik_posteriors():
    means = np.ones((1, 3))
    s = gradem_stats(np.empty((0, 3)), means, 1.0, symmetric=True, estimator="truncated")
    assert_array_equal(s["grad"], 0.0) and s.n_rows == 0
    X = _data(300, 3, np.float64)
    ll, resp = gradem_loglik(X, means, 0.8, symmetric=True)
    _, ll_ref = R.symmetric_gradient_reference(X, means[0], 0.8)
    assert_allclose(ll, ll_ref, rtol=1e-12)
    assert_allclose(resp[:, 0], expit(2 * X @ means[0] / 0.8), rtol=1e-12)
    assert_allclose(resp[:, 1], expit(-2 * X @ means[0] / 0.8), rtol=1e-12)
    mu = np.random.default_rng(3).normal(size=(4, 3))
    ll, resp = gradem_loglik(X, mu, 0.8, symmetric=False)
    g, ll_ref = R.mixture_gradient_reference(X, mu, 0.8)
    assert_allclose(ll, ll_ref, rtol=1e-12)
    assert_allclose(resp.sum(1), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="means"):
        gradem_stats(X, np.ones((2, 3)), 1.0, symmetric=True, estimator="clipped")


# ------------------------------------------------------------------------ psi
def test_the_twins_constants_are_the_kernels():
    from dpem_fast._kernels import psi as kernel_psi

    assert (R.U_SATURATE, R.PSI_MAX, R.SQRT2) == (kernel_psi.U_SATURATE, kernel_psi.PSI_MAX, kernel_psi.SQRT2)


def test_psi_shape():
    x = np.linspace(-5, 5, 10001)
    p = R.psi(x)
    assert_allclose(p, -R.psi(-x), atol=0)
    assert np.max(np.abs(p)) == pytest.approx(R.PSI_MAX, rel=1e-15)
    a = math.sqrt(2.0)
    assert R.psi(np.array([a - 1e-12]))[0] == pytest.approx(R.PSI_MAX, abs=1e-11)     # continuous
    assert np.all(np.diff(p) >= -1e-15)                                               # nondecreasing
    # the defining inequality of Catoni-Giulini: -log(1 - x + x^2/2) <= psi(x) <= log(1 + x + x^2/2)
    assert np.all(p <= np.log1p(x + x * x / 2) + 1e-12)
    assert np.all(p >= -np.log1p(-x + x * x / 2) - 1e-12)


def _direct(u, beta_m):
    """E psi(u (1 + eps)) by adaptive quadrature in the standard normal variable."""
    if u == 0.0:
        return 0.0
    tau, a = abs(u) / math.sqrt(beta_m), math.sqrt(2.0)

    def f(z):
        return float(R.psi(np.array([u + tau * z]))[0]) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    br = sorted({-40.0, 40.0, *(min(max((s * a - u) / tau, -40.0), 40.0) for s in (-1, 1))})
    with warnings.catch_warnings():     # quad may warn that 1e-13 is out of reach; the
        warnings.simplefilter("ignore", integrate.IntegrationWarning)   # comparison decides
        return math.fsum(integrate.quad(f, lo, hi, limit=400, epsabs=1e-15, epsrel=1e-13)[0]
                         for lo, hi in zip(br[:-1], br[1:]) if hi > lo)


@pytest.mark.parametrize("beta_m", [0.3, 1.0, 4.0, 30.0, 1e4])
def test_expected_psi_against_numerical_integration(beta_m):
    us = np.array([-80.0, -4.0, -1.1, -0.2, 1e-3, 0.05, 0.3, 0.499, 0.501, 0.9, 1.4, 2.0, 3.3, 7.0, 60.0, 1e5])
    direct = np.array([_direct(u, beta_m) for u in us])
    assert_allclose(R.expected_psi(us, beta_m), direct, rtol=1e-10, atol=1e-13)
    assert_allclose(expected_psi(us, beta_m), direct, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("beta_m", [0.5, 1.0, 9.0])
def test_closed_form_main_term_and_correction(beta_m):
    """E psi = u - u^3 (1 + 3/beta_m)/6 + correction, the correction being the tails'
    E[(psi(Y) - Y + Y^3/6) 1{|Y| > sqrt2}] integrated directly."""
    a = math.sqrt(2.0)
    for u in (0.05, 0.4, 1.0, 2.5):
        tau = u / math.sqrt(beta_m)

        def corr(z):
            y = u + tau * z
            return (float(R.psi(np.array([y]))[0]) - y + y ** 3 / 6) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

        c = (integrate.quad(corr, -60, (-a - u) / tau, epsabs=1e-15, limit=400)[0]
             + integrate.quad(corr, (a - u) / tau, 60, epsabs=1e-15, limit=400)[0])
        main = u - u ** 3 * (1 + 3 / beta_m) / 6
        assert R.expected_psi(np.array([u]), beta_m)[0] == pytest.approx(main + c, rel=1e-9, abs=1e-13)


@pytest.mark.parametrize("beta_m", [0.25, 1.0, 4.0, 25.0])
def test_sup_of_expected_psi_by_brute_force(beta_m):
    M, _ = R.expected_psi_sup(beta_m)
    u = np.concatenate([np.logspace(-4, 9, 200001), -np.logspace(-4, 9, 2001)])
    vals = np.abs(expected_psi(u, beta_m))
    assert vals.max() <= M * (1 + 1e-9)
    assert vals.max() >= M * (1 - 1e-6)
    assert M < R.PSI_MAX


# ------------------------------------------------------------------ gradients
def test_symmetric_gradient_is_the_score_by_finite_differences():
    """sigma2 grad_beta sum_i log p(y_i; beta) = sum_i g_i (Fisher's identity: the gradient of
    Q(.|beta) at beta equals the gradient of the log-likelihood), and the gradient of Q
    itself by central differences."""
    X = _data(400, 4, np.float64, seed=2)
    beta = np.array([0.7, -0.2, 1.1, 0.3])
    s2 = 1.6
    g, _ = R.symmetric_gradient_reference(X, beta, s2)

    def loglik(b):
        return R.symmetric_gradient_reference(X, b, s2)[1].sum()

    w = 0.5 * (1 + np.tanh(X @ beta / s2))

    def Q(b):
        return -(w @ np.sum((X - b) ** 2, 1) + (1 - w) @ np.sum((X + b) ** 2, 1)) / (2 * s2)

    h = 1e-5
    for f in (loglik, Q):
        fd = np.array([(f(beta + h * e) - f(beta - h * e)) / (2 * h) for e in np.eye(4)])
        assert_allclose(s2 * fd, g.sum(0), rtol=1e-6, atol=1e-6)


def test_mixture_gradient_is_the_score_by_finite_differences():
    X = _data(300, 3, np.float64, seed=3)
    mu = np.random.default_rng(4).normal(size=(3, 3)) * 2
    s2 = 2.2
    g, _ = R.mixture_gradient_reference(X, mu, s2)

    def loglik(m):
        return R.mixture_gradient_reference(X, m.reshape(3, 3), s2)[1].sum()

    h = 1e-5
    fd = np.array([(loglik(mu.ravel() + h * e) - loglik(mu.ravel() - h * e)) / (2 * h) for e in np.eye(9)])
    assert_allclose(s2 * fd, g.sum(0), rtol=1e-6, atol=1e-6)


# ------------------------------------------------ sensitivity, whole datasets
@pytest.mark.parametrize("estimator", ["truncated", "clipped"])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("rel", ["replace", "add_remove"])
def test_brute_force_sensitivity_over_neighbouring_datasets(estimator, symmetric, rel):
    """Small datasets, every neighbour built from a candidate set of rows (extreme and
    ordinary ones) at several parameters: the released statistic of the whole dataset
    never moves by more than the declared sensitivity, and comes within 5 % of it."""
    d, K = 2, (2 if symmetric else 3)
    est = DPGradientEM(K, symmetric=symmetric, estimator=estimator, truncation_scale=0.8, clip_norm=1.3,
                       neighbouring=rel, component_variance=0.9)
    declared = est._statistic_specs(d)[0].sensitivity("l2", rel)
    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, d))
    U = 1e6
    cands = [np.array(v, dtype=float) for v in itertools.product([-U, -3.0, -0.5, 0.0, 0.5, 3.0, U], repeat=d)]
    params = [np.array([[3.0, -3.0]]), np.array([[0.4, 0.1]])] if symmetric else \
        [np.zeros((K, d)), rng.normal(size=(K, d))]
    best = 0.0
    for means in params:
        extra = []
        if symmetric and abs(means[0] @ np.ones(d)) < 1e-12:
            # g = +-U 1 exactly: y = (g + beta) / tanh(t), t tanh t = |beta|^2 / sigma2
            t = brentq(lambda t: t * math.tanh(t) - means[0] @ means[0] / 0.9, 1e-9, 1e3)
            extra = [(sgn * U + means[0]) / math.tanh(t) for sgn in (1.0, -1.0)]

        def stat(Y):
            return gradem_stats(Y, means, 0.9, symmetric=symmetric, estimator=estimator,
                                scale=est._scale(), beta_m=1.0, n_threads=1)["grad"]
        ref = stat(base)
        S = np.array([stat(np.vstack([base, c])) for c in cands + extra])
        if rel == "add_remove":
            change = np.linalg.norm(S - ref, axis=1)
        else:
            change = np.linalg.norm(S[:, None, :] - S[None, :, :], axis=2)
        assert change.max() <= declared * (1 + 1e-9)
        best = max(best, change.max())
    assert best >= 0.95 * declared, (best, declared)


# ------------------------------------------- the extremes (issue 21, item 3)
# The largest |x| the estimator accepts, with tiny (and huge) public parameters: one row
# there used to make every log-responsibility -inf (0/0) or u = g/s infinite (E psi = NaN),
# so the statistic of one dataset was NaN and that of its neighbour finite.
B = MAX_ABS_VALUE
EXTREME_SIGMA2 = (5e-324, 1e-300, 1e-10, 1.0, 1e300)
EXTREME_SCALES = (5e-324, 1e-300, 1e-160, 1.0, 1e250)


def _extreme_rows(d):
    return np.array(list(itertools.product([-B, -B / 3, -1.0, 0.0, 0.5, B], repeat=d)))


def _extreme_means(symmetric, K, d, rng):
    if symmetric:
        return [np.full((1, d), 0.7), np.array([[3.0, -3.0]]), np.full((1, d), B), np.array([[B, -B]]),
                np.full((1, d), 1e-200)]
    return [np.zeros((K, d)),                                  # equal means: gamma = 1/K
            rng.normal(size=(K, d)),
            np.array([[B, B], [-B, -B], [B, -B]])[:K],
            np.array([[0.0, 0.0], [1e-200, 0.0], [0.0, 1e-200]])[:K],
            np.array([[B, 0.0], [B, 1.0], [-1.0, B]])[:K]]


def _assert_close_to_twin(a, ref, X, means, scale):
    """Kernel and twin at the extremes: the same values up to the rounding of the sums
    (rows of +-1e150, or of +-s at the saturated limit, cancel; each row adds at most
    |g| to raw and s to grad in a coordinate)."""
    mag = (np.abs(X).sum() + X.shape[0] * np.abs(means).sum() + 1.0)
    assert_allclose(a["raw"], ref["raw"], rtol=1e-9, atol=1e-13 * mag)
    assert_allclose(a["grad"], ref["grad"], rtol=1e-9, atol=1e-13 * X.shape[0] * scale)
    assert a.n_clipped == ref["n_clipped"]
    assert a["n_nonfinite"][0] == ref["n_nonfinite"]
    if math.isfinite(ref["loglik"]):
        assert a.loglik == pytest.approx(ref["loglik"], rel=1e-9)
    else:
        assert a.loglik == ref["loglik"]


@pytest.mark.parametrize("estimator", ["truncated", "clipped"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_kernel_is_finite_at_the_largest_accepted_values(symmetric, estimator):
    """Rows at +-MAX_ABS_VALUE, sigma2 and s down to the smallest double: every output is
    finite (the log-likelihood may be -inf: the density underflows), no row needs the last
    guard while the parameters are finite, 1 and 2 threads agree bit for bit, and the numpy
    twin gives the same values."""
    d, K = 2, (1 if symmetric else 3)
    X = _extreme_rows(d)
    rng = np.random.default_rng(5)
    for means, sigma2, scale, beta_m in itertools.product(_extreme_means(symmetric, K, d, rng), EXTREME_SIGMA2,
                                                          EXTREME_SCALES, (1.0, 1e-10, 1e10)):
        kw = dict(symmetric=symmetric, estimator=estimator, scale=scale, beta_m=beta_m)
        a = gradem_stats(X, means, sigma2, n_threads=1, **kw)
        where = (means.tolist(), sigma2, scale, beta_m)
        assert np.all(np.isfinite(a["grad"])), where
        assert np.all(np.isfinite(a["raw"])), where
        assert not math.isnan(a.loglik), where
        assert a["n_nonfinite"][0] == 0, where
        b = gradem_stats(X, means, sigma2, n_threads=2, **kw)
        for name in a:
            assert_array_equal(a[name], b[name])
        assert (a.loglik, a.n_clipped) == (b.loglik, b.n_clipped)
        ref = R.gradem_stats_reference(X, means, sigma2, **kw)
        _assert_close_to_twin(a, ref, X, means, scale)
        # the posteriors too (predict_proba): finite, summing to one
        _, resp = gradem_loglik(X, means, sigma2, symmetric=symmetric, n_threads=1)
        assert np.all(np.isfinite(resp)), where
        assert_allclose(resp.sum(1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("estimator", ["truncated", "clipped"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_extreme_rows_over_many_blocks_are_thread_invariant(symmetric, estimator):
    """The fallbacks run per row inside each block: 5000 rows (20 blocks) mixing ordinary and
    extreme rows give finite statistics, the same bits for 1 and 2 threads, and the twin's
    values."""
    rng = np.random.default_rng(8)
    ext = _extreme_rows(2)
    X = np.where(rng.random((5000, 1)) < 0.1, ext[rng.integers(0, len(ext), 5000)], rng.normal(size=(5000, 2)))
    means = np.array([[0.4, -0.3]]) if symmetric else rng.normal(size=(3, 2))
    for sigma2, scale in ((1e-300, 1e-200), (1.0, 1e-160), (1e-10, 1.0)):
        kw = dict(symmetric=symmetric, estimator=estimator, scale=scale, beta_m=1.0)
        a = gradem_stats(X, means, sigma2, n_threads=1, **kw)
        b = gradem_stats(X, means, sigma2, n_threads=2, **kw)
        assert np.all(np.isfinite(a["grad"])) and np.all(np.isfinite(a["raw"]))
        for name in a:
            assert_array_equal(a[name], b[name])
        assert (a.loglik, a.n_clipped) == (b.loglik, b.n_clipped)
        _assert_close_to_twin(a, R.gradem_stats_reference(X, means, sigma2, **kw), X, means, scale)


def test_tiny_variance_gives_the_hard_assignment_limit():
    """When every log-term -|y - mu_k|^2/(2 sigma2) underflows to -inf the row goes to the
    nearest mean(s), ties split equally: the sigma2 -> 0 limit of the softmax.  The distances
    are compared exactly, also when their squares overflow."""
    mu = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    X = np.array([[20.0, 1.0], [1.0, 20.0], [20.0, 20.0], [3.0, 3.0], [-5.0, -5.0]])
    g, _ = R.mixture_gradient_reference(X, mu, 1e-300)
    gam = np.array([[0, 1, 0], [0, 0, 1], [0, 0.5, 0.5], [1, 0, 0], [1, 0, 0]], dtype=float)
    expect = (gam[:, :, None] * (X[:, None, :] - mu[None])).reshape(5, 6)
    assert_allclose(g, expect, rtol=1e-15)
    for i in range(5):
        a = gradem_stats(X[i:i + 1], mu, 1e-300, symmetric=False, estimator="raw")
        assert_allclose(a["raw"], expect[i], rtol=1e-15)
    _, resp = gradem_loglik(X, mu, 1e-300, symmetric=False)
    assert_array_equal(resp, gam)
    # squared distances beyond the largest double: still the nearest mean
    Y = np.full((1, 200), B)
    mu2 = np.vstack([np.full(200, -1e160), np.full(200, 1e160)])
    _, resp = gradem_loglik(Y, mu2, 1.0, symmetric=False)
    assert_array_equal(resp, [[0.0, 1.0]])


def test_symmetric_dot_product_whose_terms_overflow():
    """<beta, y> with terms overflowing to +inf and -inf (inf - inf = NaN) is recomputed with
    beta scaled by 2^-600: its sign, hence tanh and g, are those of the exact value."""
    beta = np.array([[1e300, 1e300]])
    X = np.array([[B, -B], [B, -B / 2], [-B, B / 2]])
    expect = np.vstack([-beta[0], X[1] - beta[0], -X[2] - beta[0]])      # tanh = 0, +1, -1
    g, ll = R.symmetric_gradient_reference(X, beta[0], 1.0)
    assert_array_equal(g, expect)
    assert not np.any(np.isnan(ll))
    for i in range(3):
        a = gradem_stats(X[i:i + 1], beta, 1.0, symmetric=True, estimator="clipped", scale=1.0)
        assert_array_equal(a["raw"], expect[i])
        assert a["n_nonfinite"][0] == 0 and not math.isnan(a.loglik)
    _, resp = gradem_loglik(X, beta, 1.0, symmetric=True)
    assert_array_equal(resp, [[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize("beta_m", [1e-300, 1e-10, 0.5, 1.0, 30.0, 1e10, 1e300])
def test_expected_psi_saturates_at_its_limit(beta_m):
    """E psi(u (1 + eps)) -> sign(u) (2 sqrt2/3) erf(sqrt(beta_m/2)) as |u| -> inf; beyond
    2^60 the kernel returns that limit (its distance to it is below c/|u| relative), and at
    +-inf too (the closed form gave NaN there)."""
    lim = R.PSI_MAX * math.erf(math.sqrt(beta_m / 2.0))
    M = R.expected_psi_sup(beta_m)[0]
    assert lim <= M
    u = np.array([np.inf, 1e308, 1e200, 2.0 ** 60, 1e17])
    for f, slack in ((expected_psi, 1e-11), (R.expected_psi, 4e-15)):
        # the twin's sup is the true one (the limit here); below U_SATURATE each function carries
        # its rounding: the kernel's closed form up to ~5e-12 relative at beta_m = 1e-10 (its
        # tails are erfc differences), the twin's quadrature a few ulps
        v = f(np.concatenate([u, -u]), beta_m)
        assert np.all(np.isfinite(v)) and np.all(np.abs(v) <= M * (1 + slack))
        assert np.all(v[:4] == v[0]) and np.all(v[5:9] == -v[0])     # the limit, exactly
        assert_allclose(v[0], lim, rtol=3e-16)      # the kernel's 2 sqrt2/3 is an ulp below
        # just below U_SATURATE the closed form (for beta_m >= 1e-10: below that its tails
        # cancel to ~0, an absolute error under 1e-150 that the limit removes from 2^60 on)
        assert v[4] == pytest.approx(lim, rel=1e-12, abs=1e-15)
        assert v[9] == pytest.approx(-lim, rel=1e-12, abs=1e-15)
    assert expected_psi(np.array([np.nan]), beta_m)[0] != expected_psi(np.array([np.nan]), beta_m)[0]


def test_the_last_guard_zeroes_non_finite_rows():
    """Non-finite parameters (e.g. released means that overflowed) make the gradient of a
    row non-finite: its contribution is zeroed, counted, and the statistic stays finite."""
    X = np.array([[1.0, 2.0], [B, -B], [0.3, 0.1]])
    for symmetric, means in ((True, np.array([[np.inf, 1.0]])), (True, np.array([[np.nan, 0.0]])),
                             (False, np.array([[0.0, 0.0], [np.inf, -np.inf]])),
                             (False, np.array([[np.nan, 0.0], [1.0, 1.0]]))):
        for est in ("truncated", "clipped"):
            a = gradem_stats(X, means, 1.0, symmetric=symmetric, estimator=est, scale=1.0)
            ref = R.gradem_stats_reference(X, means, 1.0, symmetric=symmetric, estimator=est, scale=1.0)
            assert np.all(np.isfinite(a["grad"])) and np.all(np.isfinite(a["raw"]))
            assert a["n_nonfinite"][0] == ref["n_nonfinite"] == 3
            assert a.n_clipped == ref["n_clipped"] == 3
            assert_array_equal(a["grad"], 0.0)
            assert_array_equal(ref["grad"], 0.0)


def _adversarial_rows(symmetric, K, d, sigma2, scale):
    """(means, row, row') putting every coordinate of g at +U and at -U, |u| = U/s >= 2^61
    (saturated), exactly in floating point and with |row| <= MAX_ABS_VALUE."""
    out = []
    if symmetric:
        # beta = (c, -c): <beta, +-U 1 + beta> = 2 c^2 exactly, t = 2 c^2 / sigma2 >= 20
        c = 2.0 ** math.ceil(math.log2(math.sqrt(10.0 * sigma2) + 1e-300))
        U = max(c * 2.0 ** 20, 2.0 ** math.ceil(math.log2(scale * 2.0 ** 61)))
        if U <= B / 2:
            beta = np.array([[c, -c]])
            out.append((beta, np.array([U + c, U - c]), np.array([-U + c, -U - c])))
    else:
        for U in (B / 2, 2.0 ** math.ceil(math.log2(scale * 2.0 ** 61 * K))):
            if U <= B / 2:
                mu = np.zeros((K, d))
                out.append((mu, np.full(d, U), np.full(d, -U)))
    return out


@pytest.mark.parametrize("estimator", ["truncated", "clipped"])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("rel", ["replace", "add_remove"])
def test_one_row_moves_the_statistic_within_the_sensitivity_at_the_extremes(estimator, symmetric, rel):
    """Over rows at +-MAX_ABS_VALUE (and the adversarial ones), parameters down to the
    smallest the estimator accepts and up to the largest, the contribution of one row
    (add/remove) or the difference of two rows' contributions (replace) never exceeds the
    declared l2 sensitivity; the adversarial rows come within 5 % of it."""
    d, K = 2, (1 if symmetric else 3)
    rng = np.random.default_rng(11)
    rows = list(_extreme_rows(d))
    best = 0.0
    for sigma2, scale, beta_m in itertools.product(EXTREME_SIGMA2, (1e-240, 1e-160, 1e-10, 1.0, 1e240),
                                                   (1.0, 1e-10)):
        est = DPGradientEM(2 if symmetric else K, symmetric=symmetric, estimator=estimator, truncation_scale=scale,
                           clip_norm=scale, component_variance=min(sigma2, 1e300), multiplier_precision=beta_m,
                           neighbouring=rel)
        if estimator == "truncated" and scale * R.expected_psi_sup(beta_m)[0] < 1e-250:
            continue                    # refused by the estimator (tested in test_dg_em)
        est._check_model_params(10, d)  # the parameters are accepted
        declared = est._statistic_specs(d)[0].sensitivity("l2", rel)
        cases = [(m, rows) for m in _extreme_means(symmetric, K, d, rng)]
        cases += [(m, rows + [r1, r2]) for m, r1, r2 in _adversarial_rows(symmetric, K, d, sigma2, scale)]
        for means, cand in cases:
            S = np.array([gradem_stats(r[None, :], means, sigma2, symmetric=symmetric, estimator=estimator,
                                       scale=scale, beta_m=beta_m, n_threads=1)["grad"] for r in cand])
            assert np.all(np.isfinite(S)), (means.tolist(), sigma2, scale, beta_m)
            S = S / declared            # norms in units of the bound: no squares in the subnormal range
            if rel == "add_remove":
                change = np.linalg.norm(S, axis=1)
            else:
                change = np.linalg.norm(S[:, None, :] - S[None, :, :], axis=2)
            ratio = change.max()
            # truncated: SUP_MARGIN covers the rounding; clipped: C g/|g| is C up to a few ulps
            assert ratio <= (1.0 if estimator == "truncated" else 1.0 + 1e-12), \
                (ratio, means.tolist(), sigma2, scale, beta_m)
            best = max(best, ratio)
    assert best >= 0.95, best


# ------------------------------------------------- the truncation's bias and its correction
@pytest.mark.parametrize("beta, sigma2, scale, beta_m", [
    (np.array([1.2, -0.4, 0.3, 0.0]), 1.5, 0.8, 1.0),
    (np.array([0.9, 0.9, -0.9]), 1.0, 2.0, 4.0),
])
def test_symmetric_psi_bias_is_the_mean_truncated_gradient_at_the_model(beta, sigma2, scale, beta_m):
    """Data drawn from the symmetric model at beta: the mean gradient is 0, the truncated
    estimate's mean is h(beta) (quadrature) within Monte Carlo error, h is far from 0 (the
    uncorrected estimate is biased) and the corrected estimate G/n - h is unbiased."""
    from dpem_fast._kernels.gradem import symmetric_psi_bias
    rng = np.random.default_rng(11)
    n_batch, rows = 25, 40_000
    est, raw = [], []
    for _ in range(n_batch):
        X = rng.choice([-1.0, 1.0], size=rows)[:, None] * beta + math.sqrt(sigma2) * rng.normal(size=(rows, beta.size))
        st = gradem_stats(X, beta[None], sigma2, symmetric=True, estimator="truncated", scale=scale, beta_m=beta_m,
                          n_threads=1)
        est.append(st["grad"] / rows)
        raw.append(st["raw"] / rows)
    est, raw = np.array(est), np.array(raw)
    se = est.std(0, ddof=1) / math.sqrt(n_batch)
    h = symmetric_psi_bias(beta, sigma2, scale, beta_m)
    corrected = est.mean(0) - h
    assert np.all(np.abs(corrected) <= 4.5 * se + 1e-12), (corrected, se)
    # with the raw gradient (mean 0) as control variate: a sharper check of h itself
    cv = est - raw
    se_cv = cv.std(0, ddof=1) / math.sqrt(n_batch)
    assert np.all(np.abs(cv.mean(0) - h) <= 4.5 * se_cv + 1e-12), (cv.mean(0), h, se_cv)
    nz = beta != 0
    assert np.all(np.abs(h[nz]) > 10 * se[nz]), (h, se)           # the bias is real
    assert np.all(np.sign(h[nz]) == -np.sign(beta[nz]))           # and shrinks beta
    assert abs(h[~nz]).max(initial=0.0) < 1e-12


def test_symmetric_psi_bias_quadrature_converges_and_is_finite_at_the_extremes():
    from dpem_fast._kernels.gradem import symmetric_psi_bias
    beta = np.array([1.2, -0.4, 0.3])
    # 48 nodes against 150: the integrand is smooth but not analytic where g = 0 (E psi's tails
    # vanish like exp(-1/u^2)), so convergence is slow: about 1 % of h (1e-4 absolute) here
    assert_allclose(symmetric_psi_bias(beta, 1.5, 0.8, 1.0), symmetric_psi_bias(beta, 1.5, 0.8, 1.0, nodes=150),
                    rtol=2e-2, atol=1e-6)
    assert_array_equal(symmetric_psi_bias(np.zeros(3), 1.0, 1.0, 1.0), 0.0)
    for b, s2, s in ((np.full(2, 1e150), 1e-300, 1e-200), (np.full(2, 1e300), 1.0, 1.0), (np.full(2, 1e-300), 1.0, 1.0)):
        assert np.all(np.isfinite(symmetric_psi_bias(b, s2, s, 1.0)))
    # scale equivariance: h(c beta; c^2 sigma2, c s) = c h(beta; sigma2, s)
    assert_allclose(symmetric_psi_bias(3.0 * beta, 9.0 * 1.5, 3.0 * 0.8, 1.0),
                    3.0 * symmetric_psi_bias(beta, 1.5, 0.8, 1.0), rtol=1e-10, atol=1e-14)
