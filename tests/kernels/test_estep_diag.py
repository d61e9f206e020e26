"""The diagonal-precision GMM E-step kernel (dpem_fast._dpcore._estep_diag; covariance types
"diag" and "spherical") against its numpy twin, the full kernel and scikit-learn."""
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _contract, _estep_diag
from dpem_fast._kernels.gmm import (compute_stats, compute_stats_diag, log_normalizers_diag, predict_log_resp,
                                    predict_log_resp_diag, second_moments_of_type)
from dpem_fast._reference.gmm import estep_diag_stats_reference, log_resp_diag_reference
from plain_stats import plain

CHUNK = _contract.CHUNK_SIZE


def make_problem(n, d, K, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=2.0, size=(K, d))
    prec = rng.uniform(0.3, 2.0, size=(K, d))        # 1 / standard deviations
    weights = rng.dirichlet(np.ones(K))
    X = means[rng.integers(K, size=n)] + rng.normal(size=(n, d)) * 1.5
    return X.astype(dtype), weights, means, prec


def expand(prec):
    """The (K, d, d) diagonal factors the full kernel takes."""
    K, d = prec.shape
    P = np.zeros((K, d, d))
    P.reshape(K, d * d)[:, :: d + 1] = prec
    return P


def assert_close(got, ref, rtol):
    got, ref = plain(got), plain(ref)
    assert got["n_rows"] == ref["n_rows"]
    for name in ("counts", "first_moments", "second_moments"):
        scale = max(1.0, np.abs(ref[name]).max(initial=0.0))
        assert_allclose(got[name], ref[name], rtol=rtol, atol=rtol * scale, err_msg=name)
    assert_allclose(got["loglik"], ref["loglik"], rtol=rtol, atol=rtol)


SHAPES = [
    (0, 3, 2),
    (1, 1, 1),
    (CHUNK - 7, 2, 5),        # n < chunk
    (3 * CHUNK + 17, 10, 3),  # n % chunk != 0
    (2000, 1, 4),             # d == 1
    (1500, 4, 1),             # K == 1
    (700, 15, 3),             # the full kernel's largest hand-loop d
    (700, 16, 3),             # its smallest BLAS d
    (600, 100, 4),
    (70 * CHUNK + 5, 3, 2),   # several chunks per block
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", SHAPES)
def test_matches_reference(n, d, K, dtype):
    X, w, means, prec = make_problem(n, d, K, dtype)
    got = compute_stats_diag(X, w, means, prec, n_threads=2)
    ref = estep_diag_stats_reference(X, w, means, prec)
    assert got["second_moments"].shape == (K, d) and got["second_moments"].dtype == np.float64
    # the twin reads the same float32 values in float64: the tolerance is float64's
    assert_close(got, ref, 1e-12)


@pytest.mark.parametrize("n,d,K", [(3 * CHUNK + 17, 10, 3), (700, 15, 3), (70 * CHUNK + 5, 3, 2), (1, 1, 1),
                                   (700, 16, 3), (2 * CHUNK + 9, 24, 2)])   # past the register tiles
def test_equals_full_kernel_on_its_hand_loop_path(n, d, K):
    """For d < BLAS_MIN_D the full kernel with diagonal factors does the same operations in
    the same order: the diagonal kernel's numbers are the full kernel's bits."""
    assert d < _contract.BLAS_MIN_D
    X, w, means, prec = make_problem(n, d, K, seed=1)
    got = compute_stats_diag(X, w, means, prec, n_threads=2)
    full = compute_stats(X, w, means, expand(prec), n_threads=2)
    assert_array_equal(got["counts"], full["counts"])
    assert_array_equal(got["first_moments"], full["first_moments"])
    assert_array_equal(got["second_moments"], np.diagonal(full["second_moments"], axis1=1, axis2=2))
    assert got.loglik == full.loglik


@pytest.mark.parametrize("n,d,K", [(700, 25, 3), (600, 100, 4), (20 * CHUNK + 9, 40, 3)])
def test_matches_full_kernel_on_its_blas_path(n, d, K):
    assert d >= _contract.BLAS_MIN_D
    X, w, means, prec = make_problem(n, d, K, seed=2)
    got = compute_stats_diag(X, w, means, prec, n_threads=2)
    full = compute_stats(X, w, means, expand(prec), n_threads=2)
    full_diag = second_moments_of_type(full["second_moments"], "diag")
    assert_close(got, type(full)({**full.arrays, "second_moments": full_diag}, full.n_rows, full.loglik), 1e-12)
    # spherical: the traces, reduced from either kernel's statistics
    assert_allclose(second_moments_of_type(got["second_moments"], "spherical"),
                    second_moments_of_type(full["second_moments"], "spherical"), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", [(3 * CHUNK + 17, 10, 3), (500, 100, 2), (1, 2, 2), (0, 3, 2)])
def test_predict_log_resp_diag(n, d, K, dtype):
    X, w, means, prec = make_problem(n, d, K, dtype)
    lr, ll = predict_log_resp_diag(X, w, means, prec, n_threads=2)
    ref_lr, ref_ll = log_resp_diag_reference(X, w, means, prec)
    assert lr.dtype == dtype and ll.dtype == dtype and lr.shape == (n, K)
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    assert_allclose(ll, ref_ll, rtol=rtol, atol=rtol)
    assert_allclose(lr, ref_lr, rtol=rtol, atol=rtol * max(1.0, np.abs(ref_lr).max(initial=0.0)))
    # the full kernel's inference path with the expanded factors
    flr, fll = predict_log_resp(X, w, means, expand(prec), n_threads=2)
    assert_allclose(ll, fll, rtol=rtol, atol=rtol)
    if n:
        assert_allclose(compute_stats_diag(X, w, means, prec).loglik, ref_ll.sum(), rtol=1e-10)


def test_matches_sklearn_diag_and_spherical():
    from sklearn.mixture import GaussianMixture

    X, _, _, _ = make_problem(3000, 6, 3, seed=5)
    for ct in ("diag", "spherical"):
        gm = GaussianMixture(n_components=3, covariance_type=ct, random_state=0, max_iter=20).fit(X)
        prec = np.broadcast_to(gm.precisions_cholesky_[:, None] if ct == "spherical" else gm.precisions_cholesky_,
                               gm.means_.shape)
        lr, ll = predict_log_resp_diag(X, gm.weights_, gm.means_, prec)
        assert_allclose(ll, gm.score_samples(X), rtol=1e-10, atol=1e-10)
        assert_allclose(np.exp(lr), gm.predict_proba(X), rtol=1e-9, atol=1e-12)
        stats = compute_stats_diag(X, gm.weights_, gm.means_, prec)
        assert_allclose(stats.loglik / X.shape[0], gm.score(X), rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,K", [(70 * CHUNK + 5, 3, 4), (50 * CHUNK + 3, 10, 3), (20 * CHUNK + 9, 64, 3)])
def test_thread_count_invariance(n, d, K, dtype):
    X, w, means, prec = make_problem(n, d, K, dtype, seed=3)
    assert _estep_diag.block_count(n, d, K) > 2       # several blocks: the threads share them
    runs = [compute_stats_diag(X, w, means, prec, n_threads=t) for t in (1, 2, 4)]
    for r in runs[1:]:
        for name in ("counts", "first_moments", "second_moments"):
            assert_array_equal(r[name], runs[0][name])
        assert r.loglik == runs[0].loglik
    lrs = [predict_log_resp_diag(X, w, means, prec, n_threads=t) for t in (1, 2, 4)]
    for lr, ll in lrs[1:]:
        assert_array_equal(lr, lrs[0][0])
        assert_array_equal(ll, lrs[0][1])


def test_block_count():
    assert _estep_diag.block_count(0, 3, 2) == 0
    assert _estep_diag.block_count(1, 3, 2) == 1
    for n, d, K in [(10**6, 10, 5), (10**6, 128, 10), (5000, 3, 2)]:
        assert _estep_diag.block_count(n, d, K) == _contract.block_count(n, K * (2 * d + 1))


# --- rows mapped into the unit ball of a declared domain by the kernel's loader -------------

def _domain_case(dtype, bounds):
    from dpem_fast._preprocess import DataDomain

    rng = np.random.default_rng(3)
    n, d, K = 3000, 5, 3
    scale = np.array([7.5, 0.02, 300.0, 1.0, 4e3])      # four decades apart, per feature
    X = ((rng.normal(size=(n, d)) * 3 + 1) * scale / 7.5).astype(dtype)
    X[:40] *= 50        # far outside: clipped to the box and / or the ball
    lo, hi = -6.0 * scale / 7.5, 8.0 * scale / 7.5
    dom = DataDomain((lo + hi) / 2, scale, (lo, hi) if bounds else None, False)
    w = np.array([0.2, 0.3, 0.5])
    means = rng.uniform(-0.5, 0.5, size=(K, d))
    prec = rng.uniform(1.0, 5.0, size=(K, d))
    return X, dom, w, means, prec


@pytest.mark.parametrize("bounds", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_domain_rows_are_clipped_into_the_ball(dtype, bounds):
    from dpem_fast._preprocess import scale_and_clip

    X, dom, w, means, prec = _domain_case(dtype, bounds)
    Z, n_clipped = scale_and_clip(X.astype(np.float64), dom)
    got = compute_stats_diag(X, w, means, prec, n_threads=2, domain=dom)
    ref = estep_diag_stats_reference(Z, w, means, prec)
    assert got.n_clipped == n_clipped > 40 - 1
    assert_close(got, ref, 1e-10)
    # every loaded row lies in the unit ball: sum_k sum_j Q_kj = sum_i |z_i|^2 <= n
    assert got["second_moments"].sum() <= X.shape[0]
    # the same loader as the full kernel: the same rows, the same clip count
    full = compute_stats(X, w, means, expand(prec), n_threads=2, domain=dom)
    assert full.n_clipped == got.n_clipped
    assert_array_equal(got["second_moments"], np.diagonal(full["second_moments"], axis1=1, axis2=2))
    assert_array_equal(got["first_moments"], full["first_moments"])
    one = compute_stats_diag(X, w, means, prec, n_threads=1, domain=dom)
    assert_array_equal(one["second_moments"], got["second_moments"])


# --- bad input --------------------------------------------------------------------------------

def test_bad_input_raises():
    X, w, means, prec = make_problem(10, 3, 2)
    with pytest.raises(ValueError, match="means"):
        compute_stats_diag(X, w, means[:, :2], prec)
    with pytest.raises(ValueError, match="weights"):
        compute_stats_diag(X, w[:1], means, prec)
    with pytest.raises(ValueError, match="precisions_cholesky"):
        compute_stats_diag(X, w, means, prec[:, :2])
    with pytest.raises(ValueError, match="precisions_cholesky"):
        compute_stats_diag(X, w, means, expand(prec))          # full factors: not this kernel's
    for bad in (0.0, -1.0, np.nan, np.inf):
        p = prec.copy()
        p[1, 2] = bad
        with pytest.raises(ValueError, match="finite and > 0"):
            compute_stats_diag(X, w, means, p)
        with pytest.raises(ValueError, match="finite and > 0"):
            predict_log_resp_diag(X, w, means, p)
    with pytest.raises(ValueError, match="n_components >= 1"):
        compute_stats_diag(X, np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)))


def test_kernel_level_shape_checks():
    X, w, means, prec = make_problem(600, 3, 2)
    c = log_normalizers_diag(w, prec)
    nb = _estep_diag.block_count(600, 3, 2)
    good = [np.empty((nb, 2)), np.empty((nb, 2, 3)), np.empty((nb, 2, 3)), np.empty(nb)]
    _estep_diag.estep_diag_stats(X, means, prec, c, *good, 1)
    with pytest.raises(ValueError, match="n_blocks"):
        _estep_diag.estep_diag_stats(X, means, prec, c, np.empty((nb + 1, 2)), *good[1:], 1)
    with pytest.raises(ValueError, match="n_blocks"):
        _estep_diag.estep_diag_stats(X, means, prec, c, good[0], good[1], np.empty((nb, 2, 2)), good[3], 1)
    with pytest.raises(ValueError, match="shapes"):
        _estep_diag.estep_diag_stats(X, means, prec[:1], c, *good, 1)
    with pytest.raises(ValueError, match="domain"):
        _estep_diag.estep_diag_stats(X, means, prec, c, *good, 1, domain=np.zeros((3, 3)),
                                     part_clipped=np.zeros(nb, dtype=np.int64))
    with pytest.raises(ValueError, match="shapes"):
        _estep_diag.log_resp_diag(X, means, prec, c, np.empty((600, 3)), np.empty(600), 1)


def test_log_normalizers_diag_match_sklearn_convention():
    _, w, _, prec = make_problem(1, 5, 3)
    expect = np.log(w) + np.log(prec).sum(1) - 2.5 * np.log(2 * np.pi)
    assert_allclose(log_normalizers_diag(w, prec), expect, rtol=1e-14)


@pytest.mark.parametrize("covariance_type", ["diag", "spherical"])
def test_estimator_uses_the_diagonal_kernel(monkeypatch, covariance_type):
    """diag / spherical fits (private and epsilon=inf) and their inference never run the
    O(n K d²) full kernel."""
    from dpem_fast import DPGaussianMixture
    from dpem_fast.mixture import _dp_gmm

    def refuse(*args, **kwargs):
        raise AssertionError("the full kernel ran")

    monkeypatch.setattr(_dp_gmm, "compute_stats", refuse)
    monkeypatch.setattr(_dp_gmm, "predict_log_resp", refuse)
    X, _, _, _ = make_problem(2000, 4, 2, seed=6)
    for eps in (1.0, float("inf")):
        est = DPGaussianMixture(2, covariance_type=covariance_type, epsilon=eps, max_iter=4,
                                bounds=(X.min(0) - 1, X.max(0) + 1), random_state=0).fit(X)
        assert np.isfinite(est.score(X))
        assert est.predict_proba(X[:5]).shape == (5, est.n_components_)


@pytest.mark.parametrize("second", ["tied", "spherical"])
def test_pooled_second_moments_are_one_exact_sum_of_the_block_partials(monkeypatch, second):
    """Tied (Σ_k S2_k) and spherical (Σ_j of the squared sums) are pooled from the kernel's block
    partials of every component (feature) in one exact sum, rounded once — not from the per-
    component totals, already rounded, added in order (issue 34, item 7: every released entry
    is rounded once, as the float64 rounding bound assumes).  Thread-count invariant."""
    import math

    from dpem_fast._dpcore import _estep

    X, w, means, prec = make_problem(20 * CHUNK + 9, 6, 3, seed=5)
    kernel = _estep if second == "tied" else _estep_diag
    name = "estep_stats" if second == "tied" else "estep_diag_stats"
    seen = []
    real = getattr(kernel, name)

    def spy(*args, **kw):
        out = real(*args, **kw)
        seen.append(np.array(args[6]))          # part_s2 / part_sq, filled in place
        return out
    monkeypatch.setattr(kernel, name, spy)
    fit = compute_stats if second == "tied" else compute_stats_diag
    P = expand(prec) if second == "tied" else prec
    got = [fit(X, w, means, P, n_threads=t, second=second)["second_moments"] for t in (1, 2)]
    assert_array_equal(got[0], got[1])
    part = seen[0]
    if second == "tied":
        nb, K, d, _ = part.shape
        flat = part.reshape(nb * K, d * d)
        want = np.array([math.fsum(flat[:, j]) for j in range(d * d)]).reshape(d, d)
        want = np.triu(want) + np.triu(want, 1).T
    else:
        nb, K, d = part.shape
        want = np.array([math.fsum(part[:, k, :].ravel()) for k in range(K)])
    assert_array_equal(got[0], want)
    with pytest.raises(ValueError, match="second"):
        fit(X, w, means, P, second="full" if second == "spherical" else "diag")
