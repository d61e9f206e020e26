"""dpem_fast.synth_report: closed-form distances, the train-on-synthetic score, the public grid
of a fitted model, errors, and its figure."""
import numpy as np
import pandas as pd
import pytest

from dpem_fast import DPMixedMixture, plotting, synth_report
from dpem_fast.synth import table_grid
from sklearn.tree import DecisionTreeClassifier

TREE = DecisionTreeClassifier(max_depth=6, random_state=0)     # fast and deterministic on a busy machine


def _df(n, seed=0, flip=False):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, n)
    x = rng.normal(size=n) + 3 * z
    return pd.DataFrame({"x": x, "y": 2 * x + rng.normal(size=n), "c": np.where(z ^ flip, "b", "a")})


GRID = {"x": np.linspace(-4, 7, 12), "y": np.linspace(-10, 18, 15), "c": ["a", "b"]}


def test_identical_tables_score_zero_and_disjoint_ones_one():
    df = _df(2000)
    r = synth_report(df, df, grid=GRID)
    assert r.mean_column_tvd == 0.0 and r.max_pair_tvd == 0.0 and r.corr_error == 0.0
    far = df.assign(c="z", x=100.0)
    r = synth_report(df, far, grid=GRID)
    assert r.column_tvd["c"] == 1.0 and r.pair_tvd[("x", "c")] == 1.0
    assert r.column_tvd["y"] == 0.0 and not r.private


def test_tvd_and_correlation_error_by_hand():
    real = pd.DataFrame({"c": ["a", "a", "b", "b"], "x": [0.5, 1.5, 0.5, 1.5], "y": [0.0, 1.0, 2.0, 3.0]})
    syn = pd.DataFrame({"c": ["a", "b", "b", "q"], "x": [0.5, 0.5, 0.5, 9.0], "y": [3.0, 2.0, 1.0, 0.0]})
    grid = {"c": ["a", "b"], "x": np.array([0.0, 1.0, 2.0]), "y": np.array([-1.0, 1.5, 4.0])}
    r = synth_report(real, syn, grid=grid)
    # c: real (a .5, b .5, other 0), synthetic (.25, .5, .25) -> 0.25; x: (.5, .5) vs (.75, .25) -> .25
    assert r.column_tvd == pytest.approx({"c": 0.25, "x": 0.25, "y": 0.0})
    # (c, x) cells: real a0 a1 b0 b1 a quarter each; synthetic a0, b0 twice, other-1
    assert r.pair_tvd[("c", "x")] == pytest.approx(0.5)
    want = abs(np.corrcoef(real.x, real.y)[0, 1] - np.corrcoef(syn.x, syn.y)[0, 1])
    assert r.corr_error == pytest.approx(want)


def test_train_on_synthetic_test_on_real():
    real, train = _df(3000, 1), _df(3000, 2)
    good = synth_report(real, train, target="c", grid=GRID, real_train=train, classifier=TREE)
    assert good.tstr_accuracy > 0.9 and good.tstr_accuracy == good.trtr_accuracy
    bad = synth_report(real, _df(3000, 3, flip=True), target="c", grid=GRID, classifier=TREE)
    assert bad.tstr_accuracy < 0.1 < 0.4 < bad.majority_accuracy
    assert "NOT private" in str(good)


def test_the_grid_of_a_fitted_model_is_its_public_box_and_categories():
    df = _df(5000)
    m = DPMixedMixture(2, epsilon=2.0, bounds={"x": (-4, 7), "y": (-10, 18)}, categories={"c": ["a", "b"]},
                       random_state=0).fit(df)
    g = table_grid(m, bins=16)
    assert np.allclose(g["x"], np.linspace(-4, 7, 17)) and g["c"] == ["a", "b"]
    S, _ = m.sample(5000, other="drop", random_state=0)
    r = synth_report(df, S, target="c", grid=m, classifier=TREE, baseline_epsilon=2.0, real_train=df)
    # two Gaussian blobs: the marginals-first default (issue 37) is a little behind the plain
    # mixture here (0.152 vs 0.139 at this seed: a third of the budget goes to the marginals),
    # and far ahead of the trivial synthesizer of the same budget
    assert r.mean_pair_tvd < 0.2 and r.tstr_accuracy > 0.85
    assert r.mean_pair_tvd < 0.5 * r.baseline.mean_pair_tvd


@pytest.mark.parametrize("kw, exc, match", [
    (dict(synthetic=np.zeros((3, 3))), TypeError, "DataFrames"),
    (dict(synthetic=pd.DataFrame({"x": [1.0]})), ValueError, "columns"),
    (dict(target="nope"), ValueError, "target"),
    (dict(grid={"x": np.linspace(0, 1, 3)}), ValueError, "no cells"),
    (dict(grid={**GRID, "x": np.array([1.0, 0.0])}), ValueError, "increasing"),
])
def test_bad_input_is_refused(kw, exc, match):
    df = _df(50)
    args = dict(real_holdout=df, synthetic=df, grid=GRID)
    args.update(kw)
    with pytest.raises(exc, match=match):
        synth_report(**args)


def test_the_fidelity_figure(tmp_path):
    pytest.importorskip("matplotlib")
    df = _df(500)
    fig = plotting.synth_fidelity(synth_report(df, _df(500, 5), grid=GRID))
    path = tmp_path / "f.png"
    fig.savefig(path, dpi=40)
    assert path.stat().st_size > 1000 and len(fig.axes) >= 3
