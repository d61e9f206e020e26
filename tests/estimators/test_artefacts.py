"""What a fitted private model carries when it leaves the fit, for every estimator.

A pickle (``pickle``, ``cloudpickle``, ``joblib``) of a fitted private model holds what a
saved file holds — hyperparameters with ``random_state`` and ``budget`` as ``None``, the
allow-listed fitted attributes, ``privacy_`` — and nothing else: no key, no seed, no
ledger, no ``diagnostics_``, no attribute computed from the raw data (issue 21, item 6).
"""
import io
import pickle

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from dpem_fast import accounting as acc
from dpem_fast import _persist, _registry
from dpem_fast._rng import make_key

from examples import EXAMPLES, SEED


def _dumps_pickle(m):
    return pickle.dumps(m)


def _dumps_cloudpickle(m):
    cloudpickle = pytest.importorskip("cloudpickle")
    return cloudpickle.dumps(m)


def _dumps_joblib(m):
    joblib = pytest.importorskip("joblib")
    buf = io.BytesIO()
    joblib.dump(m, buf)
    return buf.getvalue()


def _loads(blob, how):
    if how is _dumps_joblib:
        import joblib
        return joblib.load(io.BytesIO(blob))
    return pickle.loads(blob)


@pytest.fixture(scope="module")
def fitted():
    out = {}
    for name, (factory, data) in EXAMPLES.items():
        X = data()
        rel = factory().get_params().get("neighbouring", "add_remove" if name == "lda" else "replace")
        has_budget = "budget" in factory().get_params()      # DP-SEP has no ledger yet (issue 22)
        kw = {"budget": acc.BudgetLedger(50.0, 1e-5, neighbouring=rel)} if has_budget else {}
        out[name] = (factory(**kw).fit(X), X)
    return out


def _record(m):
    return _persist.record_to_json(m.privacy_, _persist._Inline())


def _outputs(m, X):
    for method in ("score_samples", "transform", "predict"):
        if hasattr(m, method):
            return np.asarray(getattr(m, method)(X))
    raise AssertionError(f"{type(m).__name__} has no inference method")


@pytest.mark.parametrize("how", [_dumps_pickle, _dumps_cloudpickle, _dumps_joblib], ids=["pickle", "cloudpickle",
                                                                                       "joblib"])
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_the_pickle_of_a_fitted_private_model_holds_only_public_state(fitted, name, how):
    model, X = fitted[name]
    blob = how(model)
    # no key, no seed, no ledger in the bytes
    assert make_key(SEED).tobytes() not in blob
    assert SEED.to_bytes(4, "little") not in blob and str(SEED).encode() not in blob
    assert b"BudgetLedger" not in blob
    loaded = _loads(blob, how)
    allowed = (set(model.get_params(deep=False)) | set(_registry.saved_names(type(model)))
               | {"privacy_", "_sklearn_version"})
    assert set(vars(loaded)) <= allowed, set(vars(loaded)) - allowed
    assert set(vars(model)) - allowed         # the live model does hold state that must not leave
    assert loaded.random_state is None and getattr(loaded, "budget", None) is None
    assert _record(loaded) == _record(model)
    assert_array_equal(_outputs(loaded, X), _outputs(model, X))
    # the live model is untouched by pickling
    assert model.random_state == SEED


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_an_unfitted_or_non_private_model_pickles_whole(name):
    """Nothing private in them: a grid search's workers get their seeds."""
    factory, data = EXAMPLES[name]
    unfitted = pickle.loads(pickle.dumps(factory()))
    assert unfitted.random_state == SEED
    exact = factory(epsilon=np.inf, **({"noise_multiplier": None} if name == "lda" else {}))
    exact.fit(data())
    again = pickle.loads(pickle.dumps(exact))
    assert again.random_state == SEED and set(vars(again)) >= set(vars(exact))


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
@pytest.mark.parametrize("name", ["fa", "gradient_em", "gmm", "poisson"])
def test_the_update_sees_the_row_count_only_where_it_is_public(monkeypatch, rel, name):
    """The engine hands the update a Context: the row count under replace-one, None under
    add/remove (where n is private); the estimator keeps no count of its own."""
    factory, data = EXAMPLES[name]
    est = factory(neighbouring=rel)
    seen = []
    real = type(est)._update

    def spy(self, noisy, params, ctx):
        seen.append((ctx.t, ctx.n_public, set(ctx.releases)))
        return real(self, noisy, params, ctx)
    monkeypatch.setattr(type(est), "_update", spy)
    est.fit(data())
    n = len(data())
    assert [t for t, _, _ in seen] == list(range(est._n_release_rounds()))
    assert all(k == (n if rel == "replace" else None) for _, k, _ in seen)
    assert all(r == set(est.privacy_.releases) - {"domain_scale", "domain_refine", "domain_outside"} for _, _, r in seen)
    assert "_n_public" not in vars(est)


def test_every_estimator_has_an_example():
    """A new estimator must join EXAMPLES, and with it the pickle, saved-file and Dask checks."""
    assert {type(factory()).__name__ for factory, _ in EXAMPLES.values()} == set(_registry.estimators())
