"""``observe_releases``: the per-release hook sees every release of every private fit, with public
records only, and changes nothing (issue 36's cross-cutting change: made in the release layer
alone, it reaches every loop — full pass, minibatch, sequential, one-shot, selection)."""
import threading

import numpy as np
import pytest

import dpem_fast
from dpem_fast.decomposition import private_unigram
from dpem_fast.model_selection import PrivateModelSelection
from estimators.examples import EXAMPLES


def _observed_fit(make):
    seen = []
    with dpem_fast.observe_releases(lambda r, i: seen.append((r, i))) as cb:
        assert callable(cb)
        model = make()
    return model, seen


def _counts(seen):
    out = {}
    for r, i in seen:
        out.setdefault(r.name, []).append(i)
    return out


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_release_of_every_estimator_is_observed_once_in_index_order(name):
    factory, data = EXAMPLES[name]
    X = data()
    model, seen = _observed_fit(lambda: factory().fit(X))
    releases = model.privacy_.releases
    got = _counts(seen)
    # every release of the record, each index 0 .. count - 1 exactly once, in order; nothing else
    assert set(got) == set(releases), (set(got), set(releases))
    for key, indices in got.items():
        assert indices == list(range(releases[key].count)), key
    # the callback gets the plan's public record and an int, nothing computed from the data
    for r, i in seen:
        assert r == releases[r.name] and type(i) is int
    # and the fit is the one it would be without the hook
    again = factory().fit(X)
    for attr in ("means_", "cluster_centers_", "components_", "coef_", "weights_"):
        if hasattr(model, attr):
            np.testing.assert_array_equal(getattr(model, attr), getattr(again, attr))


@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")
def test_selection_partial_fit_and_unigram_are_observed():
    factory, data = EXAMPLES["gmm"]
    sel, seen = _observed_fit(lambda: PrivateModelSelection(factory(), {"n_components": [1, 2]}, epsilon=2.0,
                                                            random_state=5).fit(data()))
    got = _counts(seen)
    assert "selection_score" in got and len(got["selection_score"]) >= sel.privacy_.n_iter   # max(T, T_max)
    assert "means" in got or "first" in got or len(got) > 1    # the trials' own releases too
    lda_factory, corpus = EXAMPLES["lda"]
    X = corpus()
    lda = lda_factory()
    _, seen = _observed_fit(lambda: (lda.partial_fit(X[:30]), lda.partial_fit(X[30:])))
    assert [(r.name, i) for r, i in seen] == [("topic_word", 0), ("topic_word", 0)]
    _, seen = _observed_fit(lambda: private_unigram(X, epsilon=1.0, max_doc_length=30, random_state=7))
    assert [(r.name, i) for r, i in seen] == [("unigram", 0)]


def test_nothing_is_observed_outside_the_block_or_in_another_thread():
    factory, data = EXAMPLES["kmeans"]
    X = data()
    seen, other = [], []
    with dpem_fast.observe_releases(lambda r, i: seen.append(i)):
        t = threading.Thread(target=lambda: factory().fit(X))     # its own context: not observed
        t.start()
        t.join()
        with dpem_fast.observe_releases(lambda r, i: other.append(i)):    # blocks nest
            factory().fit(X)
    factory().fit(X)
    assert len(seen) == len(other) > 0


def test_a_non_callable_is_refused_and_a_raising_callback_propagates():
    with pytest.raises(TypeError, match="callback must be callable"):
        with dpem_fast.observe_releases(3):
            pass
    factory, data = EXAMPLES["kmeans"]

    def stop(r, i):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with dpem_fast.observe_releases(stop):
            factory().fit(data())


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_private_domain_estimate_and_start_are_observed():
    X = np.random.default_rng(0).normal(size=(3000, 2))
    model, seen = _observed_fit(lambda: dpem_fast.DPGaussianMixture(2, epsilon=1.0, max_iter=2, means_init="private",
                                                                    random_state=0).fit(X))
    got = _counts(seen)
    assert {"domain_scale", "start_counts", "start_sums"} <= set(got) == set(model.privacy_.releases)
    assert all(indices == list(range(model.privacy_.releases[k].count)) for k, indices in got.items())
