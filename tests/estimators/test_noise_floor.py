"""Issue 23, the mixtures' utility floor: dead components are dropped, noise-dominated fits warn
(or, when n is public and the noise is certain to dominate, are refused before the charge), and
the Bernoulli and Poisson mixtures are not below their one-component private fit."""
import dataclasses
import math
import pickle
import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import load_digits

import dpem_fast
from dpem_fast import (DPBernoulliMixture, DPGaussianMixture, DPKMeans, DPPoissonMixture, NoiseDominatedWarning,
                       accounting as acc)
from dpem_fast._engine import _components
from dpem_fast.mixture._gaussian_block import GAUSSIAN_MERGE_REASON


def _blobs(n, seed=0):
    """Two well-separated blobs in [-4, 4]^2: a K = 6 fit has at most 2 components of signal."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    return np.clip(rng.normal(0, 0.4, (n, 2)) + np.where(y[:, None] == 0, -2.0, 2.0), -4, 4)


def _binary(n, seed=0):
    rng = np.random.default_rng(seed)
    protos = np.array([[1] * 8 + [0] * 8, [0] * 8 + [1] * 8], dtype=bool)
    y = rng.integers(0, 2, n)
    return (protos[y] ^ (rng.random((n, 16)) < 0.1)).astype(np.float64)


def _counts(n, seed=0):
    rng = np.random.default_rng(seed)
    rates = np.array([[1.0] * 4 + [8.0] * 4, [8.0] * 4 + [1.0] * 4])
    return rng.poisson(rates[rng.integers(0, 2, n)]).astype(np.float64)


#: (name, estimator factory taking K and keywords, data, attribute of the component weights or None)
CASES = [
    ("gmm", lambda K, **kw: DPGaussianMixture(K, bounds=(-4, 4), **kw), _blobs),
    ("bernoulli", lambda K, **kw: DPBernoulliMixture(K, **kw), _binary),
    ("poisson", lambda K, **kw: DPPoissonMixture(K, max_count=10.0, **kw), _counts),
    ("kmeans", lambda K, **kw: DPKMeans(K, bounds=(-4, 4), **kw), _blobs),
]
IDS = [c[0] for c in CASES]


def _live_count(est):
    return est.n_clusters_ if isinstance(est, DPKMeans) else est.n_components_


def _capture_live(monkeypatch):
    """Record (noisy counts, threshold, mask) of every live_components call."""
    seen = []
    real = _components.live_components

    def spy(counts, release, what="components", **kw):
        live = real(counts, release, what, **kw)
        seen.append((np.array(counts), _components.count_threshold(release), live.copy()))
        return live

    for mod in ("dpem_fast.mixture._dp_gmm", "dpem_fast.mixture._dp_bernoulli", "dpem_fast.mixture._dp_poisson",
                "dpem_fast.cluster._dp_kmeans"):
        monkeypatch.setattr(f"{mod}.live_components", spy)
    return seen


@pytest.mark.parametrize("name, make, data", CASES, ids=IDS)
def test_dead_components_are_dropped_and_the_model_still_works(monkeypatch, tmp_path, name, make, data):
    """K = 6 on two clusters: the components whose final noisy count is at most
    max(1, 3 sigma) are gone from every fitted array, and predict / score / sample / save /
    pickle work on what is left."""
    seen = _capture_live(monkeypatch)
    X = data(3000)
    est = make(6, epsilon=1.0, neighbouring="add_remove", random_state=0)
    with warnings.catch_warnings():        # most of the 6 are dead: the warning may come (tested below)
        warnings.simplefilter("ignore", NoiseDominatedWarning)
        est.fit(X)
    (counts, tau, live), = seen
    assert tau == max(1.0, 3.0 * _components.noise_std(_final_release(est)))
    if (counts > tau).any():
        assert_array_equal(live, counts > tau)
    k = _live_count(est)
    assert 1 <= k < 6 and k == int(live.sum())
    if name == "kmeans":
        assert est.cluster_centers_.shape == (k, 2)
        assert est.transform(X[:5]).shape == (5, k)
        labels = est.predict(X)
    else:
        assert est.weights_.shape == (k,) and est.weights_.sum() == pytest.approx(1.0)
        assert est.means_.shape[0] == k
        # the released weights are the live noisy counts renormalised: none is below tau / total
        assert est.weights_.min() >= tau / counts[live].sum() * (1 - 1e-9)
        assert est.predict_proba(X[:5]).shape == (5, k)
        labels = est.predict(X)
        Xs, ys = est.sample(200, random_state=0)
        assert np.asarray(Xs).shape == (200, X.shape[1]) and set(np.unique(ys)) <= set(range(k))
        assert np.all(np.isfinite(est.score_samples(X)))
    assert set(np.unique(labels)) <= set(range(k))
    loaded = dpem_fast.load(est.save(tmp_path / "m.npz"))
    again = pickle.loads(pickle.dumps(est))
    for other in (loaded, again):
        assert _live_count(other) == k
        assert_array_equal(other.predict(X), labels)


def _final_release(est):
    """The counts release the last update saw: per-release scale over sqrt(m) when tail-averaged."""
    r = est.privacy_.releases["counts"]
    m = est._n_averaged(est.privacy_.n_iter)
    return r if m <= 1 else dataclasses.replace(r, noise_scale=r.noise_scale / math.sqrt(m))


@pytest.mark.parametrize("name, make, data", CASES, ids=IDS)
def test_all_dead_keeps_the_largest_and_warns_without_private_numbers(monkeypatch, name, make, data):
    """Hopeless noise under add/remove (n private, so no refusal): one component is kept and a
    NoiseDominatedWarning says what to do — what lowers the noise of a count relative to it (ε,
    rows, fewer components), not bounds, which the counts' noise does not depend on (issue 35);
    the only numbers in it are K and the live count."""
    X = data(200)
    with pytest.warns(NoiseDominatedWarning) as rec:
        est = make(5, epsilon=0.05, neighbouring="add_remove", max_iter=10, random_state=1).fit(X)
    assert _live_count(est) == 1
    msg = " ".join(str(w.message) for w in rec if issubclass(w.category, NoiseDominatedWarning))
    dead = [str(w.message) for w in rec if "noisy count" in str(w.message)]     # all or all but one dead
    assert len(dead) == 1
    for remedy in ("raise epsilon", "fewer components", "more rows"):
        assert remedy in dead[0]
    assert "bounds" not in dead[0]
    assert set(re.findall(r"\d+(?:\.\d+)?", msg)) <= {"1", "5"}


@pytest.mark.parametrize("name, make, data", CASES, ids=IDS)
def test_hopeless_replace_one_fits_are_refused_before_the_charge(monkeypatch, name, make, data):
    """Under replace-one n is public: n <= 3 sigma_N (sqrt(m)-averaged) is refused with a
    ValueError before the ledger is charged or any statistic computed."""
    X = data(200)
    est = make(5, epsilon=0.05, max_iter=10, random_state=1)

    def forbidden(*args, **kwargs):
        raise AssertionError("a statistic was computed")

    monkeypatch.setattr(type(est), "_statistics", forbidden)
    ledger = acc.BudgetLedger(10.0, 1e-5)
    est.set_params(budget=ledger)
    with pytest.raises(ValueError, match=r"n_samples=200 is too few rows.*raise epsilon"):
        est.fit(X)
    assert ledger.entries == [] and not hasattr(est, "privacy_")
    # the same rows at a budget where the counts can be told from noise: no refusal
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatedWarning)
        assert make(5, epsilon=10.0, max_iter=10, random_state=1).fit(X).privacy_ is not None


def _digits_split(seed=0):
    X = load_digits().data
    p = np.random.default_rng(seed).permutation(len(X))
    return X[p[:1600]], X[p[1600:]]


@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")
@pytest.mark.parametrize("epsilon", [0.3, 1.0])
@pytest.mark.parametrize("model", ["poisson", "bernoulli"])
def test_k_components_are_not_below_the_one_component_private_fit(model, epsilon):
    """sklearn digits (1600 training rows, 197 held out), K = 10 against K = 1 at the same budget,
    seeds 0-2: the mean held-out score of the K-component fit is not below the one-component
    fit's by more than 0.5 nat/row.  (Before issue 23 the Poisson mixture was below by 45 nats/row
    at epsilon = 0.3, -398.5 against -353.4, and by 3.2 at epsilon = 1, -224.9 against -221.8; the
    Bernoulli cases passed already.)"""
    tr, te = _digits_split()
    if model == "poisson":
        make = lambda K, s: DPPoissonMixture(K, max_count=16.0, epsilon=epsilon, random_state=s)  # noqa: E731
    else:
        tr, te = (tr > 7).astype(np.float64), (te > 7).astype(np.float64)
        make = lambda K, s: DPBernoulliMixture(K, epsilon=epsilon, random_state=s)  # noqa: E731
    k = np.mean([make(10, s).fit(tr).score(te) for s in range(3)])
    one = np.mean([make(1, s).fit(tr).score(te) for s in range(3)])
    assert k >= one - 0.5, (k, one)


# ------------------------------------------- why components were dropped (issue 35, item 3)
def _release(sd):
    return type("Release", (), {"noise_scale": sd, "mechanism": "gaussian"})()


def _numbers(msg):
    return set(re.findall(r"\d+(?:\.\d+)?", msg))


@pytest.mark.parametrize("n_public", [8000, None])
def test_dead_components_whose_counts_could_be_resolved_were_merged_and_the_warning_says_so(n_public):
    """Counts that resolve a component of average size (n/K = 1,333 rows against τ + 2σ = 50;
    n public, or the noisy total): the components that end dead were emptied by the fit.  The
    warning says that, gives the model's reason, names n_components=<live> as what the budget
    resolves and what resolves more (rows, bounds, epsilon); not the counts' noise, nor max_iter
    (with tail averaging the last update's noise does not depend on it)."""
    counts = np.array([5000.0, 3000.0, 2.0, -3.0, 1.0, 0.0])
    with pytest.warns(NoiseDominatedWarning) as rec:
        live = _components.live_components(counts, _release(10.0), "M", n_public=n_public,
                                           resolution=GAUSSIAN_MERGE_REASON)
    assert live.tolist() == [True, True, False, False, False, False]
    msg = str(rec[0].message)
    assert "kept rows" in msg and "not hidden by the counts' noise" in msg
    assert GAUSSIAN_MERGE_REASON in msg and "n_components=2" in msg
    for remedy in ("more rows", "tighter bounds", "raise epsilon"):
        assert remedy in msg
    assert "max_iter" not in msg and "iterations" not in msg and "distinguishable" not in msg
    assert _numbers(msg) <= {"2", "6"}


def test_dead_components_hidden_by_the_counts_noise_get_the_counts_remedies():
    """n/K = 1,333 rows against τ + 2σ = 2,500: the counts could not have resolved a component of
    average size, so the warning blames their noise and names what lowers it relative to a
    count (epsilon, rows, fewer components), not bounds."""
    counts = np.array([5000.0, 3000.0, 2.0, -3.0, 1.0, 0.0])
    with pytest.warns(NoiseDominatedWarning, match="has a noisy count distinguishable") as rec:
        _components.live_components(counts, _release(500.0), "M", n_public=8000,
                                    resolution=GAUSSIAN_MERGE_REASON)
    msg = str(rec[0].message)
    assert _components.COUNT_REMEDY in msg and "bounds" not in msg and "kept rows" not in msg


def test_a_mixed_fit_that_merges_components_says_why_and_what_helps():
    """DPMixedMixture(8) at ε = 10 on 6,000 rows of one cluster with a 90 %-zero column: the
    counts resolve 750 rows (σ_N ≈ 11) but the fit keeps 3; the warning names the second
    moments' floor as the reason and n_components=<live>; the fit's only warning."""
    rng = np.random.default_rng(0)
    n = 6000
    X = np.c_[rng.normal(0, 1, n), rng.normal(0, 1, n),
              np.where(rng.random(n) < 0.9, 0.0, rng.exponential(1, n)), rng.integers(0, 3, n)]
    with pytest.warns(NoiseDominatedWarning) as rec:
        est = dpem_fast.DPMixedMixture(8, epsilon=10.0, bounds=(-5, 5), categories={"x3": 3},
                                       random_state=0, marginals=None).fit(X)     # the value-space mixture
    live = est.n_components_
    assert 2 * live < 8 and len(rec) == 1
    msg = str(rec[0].message)
    assert "second moments" in msg and f"n_components={live}" in msg and "max_iter" not in msg
    assert _numbers(msg) <= {str(live), "8"}
