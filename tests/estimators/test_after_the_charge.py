"""Issue 35, items 1 and 4: nothing data-dependent fails after the charge on a degenerate column,
and epsilon=inf keeps the declared domain (the fuzz test over every estimator is in
``privacy_conformance``)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpem_fast import DPGaussianMixture, DPKMeans, DPMixedMixture
from dpem_fast import accounting as acc
from dpem_fast._preprocess import MIN_BOX_RATIO, resolve_domain
from dpem_fast.mixture._marginals import Z_MAX
from dpem_fast.synth import synth_report

pytestmark = [pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")]


def _zero_column(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    return np.c_[rng.normal(size=n), np.zeros(n)]


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
def test_a_column_of_zeros_gives_a_finite_mixture_after_the_charge(covariance_type):
    """The issue's repro: no LinAlgError once the ledger is charged; finite score, predict,
    sample; the zero column's variance is positive and tiny next to the other's."""
    X = _zero_column()
    ledger = acc.BudgetLedger(10.0, 1e-5)
    m = DPGaussianMixture(1, epsilon=1, covariance_type=covariance_type, budget=ledger, random_state=0).fit(X)
    assert len(ledger.entries) == 1
    assert np.isfinite(m.score(X)) and np.all(np.isfinite(m.score_samples(X[:50])))
    assert np.all(m.predict(X[:50]) == 0) and np.all(np.isfinite(m.sample(20, random_state=0)[0]))
    assert np.all(np.isfinite(m.precisions_cholesky_))


def test_kmeans_box_of_a_column_of_zeros_is_usable():
    """No denormal box or centres (was +-1e-323 / +-9.9e-324): the zero column's box half-width
    is at least 2^-20 of the other feature's, and the centres lie inside the box."""
    X = _zero_column()
    m = DPKMeans(2, epsilon=1, random_state=0).fit(X)
    lo, hi = m.privacy_.data_domain["bounds"]
    half = (hi - lo) / 2
    assert half[1] >= MIN_BOX_RATIO * half[0] * (1 - 1e-12)
    assert np.all(m.cluster_centers_ >= lo) and np.all(m.cluster_centers_ <= hi)
    assert np.all(np.isfinite(m.transform(X[:10])))


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_mixed_table_with_a_constant_and_a_mostly_zero_column(covariance_type):
    """A weather-like table (a 96 %-zero column, a constant one), no bounds, epsilon 0.3."""
    rng = np.random.default_rng(1)
    n = 6000
    X = np.c_[rng.normal(55, 17, n), rng.uniform(10, 100, n), rng.gamma(2, 5, n),
              np.where(rng.random(n) < 0.96, 0.0, rng.exponential(0.1, n)), np.full(n, 3.0)]
    m = DPMixedMixture(3, epsilon=0.3, covariance_type=covariance_type, categories={}, random_state=2).fit(X)
    assert np.isfinite(m.score(X)) and np.all(np.isfinite(m.sample(20, random_state=0)[0]))


def test_a_declared_box_too_narrow_for_data_norm_is_refused_before_the_charge():
    """A feature whose box image (half-width / data_norm) is below 2^-200 has no representable
    covariance: refused naming bounds and data_norm, nothing charged."""
    with pytest.raises(ValueError, match="data_norm"):
        resolve_domain(2, 5.0, ([-3, -1e-170], [3, 1e-170]))
    ledger = acc.BudgetLedger(10.0, 1e-5)
    with pytest.raises(ValueError, match="bounds"):
        DPGaussianMixture(2, epsilon=1, bounds=([-3, -1e-170], [3, 1e-170]), data_norm=5.0,
                          budget=ledger).fit(_zero_column(200))
    assert ledger.entries == []


def test_epsilon_inf_keeps_the_declared_domain():
    """Issue 35, item 4: bounds_ is the declared box, rows are clipped to it as in the private
    fit, samples stay inside it, and synth_report(grid=model) works."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 3000
    X = np.c_[rng.normal(15, 30, n), rng.integers(-20, 30, n).astype(float)]
    bounds = {"x0": (-10.0, 40.0), "x1": (1.0, 12.0)}
    for eps in (1.0, math.inf):
        m = DPMixedMixture(2, epsilon=eps, categories={}, bounds=bounds, random_state=0).fit(X)
        assert np.array_equal(m.bounds_, [[-10.0, 1.0], [40.0, 12.0]])
        S, _ = m.sample(5000, random_state=1)
        assert np.all(S >= m.bounds_[0]) and np.all(S <= m.bounds_[1])
        # the Gaussian block's means: in the box, or (marginals first, the default) in the copula's
        lo, hi = m.bounds_ if m.marginal_cdf_ is None else (-Z_MAX, Z_MAX)
        assert np.all(m.means_ >= lo) and np.all(m.means_ <= hi)
        synth_report(pd.DataFrame(X, columns=["x0", "x1"]), pd.DataFrame(S, columns=["x0", "x1"]), grid=m)
    # the non-private fit is fitted on the clipped rows
    Xc = np.clip(X, [-10.0, 1.0], [40.0, 12.0])
    a = DPMixedMixture(2, epsilon=math.inf, categories={}, bounds=bounds, random_state=0).fit(X)
    b = DPMixedMixture(2, epsilon=math.inf, categories={}, bounds=bounds, random_state=0).fit(Xc)
    assert np.array_equal(a.means_, b.means_) and np.array_equal(a.covariances_, b.covariances_)


def test_epsilon_inf_without_a_declaration_reports_the_data_box():
    """epsilon=inf with nothing declared: the fit is not private, its box is the data's, so the
    outputs' schema is the private fit's (bounds_ is not None)."""
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).normal(size=(500, 2)), columns=["a", "b"])
    m = DPMixedMixture(2, epsilon=math.inf, random_state=0).fit(X)
    assert np.array_equal(m.bounds_, [X.min(axis=0), X.max(axis=0)])
    synth_report(X, m.sample(100, random_state=0)[0], grid=m)
