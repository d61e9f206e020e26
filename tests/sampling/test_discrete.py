"""Exact discrete samplers: distribution, exactness, reproducibility, errors.

Goodness-of-fit tests use fixed seeds, so they are deterministic; their
thresholds (p > 1e-4, |z| < 5) would catch a wrong distribution with the
sample sizes used, as ``test_variance_detects_5pc_sigma_error`` checks.
"""
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpem_fast.random as dr
from dpem_fast._dpcore import _dgauss
from dpem_fast._reference import samplers as ref
from dpem_fast._rng import make_key


def _chi2_pvalue(samples, pmf, lo, hi, min_expected=5.0):
    """Chi-square GOF p-value of integer ``samples`` against ``pmf`` on [lo, hi].

    Values outside [lo, hi] are counted in the end bins, which also receive
    the pmf's mass outside (half each, the pmfs here are symmetric); adjacent
    values are merged until every bin expects at least ``min_expected``.
    """
    samples = np.asarray(samples)
    n = samples.size
    support = np.arange(lo, hi + 1)
    p = np.array(pmf(support), dtype=np.float64)
    tail = max(0.0, 1.0 - p.sum()) / 2
    p[0] += tail
    p[-1] += tail
    counts = np.bincount(np.clip(samples, lo, hi) - lo, minlength=hi - lo + 1)
    # greedy merge from the left: close a bin once it expects min_expected
    exp_v = n * p
    obs, exp = [], []
    co = ce = 0.0
    for o, e in zip(counts.tolist(), exp_v.tolist()):
        co += o
        ce += e
        if ce >= min_expected:
            obs.append(co)
            exp.append(ce)
            co = ce = 0.0
    obs.append(co)
    exp.append(ce)
    obs, exp = np.array(obs), np.array(exp)
    if exp[-1] < min_expected and len(exp) > 1:      # fold a thin last bin into its neighbour
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    assert exp.min() >= min_expected and len(exp) >= 2
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    return stats.chi2.sf(chi2, len(exp) - 1)


def _gaussian_window(sigma2):
    s = math.sqrt(float(Fraction(sigma2)))
    L = int(7 * s) + 3
    return -L, L


# ---------------------------------------------------------------------------
# Goodness of fit
# ---------------------------------------------------------------------------

@pytest.mark.statistical
@pytest.mark.parametrize(
    "sigma2, n",
    [
        (Fraction(1, 4), 400_000),   # sigma = 0.5
        (0.1, 400_000),              # float, denominator 2**56
        (2.7, 400_000),              # float, non-integer
        (100, 400_000),              # sigma = 10
        (10**8, 400_000),            # sigma = 1e4
        # D = 2 a b t^2 just below 2**126: |Y| >= 6 takes the 256-bit acceptance path
        (Fraction(2 * (2**61 - 1) + 1, 2**61 - 1), 400_000),
    ],
)
def test_discrete_gaussian_gof(sigma2, n):
    x = dr.discrete_gaussian(sigma2, n, random_state=12345, n_threads=2)
    assert x.dtype == np.int64 and x.shape == (n,)
    lo, hi = _gaussian_window(sigma2)
    pmf = lambda y: ref.discrete_gaussian_pmf(sigma2, y)  # noqa: E731
    # fine bins (every value expecting >= 5) and about 200 coarse bins (power at large sigma)
    for min_expected in (5.0, n / 200):
        p = _chi2_pvalue(x, pmf, lo, hi, min_expected)
        assert p > 1e-4, (min_expected, p)


@pytest.mark.statistical
def test_256bit_acceptance_path_tail():
    """sigma2 = 2 + 1/(2**61 - 1): c = |Y| b t - a passes 2**64 from |Y| = 6 on,
    so the tail mass P(|Y| >= 6) is decided on the 256-bit path."""
    s2 = Fraction(2 * (2**61 - 1) + 1, 2**61 - 1)
    n = 3_000_000
    x = dr.discrete_gaussian(s2, n, random_state=31, n_threads=2)
    k = int(np.count_nonzero(np.abs(x) >= 6))
    p = 1.0 - ref.discrete_gaussian_pmf(s2, np.arange(-5, 6)).sum()
    assert abs(k - n * p) < 5 * math.sqrt(n * p) + 1, (k, n * p)
    k5 = int(np.count_nonzero(np.abs(x) == 5))
    p5 = 2 * ref.discrete_gaussian_pmf(s2, [5])[0]
    assert abs(k5 - n * p5) < 5 * math.sqrt(n * p5), (k5, n * p5)


@pytest.mark.statistical
@pytest.mark.parametrize("scale, n", [(Fraction(1, 2), 300_000), (3, 300_000), (2.5, 300_000), (Fraction(40, 7), 300_000)])
def test_discrete_laplace_gof(scale, n):
    x = dr.discrete_laplace(scale, n, random_state=777, n_threads=2)
    assert x.dtype == np.int64
    L = int(40 * float(Fraction(scale))) + 5
    pmf = lambda y: ref.discrete_laplace_pmf(scale, y)  # noqa: E731
    for min_expected in (5.0, n / 200):
        p = _chi2_pvalue(x, pmf, -L, L, min_expected)
        assert p > 1e-4, (min_expected, p)


@pytest.mark.statistical
def test_variance_detects_5pc_sigma_error():
    """Sample variance of 1e6 draws at sigma = 10 is within 5 standard errors of
    the exact variance, and more than 20 away from that of sigma = 9.5."""
    n = 1_000_000
    x = dr.discrete_gaussian(100, n, random_state=2024, n_threads=2).astype(np.float64)
    v = x.var()
    se = math.sqrt(2.0 / n)                     # relative s.e. of a Gaussian sample variance
    exact = ref.discrete_gaussian_variance(100)
    assert abs(v / exact - 1) < 5 * se, (v, exact)
    wrong = ref.discrete_gaussian_variance(Fraction(95, 10) ** 2)
    assert abs(v / wrong - 1) > 20 * se
    assert abs(x.mean()) < 5 * 10 / math.sqrt(n)


@pytest.mark.statistical
def test_discrete_laplace_variance():
    n = 500_000
    scale = Fraction(7, 2)
    x = dr.discrete_laplace(scale, n, random_state=5, n_threads=2).astype(np.float64)
    r = math.exp(-1 / 3.5)
    exact = 2 * r / (1 - r) ** 2
    # kurtosis of the (discrete) Laplace is about 6: var(s^2) ~ 5 sigma^4 / n
    assert abs(x.var() / exact - 1) < 5 * math.sqrt(5.0 / n)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [Fraction(27, 10), 0.3])
def test_reference_sampler_matches_pmf(sigma2):
    u = ref.python_source(random.Random(99))
    x = np.array([ref.discrete_gaussian(Fraction(sigma2), u) for _ in range(4000)])
    lo, hi = _gaussian_window(sigma2)
    assert _chi2_pvalue(x, lambda y: ref.discrete_gaussian_pmf(sigma2, y), lo, hi) > 1e-4
    y = np.array([ref.discrete_laplace(Fraction(5, 2), u) for _ in range(4000)])
    assert _chi2_pvalue(y, lambda k: ref.discrete_laplace_pmf(Fraction(5, 2), k), -80, 80) > 1e-4


@pytest.mark.statistical
@pytest.mark.parametrize("p, q", [(1, 3), (5, 7), (1, 2**40 + 1), (2**56 - 3, 2**56), (2**55 + 1, 2**56 - 1)])
def test_bernoulli_fraction(p, q):
    n = 400_000
    key = make_key(3)
    k = _dgauss._bernoulli_count_wrapper(key, 0, p, q, n, False)
    pr = p / q
    assert abs(k - n * pr) < 5 * math.sqrt(n * pr * (1 - pr)) + 1e-9
    assert _dgauss._bernoulli_count_wrapper(key, 1, 0, q, 1000, False) == 0


@pytest.mark.statistical
@pytest.mark.parametrize("p, q", [(0, 1), (1, 1), (1, 3), (7, 3), (5, 2), (2**40, 2**40 + 7), (10**6, 10**6 + 1), (3 * 2**55, 2**56)])
def test_bernoulli_exp(p, q):
    # 4e6 trials: a wrong answer on any one 8-bit branch of Bernoulli(exp(-1))
    # (probability 1/256) would move the mean by ~16 standard errors
    n = 4_000_000
    k = _dgauss._bernoulli_count_wrapper(make_key(4), 0, p, q, n, True)
    pr = math.exp(-p / q)
    assert abs(k - n * pr) < 5 * math.sqrt(n * pr * (1 - pr)) + 1e-9


# ---------------------------------------------------------------------------
# Range extremes
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sigma2", [1e-4, Fraction(1, 10**4), 0.01 ** 2, 1e-6])
def test_tiny_sigma_is_zero(sigma2):
    # P(Y != 0) = 2 exp(-1/(2 sigma2)) / Z <= 2 exp(-5000)
    x = dr.discrete_gaussian(sigma2, 20_000, random_state=1)
    assert np.all(x == 0)


@pytest.mark.statistical
@pytest.mark.parametrize("sigma2", [10**12, 1e12, Fraction(10**12 + 1, 3)])
def test_huge_sigma_moments(sigma2):
    n = 200_000
    x = dr.discrete_gaussian(sigma2, n, random_state=8, n_threads=2).astype(np.float64)
    s2 = float(Fraction(sigma2))
    assert abs(x.mean()) < 5 * math.sqrt(s2 / n)
    assert abs(x.var() / s2 - 1) < 5 * math.sqrt(2.0 / n)


def test_small_sigma_float_moments():
    # sigma^2 = 0.1 as a float (odd numerator over 2**56): P(|Y| = 1) = 2 e^-5 / Z
    n = 400_000
    x = dr.discrete_gaussian(0.1, n, random_state=9)
    v = ref.discrete_gaussian_variance(0.1)
    assert abs(x.var() - v) < 5 * math.sqrt(v * (1 - v) / n)
    assert set(np.unique(x)) <= {-2, -1, 0, 1, 2}


# ---------------------------------------------------------------------------
# Symmetric matrices
# ---------------------------------------------------------------------------

def test_symmetric_discrete_gaussian_exact():
    g = 2.0 ** -6
    M = dr.symmetric_discrete_gaussian(9, 2.7, g, batch=4, random_state=3)
    assert M.shape == (4, 9, 9) and M.dtype == np.float64
    assert np.array_equal(M, np.swapaxes(M, 1, 2))
    Z = M / g
    assert np.array_equal(Z, np.round(Z))
    one = dr.symmetric_discrete_gaussian(5, 4, 1.0, random_state=3)
    assert one.shape == (5, 5) and np.array_equal(one, one.T)


@pytest.mark.statistical
def test_symmetric_discrete_gaussian_variance():
    d, nb, g = 24, 150, 0.5
    M = dr.symmetric_discrete_gaussian(d, 100, g, batch=nb, random_state=11, n_threads=2)
    iu = np.triu_indices(d)
    z = (M[:, iu[0], iu[1]] / g).ravel()          # 150 * 300 = 45,000 independent draws
    assert abs(z.var() / 100 - 1) < 5 * math.sqrt(2.0 / z.size)
    lo, hi = _gaussian_window(100)
    assert _chi2_pvalue(z.astype(np.int64), lambda y: ref.discrete_gaussian_pmf(100, y), lo, hi) > 1e-4


# ---------------------------------------------------------------------------
# Reproducibility
# ---------------------------------------------------------------------------

N_MULTI = 3 * dr.DISCRETE_SAMPLER_BLOCK + 123     # several blocks and a partial last block


@pytest.mark.parametrize(
    "fn",
    [
        lambda nt, rs: dr.discrete_gaussian(2.7, N_MULTI, random_state=rs, n_threads=nt),
        lambda nt, rs: dr.discrete_gaussian(10**6, (N_MULTI,), random_state=rs, n_threads=nt),
        lambda nt, rs: dr.discrete_laplace(Fraction(5, 3), N_MULTI, random_state=rs, n_threads=nt),
        lambda nt, rs: dr.symmetric_discrete_gaussian(33, 9, 0.25, batch=3, random_state=rs, n_threads=nt),
    ],
    ids=["gauss", "gauss-big", "laplace", "symmetric"],
)
def test_threads_and_seeds(fn):
    a = fn(1, 42)
    assert np.array_equal(a, fn(2, 42))
    assert np.array_equal(a, fn(1, 42))
    assert not np.array_equal(a, fn(2, 43))


def test_shapes_and_empty():
    assert dr.discrete_gaussian(1, (3, 4), random_state=0).shape == (3, 4)
    assert dr.discrete_gaussian(1, 0, random_state=0).shape == (0,)
    assert dr.discrete_laplace(1, (2, 0), random_state=0).shape == (2, 0)
    assert dr.symmetric_discrete_gaussian(3, 1, 1.0, batch=0, random_state=0).shape == (0, 3, 3)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "bad, exc",
    [
        (0, ValueError), (-1, ValueError), (0.0, ValueError), (-2.5, ValueError),
        (float("nan"), ValueError), (float("inf"), ValueError), (Fraction(-1, 3), ValueError),
        (True, TypeError), ("1", TypeError), (None, TypeError), (1 + 0j, TypeError),
        (5e-324, ValueError),              # denominator 2**1074: outside the exact range
        (Fraction(1, 2**110), ValueError),
        (2**64, ValueError),               # D = 2 a b t^2 >= 2**126
    ],
)
def test_sigma2_errors(bad, exc):
    with pytest.raises(exc, match="sigma2"):
        dr.discrete_gaussian(bad, 3, random_state=0)
    with pytest.raises(exc, match="sigma2"):
        dr.symmetric_discrete_gaussian(3, bad, 1.0, random_state=0)


@pytest.mark.parametrize(
    "bad, exc",
    [(0, ValueError), (-3, ValueError), (float("nan"), ValueError), (float("-inf"), ValueError),
     (False, TypeError), ([1], TypeError), (2**57, ValueError), (Fraction(1, 2**65), ValueError)],
)
def test_scale_errors(bad, exc):
    with pytest.raises(exc, match="scale"):
        dr.discrete_laplace(bad, 3, random_state=0)


def test_other_argument_errors():
    with pytest.raises(ValueError, match="size"):
        dr.discrete_gaussian(1, -1)
    with pytest.raises(TypeError, match="size"):
        dr.discrete_laplace(1, 2.5)
    with pytest.raises(TypeError, match="size"):
        dr.discrete_laplace(1, True)
    with pytest.raises(ValueError, match="granularity"):
        dr.symmetric_discrete_gaussian(3, 1, 0.0)
    with pytest.raises(ValueError, match="granularity"):
        dr.symmetric_discrete_gaussian(3, 1, float("nan"))
    with pytest.raises(ValueError, match="d"):
        dr.symmetric_discrete_gaussian(0, 1, 1.0)
    with pytest.raises(ValueError, match="batch"):
        dr.symmetric_discrete_gaussian(2, 1, 1.0, batch=-1)
    with pytest.raises(ValueError, match="n_threads"):
        dr.discrete_gaussian(1, 3, n_threads=0)


def test_supported_range_edges_accepted():
    # documented range: float sigma2 in [2**-20, 2**62] (worst case: full 53-bit
    # odd mantissa), int sigma2 up to 4e18, Fraction(p, q) with q <= 2**20, sigma2 <= 1e12
    worst = [(2**53 - 1) * 2.0**-73 * 2 ** k for k in range(1, 83, 3)]   # 2**-20 .. 2**62
    assert worst[0] >= 2.0**-20 and worst[-1] <= 2.0**62
    for s2 in worst + [2.0**-20, 1e-4, 0.01, 1.0, 2.0**62, 1, 10**12, 4 * 10**18,
                       Fraction(10**12 * 2**20 - 1, 2**20), Fraction(1, 2**20)]:
        dr._discrete_gaussian_params(s2)
    with pytest.raises(ValueError, match="sigma2"):
        dr._discrete_gaussian_params((2**53 - 1) * 2.0**-74)    # just below 2**-20
    for sc in (2.0**-10, 1e-3, 2.0**56, 2**56):
        dr.discrete_laplace(sc, 2, random_state=0)


def test_overflow_is_reported_not_wrapped(monkeypatch):
    # Laplace kernel with an artificially tiny cap on V: P(V > 1) = e^-2 per accepted U
    key = make_key(0)
    out = np.full(2 * 4096, 7, dtype=np.int64)
    flags = np.zeros(2, dtype=np.uint8)
    _dgauss.fill_discrete_laplace(key, 0, 1, 1, 1, out, flags, 1)
    assert flags.all()
    assert np.all(np.abs(out) <= 1)                 # values written before the flag are in range
    # Gaussian: ymax = 0 flags the first proposal with |Y| > 0
    t, vcap, ymax, a, bt, D = dr._discrete_gaussian_params(100)
    monkeypatch.setattr(dr, "_discrete_gaussian_params", lambda s2: (t, vcap, 0, a, bt, D))
    with pytest.raises(OverflowError, match="discrete_gaussian"):
        dr.discrete_gaussian(100, 10, random_state=0)
    with pytest.raises(OverflowError, match="symmetric_discrete_gaussian"):
        dr.symmetric_discrete_gaussian(4, 100, 1.0, random_state=0)


def test_public_names():
    for name in ("discrete_laplace", "discrete_gaussian", "symmetric_discrete_gaussian"):
        assert name in dr.__all__


def test_compiled_callers_get_the_modules_key_parameters_and_headers():
    """What a cimporting package needs (examples/cimport_consumer): the sampler's key, its
    exact integer parameters, and the headers the installed .pxd files refer to."""
    import os

    import dpem_fast
    from dpem_fast import random as dr
    from dpem_fast._rng import derive_key, make_key

    key = dr.sampler_key(5, "discrete_gaussian")
    assert key.dtype == np.uint32 and key.shape == (8,)
    np.testing.assert_array_equal(key, derive_key(make_key(5), "dpem_fast.random", "discrete_gaussian"))
    assert not np.array_equal(key, dr.sampler_key(5, "discrete_laplace"))
    with pytest.raises(ValueError, match="sampler must be one of"):
        dr.sampler_key(5, "sampler_key")
    t, vcap, ymax, a, bt, D = dr.discrete_gaussian_parameters(Fraction(7, 3))
    assert (t, a, bt, D) == (2, 7, 3 * 2, 2 * 7 * 3 * 4)
    with pytest.raises(ValueError, match="sigma2"):
        dr.discrete_gaussian_parameters(-1.0)
    inc = dpem_fast.get_include()
    for header in ("dpc_rng.h", "dpc_normal.h", "dpc_dgauss.h", "dpc_contract.h"):
        assert os.path.exists(os.path.join(inc, header)), header
