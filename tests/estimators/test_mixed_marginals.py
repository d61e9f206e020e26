"""DPMixedMixture's marginals first (issue 37): the sample contract, the marginals' one-off
release (its sensitivity by brute force, its place in the plan and the record), the copula's
round trip, and the trivial synthesizer of synth_report."""
import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from dpem_fast import DPMixedMixture, synth_report
from dpem_fast._engine._specs import column_histograms
from dpem_fast.mixture._atoms import NumericCells, column_cells
from dpem_fast.mixture._marginals import MARGINAL_BINS, MARGINALS, U_CLIP, Z_MAX, Marginals, marginal_counts
from dpem_fast.synth import independent_baseline

from neighbours import worst_changes
from test_dp_mixed import FRAME_BOUNDS, _frame

CATS = ["AA", "B6", "UA"]


def _model(**kw):
    params = dict(epsilon=1.0, bounds=FRAME_BOUNDS, max_iter=6, random_state=0)
    params.update(kw)
    return DPMixedMixture(3, **params)


def _fit(df, groups=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _model(**kw).fit(df, groups=groups)


# ----------------------------------------------------------------------- the sample contract
@pytest.mark.parametrize("eps", [0.3, np.inf])
@pytest.mark.parametrize("marginals", ["auto", None])
def test_sample_holds_declared_categories_only_no_missing_and_declared_dtypes(eps, marginals):
    df = _frame(3000)
    m = _fit(df, epsilon=eps, marginals=marginals, dtypes={"distance": "int64"})
    S, _ = m.sample(20000, random_state=3)
    assert not S.isna().any().any()
    assert set(S["carrier"].unique()) <= set(CATS) and set(S["night"].unique()) <= {False, True}
    assert [str(t) for t in S.dtypes] == list(m.dtypes_) == ["float64", "category", "int64", "category"]
    assert list(S["carrier"].cat.categories) == CATS
    assert S["delay"].between(-6, 6).all() and S["distance"].between(0, 1200).all()
    M, _ = m.sample(20000, other="missing", random_state=3)      # the explicit opt-in to the "other" slot
    assert set(M["carrier"].dropna().unique()) <= set(CATS)


# --------------------------------------------------------------------- the one-off release
def _layout_counts(X, lay, lo, hi):
    return marginal_counts(tuple(lay.num_cols), NumericCells(lo, hi, MARGINAL_BINS), tuple(lay.cat_cols),
                           tuple(lay.n_categories), X)


def test_the_marginals_sensitivity_by_brute_force_over_neighbours():
    """Every neighbour of a table (one row removed, one row replaced, by rows anywhere and beyond
    the box) moves the stacked histograms by at most the declared ℓ2 and ℓ1, and the worst case
    attains them."""
    m = DPMixedMixture(2, bounds=(-4, 4), categories={"x1": 3, "x3": 2})
    lay = m._lay(4)
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=60), rng.integers(-1, 3, 60), rng.normal(size=60) * 3,
                         rng.integers(0, 2, 60)]).astype(float)
    lo, hi = np.full(2, -4.0), np.full(2, 4.0)
    spec = m._marginal_specs(4)[0]
    assert spec == column_histograms(MARGINALS, 4, 2 * column_cells(MARGINAL_BINS) + 4 + 3)
    cand = np.column_stack([rng.uniform(-9, 9, 40), rng.integers(-2, 4, 40), rng.uniform(-9, 9, 40),
                            rng.choice([0.0, 1.0, 2.5, np.nan], 40)])
    worst = worst_changes(lambda A: _layout_counts(A, lay, lo, hi), X, cand[:8])
    for rel, (l2, l1) in worst.items():
        assert l2 <= spec.sensitivity("l2", rel) * (1 + 1e-12) and l1 <= spec.sensitivity("l1", rel)
        assert l2 == pytest.approx(spec.sensitivity("l2", rel)) and l1 == spec.sensitivity("l1", rel)
    assert spec.sensitivity("l2", "add_remove") == 2.0 and spec.sensitivity("l2", "replace") == math.sqrt(8.0)


@pytest.mark.parametrize("rel", ["replace", "add_remove"])
def test_the_marginals_are_one_release_of_the_fits_plan_and_record(rel):
    df = _frame(2000)
    m = _fit(df, neighbouring=rel)
    r = m.privacy_.releases[MARGINALS]
    D = 4
    assert r.count == 1 and r.sensitivity == pytest.approx(math.sqrt(D if rel == "add_remove" else 2 * D))
    assert m.privacy_.epsilon_spent <= 1.0 * (1 + 1e-9)
    assert m.marginal_cdf_.shape == (2, column_cells(MARGINAL_BINS) + 1) and np.all(np.diff(m.marginal_cdf_, axis=1) >= 0)
    g = np.arange(len(df)) // 4
    p = _fit(df, groups=g, neighbouring=rel, max_rows_per_group=3)
    # person level: the engine's group rule, m times the row level's
    assert p.privacy_.releases[MARGINALS].sensitivity == pytest.approx(3 * r.sensitivity)
    off = _fit(df, neighbouring=rel, marginals=None)
    assert MARGINALS not in off.privacy_.releases and off.marginal_cdf_ is None


def test_marginals_with_a_private_box_and_a_private_start_share_one_plan():
    df = _frame(6000)
    m = _fit(df, bounds=None, means_init="private", epsilon=3.0)
    names = set(m.privacy_.releases)
    assert {MARGINALS, "domain_scale", "start_counts", "start_sums"} <= names
    assert m.privacy_.epsilon_spent <= 3.0 * (1 + 1e-9)
    assert np.all(m.bounds_[0] < m.bounds_[1]) and np.all(np.isfinite(m.bounds_))


def test_copula_z_values_lie_in_the_public_box_and_invert_to_the_bin():
    lo, hi = np.array([0.0, -1.0]), np.array([10.0, 1.0])
    rng = np.random.default_rng(1)
    A = np.column_stack([rng.exponential(2.0, 5000), rng.uniform(-1, 1, 5000)])
    from dpem_fast._kernels.mixed import MixedLayout
    lay = MixedLayout((0, 1), (), ())
    marg = Marginals.from_counts(_layout_counts(A, lay, lo, hi), lay, NumericCells(lo, hi, MARGINAL_BINS))
    Z = marg.to_z(np.vstack([A, [[-5.0, 3.0], [50.0, -3.0]]]))
    assert np.all(np.abs(Z) <= Z_MAX + 1e-12)
    from scipy.special import ndtr
    back = marg.from_u(ndtr(marg.to_z(A)))
    w = (hi - lo) / MARGINAL_BINS
    same = np.abs(back - np.clip(A, lo, hi)) <= w + 1e-9     # the same bin, but for the clipped tails (α each)
    assert same.all(axis=1).mean() >= 1 - 4 * U_CLIP


def test_at_epsilon_inf_each_sampled_column_has_the_exact_marginal():
    """1-way TVD of the synthetic columns against the (exact) released histograms, on the
    marginals' own bins: sampling error only, whatever the mixture learned of the column."""
    df = _frame(20000)
    df["delay"] = np.where(np.random.default_rng(4).random(len(df)) < 0.6, 0.0, df["delay"])    # a point mass
    m = _fit(df, epsilon=np.inf, max_iter=10, calibrate=None)     # raking towards pairs trades a little of it
    S, _ = m.sample(100000, random_state=5)
    cells = NumericCells(m.bounds_[0], m.bounds_[1], MARGINAL_BINS)       # the atoms, then 64 bins
    B = cells.n_cells
    for j, c in enumerate(["delay", "distance"]):
        p = np.diff(m.marginal_cdf_[j])
        q = np.bincount(cells.cells(S[["delay", "distance"]].to_numpy(float))[0][:, j], minlength=B) / len(S)
        assert 0.5 * np.abs(p - q).sum() < 0.02
        real = np.bincount(cells.cells(df[["delay", "distance"]].to_numpy(float))[0][:, j], minlength=B) / len(df)
        assert 0.5 * np.abs(p - real).sum() < 1e-12
    share = S["carrier"].value_counts(normalize=True).reindex(CATS).to_numpy()
    real = df["carrier"].value_counts(normalize=True).reindex(CATS).to_numpy()
    assert np.abs(share - real).max() < 0.01     # the categories raked to their marginal


def test_marginals_beat_the_plain_mixture_on_a_point_mass():
    """A column with 60 % zeros: the copula's sample keeps the point mass; 2-way TVD below the
    plain mixture's and the trivial synthesizer's."""
    df = _frame(20000)
    rng = np.random.default_rng(6)
    df["delay"] = np.where(rng.random(len(df)) < 0.6, 0.0, df["delay"])
    train, hold = df.iloc[:15000], df.iloc[15000:]
    grid = {"delay": np.linspace(-6, 6, 17), "carrier": CATS, "distance": np.linspace(0, 1200, 17),
            "night": [False, True]}
    on = _fit(train, max_iter=15, epsilon=1.0, neighbouring="add_remove")
    off = _fit(train, max_iter=15, epsilon=1.0, neighbouring="add_remove", marginals=None)
    r_on = synth_report(hold, on.sample(15000, random_state=0)[0], grid=grid, real_train=train, baseline_epsilon=1.0)
    r_off = synth_report(hold, off.sample(15000, random_state=0)[0], grid=grid)
    assert r_on.mean_pair_tvd < r_off.mean_pair_tvd
    assert r_on.mean_pair_tvd < r_on.baseline.mean_pair_tvd
    assert r_on.summary()["baseline_pair_tvd"] == r_on.baseline.mean_pair_tvd


def test_the_trivial_synthesizer_is_independent_and_warns_when_not_beaten():
    df = _frame(8000)
    grid = {"delay": np.linspace(-6, 6, 17), "carrier": CATS, "distance": np.linspace(0, 1200, 17),
            "night": [False, True]}
    B = independent_baseline(df, grid, epsilon=100.0, n_samples=8000)
    assert list(B.columns) == list(df.columns) and not B.isna().any().any()
    r = synth_report(df, B, grid=grid)
    assert r.mean_column_tvd < 0.03                      # the 1-way histograms, nearly exact at epsilon 100
    assert abs(r.corr_synthetic[0, 1]) < 0.05            # and nothing of the dependence
    with pytest.warns(UserWarning, match="not below the trivial synthesizer"):
        synth_report(df, B.sample(frac=1.0, random_state=1), grid=grid, real_train=df, baseline_epsilon=100.0)
    with pytest.raises(ValueError, match="real_train"):
        synth_report(df, B, grid=grid, baseline_epsilon=1.0)


@pytest.mark.parametrize("value, match", [("yes", "marginals must be"), ("copula", "needs a box")])
def test_bad_marginals_are_refused_before_the_charge(value, match):
    X = _frame(200)
    with pytest.raises(ValueError, match=match):
        DPMixedMixture(2, bounds=None, data_norm=2000.0, marginals=value).fit(X)


def test_data_norm_alone_fits_the_plain_mixture_under_auto():
    X = _frame(500)
    m = _fit(X, bounds=None, data_norm=2000.0)
    assert MARGINALS not in m.privacy_.releases and m.marginal_cdf_ is None


def test_the_copula_fit_is_reproducible_and_thread_invariant():
    df = _frame(3000)
    a, b = _fit(df, n_threads=1), _fit(df, n_threads=2)
    for k in ("weights_", "means_", "covariances_", "marginal_cdf_"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    pd.testing.assert_frame_equal(a.sample(100, random_state=0)[0], b.sample(100, random_state=0)[0])
    for x, y in itertools.combinations([a.category_probs_[0], b.category_probs_[0]], 2):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------- the privacy report
@pytest.mark.parametrize("name", ["gmm", "bernoulli", "poisson", "mixed"])
def test_the_privacy_report_names_the_live_components(name):
    """A mixture's privacy report says how many components the released model kept
    (``n_components_``, post-processing of the released counts) of the K it fitted; an
    over-provisioned fit at a small epsilon drops some, and the report says so.  The count is
    not left on the model (it is part of the record only)."""
    from examples import EXAMPLES

    factory, data = EXAMPLES[name]
    X = data()
    for K, eps in ((2, 1.0), (12, 1.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = factory(n_components=K, epsilon=eps, neighbouring="add_remove").fit(X)
        text = str(m.privacy_)
        assert f"n_components_ = {m.n_components_} live of {K} " in text
        assert "_n_live" not in vars(m)
    assert m.n_components_ < 12     # the over-provisioned fit dropped components, and its report says so
