"""A private estimator as an OpenDP measurement (issue 38): the map at d_in = 1 is our claim,
the function returns the public fitted parameters and the record only, and OpenDP's compositors
take it (a privacy filter refuses the query that would exceed its budget)."""
from __future__ import annotations

import pathlib
import sys
import warnings

import numpy as np
import pytest

from dpem_fast.accounting import PrivacyLeakWarning

dp = pytest.importorskip("opendp.prelude")

from dpem_fast import DPGaussianMixture  # noqa: E402
from dpem_fast.interop import make_measurement  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "estimators"))
from examples import EXAMPLES  # noqa: E402


def _invoke(meas, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return meas(X)


def _cases():
    for name, (factory, _) in EXAMPLES.items():
        rels = factory()._relations if "neighbouring" in factory().get_params() else (factory()._relation(),)
        for rel in rels:
            yield pytest.param(name, rel, id=f"{name}-{rel}")


@pytest.mark.parametrize("name, rel", list(_cases()))
def test_map_at_one_is_the_claim(name, rel):
    factory, data = EXAMPLES[name]
    X = data()
    est = factory(random_state=None, **({"neighbouring": rel} if "neighbouring" in factory().get_params() else {}))
    n = X.shape[0] if rel == "replace" else None
    meas = make_measurement(est, X.shape[1], n_samples=n)
    assert meas.input_metric == (dp.hamming_distance() if rel == "replace" else dp.insert_delete_distance())
    out = _invoke(meas, X)
    rec = out["privacy_"]
    assert meas.map(1) == pytest.approx((rec.epsilon_spent, rec.delta), rel=1e-12)
    assert meas.map(0) == (0.0, 0.0)
    # only the public fitted parameters: no key, no diagnostics, no hyperparameter, no ledger
    assert set(out) == {"params", "privacy_"}
    assert all(k.endswith("_") for k in out["params"]) and "diagnostics_" not in out["params"]
    assert not hasattr(est, "privacy_")             # a clone was fitted


def test_group_privacy_and_zcdp():
    X = EXAMPLES["gmm"][1]()
    meas = make_measurement(DPGaussianMixture(2, epsilon=1.0, bounds=(-4, 4), max_iter=3), 3, n_samples=len(X))
    eps1, eps2 = meas.map(1)[0], meas.map(2)[0]
    assert eps1 < eps2 < 2.5 * eps1         # Gaussian group privacy: the multipliers halved
    f, data = EXAMPLES["gradient_em"]       # zCDP-accounted: its ρ
    rho = make_measurement(f(random_state=None), 3, measure="zcdp").map(1)
    assert 0 < rho < 1
    with pytest.raises(ValueError, match="measure='zcdp'"):
        make_measurement(DPGaussianMixture(2, bounds=(-4, 4)), 3, measure="zcdp")
    lda = make_measurement(EXAMPLES["lda"][0](random_state=None), 12)
    with pytest.raises(Exception, match="d_in > 1"):
        lda.map(2)                          # subsampled: no group privacy derived


def test_refusals():
    with pytest.raises(ValueError, match="person-level"):
        make_measurement(DPGaussianMixture(2, bounds=(-4, 4), max_rows_per_group=2), 3)
    with pytest.raises(ValueError, match="n_samples"):
        make_measurement(DPGaussianMixture(2, bounds=(-4, 4), neighbouring="add_remove"), 3, n_samples=10)
    meas = make_measurement(DPGaussianMixture(2, bounds=(-4, 4), max_iter=2), 3, n_samples=120)
    with pytest.raises(Exception):
        meas(np.zeros((119, 3)))            # the replace-one domain's public size


@pytest.mark.filterwarnings("ignore::dpem_fast.accounting.NoiseDominatedWarning")     # 120 rows, ε = 0.5
def test_composition_refuses_a_third_fit():
    """Two fits of ε = 0.5 in a privacy filter of ε = 1.2 (OpenDP composes (ε, δ) additively);
    a third would exceed it and is refused before it runs."""
    X = EXAMPLES["gmm"][1]()
    est = DPGaussianMixture(2, epsilon=0.5, bounds=(-4, 4), max_iter=2, neighbouring="add_remove")
    meas = make_measurement(est, 3)
    odometer = dp.c.make_fully_adaptive_composition(meas.input_domain, meas.input_metric, meas.output_measure)
    queryable = dp.c.make_privacy_filter(odometer, d_in=1, d_out=(1.2, 3e-5))(X)
    fits = [queryable(meas), queryable(meas)]
    assert all(f["privacy_"].epsilon_spent <= 0.5 for f in fits)
    with pytest.raises(dp.OpenDPException, match="exceed"):
        queryable(meas)
    # the compositor with its budgets up front: out of queries after two
    comp = dp.c.make_adaptive_composition(meas.input_domain, meas.input_metric, meas.output_measure, d_in=1,
                                          d_mids=[meas.map(1), meas.map(1)])
    q = comp(X)
    q(meas)
    q(meas)
    with pytest.raises(dp.OpenDPException, match="out of queries"):
        q(meas)


def test_a_fixed_seed_warns_that_invocations_share_their_noise():
    """A clone keeps random_state: every invocation would draw the same noise."""
    est = DPGaussianMixture(2, epsilon=0.5, bounds=(-4, 4), max_iter=2, neighbouring="add_remove", random_state=0)
    with pytest.warns(PrivacyLeakWarning, match="random_state: every invocation"):
        make_measurement(est, 3)
