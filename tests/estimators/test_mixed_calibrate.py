"""DPMixedMixture's 2-way calibration (issue 37, ``calibrate="pairs"``): the pair tables'
one-off release (its sensitivity by brute force, its place in the plan and the record, the
plan's ε unchanged), the raked sample moving towards the released tables, determinism."""
import math
import warnings

import numpy as np
import pytest

from dpem_fast import DPMixedMixture
from dpem_fast._engine._specs import column_histograms
from dpem_fast.mixture._calibrate import (MAX_COLUMNS, PAIR_BINS, PAIR_SHARE, PAIRS, _cells, _sizes, column_pairs,
                                          pair_counts)
from dpem_fast.mixture._marginals import MARGINALS

from neighbours import worst_changes
from test_dp_mixed import FRAME_BOUNDS, _frame


def _fit(df, groups=None, **kw):
    params = dict(epsilon=1.0, bounds=FRAME_BOUNDS, max_iter=6, random_state=0, calibrate="pairs")
    params.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DPMixedMixture(3, **params).fit(df, groups=groups)


def test_column_pairs_are_all_pairs_up_to_the_cap_then_a_band():
    assert column_pairs(4) == ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
    assert len(column_pairs(MAX_COLUMNS)) == MAX_COLUMNS * (MAX_COLUMNS - 1) // 2
    big = column_pairs(30)
    assert 0 < len(big) <= MAX_COLUMNS * (MAX_COLUMNS - 1) // 2
    assert all(b - a <= max(b - a for a, b in big) for a, b in big) and (0, 1) in big


def _counts(X, lay, lo, hi):
    sizes = _sizes(lay)
    return pair_counts(tuple(lay.num_cols), lo, hi, tuple(lay.cat_cols), tuple(lay.n_categories),
                       column_pairs(sizes.size), tuple(sizes), X)


def test_the_pair_tables_sensitivity_by_brute_force_over_neighbours():
    """Every neighbour (a row removed; a row replaced by rows anywhere, beyond the box, with
    unknown or missing categories) moves the stacked pair tables by at most the declared ℓ2 and
    ℓ1, and the worst case attains them."""
    m = DPMixedMixture(2, bounds=(-4, 4), categories={"x1": 3, "x3": 2}, calibrate="pairs")
    lay = m._lay(4)
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=50), rng.integers(-1, 3, 50), rng.normal(size=50) * 3,
                         rng.integers(0, 2, 50)]).astype(float)
    lo, hi = np.full(2, -4.0), np.full(2, 4.0)
    base = _counts(X, lay, lo, hi)
    P = len(column_pairs(4))
    cells = sum(a * b for a, b in [(PAIR_BINS, 4), (PAIR_BINS, PAIR_BINS), (PAIR_BINS, 3), (4, PAIR_BINS),
                                   (4, 3), (PAIR_BINS, 3)])
    assert m._pair_specs(4)[0] == column_histograms(PAIRS, P, cells) and base.size == cells
    cand = np.column_stack([rng.uniform(-9, 9, 30), rng.integers(-2, 4, 30), rng.uniform(-9, 9, 30),
                            rng.choice([0.0, 1.0, 2.5, np.nan], 30)])
    worst = worst_changes(lambda A: _counts(A, lay, lo, hi), X, cand[:8])
    spec = m._pair_specs(4)[0]
    for rel, (l2, l1) in worst.items():
        assert l2 <= spec.l2[rel] + 1e-12 and l1 <= spec.l1[rel] + 1e-12
        assert l2 == pytest.approx(spec.l2[rel]) and l1 == pytest.approx(spec.l1[rel])
    assert spec.l2 == {"add_remove": math.sqrt(P), "replace": math.sqrt(2 * P)}


@pytest.mark.parametrize("rel", ["replace", "add_remove"])
def test_the_pairs_are_one_release_of_the_same_plan(rel):
    df = _frame(2000)
    m = _fit(df, neighbouring=rel)
    r = m.privacy_.releases[PAIRS]
    P = len(column_pairs(4))
    assert r.count == 1 and r.sensitivity == pytest.approx(math.sqrt(P if rel == "add_remove" else 2 * P))
    off = _fit(df, neighbouring=rel, calibrate=None)
    assert PAIRS not in off.privacy_.releases and off.pair_tables_ is None
    # the share comes out of the same budget: the same ε, the marginals as noisy as before, EM noisier
    assert m.privacy_.epsilon_spent == pytest.approx(off.privacy_.epsilon_spent, rel=1e-6)
    assert m.privacy_.epsilon_spent <= 1.0 * (1 + 1e-9)
    assert m.privacy_.releases[MARGINALS].noise_scale == pytest.approx(off.privacy_.releases[MARGINALS].noise_scale)
    assert m.privacy_.releases["counts"].noise_scale > off.privacy_.releases["counts"].noise_scale
    assert 0 < PAIR_SHARE < 1
    g = np.arange(len(df)) // 4
    p = _fit(df, groups=g, neighbouring=rel, max_rows_per_group=3)
    assert p.privacy_.releases[PAIRS].sensitivity == pytest.approx(3 * r.sensitivity)    # the group rule
    assert len(m.pair_tables_) == P and all(np.isclose(t.sum(), 1.0) and (t >= 0).all() for t in m.pair_tables_)


def test_calibrate_without_marginals_is_refused_before_the_charge():
    with pytest.raises(ValueError, match="calibrate='pairs' needs the marginals"):
        _fit(_frame(500), marginals=None)
    auto = _fit(_frame(500), marginals=None, calibrate="auto")        # pairs with marginals only
    assert PAIRS not in auto.privacy_.releases and auto.pair_tables_ is None
    assert PAIRS in _fit(_frame(500), calibrate="auto").privacy_.releases
    assert PAIRS not in _fit(_frame(500), calibrate=None).privacy_.releases     # off
    assert DPMixedMixture().calibrate == "auto"                                  # the default


def _sample_tables(m, S):
    lay = m._fitted_schema().layout
    Z = m._fitted_schema().encode(S)
    cells = _cells(Z, tuple(lay.num_cols), m.bounds_[0], m.bounds_[1], tuple(lay.cat_cols), tuple(lay.n_categories))
    sizes = _sizes(lay)
    out = []
    for a, b in column_pairs(sizes.size):
        t = np.bincount(cells[:, a] * sizes[b] + cells[:, b], minlength=int(sizes[a] * sizes[b]))
        out.append(t / t.sum())
    return out


def test_at_epsilon_inf_the_sample_moves_towards_the_released_pair_tables():
    df = _frame(6000)
    m = _fit(df, epsilon=np.inf, max_iter=5)
    off = _fit(df, epsilon=np.inf, max_iter=5, calibrate=None)
    assert off.pair_tables_ is None
    target = m.pair_tables_
    tvd = [np.mean([0.5 * np.abs(s - t.ravel()).sum() for s, t in zip(_sample_tables(x, x.sample(20000, random_state=1)[0]),
                                                                        target)]) for x in (m, off)]
    assert tvd[0] < 0.8 * tvd[1]


def test_the_calibrated_sample_is_deterministic_for_a_seed():
    df = _frame(2000)
    a, b = _fit(df), _fit(df)
    for x, y in zip(a.pair_tables_, b.pair_tables_):
        np.testing.assert_array_equal(x, y)
    Sa, ya = a.sample(500, random_state=4)
    Sb, yb = b.sample(500, random_state=4)
    assert Sa.equals(Sb) and np.array_equal(ya, yb) and len(Sa) == 500
