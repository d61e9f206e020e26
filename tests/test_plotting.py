"""dpem_fast.plotting: each figure rendered to PNG with Agg, its size and contents checked."""
import csv
import struct

import numpy as np
import pytest
from numpy.testing import assert_allclose

import dpem_fast
from dpem_fast import plotting

pytest.importorskip("matplotlib")
from matplotlib.patches import Ellipse  # noqa: E402


def _png_size(path):
    """(width, height) from the PNG signature and IHDR chunk."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def _render(fig, path, dpi=50):
    fig.savefig(path, dpi=dpi)
    w, h = fig.get_size_inches()
    assert _png_size(path) == (round(w * dpi), round(h * dpi))
    assert path.stat().st_size > 1000


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(-2, 0.4, (200, 2)), rng.normal(2, 0.4, (200, 2)), rng.normal([2, -2], 0.4, (200, 2))])


def test_privacy_utility_reads_a_benchmark_csv(tmp_path):
    # the columns bench/dpem_figures.py writes
    path = tmp_path / "dpem_figures_shuttle.csv"
    rows = [dict(split=s, scenario="none", accountant="non-private", epsilon=float("inf"), test_ll=-1.0 - s)
            for s in range(2)]
    for s in range(2):
        for acct in ("gdp", "zcdp"):
            for eps in (0.5, 1.0, 2.0):
                rows.append(dict(split=s, scenario="GGG", accountant=acct, epsilon=eps,
                                 test_ll=-3.0 + eps + s + (acct == "gdp")))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    fig = plotting.privacy_utility(path, title="shuttle")
    _render(fig, tmp_path / "pu.png")
    ax = fig.axes[0]
    curves = {c.get_label(): c for c in ax.containers}           # errorbar containers
    assert set(curves) == {"GGG, gdp", "GGG, zcdp"}
    xs, ys = (np.asarray(v, dtype=float) for v in curves["GGG, gdp"].lines[0].get_data())
    assert_allclose(xs, [0.5, 1.0, 2.0])
    assert_allclose(ys, [-3.0 + e + 0.5 + 1 for e in (0.5, 1.0, 2.0)])   # mean over the two splits
    base = [line for line in ax.get_lines() if line.get_label() == "none, non-private (no privacy)"]
    assert len(base) == 1 and _ydata(base[0]) == -1.5
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "test_ll"
    # the same from a list of dicts, filtered
    fig = plotting.privacy_utility(rows, group="accountant", where={"split": 1})
    assert {c.get_label() for c in fig.axes[0].containers} == {"gdp", "zcdp"}


def _ydata(line):
    return float(np.unique(line.get_ydata())[0])


@pytest.mark.parametrize("kwargs, cause", [
    (dict(y="nope"), "no column 'nope'"),
    (dict(group=["dataset"]), "group: no column 'dataset'"),
    (dict(where={"split": 7}), "keeps no rows"),
])
def test_privacy_utility_bad_input(kwargs, cause):
    rows = [dict(split=0, method="a", epsilon=1.0, test_ll=-1.0)]
    with pytest.raises(ValueError, match=cause):
        plotting.privacy_utility(rows, **kwargs)
    with pytest.raises(ValueError, match="no such file"):
        plotting.privacy_utility("/nonexistent/x.csv")
    with pytest.raises(TypeError, match="data must be"):
        plotting.privacy_utility(3)


def test_mixture_ellipses(X, tmp_path):
    g = dpem_fast.DPGaussianMixture(3, epsilon=4.0, bounds=(-4, 4), max_iter=5, random_state=0).fit(X)
    fig = plotting.mixture_ellipses(g, X=X, figsize=(4, 4))
    _render(fig, tmp_path / "mix.png")
    ellipses = [p for p in fig.axes[0].patches if isinstance(p, Ellipse)]
    assert len(ellipses) == g.n_components
    for e, m, c in zip(ellipses, g.means_, g.covariances_):
        assert_allclose(e.center, m)
        vals = np.linalg.eigvalsh(c)
        assert_allclose(sorted([e.width, e.height]), 4.0 * np.sqrt(vals), rtol=1e-10)
    assert len(fig.axes[0].collections) == 1                     # the scatter of X, passed explicitly
    assert len(plotting.mixture_ellipses(g).axes[0].collections) == 0   # no data unless given


def test_mixture_ellipses_bad_input(X):
    with pytest.raises(ValueError, match="not a fitted"):
        plotting.mixture_ellipses(dpem_fast.DPGaussianMixture(2))
    X3 = np.column_stack([X, X[:, 0]])
    g3 = dpem_fast.DPGaussianMixture(2, epsilon=1.0, bounds=(-4, 4), max_iter=2, random_state=0).fit(X3)
    with pytest.raises(ValueError, match="2-D mixtures"):
        plotting.mixture_ellipses(g3)
    g = dpem_fast.DPGaussianMixture(2, epsilon=1.0, bounds=(-4, 4), max_iter=2, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"X must have shape \(n_samples, 2\)"):
        plotting.mixture_ellipses(g, X=X3)


def test_loadings_grid_on_factor_analysis_of_digits(tmp_path):
    from sklearn.datasets import load_digits

    D = load_digits().data            # all 1,797 rows: at 400 no loading stands above the noise
    fa = dpem_fast.DPFactorAnalysis(5, epsilon=4.0, bounds=(0, 16), random_state=0).fit(D)
    assert fa.n_resolved_ >= 1
    fig = plotting.loadings_grid(fa, (8, 8))
    _render(fig, tmp_path / "fa.png")
    assert len(fig.axes) == 5
    for k, ax in enumerate(fig.axes):
        assert ax.get_title() == f"factor {k}"
        img = ax.get_images()[0]
        assert_allclose(img.get_array(), fa.components_[k].reshape(8, 8))
        lo, hi = img.get_clim()
        assert lo == -hi == -np.abs(fa.components_[k]).max()
    assert len(plotting.loadings_grid(fa.components_[:3], (8, 8), n_cols=1).axes) == 3
    with pytest.raises(ValueError, match="has 63 pixels"):
        plotting.loadings_grid(fa.components_, (7, 9))
    with pytest.raises(TypeError, match="is it fitted"):
        plotting.loadings_grid(dpem_fast.DPFactorAnalysis(2), (8, 8))
    with pytest.raises(ValueError, match="2-D array"):
        plotting.loadings_grid(np.ones(64), (8, 8))


@pytest.mark.filterwarnings("ignore:.*noise-dominated:UserWarning")   # 200 documents: the fit says so
def test_top_words_in_the_order_of_components(tmp_path, reuters):
    counts, vocab = reuters
    counts = counts[:200]
    m = dpem_fast.DPLatentDirichletAllocation(4, noise_multiplier=1.0, batch_size=50, max_doc_length=100,
                                              total_samples=counts.shape[0],
                                              vocabulary=vocab, random_state=0).fit(counts)
    fig = plotting.top_words(m, n_words=6)
    _render(fig, tmp_path / "topics.png")
    assert len(fig.axes) == 4
    for k, ax in enumerate(fig.axes):
        order = sorted(range(len(vocab)), key=lambda j: (-m.components_[k, j], j))[:6]
        labels = sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])   # top of the axes first
        assert [t.get_text() for t in labels] == [vocab[j] for j in order]
        assert ax.get_title() == f"topic {k}"
    assert len(plotting.top_words(m, vocab, 3, topics=[2]).axes) == 1
    with pytest.raises(ValueError, match="vocabulary has 3 words"):
        plotting.top_words(m, ["a", "b", "c"])
    with pytest.raises(ValueError, match="not a fitted topic model"):
        plotting.top_words(dpem_fast.DPLatentDirichletAllocation(2), vocab)
    with pytest.raises(ValueError, match="topics must be"):
        plotting.top_words(m, topics=[9])


def test_missing_matplotlib_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"dpem_fast\[plot\]"):
        plotting.loadings_grid(np.ones((1, 4)), (2, 2))
