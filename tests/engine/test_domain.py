"""The private domain estimate: bins, sensitivities by brute force, and coverage."""
import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import load_breast_cancer

from dpem_fast import DPFactorAnalysis, DPGaussianMixture, DPKMeans, DPMixedMixture

from dpem_fast._dpcore import _domain as _kernel
from dpem_fast._engine import ReleaseLayer, make_plan
from dpem_fast._engine import _domain as dom
from dpem_fast._reference.domain import histogram_reference, refine_bins_reference, scale_bins_reference
from dpem_fast._rng import make_key
from dpem_fast.accounting import BudgetLedger, DomainCoverageWarning

DMAX = np.finfo(np.float64).max


def test_the_twins_constants_are_the_kernels():
    from dpem_fast._reference import domain as twin

    assert (twin.E_MIN, twin.ZERO_BIN) == (_kernel.E_MIN, _kernel.ZERO_BIN)
    assert np.frexp(5e-324)[1] == twin.E_MIN and np.frexp(DMAX)[1] == 1024


def test_scale_bins_cover_every_double_in_order():
    vals = np.array([-DMAX, -1.0, -0.75, -0.5, -5e-324, 0.0, -0.0, 5e-324, 0.5, 0.75, 1.0, 2.0, DMAX])
    b = scale_bins_reference(vals)
    assert b.min() >= 0 and b.max() < dom.SCALE_BINS
    assert np.all(np.diff(b[[0, 1, 3, 4, 5, 7, 8, 10, 11, 12]]) > 0)     # monotone over distinct bins
    assert b[2] == b[3] and b[8] == b[9] and b[5] == b[6] == dom._N_EXP    # [0.5, 1) share a bin
    lower, upper = dom._scale_edges()
    assert np.all(lower <= upper) and np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))
    for v, i in zip(vals, b):
        assert lower[i] <= v <= upper[i]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 5000])
def test_histogram_kernels_equal_the_numpy_twins_for_any_thread_count(n, dtype):
    rng = np.random.default_rng(n)
    X = (rng.standard_t(2, size=(n, 5)) * 10.0 ** rng.integers(-30, 30, size=(n, 5))).astype(dtype)
    if n:
        X[0] = [0.0, -0.0, np.finfo(dtype).max, -np.finfo(dtype).tiny, 1.0]
    lo, hi = np.array([-3.0, -1e300, 0.0, -DMAX, 0.5]), np.array([4.0, 1e300, 1e-3, DMAX, 0.75])
    want1 = histogram_reference(scale_bins_reference(X), dom.SCALE_BINS)
    want2 = histogram_reference(refine_bins_reference(X, lo, hi, dom.REFINE_BINS), dom.REFINE_BINS)
    for t in (1, 2, 3):
        assert_array_equal(dom._counts(_kernel.scale_histogram, X, t, (5, dom.SCALE_BINS)), want1)
        assert_array_equal(dom._counts(_kernel.refine_histogram, X, t, (5, dom.REFINE_BINS), lo, hi), want2)


def _hist(rows, stage):
    if stage == 1:
        return dom._counts(_kernel.scale_histogram, rows, 2, (rows.shape[1], dom.SCALE_BINS))
    box = np.full(rows.shape[1], -3.0), np.full(rows.shape[1], 5.0)
    return dom._counts(_kernel.refine_histogram, rows, 2, (rows.shape[1], dom.REFINE_BINS), *box)


@pytest.mark.parametrize("stage", [1, 2])
def test_histogram_sensitivity_by_brute_force(stage):
    rng = np.random.default_rng(0)
    d = 4
    specs = dom.domain_specs(d)
    base = rng.normal(scale=3, size=(50, d))
    worst = {"add_remove": 0.0, "replace": 0.0}
    for _ in range(300):
        x = rng.normal(scale=10.0 ** rng.uniform(-3, 3), size=d)
        h0 = _hist(base, stage)
        added = _hist(np.vstack([base, x]), stage) - h0
        i = rng.integers(len(base))
        other = base.copy()
        other[i] = x
        replaced = _hist(other, stage) - h0
        worst["add_remove"] = max(worst["add_remove"], np.linalg.norm(added))
        worst["replace"] = max(worst["replace"], np.linalg.norm(replaced))
    spec = specs[stage - 1]
    for rel in worst:
        assert worst[rel] <= spec.sensitivity("l2", rel) + 1e-12
        assert worst[rel] >= 0.999 * spec.sensitivity("l2", rel)
    assert spec.sensitivity("l1", "replace") == 2 * d


def _plan(d, epsilon, rel="replace", m=None):
    """A plan of the estimate alone, its releases at the estimators' relative shares."""
    return make_plan((), 1, epsilon=epsilon, delta=1e-6, neighbouring=rel, accountant="gdp",
                     one_off_specs=dom.domain_specs(d),
                     one_off_share={k: v / dom.DOMAIN_SHARE * 0.5 for k, v in dom.domain_shares().items()},
                     max_rows_per_group=m)


def _estimate(X, epsilon=1.0, seed=0, rel="replace", report=None):
    plan = _plan(X.shape[1], epsilon, rel)
    return dom.estimate_domain(X, ReleaseLayer(plan, make_key(seed), 2), n_threads=2, report=report)


def test_estimate_covers_the_data_and_is_tight():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.uniform(0, 2400, 200_000), rng.normal(1000, 3, 200_000),
                         rng.standard_t(3, 200_000) * 1e-3])
    D = _estimate(X)
    lo, hi = D.bounds
    # rows outside the box (clipped to it) are a small fraction, even in the heavy t(3) tails
    outside = np.mean((X < lo) | (X > hi), axis=0)
    assert np.all(outside <= 0.005), outside
    # not loose: stage 1 gives [0.5, 8192] for column 0 (bins [1, 2) .. [2048, 4096), one more
    # each side) and [256, 2048] for column 1; stage 2 trims to one 1/32 step beyond the data
    assert 0 <= lo[0] <= 1 and hi[0] <= 2400 + 8192 / 32
    assert hi[1] - lo[1] <= 30 + 2 * (2048 - 256) / 32 and lo[1] > 900
    assert np.allclose(D.scale, np.sqrt(3) * (hi - lo) / 2)     # per feature: sqrt(d) half-widths
    assert np.allclose(D.center, (lo + hi) / 2)


def test_estimate_survives_extreme_and_degenerate_columns():
    rng = np.random.default_rng(2)
    X = np.column_stack([np.zeros(5000), rng.normal(size=5000), rng.normal(size=5000)])
    X[0] = [DMAX, -DMAX, 1.5e308]                      # one huge row: a bin of its own, below threshold
    D = _estimate(X)
    lo, hi = D.bounds
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)
    assert hi[0] - lo[0] < 1e-300 and abs(hi[1]) < 100 and np.all(np.isfinite(D.scale)) and np.all(D.scale > 0)


def test_a_feature_no_bin_resolves_gets_a_box_and_a_warning_not_an_error():
    # before issue 23 the box of such a feature was the noisy mode of 4,197 bins: a random
    # scale up to 1e308; until issue 35 the estimate raised, after the budget was spent.  Now
    # the feature gets a box from summed bins or a public placeholder, and the fit warns,
    # naming the features and `bounds`.
    rng = np.random.default_rng(3)
    report = {}
    with pytest.warns(DomainCoverageWarning, match=r"feature\(s\) \[0, 1\].*placeholder.*Declare bounds"):
        D = _estimate(rng.normal(size=(3, 2)), epsilon=0.01, report=report)
    assert_array_equal(D.bounds[0], [-1.0, -1.0]) and assert_array_equal(D.bounds[1], [1.0, 1.0])
    assert report["unresolved"] == report["placeholder"] == [0, 1]
    # one resolvable feature (all rows in one bin) and one spread over ~100 binary exponents:
    # the latter is resolved by summed bins, a wide box that covers its bulk
    X = np.column_stack([np.full(4000, 3.0), 10.0 ** rng.uniform(-50, 50, 4000)])
    report = {}
    with pytest.warns(DomainCoverageWarning, match=r"feature\(s\) \[1\] were resolved only by summing.*bounds"):
        D = _estimate(X, epsilon=1.0, report=report)
    lo, hi = D.bounds
    assert report["unresolved"] == [1] and report["placeholder"] == []
    assert np.all(np.isfinite(lo)) and np.all(hi > lo) and np.mean((X[:, 1] >= lo[1]) & (X[:, 1] <= hi[1])) >= 0.9


@pytest.mark.parametrize("d", [1, 3])
def test_rows_needed_is_the_even_chance_of_the_best_case(d):
    """rows_needed(plan) = σ1 z1: a bin holding that many rows passes half the time; the
    check refuses below it and only under replace-one (n is private under add/remove)."""
    plan = _plan(d, 2.0)
    need = dom.rows_needed(plan, d)
    sigma = plan.releases["domain_scale"].noise_scale
    assert need == pytest.approx(sigma * dom._z(1, dom.SCALE_BINS * d))
    n = int(need)
    with pytest.raises(ValueError, match=rf"n_samples={n} is too few rows.*declare bounds"):
        dom.check_estimable(plan, d, n)
    dom.check_estimable(plan, d, n + 1)
    dom.check_estimable(_plan(d, 2.0, "add_remove"), d, None)
    # empirical: all rows in one bin, n = need + 3 σ passes in (almost) every seed; n = need - 3 σ
    # in (almost) none
    X_hi = np.full((int(need + 3 * sigma), d), 5.0)
    X_lo = np.full((int(need - 3 * sigma), d), 5.0)
    ok_hi = ok_lo = 0
    for seed in range(20):
        for X, ok in ((X_hi, "hi"), (X_lo, "lo")):
            report = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DomainCoverageWarning)
                dom.estimate_domain(X, ReleaseLayer(plan, make_key(seed), 1), 1, report=report)
            if not report["unresolved"]:        # stage 1 resolved every feature
                ok_hi += ok == "hi"
                ok_lo += ok == "lo"
    assert ok_hi >= 19 and ok_lo <= 1, (ok_hi, ok_lo)


# ------------------------------------------------------------------ issue 35: coverage
def _outside(rows, lo, hi):
    return dom._outside_counts(lo, hi, None, np.ascontiguousarray(rows))


def test_outside_count_sensitivity_by_brute_force():
    """Stage 3 (the rows outside the bulk box, outside the core box, and the row count): one
    row added or removed changes each entry by at most 1 (ℓ2 √3, attained by a row outside
    both boxes); one row replaced changes each outside count by at most 1 and the row count
    not at all (ℓ2 √2, attained; declared √3, padded so that a group's is m times a row's).
    Rows drawn adversarially: inside, outside, on the edges, far out, of nested and disjoint
    boxes, in one feature or in all."""
    rng = np.random.default_rng(5)
    d = 4
    spec = dom.domain_specs(d)[2]
    assert spec.name == "domain_outside" and spec.shape == (3,)
    lo = np.array([[-1.0, 0.0, 10.0, -DMAX], [-0.5, 0.0, 12.0, -1.0]])      # bulk box, core box
    hi = np.array([[1.0, 1e-300, 20.0, 0.0], [0.5, 1e-300, 25.0, 0.0]])
    base = np.vstack([rng.uniform(-5, 45, size=(20, d)), np.tile(lo[1] / 2 + hi[1] / 2, (20, 1))])
    h0 = _outside(base, lo, hi)
    choices = np.column_stack([lo[0], hi[0], lo[1], hi[1], lo[0] - 1, hi[0] + 1, lo[1] / 2 + hi[1] / 2,
                               np.full(d, DMAX), np.full(d, -DMAX), np.full(d, 25.0)])
    worst = {"add_remove": 0.0, "replace": 0.0}
    for _ in range(600):
        x = choices[np.arange(d), rng.integers(0, choices.shape[1], d)]
        added = _outside(np.vstack([base, x]), lo, hi) - h0
        other = base.copy()
        other[rng.integers(len(base))] = x
        replaced = _outside(other, lo, hi) - h0
        worst["add_remove"] = max(worst["add_remove"], np.linalg.norm(added))
        worst["replace"] = max(worst["replace"], np.linalg.norm(replaced))
        assert replaced[-1] == 0 and added[-1] == 1
    assert worst["add_remove"] == pytest.approx(spec.sensitivity("l2", "add_remove"))
    assert worst["replace"] <= spec.sensitivity("l2", "replace")
    assert worst["replace"] == pytest.approx(math.sqrt(2))
    assert spec.sensitivity("l1", "add_remove") == spec.sensitivity("l1", "replace") == 3


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_every_domain_release_is_in_the_plan_and_scaled_per_person(rel):
    """The estimate's three releases are one-offs of the plan at DOMAIN_SPLIT of its share;
    a person-level plan (at most m rows per group) releases each with m times the row-level
    sensitivity."""
    d, m = 3, 5
    row, grp = _plan(d, 1.0, rel), _plan(d, 1.0, rel, m=m)
    names = [s.name for s in dom.domain_specs(d)]
    assert list(row.releases) == names == ["domain_scale", "domain_refine", "domain_outside"]
    mu2 = {n: (r.sensitivity / r.noise_scale) ** 2 for n, r in row.releases.items()}
    for n in names:
        assert mu2[n] / sum(mu2.values()) == pytest.approx(dom.DOMAIN_SPLIT[n], rel=1e-9)
        assert grp.releases[n].sensitivity == pytest.approx(m * row.releases[n].sensitivity, rel=1e-12)
    assert sum(dom.domain_shares().values()) == pytest.approx(dom.DOMAIN_SHARE)


def test_the_outside_count_release_warns_when_the_box_leaves_rows_out():
    """A box that leaves most rows of a feature outside (forced here by a stage-2 release
    that resolves only its middle) is reported by the released outside fraction, and the
    fit warns naming `bounds`; a covering box on plenty of rows does not warn."""
    rng = np.random.default_rng(7)
    X = np.column_stack([rng.normal(size=100_000), rng.uniform(0, 100, 100_000)])
    report = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _estimate(X, epsilon=1.0, report=report)
    assert report["outside_fraction"] < 0.02 and report["rows_released"] == pytest.approx(1e5, rel=0.01)
    # the estimate's stage 2 fooled into a narrow box: the outside count sees it
    real = dom._refine_box, dom._core_box
    try:
        dom._refine_box = dom._core_box = lambda row, sigma, z: (15, 16)
        report = {}
        with pytest.warns(DomainCoverageWarning, match=r"(9\d|100) % of the rows lie outside the box.*Declare bounds"):
            _estimate(X, epsilon=1.0, report=report)
    finally:
        dom._refine_box, dom._core_box = real
    assert report["outside_fraction"] > 0.9


def test_a_too_noisy_outside_count_warns_instead_of_claiming_coverage():
    """Few rows at a small epsilon: the box covers the data (every row in one binary exponent,
    which stage 1 resolves) but the release cannot tell 0 % from 10 % outside, so the fit says
    so (naming `bounds`) instead of staying silent."""
    X = np.random.default_rng(8).uniform(1, 2, size=(2000, 2))
    report = {}
    with pytest.warns(DomainCoverageWarning, match=r"noise σ = \d+ rows, too much .*Declare bounds"):
        D = _estimate(X, epsilon=0.08, report=report)
    assert report["unresolved"] == [] and np.all(D.bounds[0] <= 1) and np.all(D.bounds[1] >= 2)


_ESTIMATORS = {
    "gmm-full": lambda **kw: DPGaussianMixture(2, **kw),
    "gmm-diag": lambda **kw: DPGaussianMixture(2, covariance_type="diag", **kw),
    "kmeans": lambda **kw: DPKMeans(2, **kw),
    "fa": lambda **kw: DPFactorAnalysis(1, **kw),
    "mixed": lambda **kw: DPMixedMixture(2, categories={"x1": 2}, **kw),
}


def _fit_recording(est, X):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        est.fit(X)
    return [w for w in seen if issubclass(w.category, DomainCoverageWarning)]


@pytest.mark.parametrize("name", sorted(_ESTIMATORS))
def test_no_exception_after_the_charge_when_no_bin_resolves(name):
    """Until issue 35 a feature whose stage-1 histogram had no bin above the noise raised
    after the ledger was charged (add/remove: n is private, nothing refuses before).  Now the
    fit returns a finite, usable model with the budget spent and a warning naming `bounds`."""
    rng = np.random.default_rng(11)
    X = np.column_stack([rng.normal(50.0, 5.0, 300), rng.integers(0, 2, 300), rng.normal(size=300)])
    ledger = BudgetLedger(5.0, 1e-5, neighbouring="add_remove")
    est = _ESTIMATORS[name](epsilon=1.0, neighbouring="add_remove", budget=ledger, random_state=0)
    coverage = _fit_recording(est, X)
    assert len(ledger.entries) == 1
    assert coverage and "bounds" in str(coverage[0].message)
    cov = est.privacy_.data_domain["coverage"]
    assert cov["unresolved"] and 0.0 <= cov["outside_fraction"] <= 1.0
    out = est.predict(X) if name == "kmeans" else est.transform(X) if name == "fa" else est.score_samples(X)
    assert np.all(np.isfinite(out))
    assert "released" in str(est.privacy_) and "box per feature" in str(est.privacy_)


def _inside(X, bounds):
    lo, hi = bounds
    return np.mean((X >= lo) & (X <= hi), axis=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_breast_cancer_box_covers_the_bulk_or_warns(seed):
    """Issue 35: load_breast_cancer() at epsilon 10, no bounds (569 rows, 30 features).  Every
    feature's private box holds >= 90 % of the rows, or the fit warns naming `bounds`.  Before,
    seed 0 boxed feature 13 (data 6.8 .. 542) to [62.25, 64]: 2 rows of 569 inside, no warning."""
    X = load_breast_cancer().data
    est = DPGaussianMixture(2, covariance_type="diag", epsilon=10.0, random_state=seed)
    coverage = _fit_recording(est, X)
    inside = _inside(X, est.privacy_.data_domain["bounds"])
    assert np.all(inside >= 0.9) or (coverage and "Declare bounds" in str(coverage[0].message)), inside.min()
    assert np.isfinite(est.score(X))


def _cities(n=30_000, seed=0):
    """A city-coordinates-like table: 300 towns over latitude -55..70, longitude -160..175,
    sizes Zipf-distributed (a few huge cities hold most rows), each a tight cluster."""
    rng = np.random.default_rng(seed)
    towns = np.column_stack([rng.uniform(-55, 70, 300), rng.uniform(-160, 175, 300)])
    towns[:20, 0] = rng.uniform(25, 60, 20)         # the largest cities in the north
    p = 1.0 / np.arange(1, 301) ** 1.1
    z = rng.choice(300, size=n, p=p / p.sum())
    return (towns[z] + rng.normal(scale=0.3, size=(n, 2))).clip([-55, -160], [70, 175])


@pytest.mark.parametrize("seed", [0, 1])
def test_coordinate_table_box_covers_the_bulk_or_warns(seed):
    """Issue 35's second table: ~30k coordinates at epsilon 1, no bounds."""
    X = _cities(seed=seed)
    est = DPGaussianMixture(3, epsilon=1.0, random_state=seed, max_iter=5)
    coverage = _fit_recording(est, X)
    inside = _inside(X, est.privacy_.data_domain["bounds"])
    assert np.all(inside >= 0.9) or (coverage and "Declare bounds" in str(coverage[0].message)), inside
