"""The private domain estimate: bins, sensitivities by brute force, and coverage."""
import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from dpem_fast._dpcore import _domain as _kernel
from dpem_fast._engine import ReleaseLayer, make_plan
from dpem_fast._engine import _domain as dom
from dpem_fast._reference.domain import histogram_reference, refine_bins_reference, scale_bins_reference
from dpem_fast._rng import make_key

DMAX = np.finfo(np.float64).max


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


def _estimate(X, epsilon=1.0, seed=0, rel="replace"):
    plan = make_plan((), 1, epsilon=epsilon, delta=1e-6, neighbouring=rel, accountant="gdp",
                     one_off_specs=dom.domain_specs(X.shape[1]), one_off_share=0.5)
    return dom.estimate_domain(X, ReleaseLayer(plan, make_key(seed), 2), n_threads=2)


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


def test_a_feature_no_bin_resolves_is_refused_not_given_a_box_built_from_noise():
    # before issue 23 the box of such a feature was the noisy mode of 4,197 bins: a random
    # scale up to 1e308.  Now the estimate refuses, naming the unresolved features.
    rng = np.random.default_rng(3)
    with pytest.raises(ValueError, match=r"feature\(s\) \[0, 1\].*declare bounds=\(lower, upper\) or data_norm"):
        _estimate(rng.normal(size=(3, 2)), epsilon=0.01)
    # one resolvable feature (all rows in one bin) and one spread over ~100 bins: only the latter
    X = np.column_stack([np.full(4000, 3.0), 10.0 ** rng.uniform(-50, 50, 4000)])
    with pytest.raises(ValueError, match=r"feature\(s\) \[1\] above"):
        _estimate(X, epsilon=1.0)


def _plan(d, epsilon, rel="replace"):
    return make_plan((), 1, epsilon=epsilon, delta=1e-6, neighbouring=rel, accountant="gdp",
                     one_off_specs=dom.domain_specs(d), one_off_share=0.5)


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
        layer = lambda: ReleaseLayer(plan, make_key(seed), 1)     # noqa: E731
        try:
            dom.estimate_domain(X_hi, layer(), 1)
            ok_hi += 1
        except ValueError:
            pass
        try:
            dom.estimate_domain(X_lo, layer(), 1)
            ok_lo += 1
        except ValueError:
            pass
    assert ok_hi >= 19 and ok_lo <= 1, (ok_hi, ok_lo)
