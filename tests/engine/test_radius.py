"""The private radius of a declared box (issue 40, :mod:`dpem_fast._engine._radius`)."""
import warnings

import numpy as np
import pytest

from dpem_fast import DPGaussianMixture
from dpem_fast._engine._radius import (RADIUS, RADIUS_BINS, RADIUS_MIN_ROWS, RADIUS_TAIL, _norm_histogram,
                                       radius_from_histogram)
from dpem_fast._preprocess import box_domain


def test_radius_is_the_smallest_edge_with_a_small_noisy_tail():
    h = np.zeros(RADIUS_BINS)
    h[10] = 1000.0                                  # every row at norm in [10/64, 11/64)
    assert radius_from_histogram(h, 1000) == 11 / RADIUS_BINS
    h[40] = RADIUS_TAIL * 1000 + 1                  # a tail above the allowance keeps bin 40
    assert radius_from_histogram(h, 1000) == 41 / RADIUS_BINS
    # uniform norms: the outermost bin holds 1/64 < 3 % of the rows, two bins more than 3 %
    assert radius_from_histogram(np.full(RADIUS_BINS, 100.0), 64 * 100) == 63 / RADIUS_BINS
    assert radius_from_histogram(np.full(RADIUS_BINS, 100.0), 100) == 1.0
    assert radius_from_histogram(-np.ones(RADIUS_BINS), 0) == 1.0 / RADIUS_BINS   # noise only: post-processing


def test_norm_histogram_counts_clipped_rows_in_box_units():
    dom = box_domain(np.zeros(2), np.full(2, 4.0))
    X = np.array([[2.0, 2.0], [4.0, 4.0], [100.0, -100.0]])     # centre, a corner, clipped to a corner
    h = _norm_histogram(dom.center, dom.scale, *dom.bounds, None, X)
    assert h.sum() == 3 and h[0] == 1 and h[RADIUS_BINS - 1] == 2


def _box_table(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, (n, 3)), (np.full(3, -50.0), np.full(3, 50.0))


@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")
def test_declared_box_releases_its_radius_and_works_in_that_ball():
    X, bounds = _box_table(40000)       # at a few thousand rows the noise of 64 bins keeps r near 1
    est = DPGaussianMixture(2, epsilon=1.0, bounds=bounds, random_state=0, max_iter=4).fit(X)
    rec = est.privacy_
    assert RADIUS in rec.releases
    r = rec.data_domain["radius"]
    assert 0 < r < 0.25                             # rows at sd 1 in a box of half-width 50
    np.testing.assert_allclose(rec.data_domain["scale"], 50.0 * np.sqrt(3) * r)
    assert np.all(np.isfinite(est.score_samples(X)))


@pytest.mark.parametrize("kw", [dict(data_norm=100.0), dict(), dict(epsilon=float("inf"))])
def test_no_radius_without_a_declared_box_alone(kw):
    X, bounds = _box_table(RADIUS_MIN_ROWS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = {"epsilon": 1.0, "random_state": 0, "max_iter": 2, **kw}
        if "data_norm" in kw or "epsilon" in kw:
            args["bounds"] = bounds
        est = DPGaussianMixture(2, **args).fit(X)
    rec = est.privacy_
    assert rec is None or RADIUS not in rec.releases


def test_radius_is_in_the_plan_before_the_charge():
    """From public quantities: a declared box alone, and n >= RADIUS_MIN_ROWS where n is public."""
    bounds = _box_table(10)[1]
    plan = DPGaussianMixture(2, epsilon=1.0, bounds=bounds).privacy_plan(3, RADIUS_MIN_ROWS)
    assert RADIUS in plan.releases and plan.releases[RADIUS].count == 1
    assert RADIUS not in DPGaussianMixture(2, bounds=bounds).privacy_plan(3, RADIUS_MIN_ROWS - 1).releases
    assert RADIUS in DPGaussianMixture(2, bounds=bounds, neighbouring="add_remove").privacy_plan(3).releases
    assert RADIUS not in DPGaussianMixture(2, bounds=bounds, data_norm=100.0).privacy_plan(3, 10 ** 6).releases


def test_a_tail_within_its_noise_says_nothing():
    h = np.zeros(RADIUS_BINS)
    h[1] = 150.0                                    # 150 rows near the centre, noise sd 23 per bin
    assert radius_from_histogram(h, 150, sigma=23.0) == 1.0
    assert radius_from_histogram(h, 150, sigma=0.0) == 2 / RADIUS_BINS
