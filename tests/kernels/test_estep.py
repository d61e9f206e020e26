"""Fused GMM E-step kernel (dpem_fast._dpcore._estep) against its numpy twin and scikit-learn."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dpem_fast._reference.exactsum import sum_blocks_reference
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _contract, _estep
from dpem_fast._reference.gmm import (
    estep_stats_reference,
    log_gaussian_prob_reference,
    log_resp_reference,
)
from dpem_fast._kernels.gmm import compute_stats, gmm_statistics, log_normalizers, predict_log_resp
from plain_stats import plain

CHUNK = _contract.CHUNK_SIZE
RTOL = {np.float32: 1e-4, np.float64: 1e-10}


def make_problem(n, d, K, dtype=np.float64, seed=0, triangular=True):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=3.0, size=(K, d))
    P = np.empty((K, d, d))
    for k in range(K):
        A = rng.normal(size=(d, d))
        cov = A @ A.T / d + 0.5 * np.eye(d)
        L = np.linalg.cholesky(cov)
        P[k] = np.linalg.solve(L, np.eye(d)).T  # upper triangular, precision = P @ P.T
        if not triangular:
            P[k] = P[k] @ np.linalg.qr(rng.normal(size=(d, d)))[0]
    weights = rng.dirichlet(np.ones(K))
    comp = rng.integers(K, size=n)
    X = means[comp] + rng.normal(size=(n, d)) * 1.5
    return X.astype(dtype), weights, means, P


def assert_stats_close(a, b, rtol, atol_scale=1.0):
    a, b = plain(a), plain(b)
    assert a["n_rows"] == b["n_rows"]
    scale = max(1.0, np.abs(b["second_moments"]).max(initial=0.0)) * atol_scale
    assert_allclose(a["counts"], b["counts"], rtol=rtol, atol=rtol * max(1.0, b["n_rows"]))
    assert_allclose(a["first_moments"], b["first_moments"], rtol=rtol, atol=rtol * scale)
    assert_allclose(a["second_moments"], b["second_moments"], rtol=rtol, atol=rtol * scale)
    assert_allclose(a["loglik"], b["loglik"], rtol=rtol, atol=rtol)


SHAPES = [
    (0, 3, 2),
    (1, 1, 1),
    (CHUNK - 7, 2, 5),       # n < chunk
    (3 * CHUNK + 17, 10, 3),  # n % chunk != 0
    (2000, 1, 4),            # d == 1
    (1500, 4, 1),            # K == 1
    (700, 15, 3),            # largest hand-loop d
    (700, 16, 3),            # smallest BLAS d
    (600, 100, 4),           # d = 100 (BLAS path)
    (70 * CHUNK + 5, 3, 2),  # more chunks than BLOCK_CHUNKS: several chunks per block
    # issue 41: the hand loops past their register tiles (d = 16 .. BLAS_MIN_D - 1 = 24),
    # and the first BLAS d
    (3 * CHUNK + 17, 16, 3),
    (2 * CHUNK + 5, 20, 4),
    (CHUNK + 3, 24, 2),
    (CHUNK + 3, 25, 2),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", SHAPES)
def test_matches_reference(n, d, K, dtype):
    X, w, means, P = make_problem(n, d, K, dtype)
    got = compute_stats(X, w, means, P, n_threads=2)
    ref = estep_stats_reference(X, w, means, P)
    assert got["first_moments"].dtype == np.float64 and got["second_moments"].dtype == np.float64
    assert_stats_close(got, ref, RTOL[dtype])
    assert_array_equal(got["second_moments"], got["second_moments"].transpose(0, 2, 1))


@pytest.mark.parametrize("d", [3, 20])
def test_non_triangular_factor(d):
    X, w, means, P = make_problem(900, d, 3, triangular=False)
    assert np.any(np.tril(P, -1))
    assert_stats_close(compute_stats(X, w, means, P), estep_stats_reference(X, w, means, P), 1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", [(3 * CHUNK + 17, 10, 3), (500, 100, 2), (1, 2, 2)])
def test_predict_log_resp(n, d, K, dtype):
    X, w, means, P = make_problem(n, d, K, dtype)
    log_resp, ll = predict_log_resp(X, w, means, P, n_threads=2)
    ref_lr, ref_ll = log_resp_reference(X, w, means, P)
    assert log_resp.dtype == dtype and ll.dtype == dtype
    rtol = RTOL[dtype]
    assert_allclose(ll, ref_ll, rtol=rtol, atol=rtol * 10)
    assert_allclose(log_resp, ref_lr, rtol=rtol, atol=rtol * np.abs(ref_lr).max())
    # consistency with the fused kernel
    stats = compute_stats(X, w, means, P)
    assert_allclose(stats.loglik, ref_ll.sum(), rtol=rtol)


def test_predict_log_resp_empty():
    X, w, means, P = make_problem(0, 3, 2)
    lr, ll = predict_log_resp(X, w, means, P)
    assert lr.shape == (0, 2) and ll.shape == (0,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", [(70 * CHUNK + 5, 3, 4), (50 * CHUNK + 3, 10, 3), (30 * CHUNK + 7, 20, 3),
                                   (20 * CHUNK + 9, 40, 3)])
def test_thread_count_invariance(n, d, K, dtype):
    X, w, means, P = make_problem(n, d, K, dtype, seed=3)
    runs = [compute_stats(X, w, means, P, n_threads=t) for t in (1, 2, 4)]
    for r in runs[1:]:
        assert_array_equal(r["counts"], runs[0]["counts"])
        assert_array_equal(r["first_moments"], runs[0]["first_moments"])
        assert_array_equal(r["second_moments"], runs[0]["second_moments"])
        assert r.loglik == runs[0].loglik
    lrs = [predict_log_resp(X, w, means, P, n_threads=t) for t in (1, 2, 4)]
    for lr, ll in lrs[1:]:
        assert_array_equal(lr, lrs[0][0])
        assert_array_equal(ll, lrs[0][1])


def test_block_count_independent_of_threads_and_bounded():
    assert _estep.block_count(0, 3, 2) == 0
    assert _estep.block_count(1, 3, 2) == 1
    assert _estep.block_count(10**6, 10, 5) == -(-10**6 // (256 * _contract.BLOCK_CHUNKS))
    # partial memory stays bounded for large d
    nb = _estep.block_count(10**6, 100, 10)
    assert _contract.MIN_BLOCKS <= nb and nb * 10 * (100 * 100 + 101) <= _contract.PARTIAL_BUDGET


def test_matches_sklearn_score_samples():
    from sklearn.mixture import GaussianMixture

    X, _, _, _ = make_problem(3000, 4, 3, seed=5)
    gm = GaussianMixture(n_components=3, covariance_type="full", random_state=0, max_iter=20).fit(X)
    _, ll = predict_log_resp(X, gm.weights_, gm.means_, gm.precisions_cholesky_)
    assert_allclose(ll, gm.score_samples(X), rtol=1e-10, atol=1e-10)
    stats = compute_stats(X, gm.weights_, gm.means_, gm.precisions_cholesky_)
    assert_allclose(stats.loglik / X.shape[0], gm.score(X), rtol=1e-10)
    assert_allclose(stats["counts"] / X.shape[0], gm.predict_proba(X).mean(axis=0), rtol=1e-9, atol=1e-12)
    lr, _ = predict_log_resp(X, gm.weights_, gm.means_, gm.precisions_cholesky_)
    assert_allclose(np.exp(lr), gm.predict_proba(X), rtol=1e-9, atol=1e-12)
    # the numpy twin agrees with scikit-learn too
    ref = log_gaussian_prob_reference(X, gm.means_, gm.precisions_cholesky_) + np.log(gm.weights_)
    assert_allclose(np.logaddexp.reduce(ref, axis=1), gm.score_samples(X), rtol=1e-12)


@pytest.mark.parametrize("d", [3, 30])
def test_additivity(d):
    X, w, means, P = make_problem(5 * CHUNK + 31, d, 3, seed=7)
    whole = compute_stats(X, w, means, P)
    m = 2 * CHUNK + 100
    parts = compute_stats(X[:m], w, means, P) + compute_stats(X[m:], w, means, P)
    assert parts.n_rows == whole.n_rows
    assert_stats_close(parts, whole, 1e-12)
    total = gmm_statistics(0, np.zeros(3), np.zeros((3, d)), np.zeros((3, d, d)))
    for lo in range(0, X.shape[0], 333):
        total = total + compute_stats(X[lo:lo + 333], w, means, P)
    assert_stats_close(total, whole, 1e-12)


def test_concurrent_calls():
    problems = [make_problem(4000, d, 3, seed=s) for s, d in enumerate([2, 10, 30, 2, 10, 30])]
    expected = [compute_stats(*p, n_threads=1) for p in problems]
    with ThreadPoolExecutor(max_workers=4) as ex:
        got = list(ex.map(lambda p: compute_stats(*p, n_threads=2), problems * 2))
    for i, g in enumerate(got):
        e = expected[i % len(problems)]
        assert_array_equal(g["second_moments"], e["second_moments"])
        assert_array_equal(g["first_moments"], e["first_moments"])
        assert_array_equal(g["counts"], e["counts"])


@pytest.mark.parametrize("d", [2, 10, 40])
def test_far_points_are_finite(d):
    X, w, means, P = make_problem(600, d, 3, seed=11)
    X[::3] += 1e6       # far from every component: log-probs around -1e12
    X[1::7] = -3e7
    stats = compute_stats(X, w, means, P, n_threads=2)
    for f in (stats["counts"], stats["first_moments"], stats["second_moments"]):
        assert np.all(np.isfinite(f))
    assert np.isfinite(stats.loglik)
    assert_allclose(stats["counts"].sum(), X.shape[0], rtol=1e-12)
    ref = estep_stats_reference(X, w, means, P)
    assert_allclose(stats["counts"], ref["counts"], rtol=1e-9, atol=1e-9)
    assert_allclose(stats.loglik, ref["loglik"], rtol=1e-9)
    lr, ll = predict_log_resp(X, w, means, P)
    assert np.all(np.isfinite(ll)) and not np.any(np.isnan(lr))


def test_zero_weight_component():
    X, w, means, P = make_problem(800, 3, 3, seed=2)
    w = np.array([0.5, 0.5, 0.0])
    stats = compute_stats(X, w, means, P)
    assert stats["counts"][2] == 0.0 and np.all(stats["second_moments"][2] == 0.0)
    assert_stats_close(stats, estep_stats_reference(X, w, means, P), 1e-10)


def test_exp_log_helpers():
    x = -np.concatenate([np.linspace(0, 745, 20001), np.geomspace(1e-300, 1, 500)])
    e, lg = np.empty_like(x), np.empty_like(x)
    _estep._exp_log_wrapper(x, e, lg)
    ok = x >= -708
    assert_allclose(e[ok], np.exp(x[ok]), rtol=4e-16, atol=0)
    assert np.all(e[~ok] == 0.0)
    assert e[x == 0].item(0) == 1.0
    pos = x < 0
    assert_allclose(lg[pos], np.log(-x[pos]), rtol=4e-16, atol=4e-16)


def test_log_normalizers_match_sklearn_convention():
    _, w, means, P = make_problem(1, 5, 3)
    c = log_normalizers(w, P)
    expect = np.log(w) + np.log(np.diagonal(P, axis1=1, axis2=2)).sum(1) - 2.5 * np.log(2 * np.pi)
    assert_allclose(c, expect, rtol=1e-14)


def test_bad_shapes_raise():
    X, w, means, P = make_problem(10, 3, 2)
    with pytest.raises(ValueError):
        compute_stats(X, w, means[:, :2], P)
    with pytest.raises(ValueError):
        compute_stats(X, w[:1], means, P)
    with pytest.raises(ValueError):
        compute_stats(X, w, means, P[:, :2])


# --- declared-domain transform inside the kernel (no copy of X in a private fit) -----------

#: per-feature scales of the loader tests: four decades apart, so a loader that used one
#: scale for every feature (or the wrong feature's) is far off
PER_FEATURE = np.array([7.5, 0.02, 300.0, 1.0, 4e3])


def _domain_case(dtype, bounds, per_feature=False):
    from dpem_fast._preprocess import DataDomain

    rng = np.random.default_rng(3)
    n, d, K = 3000, 5, 3
    X = (rng.normal(size=(n, d)) * 3 + 1).astype(dtype)
    X[:40] *= 50  # far outside: clipped to the box and/or the ball
    lo, hi = np.full(d, -6.0), np.full(d, 8.0)
    if per_feature:
        X *= (PER_FEATURE / 7.5).astype(dtype)
        lo, hi = lo * PER_FEATURE / 7.5, hi * PER_FEATURE / 7.5
    dom = DataDomain((lo + hi) / 2, PER_FEATURE if per_feature else 7.5, (lo, hi) if bounds else None, False)
    w = np.array([0.2, 0.3, 0.5])
    means = rng.uniform(-0.5, 0.5, size=(K, d))
    P = np.stack([np.triu(rng.normal(size=(d, d)) * 0.1) + np.eye(d) * 3 for _ in range(K)])
    return X, dom, w, means, P


@pytest.mark.parametrize("per_feature", [False, True])
@pytest.mark.parametrize("bounds", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_domain_transform_matches_numpy_scale_and_clip(dtype, bounds, per_feature):
    from dpem_fast._preprocess import scale_and_clip
    from dpem_fast._kernels.gmm import compute_stats

    X, dom, w, means, P = _domain_case(dtype, bounds, per_feature)
    if per_feature:     # the twin is the per-feature map: z_i = (clip(x)_i - c_i) / s_i, in the ball
        lo, hi = dom.bounds if bounds else (-np.inf, np.inf)
        V = (np.clip(X.astype(np.float64), lo, hi) - dom.center) / PER_FEATURE
        inside = np.linalg.norm(V, axis=1) <= 0.999
        assert inside.sum() > 1000
        assert_allclose(scale_and_clip(X.astype(np.float64), dom)[0][inside], V[inside], rtol=1e-13, atol=1e-15)
    Z, n_clipped = scale_and_clip(X.astype(np.float64), dom)
    assert np.all(np.linalg.norm(Z, axis=1) <= 1.0)
    ref = compute_stats(Z, w, means, P, n_threads=1)
    got = compute_stats(X, w, means, P, n_threads=1, domain=dom)
    assert got.n_clipped == n_clipped > 0
    tol = dict(rtol=1e-10, atol=1e-10)
    assert_allclose(got["counts"], ref["counts"], **tol)
    assert_allclose(got["first_moments"], ref["first_moments"], **tol)
    assert_allclose(got["second_moments"], ref["second_moments"], **tol)
    assert_allclose(got.loglik, ref.loglik, rtol=1e-10)
    # every transformed row lies in the unit ball: the trace of S2 is sum_i |z_i|^2 <= n
    assert got["second_moments"].trace(axis1=1, axis2=2).sum() <= X.shape[0]


def test_kernel_domain_transform_thread_invariant():
    from dpem_fast._kernels.gmm import compute_stats

    X, dom, w, means, P = _domain_case(np.float64, True)
    a = compute_stats(X, w, means, P, n_threads=1, domain=dom)
    b = compute_stats(X, w, means, P, n_threads=2, domain=dom)
    assert_array_equal(a["second_moments"], b["second_moments"])
    assert_array_equal(a["first_moments"], b["first_moments"])
    assert a.n_clipped == b.n_clipped


# --- fast paths of the wrapper and the M-step: same numbers as the plain formulations -------

@pytest.mark.parametrize("n,d,K", [(3 * CHUNK + 17, 10, 3), (700, 16, 2), (900, 1, 1), (70 * CHUNK + 5, 3, 2)])
def test_compute_stats_mirror_and_reduce_bitwise(n, d, K):
    """compute_stats == the kernel's partials reduced exactly (the fsum twin) and mirrored with triu."""
    from dpem_fast._kernels.gmm import _params

    X, w, means, P = make_problem(n, d, K, seed=4)
    Xc, m, Pc, lc, upper = _params(X, w, means, P)
    assert upper == (not np.any(np.tril(P, -1)))
    nb = _estep.block_count(n, d, K)
    parts = [np.empty((nb, K)), np.empty((nb, K, d)), np.empty((nb, K, d, d)), np.empty(nb)]
    _estep.estep_stats(Xc, m, Pc, lc, *parts, upper, 1)
    s2u = sum_blocks_reference(parts[2])
    assert np.all(np.tril(s2u, -1) == 0) and not np.any(np.signbit(s2u) & (s2u == 0))
    got = compute_stats(X, w, means, P, n_threads=1)
    assert_array_equal(got["counts"], sum_blocks_reference(parts[0]))
    assert_array_equal(got["first_moments"], sum_blocks_reference(parts[1]))
    assert_array_equal(got["second_moments"], np.triu(s2u) + np.triu(s2u, 1).transpose(0, 2, 1))
    assert got.loglik == float(np.add.reduce(parts[3]))        # a diagnostic: summed in block order


def test_is_upper_and_log_normalizers_zero_weight():
    from dpem_fast._kernels.gmm import _is_upper

    _, w, means, P = make_problem(1, 6, 3)
    assert _is_upper(P)
    Q = P.copy()
    Q[1, 4, 2] = 1e-300
    assert not _is_upper(Q)
    assert _is_upper(np.ones((2, 1, 1)))
    w0 = np.array([0.5, 0.5, 0.0])
    c = log_normalizers(w0, P)
    assert c[2] == -np.inf and np.all(np.isfinite(c[:2]))


@pytest.mark.parametrize("d", [1, 2, 10, 40])
def test_precision_cholesky_matches_scipy_loop(d):
    from scipy import linalg

    from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky as _compute_precision_cholesky

    rng = np.random.default_rng(d)
    A = rng.normal(size=(4, d, d))
    covs = A @ A.transpose(0, 2, 1) / d + 1e-3 * np.eye(d)
    ref = np.stack([linalg.solve_triangular(linalg.cholesky(c, lower=True), np.eye(d), lower=True).T
                    for c in covs])
    assert_array_equal(_compute_precision_cholesky(covs), ref)
    bad = covs.copy()
    bad[2, -1, -1] = -1.0
    with pytest.raises(np.linalg.LinAlgError):
        _compute_precision_cholesky(bad)
    bad[2, 0, 0] = np.nan
    with pytest.raises(ValueError):
        _compute_precision_cholesky(bad)


def test_exact_m_step_matches_plain_formulation():
    from dpem_fast.mixture._dp_gmm import DPGaussianMixture

    rng = np.random.default_rng(0)
    K, d, n = 3, 7, 500
    A = rng.normal(size=(K, d, d))
    stats = gmm_statistics(n, rng.uniform(50, 200, K), rng.normal(size=(K, d)), A @ A.transpose(0, 2, 1) * 50, 0.0)
    g = DPGaussianMixture(n_components=K, reg_covar=1e-6)
    weights, means, covs = g._exact_m_step(stats)
    nk = stats["counts"] + 10 * np.finfo(np.float64).eps
    m = stats["first_moments"] / nk[:, None]
    c = stats["second_moments"] / nk[:, None, None] - np.einsum("ki,kj->kij", m, m)
    c = (c + np.swapaxes(c, 1, 2)) / 2
    c[:, np.arange(d), np.arange(d)] += 1e-6
    assert_array_equal(means, m)
    assert_array_equal(covs, c)
    assert_allclose(weights.sum(), 1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_specialised_small_d_paths_bitwise(dtype):
    """d = 1..15 take constant-d register-tile code (logp, chunk load); the triangular
    factor passed as 'not triangular' takes the generic loops: the numbers must agree bit
    for bit (the extra terms are exact zeros and y enters squared), across thread counts."""
    for d in range(1, 17):
        n, K = 2 * CHUNK + 37, 3
        X, w, means, P = make_problem(n, d, K, dtype, seed=20 + d)
        Xc = np.ascontiguousarray(X)
        lc = log_normalizers(w, P, True)
        nb = _estep.block_count(n, d, K)
        outs = []
        for upper in (True, False):
            for t in (1, 2):
                parts = [np.empty((nb, K)), np.empty((nb, K, d)), np.empty((nb, K, d, d)), np.empty(nb)]
                _estep.estep_stats(Xc, means, P, lc, *parts, upper, t)
                outs.append(parts)
        for o in outs[1:]:
            for a, b in zip(outs[0], o):
                assert_array_equal(a, b)
        lr = [np.empty((n, K), dtype=dtype) for _ in range(2)]
        ll = [np.empty(n, dtype=dtype) for _ in range(2)]
        _estep.log_resp(Xc, means, P, lc, lr[0], ll[0], True, 2)
        _estep.log_resp(Xc, means, P, lc, lr[1], ll[1], False, 1)
        assert_array_equal(lr[0], lr[1])
        assert_array_equal(ll[0], ll[1])
        ref = estep_stats_reference(X, w, means, P)
        assert_stats_close(compute_stats(X, w, means, P, n_threads=2), ref, RTOL[dtype])


# --- huge finite rows: the domain map must not overflow (privacy hardening) ---------------

F64_MAX = float(np.finfo(np.float64).max)   # 1.7976931348623157e308
F32_MAX = float(np.finfo(np.float32).max)


def _huge_rows(d, dtype):
    """Finite rows whose centred, scaled squared norm overflows, plus ordinary ones."""
    rng = np.random.default_rng(17)
    big = F64_MAX if dtype == np.float64 else F32_MAX
    rows = [np.full(d, 0.3)]
    for v in ((1.5e308, -1.5e308, F64_MAX, -F64_MAX) if dtype == np.float64 else (big, -big)):
        r = np.zeros(d)
        r[0] = v
        rows.append(r)
        rows.append(np.full(d, v))                   # every feature huge
    mixed = rng.normal(size=d) * 1e-300               # tiny features beside huge ones
    mixed[::2] = big * np.linspace(-0.9, 1.0, len(mixed[::2]))
    rows.append(mixed)
    alt = np.where(np.arange(d) % 2 == 0, big, -big)  # opposite signs: x - c overflows too
    rows.append(alt)
    rows += list(rng.normal(size=(40, d)))
    return np.asarray(rows).astype(dtype)


def _huge_domains(d, dtype):
    from dpem_fast._preprocess import DataDomain, resolve_domain

    X = np.zeros((1, d))
    doms = {
        "data_norm=0.5": resolve_domain(X.shape[1], 0.5, None),                       # inv_scale = 2
        "box+tiny radius": resolve_domain(X.shape[1], 1e-10, (-1e150, 3e150)),        # clip, then overflow
        "far centre": DataDomain(np.full(d, -1e308), 2.0, None, False),      # x - c overflows
    }
    # per-feature scales many decades apart: the huge-row fallback must keep the direction
    # of (a - c) / s (not of a - c)
    spread = np.geomspace(1e-3, 1e3, d) if d > 1 else np.ones(1)
    doms["per-feature scales"] = DataDomain(np.zeros(d), 0.5 * spread, None, False)
    doms["per-feature, far centre"] = DataDomain(np.full(d, -1e308), 2.0 * spread, None, False)
    if dtype == np.float32:  # float32 input cannot overflow a double unless the radius is tiny
        doms = {"data_norm=1e-290": resolve_domain(X.shape[1], 1e-290, None),
                "box+tiny radius": resolve_domain(X.shape[1], 1e-290, (-1e38, 2e38)),
                "per-feature tiny scales": DataDomain(np.zeros(d), 1e-290 * spread, None, False)}
    return doms


def _direction(a, center, scale=None):
    """Unit vector along (a - center) / scale from exact rational arithmetic (no overflow)."""
    from fractions import Fraction

    scale = np.ones(len(a)) if scale is None else scale
    diff = [(Fraction(float(x)) - Fraction(float(c))) / Fraction(float(s)) for x, c, s in zip(a, center, scale)]
    m = max(abs(t) for t in diff)
    if m == 0:
        return np.zeros(len(diff))
    u = np.array([float(t / m) for t in diff])
    return u / np.linalg.norm(u)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d", [1, 3, 20])
def test_domain_huge_finite_rows_stay_in_the_ball(d, dtype):
    from dpem_fast._preprocess import clip_target, scale_and_clip

    X = _huge_rows(d, dtype)
    assert np.all(np.isfinite(X))
    K = 3
    rng = np.random.default_rng(d)
    w = np.array([0.2, 0.3, 0.5])
    means = rng.uniform(-0.3, 0.3, size=(K, d))
    P = np.stack([np.triu(rng.normal(size=(d, d)) * 0.1) + np.eye(d) * 2 for _ in range(K)])
    for name, dom in _huge_domains(d, dtype).items():
        Z, n_clipped = scale_and_clip(X.astype(np.float64), dom)
        assert np.all(np.isfinite(Z)), name
        norms = np.linalg.norm(Z, axis=1)
        assert np.all(norms <= 1.0), name
        got = compute_stats(X, w, means, P, n_threads=2, domain=dom)
        ref = compute_stats(Z, w, means, P, n_threads=1)
        for f in (got["counts"], got["first_moments"], got["second_moments"]):
            assert np.all(np.isfinite(f)), name
        assert np.isfinite(got.loglik), name
        assert got.n_clipped == n_clipped > 0, name
        assert_stats_close(got, ref, 1e-10)
        # the numpy twin in X's own dtype agrees
        Z32, n32 = scale_and_clip(X, dom)
        assert Z32.dtype == dtype and n32 == n_clipped and np.all(np.isfinite(Z32)), name
        assert np.all(np.linalg.norm(Z32.astype(np.float64), axis=1) <= 1.0), name
        # row by row through the kernel (K = 1: s1 is the mapped row, trace(s2) its norm^2):
        # norm <= 1, and a clipped row points along (box-clipped x) - centre
        lo, hi = dom.bounds if dom.bounds is not None else (np.full(d, -np.inf), np.full(d, np.inf))
        tgt = clip_target(d, np.float64)
        for i in range(12):
            s = compute_stats(X[i:i + 1], [1.0], means[:1], P[:1], n_threads=1, domain=dom)
            z = s["first_moments"][0]
            assert np.all(np.isfinite(z)) and np.linalg.norm(z) <= 1.0, (name, i)
            assert_allclose(s["second_moments"][0].trace(), z @ z, rtol=1e-12)
            if s.n_clipped:
                a = np.clip(X[i].astype(np.float64), lo, hi)
                assert_allclose(np.linalg.norm(z), tgt, rtol=1e-14)
                assert_allclose(z / np.linalg.norm(z), _direction(a, dom.center, dom.scale), rtol=1e-12,
                                atol=1e-15)
                assert_allclose(Z[i], z, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_domain_infinite_rows_per_feature_scales(dtype):
    """+-inf input (the kernels' loader is also reached by callers that did not validate X):
    with a box the row is clipped to it, mapped per feature and equals the numpy twin; with
    no box the row goes to the limiting direction (+-1 on the infinite features, 0 elsewhere)
    at norm clip_target, in the loader and in the twin alike."""
    from dpem_fast._preprocess import DataDomain, clip_target, scale_and_clip

    d = 4
    scale = np.array([1e-3, 1.0, 50.0, 2e4])
    X = np.array([[np.inf, 0.0, 1.0, -3.0], [0.5, -np.inf, np.inf, 2.0], [-np.inf] * d,
                  [1e-4, 0.2, -10.0, 1e3]], dtype=dtype)
    lo, hi = -2.0 * scale, 3.0 * scale
    doms = {"box": DataDomain((lo + hi) / 2, np.sqrt(d) * (hi - lo) / 2, (lo, hi), False),
            "no box": DataDomain(np.zeros(d), scale, None, False)}
    tgt = clip_target(d, np.float64)
    for name, dom in doms.items():
        Z, n_clipped = scale_and_clip(X.astype(np.float64), dom)
        assert np.all(np.isfinite(Z)) and np.all(np.linalg.norm(Z, axis=1) <= 1.0), name
        for i in range(X.shape[0]):
            s = compute_stats(X[i:i + 1], [1.0], np.zeros((1, d)), np.eye(d)[None], n_threads=1, domain=dom)
            z = s["first_moments"][0]
            assert np.all(np.isfinite(z)), (name, i)
            assert_allclose(z, Z[i], rtol=1e-12, atol=1e-15, err_msg=f"{name} row {i}")
        if name == "box":   # a box tames inf: clip, then the per-feature map, inside the cube
            V = (np.clip(X.astype(np.float64), lo, hi) - dom.center) / dom.scale
            assert_allclose(Z, V, rtol=1e-13, atol=1e-15)
            assert np.all(np.abs(Z) <= 1 / np.sqrt(d) * (1 + 1e-15))
        else:
            expect = np.where(np.isinf(X[:3]), np.sign(X[:3]), 0.0).astype(np.float64)
            expect *= (tgt / np.linalg.norm(expect, axis=1))[:, None]
            assert_allclose(Z[:3], expect, rtol=1e-14)


def test_domain_huge_rows_thread_invariant():
    from dpem_fast._preprocess import resolve_domain

    d = 5
    X = np.concatenate([_huge_rows(d, np.float64)] * 40)
    X = np.concatenate([X, np.random.default_rng(0).normal(size=(20 * CHUNK, d))])
    dom = resolve_domain(X.shape[1], 0.5, None)
    _, w, means, P = make_problem(1, d, 3)
    runs = [compute_stats(X, w, means / 10, P, n_threads=t, domain=dom) for t in (1, 2, 4)]
    for r in runs[1:]:
        assert_array_equal(r["second_moments"], runs[0]["second_moments"])
        assert_array_equal(r["first_moments"], runs[0]["first_moments"])
        assert r.n_clipped == runs[0].n_clipped


@pytest.mark.parametrize("bounds", [
    (-1e308, 1e308),                                   # width overflows
    (-8e307, 8e307),                                   # sqrt(d) x half-width overflows
    (np.full(20, -1e-310), np.full(20, 1e-310)),       # sqrt(d) x a subnormal half-width: its inverse overflows
    (1e308, 1.7e308),                                  # midpoint overflows
])
@pytest.mark.parametrize("data_norm", [None, 1.0])
def test_bounds_that_overflow_are_rejected(bounds, data_norm):
    from dpem_fast._preprocess import resolve_domain

    with pytest.raises(ValueError, match="bounds"):
        resolve_domain(20, data_norm, bounds)


def test_wide_finite_bounds_accepted():
    from dpem_fast._preprocess import resolve_domain

    dom = resolve_domain(3, None, (-1e150, 3e150))
    assert np.all(np.isfinite(dom.scale)) and np.all(np.isfinite(dom.center))
