"""DPMixedMixture.sample's fast pieces (issue 37, sample(1e6) in under a second) are exact:
each returns, bit for bit, what its straightforward numpy form returns."""
import numpy as np
import pytest
from scipy.special import ndtr

from dpem_fast.mixture._sampling import CHUNK, by_component, draw_categories, mixture_cdf, search_right


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_by_component_is_flatnonzero_per_class(rng):
    y = rng.integers(0, 5, 10_000)
    y[y == 3] = 1                       # an empty class
    groups = by_component(y, 5)
    for k in range(5):
        np.testing.assert_array_equal(groups[k], np.flatnonzero(y == k))


def test_mixture_cdf_is_np_interp_on_the_grid(rng):
    K, d, n = 4, 3, 3 * CHUNK + 17       # several chunks and a ragged tail
    w = rng.dirichlet(np.ones(K))
    means, sd = rng.normal(size=(K, d)), rng.uniform(0.05, 2.0, (K, d))
    Z = rng.normal(scale=3.0, size=(n, d))
    Z[:5] = [[-1e3] * d, [1e3] * d, [0.0] * d, [np.inf] * d, [-np.inf] * d]    # beyond the grid
    got = mixture_cdf(Z, w, means, sd)
    for j in range(d):
        zg = np.linspace(np.min(means[:, j] - 9 * sd[:, j]), np.max(means[:, j] + 9 * sd[:, j]), 4097)
        G = ndtr((zg[:, None] - means[None, :, j]) / sd[None, :, j]) @ w
        np.testing.assert_array_equal(got[:, j], np.clip(np.interp(Z[:, j], zg, G), 0.0, 1.0))
        zg_points = zg[rng.integers(0, zg.size, 1000)]          # exactly on grid points
        np.testing.assert_array_equal(mixture_cdf(np.repeat(zg_points[:, None], d, 1), w, means, sd)[:, j],
                                      np.clip(np.interp(zg_points, zg, G), 0.0, 1.0))


def test_search_right_is_searchsorted_with_flat_steps_and_edges(rng):
    p = rng.dirichlet(np.ones(64) * 0.3)
    p[10:30] = 0.0                       # empty bins: repeated knots
    F = np.concatenate([[0.0], np.minimum(np.cumsum(p / p.sum()), 1.0)])
    F[-1] = 1.0
    u = np.concatenate([rng.random(200_000), F, [0.0, 1.0, -0.5, 1.5, np.nextafter(1.0, 0.0)]])
    np.testing.assert_array_equal(search_right(F, u), np.searchsorted(F, u, side="right"))


def test_draw_categories_is_the_per_row_inverse_cdf(rng):
    K, C, n = 3, 6, 50_000
    probs = rng.dirichlet(np.ones(C + 1), K)
    probs[1, 2] = 0.0
    y = rng.integers(0, K, n)
    r = rng.random(n)
    for P, top in ((probs, C), (probs[:, :C], C)):        # with and without the "other" slot
        cdf = np.cumsum(P[y], axis=1)
        u = r * cdf[:, -1]
        np.testing.assert_array_equal(draw_categories(P, by_component(y, K), r, top),
                                      np.minimum((u[:, None] >= cdf).sum(axis=1), top))
