"""The privacy audit (issue 25): valid lower bounds, tight on correct releases, and a
mutation check that an under-noised release is caught.

(a) the bounds on the plain Gaussian mechanism, where the exact ε is known in closed form
    (μ-GDP: ε_μ(δ)); (b) tightness of the estimator audits at ε = 1; (c) mutations of the
    release layer's sampler (noise scaled by 0.5 / 0.8) are flagged, and the same audit
    of the correct code is not; (d) bad input.
"""
import numpy as np
import pytest

from dpem_fast import DPBernoulliMixture, DPFactorAnalysis, DPGaussianMixture, DPKMeans
from dpem_fast._engine import _release
from dpem_fast.audit import AuditResult, audit, gdp_epsilon, gdp_lower_bound, threshold_lower_bound

DELTA = 1e-5


def _gmm(**kw):
    return DPGaussianMixture(n_components=3, epsilon=1.0, delta=DELTA, data_norm=1.0, **kw)


def _kmeans(**kw):
    return DPKMeans(n_clusters=3, epsilon=1.0, delta=DELTA, data_norm=1.0, **kw)


def _fa(**kw):
    return DPFactorAnalysis(n_components=1, epsilon=1.0, delta=DELTA, data_norm=1.0, **kw)


# ---------------------------------------------------------------- (a) the bounds themselves
def test_gdp_epsilon_is_the_exact_gaussian_profile():
    # μ-GDP with μ = 1 at δ = 1e-5: δ(ε) = Φ(−ε + 1/2) − e^ε Φ(−ε − 1/2) solved for ε
    from scipy.stats import norm
    eps = gdp_epsilon(1.0, DELTA)
    assert norm.cdf(-eps + 0.5) - np.exp(eps) * norm.cdf(-eps - 0.5) == pytest.approx(DELTA, rel=1e-6)
    assert gdp_epsilon(0.0, DELTA) == 0.0


def test_bounds_on_the_gaussian_mechanism_never_exceed_the_true_epsilon():
    mu = 1.0
    true = gdp_epsilon(mu, DELTA)
    gdp, thr = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        a = rng.normal(0.0, 1.0, 20_000)
        b = rng.normal(mu, 1.0, 20_000)
        gdp.append(gdp_lower_bound(a, b, DELTA, 0.95)[0])
        thr.append(threshold_lower_bound(a, b, mu / 2, DELTA, 0.95))
    assert max(gdp) <= true, (max(gdp), true)
    assert max(thr) <= true
    assert min(gdp) >= 0.8 * true           # tight with enough trials
    assert np.mean(thr) < np.mean(gdp)      # the distribution-free bound is weaker


def test_gdp_bound_scales_with_the_noise():
    """The bound estimates σ from the samples: under-noised outputs (σ = 0.5) give about twice
    the μ of the claimed σ = 1, so the bound exceeds the claim."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, 0.5, 50_000), rng.normal(1.0, 0.5, 50_000)
    eps, mu = gdp_lower_bound(a, b, DELTA, 0.95)
    assert 1.9 < mu < 2.0
    assert eps > gdp_epsilon(1.0, DELTA)


def test_gdp_bound_coverage_at_small_samples():
    """Validity where it is hardest (few samples, moderate μ): the lower bound on μ stays
    below the truth in at least the stated share of runs (here: every one of 200)."""
    mu = 0.5
    rng = np.random.default_rng(1)
    hits = sum(gdp_lower_bound(rng.normal(0, 1, 50), rng.normal(mu, 1, 50), DELTA, 0.95)[1] > mu
               for _ in range(200))
    assert hits <= 10                       # 5 % of 200, and the interval is conservative


# ---------------------------------------------------------------- (b) tight on estimators
@pytest.mark.parametrize("make, scope", [(_gmm, "release"), (_gmm, "iteration"), (_kmeans, "iteration"),
                                         (_fa, "iteration")])
def test_audit_is_tight_and_sound_at_epsilon_one(make, scope):
    r = audit(make(), random_state=0, scope=scope)
    assert isinstance(r, AuditResult)
    assert r.mode == "white-box" and r.method == "gdp" and r.claimed_for == scope
    assert r.n_trials == 1_000_000 and r.confidence == 0.95 and r.delta == DELTA
    # the canary attains the declared sensitivity (FA's joint bound: up to the candidates' angles),
    # and never exceeds it (that would be a wrong sensitivity)
    assert 0.99 <= r.canary["attained"] <= 1.0 + 1e-9
    assert 0.8 * r.epsilon_claimed <= r.epsilon_lower <= r.epsilon_claimed
    assert r.epsilon_claimed <= r.plan_epsilon <= 1.0 + 1e-9    # FA: one round, the iteration is the fit
    assert not r.violated


def test_audit_add_remove_and_release_choice():
    r = audit(_gmm(neighbouring="add_remove"), n_trials=200_000, random_state=3)
    assert r.canary["relation"] == "add_remove" and r.canary["replacement"] is None
    assert np.linalg.norm(r.canary["row"]) == pytest.approx(1.0)
    assert r.epsilon_lower <= r.epsilon_claimed
    r2 = audit(_gmm(), n_trials=200_000, random_state=3, statistic="counts")
    assert r2.statistic == "counts" and r2.epsilon_lower <= r2.epsilon_claimed


def test_box_domain_canaries_sit_on_its_corners():
    r = audit(DPKMeans(n_clusters=3, epsilon=1.0, delta=DELTA, bounds=(-2.0, 2.0)), n_features=3, scope="iteration",
              n_trials=50_000, random_state=0)
    assert r.canary["attained"] == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(np.abs(r.canary["row"]), 2.0)
    assert r.epsilon_lower <= r.epsilon_claimed


def test_audit_is_reproducible_and_independent_of_threads():
    r1 = audit(_kmeans(n_threads=1), n_trials=100_000, random_state=7)
    r2 = audit(_kmeans(n_threads=2), n_trials=100_000, random_state=7)
    assert r1.epsilon_lower == r2.epsilon_lower and r1.mu_lower == r2.mu_lower
    np.testing.assert_array_equal(r1.canary["row"], r2.canary["row"])


def test_threshold_method_runs_and_is_weaker():
    g = audit(_gmm(), n_trials=200_000, random_state=0, scope="iteration")
    t = audit(_gmm(), n_trials=200_000, random_state=0, scope="iteration", method="threshold")
    assert t.method == "threshold" and t.mu_lower is None
    assert t.epsilon_lower <= g.epsilon_lower <= g.epsilon_claimed


# ---------------------------------------------------------------- (c) mutations are caught
def _scaled_noise(monkeypatch, name, factor):
    original = _release.add_noise

    def add_noise(value, release, key, n_threads=1):
        out = original(value, release, key, n_threads)
        if release.name == name:
            value = np.asarray(value, dtype=np.float64)
            return value + factor * (out - value)
        return out

    monkeypatch.setattr(_release, "add_noise", add_noise)


@pytest.mark.parametrize("make, name, factor, scope", [
    (_gmm, "second_moments", 0.8, "release"),
    (_gmm, "first_moments", 0.8, "release"),
    (_kmeans, "sums", 0.8, "release"),
    (_gmm, "counts", 0.5, "iteration"),
    (_kmeans, "counts", 0.5, "iteration"),
    (_fa, "second_moment", 0.8, "release"),
])
def test_an_under_noised_release_is_flagged(monkeypatch, make, name, factor, scope):
    kw = {"statistic": name} if scope == "release" else {}
    kw["n_trials"] = 400_000 if factor == 0.8 else 100_000
    clean = audit(make(), random_state=11, scope=scope, **kw)
    assert not clean.violated
    _scaled_noise(monkeypatch, name, factor)
    bad = audit(make(), random_state=11, scope=scope, **kw)
    assert bad.violated, (bad.epsilon_lower, bad.epsilon_claimed)


def test_an_under_noised_release_layer_is_flagged(monkeypatch):
    """The mutation in ReleaseLayer.release itself (not its sampler): the trials go through it."""
    original = _release.ReleaseLayer.release

    def release(self, statistics, index):
        out = original(self, statistics, index)
        if "sums" in out:
            v = np.asarray(statistics["sums"], dtype=np.float64)
            out["sums"] = v + 0.8 * (out["sums"] - v)
        return out

    monkeypatch.setattr(_release.ReleaseLayer, "release", release)
    assert audit(_kmeans(), random_state=5, statistic="sums", n_trials=400_000).violated


# ---------------------------------------------------------------- (c') person-level (issue 27)
@pytest.mark.parametrize("make, rel", [(_gmm, "replace"), (_kmeans, "add_remove")])
def test_a_person_level_plan_is_audited_with_a_canary_person_of_m_rows(make, rel):
    """The canary is a person of m copies of the canary row against the plan's group-level noise:
    it attains the group-level sensitivity, the audit is tight, and nothing is violated."""
    r = audit(make(max_rows_per_group=4, neighbouring=rel), random_state=2, scope="iteration", n_trials=200_000)
    assert r.canary["rows_per_group"] == 4 and r.canary["relation"] == rel
    assert 0.99 <= r.canary["attained"] <= 1.0 + 1e-9
    assert 0.75 * r.epsilon_claimed <= r.epsilon_lower <= r.epsilon_claimed and not r.violated


def test_a_person_level_plan_that_forgets_m_is_flagged(monkeypatch):
    """A plan whose sensitivities were scaled by m/2 instead of m: the audit's canary person of m
    rows moves the statistics twice as far as the noise was calibrated for."""
    from dpem_fast._engine import _plan

    real = _plan.group_spec
    monkeypatch.setattr(_plan, "group_spec", lambda spec, m: real(spec, max(m // 2, 1)))
    assert audit(_kmeans(max_rows_per_group=4), random_state=2, scope="iteration", n_trials=100_000).violated


# ---------------------------------------------------------------- (d) bad input
@pytest.mark.parametrize("est, kw, exc, match", [
    ("not an estimator", {}, TypeError, "estimator"),
    (None, {"mode": "black-box"}, ValueError, "mode"),
    (None, {"n_trials": 1}, ValueError, "n_trials"),
    (None, {"n_trials": 2.5}, ValueError, "n_trials"),
    (None, {"confidence": 1.0}, ValueError, "confidence"),
    (None, {"confidence": "high"}, ValueError, "confidence"),
    (None, {"scope": "fit"}, ValueError, "scope"),
    (None, {"statistic": "nope"}, ValueError, "statistic"),
    (None, {"statistic": 3}, TypeError, "statistic"),
    (None, {"statistic": "counts", "scope": "iteration"}, ValueError, "statistic"),
    (None, {"method": "bayes"}, ValueError, "method"),
    (DPGaussianMixture(n_components=2, epsilon=float("inf"), data_norm=1.0), {}, ValueError, "epsilon"),
    (DPGaussianMixture(n_components=2), {}, ValueError, "declared domain"),
    (DPBernoulliMixture(n_components=2), {}, ValueError, "fixed domain"),
    (DPGaussianMixture(n_components=2, data_norm=1.0, noise="discrete_gaussian"), {}, ValueError, "noise"),
])
def test_bad_input_is_refused_clearly(est, kw, exc, match):
    with pytest.raises(exc, match=match):
        audit(_gmm() if est is None else est, n_trials=kw.pop("n_trials", 1000), **kw)


def test_bad_samples_are_refused():
    with pytest.raises(ValueError, match="a: need at least 2"):
        gdp_lower_bound([1.0], [1.0, 2.0], DELTA)
    with pytest.raises(ValueError, match="b: samples must be finite"):
        gdp_lower_bound([1.0, 2.0], [1.0, np.nan], DELTA)
    with pytest.raises(ValueError, match="delta"):
        threshold_lower_bound([1.0, 2.0], [1.0, 2.0], 0.0, 1.5)


# ---------------------------------------------------------------- command line
def test_command_line_audit(capsys):
    import json

    from dpem_fast._cli import main

    rc = main(["audit", "--model", "kmeans", "--epsilon", "1", "--data-norm", "1", "--n-clusters", "3",
               "--scope", "iteration", "--trials", "200000", "--random-state", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["model"] == "DPKMeans" and out["violated"] is False
    direct = audit(_kmeans(), n_trials=200_000, random_state=0, scope="iteration")
    assert out["epsilon_lower"] == direct.epsilon_lower and out["epsilon_claimed"] == direct.epsilon_claimed


@pytest.mark.parametrize("argv, match", [
    (["--model", "gmm", "--epsilon", "1"], "declared domain"),
    (["--model", "gmm", "--epsilon", "1", "--data-norm", "1", "--bounds", "0,1"], "at most one"),
    (["--model", "gmm", "--epsilon", "1", "--data-norm", "1", "--trials", "1"], "n_trials"),
    (["--model", "gmm", "--epsilon", "1", "--data-norm", "1", "--features", "0"], "n_features"),
])
def test_command_line_audit_errors(capsys, argv, match):
    from dpem_fast._cli import main

    assert main(["audit", *argv]) == 2
    assert match in capsys.readouterr().err
