"""DPPoissonMixture: the model written on the new base to show what adding one takes (its
module, its package's ``__init__``, its kernel), with the whole conformance suite."""
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast import DPPoissonMixture
from dpem_fast._engine._sources import summarize
from dpem_fast._kernels.poisson import poisson_stats
from dpem_fast._reference.poisson import poisson_stats_reference
from dpem_fast._rng import make_key

from conformance import PrivateEstimatorConformance

M, D, K = 10.0, 4, 3
RATES = np.array([[0.5, 1.0, 6.0, 8.0], [7.0, 5.0, 1.0, 0.5], [3.0, 3.0, 3.0, 3.0]])


def _counts(n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, n)
    return rng.poisson(RATES[z]).astype(np.float64)


@pytest.mark.parametrize("n", [0, 1, 1000, 70_000])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_kernel_equals_its_numpy_twin_and_is_thread_invariant(n, n_threads):
    X = _counts(n, seed=n)
    X[::7] *= 3.0                                    # some counts above M: clipped in the kernel
    if n:
        X[0, 0] = -2.0                               # below 0: clipped to 0
    w = np.array([0.2, 0.5, 0.3])
    s = poisson_stats(X, w, RATES, M, n_threads=n_threads)
    one = poisson_stats(X, w, RATES, M, n_threads=1)
    for name in ("counts", "sums"):
        assert_array_equal(s[name], one[name])
    if n <= 1000:
        N, S, ll, clipped = poisson_stats_reference(X, w, RATES, M)
        assert_allclose(s["counts"], N, rtol=1e-12, atol=1e-12)
        assert_allclose(s["sums"], S, rtol=1e-11, atol=1e-11)
        assert s.loglik == pytest.approx(ll, rel=1e-12, abs=1e-9) and s.n_clipped == clipped


class TestConformance(PrivateEstimatorConformance):
    estimator_class = DPPoissonMixture
    params = dict(n_components=K, max_count=M, epsilon=1.0, delta=1e-5, max_iter=4)
    fitted_attributes = ("weights_", "rates_")
    # scikit-learn's checks fit 20-30 rows: epsilon=10 keeps them above the refusal threshold
    sklearn_params = (dict(n_components=2, epsilon=10.0, max_iter=3, random_state=0),
                      dict(n_components=2, epsilon=float("inf"), max_iter=3, random_state=0))
    refuses_huge_rows = True                         # a negative count is refused, naming X

    def make_data(self, n, seed=0):
        return _counts(n, seed)

    def outlier_data(self, n, seed=0):
        X = _counts(n, seed)
        X[::20] *= 50.0
        return X

    def exact_reference(self, est, X):
        w, lam = est._initial_parameters(summarize(X), None, make_key(0), False)
        for _ in range(est.max_iter):
            N, S, _, _ = poisson_stats_reference(X, w, lam, M)
            N = np.maximum(N, 10 * np.finfo(np.float64).eps)
            w = N / N.sum()
            c, R = M / 2, M / 2 * math.sqrt(X.shape[1])
            lam = np.clip((R * S + c * N[:, None]) / N[:, None], M / 1000, M)
        return {"weights_": w, "rates_": lam}

    def random_parameters(self, est, rng, d):
        w = rng.dirichlet(np.ones(K))
        return w, rng.uniform(M / 1000, M, (K, d))

    def random_row(self, est, rng, d):
        return rng.uniform(-0.2 * M, 1.2 * M, d)

    def perturb_row(self, est, rng, x):
        return x + rng.normal(0, 0.3 * M, x.shape)

    def adversarial_cases(self, est, rng, d):
        top, low = np.full(d, M), np.zeros(d)
        one = (np.array([1 - 2e-12, 1e-12, 1e-12]), np.full((K, d), M / 2))      # every row to component 0
        split = (np.full(K, 1.0 / K), np.vstack([np.full(d, M), np.full(d, M / 1000), np.full(d, M / 1000)]))
        return [(one, top, low), (one, low, top), (split, top, low)]

    def check_statistics_bounded(self, stats, n_rows):
        assert 0 <= stats["counts"].sum() <= n_rows * (1 + 1e-12)
        assert np.all(np.abs(stats["sums"]) <= n_rows / math.sqrt(D) * (1 + 1e-12))


def test_a_private_fit_recovers_well_separated_rates():
    X = _counts(20_000, seed=3)
    m = DPPoissonMixture(K, max_count=M, epsilon=1.0, max_iter=30, random_state=0).fit(X)
    order = [int(np.argmin(np.abs(m.rates_ - r).sum(axis=1))) for r in RATES]
    assert sorted(order) == [0, 1, 2]
    assert_allclose(m.rates_[order], RATES, atol=0.6)
    assert m.score(_counts(2000, seed=4)) > DPPoissonMixture(1, max_count=M, epsilon=1.0, max_iter=30,
                                                             random_state=0).fit(X).score(_counts(2000, seed=4))
    Xs, y = m.sample(100, random_state=0)
    assert Xs.shape == (100, D) and np.all(Xs >= 0)


class _Blocks:
    """A block source of ``X`` in blocks of ``rows``; ``passes`` counts the passes it gave."""

    def __init__(self, X, rows):
        self._X, self._rows, self.passes = X, rows, 0
        self.n_features, self.dtype = X.shape[1], X.dtype

    def iter_blocks(self):
        self.passes += 1
        for s in range(0, self._X.shape[0], self._rows):
            yield self._X[s:s + self._rows]


@pytest.mark.parametrize("value, match", [(2.5, r"X: column 2 holds fractional values"),
                                          (-1.0, r"Negative values in data passed to X \(column 2\)")])
def test_counts_that_are_not_whole_non_negative_numbers_are_refused_before_the_charge(value, match):
    """Issue 39: a fractional (or negative) count is refused naming X and its column, in memory
    and on a block source's scanning pass, before the ledger is charged; no value is quoted."""
    from dpem_fast.accounting import BudgetLedger

    X = _counts(3000, seed=5)
    X[2900, 2] = value                                    # in the last block of the stream only
    for source in (X, _Blocks(X, 1000)):
        ledger = BudgetLedger(10.0, 1e-4)
        with pytest.raises(ValueError, match=match) as info:
            DPPoissonMixture(K, max_count=M, budget=ledger, random_state=0).fit(source)
        assert ledger.entries == [] and str(value) not in str(info.value)
        if isinstance(source, _Blocks):
            assert source.passes == 1                     # the scan: nothing read after it
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=["a", "b", "visits", "d"])
    with pytest.raises(ValueError, match="column 2 \\('visits'\\)"):
        DPPoissonMixture(K, max_count=M, random_state=0).fit(frame)
    whole = _counts(3000, seed=5)
    assert DPPoissonMixture(K, max_count=M, max_iter=2, random_state=0).fit(whole).score(whole) < 0
    with pytest.raises(ValueError, match="fractional"):
        DPPoissonMixture(K, max_count=M, max_iter=2, random_state=0).fit(whole).score(whole + 0.5)
