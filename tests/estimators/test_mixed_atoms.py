"""DPMixedMixture's atoms (issue 37): point masses at the box's edges and integer cells in the
marginals (their sensitivity unchanged, by brute force and in the record), their exact values in
the sample; the raked pool's systematic resampling; text columns' released dtypes."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from dpem_fast import DPMixedMixture
from dpem_fast._engine._specs import column_histograms
from dpem_fast._kernels.mixed import MixedLayout
from dpem_fast.mixture._atoms import NumericCells, column_cells
from dpem_fast.mixture._calibrate import POOL_MIN, _systematic
from dpem_fast.mixture._marginals import MARGINAL_BINS, MARGINALS, Marginals, marginal_counts

from neighbours import worst_changes
from test_dp_mixed import FRAME_BOUNDS, _frame

B = column_cells(MARGINAL_BINS)


def _fit(df, **kw):
    params = dict(epsilon=1.0, bounds=FRAME_BOUNDS, max_iter=8, random_state=0)
    params.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DPMixedMixture(3, **params).fit(df)


def _rainy(n, seed=0):
    """``delay``: 90 % exactly 0 (the box's lower edge), 3 % saturated at the top (6);
    ``distance``: integer codes 0 .. 9."""
    df = _frame(n, seed)
    rng = np.random.default_rng(seed + 10)
    u = rng.random(n)
    df["delay"] = np.where(u < 0.9, 0.0, np.where(u < 0.93, 6.0, rng.uniform(0, 6, n)))
    df["distance"] = rng.integers(0, 10, n)
    return df


RAINY_BOUNDS = {"delay": (0.0, 6.0), "distance": (0.0, 9.0)}


# ----------------------------------------------------------------------------- the cells
def test_cells_atoms_at_the_edges_bins_between_and_integers():
    cells = NumericCells([0.0, 0.0, -0.5], [6.0, 9.0, 200.0], MARGINAL_BINS, [False, True, True])
    assert list(cells.n_int) == [0, 10, 0]          # 201 integers in the third box: more than the cells
    A = np.array([[0.0, 0.0, -0.5], [-3.0, 3.4, 7.2], [6.0, 9.0, 200.0], [9.0, 12.0, 250.0], [3.0, 4.6, 0.0]])
    c, t = cells.cells(A)
    # column 0: 0 is the box's edge (no split): the atom at hi is cell bins + 1, two empty cells after
    assert list(c[:, 0]) == [0, 0, MARGINAL_BINS + 1, MARGINAL_BINS + 1, 1 + MARGINAL_BINS // 2]
    assert list(c[:, 1]) == [0, 3, 9, 9, 5] and np.all(t[:, 1] == 0.5)
    # column 2: 0 inside the box, in bin b0 = 0: [-0.5, 0) is cell 1, 0 exactly cell 2, (0, w) cell 3
    w2 = 200.5 / MARGINAL_BINS
    assert c[0, 2] == 0 and c[2, 2] == B - 1 and c[4, 2] == 2 and t[4, 2] == 0.5
    assert c[1, 2] == 3 + int((7.2 + 0.5) / w2)
    left, width = cells.values()
    assert left[0, 0] == 0.0 and width[0, 0] == 0.0 and left[0, MARGINAL_BINS + 1] == 6.0
    assert np.all(width[0, MARGINAL_BINS + 1:] == 0.0)
    assert np.all(width[0, 1:MARGINAL_BINS + 1] == 6.0 / MARGINAL_BINS)
    assert list(left[1, :10]) == list(range(10)) and np.all(width[1] == 0) and np.all(left[1, 10:] == 9)
    assert cells.structural()[1, 10:].all() and not cells.structural()[1, :10].any()
    assert cells.structural()[0, MARGINAL_BINS + 2:].all() and not cells.structural()[0, :MARGINAL_BINS + 2].any()
    assert not cells.structural()[2].any()
    assert (left[2, 1], width[2, 1], left[2, 2], width[2, 2], left[2, 3]) == (-0.5, 0.5, 0.0, 0.0, 0.0)
    assert np.isclose(width[2, 3], w2 - 0.5) and np.isclose(left[2, 4], w2 - 0.5) and left[2, -1] == 200.0


def test_every_value_lies_in_its_cell_and_cells_are_in_value_order():
    """For random boxes (0 inside, at an edge, outside; integer columns too) every value's cell
    holds it (``left + t * width`` is the value, clipped to the box) and the cells' ranges are
    in value order, so the released CDF over them is a CDF of the column."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        lo = rng.choice([-5.0, -0.3, 0.0, 1.0], 4) * rng.uniform(0.5, 3, 4)
        hi = lo + rng.uniform(0.5, 40, 4)
        cells = NumericCells(lo, hi, MARGINAL_BINS, rng.random(4) < 0.3)
        A = np.vstack([rng.uniform(lo - 1, hi + 1, (200, 4)), np.zeros((5, 4)), np.round(rng.uniform(lo, hi, (20, 4)))])
        c, t = cells.cells(A)
        left, width = cells.values()
        j = np.arange(4)
        v = np.clip(A, lo, hi)
        got = left[j, c] + t * width[j, c]
        exact = (width[j, c] == 0)
        binned = cells.n_int == 0
        assert np.allclose(got[:, binned], v[:, binned], rtol=0, atol=1e-9 * (hi - lo)[binned])
        assert not cells.structural()[j, c].any()
        for k in np.flatnonzero(binned):
            live = ~cells.structural()[k]
            ends = left[k, live] + width[k, live]
            assert np.all(np.diff(left[k, live]) >= -1e-12) and np.all(ends[:-1] <= left[k, live][1:] + 1e-9)
        zero_inside = binned & (lo < 0) & (hi > 0)
        rows0 = slice(200, 205)
        assert np.all(exact[rows0][:, zero_inside]) and np.all(got[rows0][:, zero_inside] == 0.0)


def test_interior_zeros_come_back_as_exact_zeros():
    """A column 60 % exactly 0 in the middle of a symmetric box (shuttle's sensor readings) is
    sampled with about 60 % exact zeros, with no integer declaration."""
    rng = np.random.default_rng(0)
    n = 4000
    x = np.where(rng.random(n) < 0.6, 0.0, rng.normal(0, 4, n)).clip(-20, 20)
    df = pd.DataFrame({"x": x, "y": rng.normal(size=n).clip(-4, 4)})
    for eps in (1.0, float("inf")):
        m = DPMixedMixture(2, epsilon=eps, bounds={"x": (-20, 20), "y": (-4, 4)}, random_state=0).fit(df)
        S = m.sample(20000, random_state=1)[0]
        assert abs(float(np.mean(S["x"] == 0.0)) - 0.6) < 0.05, eps
        # a column without zeros: none at eps = inf; at eps = 1 the atom's noise mass (one cell's)
        assert float(np.mean(S["y"] == 0.0)) <= (0.0 if eps == float("inf") else 0.01)


def test_the_marginals_sensitivity_with_atoms_and_integers_by_brute_force():
    """Atoms and integer cells: every row still adds 1 to exactly one cell of each column, so
    every neighbour moves the stacked counts by at most ℓ2 √D (add/remove), √(2D) (replace),
    attained; the spec is the histograms' with 68 cells a numeric column."""
    m = DPMixedMixture(2, bounds=(-4, 4), categories={"x1": 3})
    lay = m._lay(4)
    assert m._marginal_specs(4)[0] == column_histograms(MARGINALS, 4, 3 * B + 4)
    cells = NumericCells(np.array([-4.0, 0.0, -4.0]), np.array([4.0, 9.0, 4.0]), MARGINAL_BINS, [False, True, False])
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.choice([-4.0, 4.0, 0.3], 40), rng.integers(-1, 3, 40), rng.integers(-2, 12, 40),
                         rng.normal(size=40) * 3]).astype(float)
    cand = np.column_stack([rng.choice([-9.0, -4.0, 4.0, 9.0, 0.1], 8), rng.integers(-2, 4, 8),
                            rng.choice([-3.0, 0.0, 4.4, 9.0, 20.0], 8), rng.uniform(-9, 9, 8)])
    count = lambda A: marginal_counts(tuple(lay.num_cols), cells, tuple(lay.cat_cols), tuple(lay.n_categories), A)
    assert count(X).sum() == 4 * X.shape[0]
    worst = worst_changes(count, X, cand)
    assert worst["add_remove"][0] == pytest.approx(2.0) and worst["replace"][0] == pytest.approx(math.sqrt(8.0))
    assert worst["add_remove"][1] == 4.0 and worst["replace"][1] == 8.0


@pytest.mark.parametrize("rel", ["replace", "add_remove"])
def test_integer_cells_leave_the_release_noise_unchanged(rel):
    """Declaring a column an integer dtype changes its cells, not the release: the same
    sensitivity and noise scale as the binned column's."""
    df = _rainy(3000)
    a = _fit(df, bounds=RAINY_BOUNDS, neighbouring=rel)
    b = _fit(df, bounds=RAINY_BOUNDS, neighbouring=rel, dtypes={"distance": "int64"})
    ra, rb = a.privacy_.releases[MARGINALS], b.privacy_.releases[MARGINALS]
    assert ra.noise_scale == rb.noise_scale and ra.sensitivity == rb.sensitivity == pytest.approx(
        math.sqrt(4 if rel == "add_remove" else 8))
    assert a.marginal_cdf_.shape == b.marginal_cdf_.shape == (2, B + 1)
    assert np.all(b.marginal_cdf_[1, 10:] == 1.0)       # the structurally empty integer cells


# ----------------------------------------------------------------------- sampled atoms
@pytest.mark.parametrize("eps", [1.0, np.inf])
def test_a_column_of_ninety_percent_zeros_comes_back_with_ninety_percent_exact_zeros(eps):
    df = _rainy(20000)
    m = _fit(df, bounds=RAINY_BOUNDS, epsilon=eps, dtypes={"distance": "int64"})
    S, _ = m.sample(50000, random_state=1)
    zeros, top = (S["delay"] == 0.0).mean(), (S["delay"] == 6.0).mean()
    assert abs(zeros - 0.9) < 0.02 and abs(top - 0.03) < 0.01
    inner = S["delay"][(S["delay"] > 0) & (S["delay"] < 6)]
    assert abs(len(inner) / len(S) - 0.07) < 0.02 and inner.nunique() > 100      # a density, not atoms
    real = np.bincount(df["distance"], minlength=10) / len(df)
    got = np.bincount(S["distance"], minlength=10) / len(S)
    assert 0.5 * np.abs(real - got).sum() < 0.03 and S["distance"].between(0, 9).all()


def test_the_copula_maps_an_atom_to_its_mid_rank():
    from scipy.special import ndtri
    lay = MixedLayout((0,), (), ())
    cells = NumericCells([0.0], [6.0], MARGINAL_BINS)
    A = np.concatenate([np.zeros(900), np.linspace(0.5, 5.5, 100)])[:, None]
    m = Marginals.from_counts(marginal_counts((0,), cells, (), (), A), lay, cells)
    assert m.cdf[0, 1] == pytest.approx(0.9)
    assert m.to_z(np.zeros((1, 1)))[0, 0] == pytest.approx(ndtri(0.45))
    assert np.all(m.from_u(np.array([[0.0], [0.3], [0.8999]])) == 0.0)


def test_atoms_are_thread_count_invariant():
    df = _rainy(4000)
    a = _fit(df, bounds=RAINY_BOUNDS, n_threads=1, dtypes={"distance": "int64"})
    b = _fit(df, bounds=RAINY_BOUNDS, n_threads=2, dtypes={"distance": "int64"})
    for k in ("weights_", "means_", "covariances_", "marginal_cdf_"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    pd.testing.assert_frame_equal(a.sample(5000, random_state=0)[0], b.sample(5000, random_state=0)[0])


# ----------------------------------------------------------------- the resampled pool
def test_systematic_resampling_keeps_each_rows_share_and_flags_its_copies():
    rng = np.random.default_rng(0)
    w = rng.random(1000) ** 4
    for n in (700, 1000, 50000):
        pick, copies = _systematic(w, n, np.random.default_rng(1))
        counts = np.bincount(pick, minlength=w.size)
        share = n * w / w.sum()
        assert np.all(counts >= np.floor(share) - 1e-9) and np.all(counts <= np.ceil(share) + 1e-9)
        assert copies.sum() == n - np.count_nonzero(counts)      # all but one copy of each row drawn


def test_a_sample_beyond_the_pool_has_no_repeated_rows_and_the_released_marginals():
    df = _frame(4000)
    m = _fit(df, calibrate="pairs")
    n = 3 * POOL_MIN
    S, y = m.sample(n, random_state=2)
    assert len(S) == n and y.shape == (n,)
    assert S[["delay", "distance"]].duplicated().mean() < 0.001      # copies re-drawn within their cells
    cells = NumericCells(m.bounds_[0], m.bounds_[1], MARGINAL_BINS)
    got = cells.cells(S[["delay", "distance"]].to_numpy(float))[0]
    for j in range(2):
        q = np.bincount(got[:, j], minlength=B) / n
        assert 0.5 * np.abs(np.diff(m.marginal_cdf_[j]) - q).sum() < 0.05
    T, _ = m.sample(n, random_state=2)
    pd.testing.assert_frame_equal(S, T)


# ------------------------------------------------------------------------------ dtypes
@pytest.mark.parametrize("kind", ["default", "object", "string", "category"])
def test_a_text_column_comes_back_in_its_text_dtype(kind):
    df = _frame(2000)
    labels = ["AA", "B6", "UA"]
    col = np.asarray(df["carrier"].astype(str))
    default = pd.Series(["a"]).dtype           # object before pandas 3, "str" from it
    made = {"default": pd.Series(list(col)), "object": pd.Series(list(col), dtype=object),
            "string": pd.Series(list(col), dtype="string"),
            "category": pd.Series(pd.Categorical(col, categories=labels))}[kind]
    df["carrier"] = made
    m = _fit(df, categories={"carrier": labels})
    S, _ = m.sample(500, random_state=0)
    want = {"default": default, "object": default, "string": pd.StringDtype("python"),
            "category": pd.CategoricalDtype(labels)}[kind]
    assert S["carrier"].dtype == want and set(S["carrier"]) <= set(labels)
    M, _ = m.sample(20000, other="missing", random_state=0)
    assert M["carrier"].dtype == want
    assert m.dtypes_[1] == str(want) if kind != "string" else m.dtypes_[1] == "string[python]"
