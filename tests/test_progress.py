"""``verbose=1``: a progress bar on stderr with public values only; ``verbose=0``: silent."""
import re
import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import dpem_fast
from dpem_fast import accounting as acc
from dpem_fast import _progress
from dpem_fast._engine import StatSpec, domain_specs, make_plan
from dpem_fast._progress import plan_spent, truncated_event


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(-2, 0.5, (150, 2)), rng.normal(2, 0.5, (150, 2))])


@pytest.fixture(scope="module")
def docs():
    rng = np.random.default_rng(1)
    return rng.poisson(0.3, size=(120, 40)).astype(float)


def _fits(X, docs, verbose):
    return {
        "gmm": dpem_fast.DPGaussianMixture(2, epsilon=20.0, bounds=(-4, 4), max_iter=5, random_state=3,
                                           verbose=verbose).fit(X),
        "kmeans": dpem_fast.DPKMeans(2, epsilon=50.0, max_iter=4, random_state=3, verbose=verbose).fit(X),
        "sep": dpem_fast.DPStochasticEP(2, epsilon=1.0, n_epochs=3, random_state=3, verbose=verbose).fit(X),
        "lda": dpem_fast.DPLatentDirichletAllocation(3, noise_multiplier=2.0, batch_size=30, max_doc_length=20,
                                                     total_samples=docs.shape[0],
                                                     vocabulary=[f"w{i}" for i in range(40)], random_state=3,
                                                     verbose=verbose).fit(docs),
    }


_ATTR = {"gmm": "means_", "kmeans": "cluster_centers_", "sep": "means_", "lda": "components_"}
_TOTAL = {"gmm": "5/5", "kmeans": "4/4", "sep": "3/3", "lda": "4/4"}


def test_verbose_bar_reaches_the_end_with_the_spent_epsilon_and_changes_nothing(X, docs, capsys):
    pytest.importorskip("tqdm")
    quiet = _fits(X, docs, 0)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""          # verbose=0: completely silent
    loud = _fits(X, docs, 1)
    err = capsys.readouterr().err
    for name, model in loud.items():
        assert_array_equal(getattr(model, _ATTR[name]), getattr(quiet[name], _ATTR[name]))
        final = [line for line in re.split(r"[\r\n]", err) if line.startswith(type(model).__name__)][-1]
        assert _TOTAL[name] in final
        assert f"eps={model.privacy_.epsilon_spent:.4g} (delta=1e-05)" in final, final
        assert re.search(r"last=[0-9.e-]+s", final)
    assert "eps=1 (delta=1e-05)" in err               # the target of the calibrated fits


def test_without_tqdm_plain_lines_on_stderr(X, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)      # import tqdm -> ImportError
    monkeypatch.setattr(_progress, "REFRESH_SECONDS", 0.0)          # a line per iteration
    monkeypatch.setattr(_progress, "EPSILON_OVERHEAD", 1e12)        # epsilon recomputed every time
    model = dpem_fast.DPKMeans(2, epsilon=50.0, max_iter=4, random_state=3, verbose=1).fit(X)
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert [line.split(",")[0] for line in lines] == [f"DPKMeans: iteration {t}/4" for t in range(1, 5)]
    assert lines[-1].endswith(f"eps={model.privacy_.epsilon_spent:.4g} (delta=1e-05)")
    spent = [float(re.search(r"eps=([0-9.e+-]+)", line).group(1)) for line in lines]
    assert spent == sorted(spent) and spent[0] < spent[-1]


def test_progress_shows_nothing_computed_from_the_data(X, capsys, monkeypatch):
    """The same fit on two different data sets prints the same text, timings aside."""
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr(_progress, "REFRESH_SECONDS", 0.0)          # a line per iteration
    monkeypatch.setattr(_progress, "EPSILON_OVERHEAD", 1e12)        # epsilon recomputed every time
    texts = []
    for data in (X, 3.0 * X[::-1] + 1.0):
        dpem_fast.DPGaussianMixture(2, epsilon=20.0, bounds=(-8, 8), max_iter=3, random_state=3,
                                    verbose=1).fit(data)
        texts.append(re.sub(r"last [0-9.e+-]+s", "last Ts", capsys.readouterr().err))
    assert texts[0] == texts[1] and texts[0].count("\n") == 3


def test_epsilon_after_t_rounds_is_the_truncated_plan():
    specs = [StatSpec("a", (3,), {"add_remove": 1.0, "replace": 2.0})]
    J, delta = 6, 1e-5
    plan = make_plan(specs, J, epsilon=1.0, delta=delta, neighbouring="replace", accountant="zcdp",
                     one_off_specs=domain_specs(3), one_off_share=0.1)
    spent = plan_spent(plan, J, delta)
    eps = [spent(t) for t in range(J + 1)]
    assert eps[J] == plan.epsilon_spent
    assert all(a < b for a, b in zip(eps, eps[1:]))
    assert eps[0] > 0                                   # the one-off domain estimate comes first
    z = plan.releases["a"].noise_multiplier
    one_offs = [r.event() for name, r in plan.releases.items() if name != "a"]
    manual = acc.NeighbouringEvent("replace", acc.ComposedEvent(
        [*one_offs, acc.SelfComposedEvent(acc.ComposedEvent([acc.GaussianEvent(z)]), 2)]))
    assert spent(2) == pytest.approx(acc.get_accountant("zcdp", "replace")().compose(manual).get_epsilon(delta),
                                     rel=1e-12)
    assert truncated_event(acc.GaussianEvent(1.0), J, 3) == acc.GaussianEvent(1.0)


def test_non_private_fit_says_so(X, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    dpem_fast.DPGaussianMixture(2, epsilon=np.inf, max_iter=2, random_state=0, verbose=1).fit(X)
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("DPGaussianMixture: iteration 2/2") and err[-1].endswith("not private")
