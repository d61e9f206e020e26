"""The privacy audit (issue 25): valid lower bounds, tight on correct releases, and a
mutation check that an under-noised release is caught.

(a) the bounds on the plain Gaussian mechanism, where the exact ε is known in closed form
    (μ-GDP: ε_μ(δ)); (b) tightness of the estimator audits at ε = 1; (c) mutations of the
    release layer's sampler (noise scaled by 0.5 / 0.8) are flagged, and the same audit
    of the correct code is not; (d) bad input.
"""
import dataclasses

import numpy as np
import pytest

from dpem_fast import (DPBernoulliMixture, DPFactorAnalysis, DPGaussianMixture, DPGradientEM, DPKMeans,
                       DPLatentDirichletAllocation, DPPoissonMixture, DPStochasticEP)
from dpem_fast._engine import _base as engine_base
from dpem_fast._engine import _release
from dpem_fast._engine._specs import ROUNDING_ROW_CAP, float64_exact_sum_factor, float64_rounding_factor
from dpem_fast.audit import AuditResult, audit, gdp_epsilon, gdp_lower_bound, threshold_lower_bound

DELTA = 1e-5


def _gmm(**kw):
    return DPGaussianMixture(n_components=3, epsilon=1.0, delta=DELTA, data_norm=1.0, **kw)


def _kmeans(**kw):
    return DPKMeans(n_clusters=3, epsilon=1.0, delta=DELTA, data_norm=1.0, **kw)


def _fa(**kw):
    return DPFactorAnalysis(n_components=1, epsilon=1.0, delta=DELTA, data_norm=1.0, **kw)


VOCAB = [f"w{i}" for i in range(20)]


def _lda(**kw):
    p = dict(n_components=3, epsilon=1.0, delta=DELTA, batch_size=50, total_samples=1000, vocabulary=VOCAB,
             max_doc_length=30)
    return DPLatentDirichletAllocation(**{**p, **kw})


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


# ---------------------------------------------------------------- (b') the whole fit, LDA, fixed domains
@pytest.mark.parametrize("make", [_kmeans, _fa])
def test_fit_scope_audits_every_round_against_the_accountants_epsilon(make):
    """J rounds at the sharpened parameters: the bound reaches 0.9 of what the accountant
    claims for the plan's iteration part (the whole ε of a plan with no one-off release;
    DPKMeans' private start holds 20 % of its plan), and never exceeds it."""
    r = audit(make(), random_state=0, scope="fit")
    assert r.claimed_for == "fit" and r.statistic == "fit" and r.n_trials == 100_000
    assert 0.99 <= r.canary["attained"] <= 1.0 + 1e-9
    assert 0.9 * r.epsilon_claimed <= r.epsilon_lower <= r.epsilon_claimed
    if make is _fa:         # one release round, no one-off release: the claim is the fit's ε
        assert r.epsilon_claimed == pytest.approx(r.plan_epsilon, rel=1e-9)
    else:
        assert r.epsilon_claimed < r.plan_epsilon


def test_fit_scope_catches_an_accountant_that_counts_too_few_rounds(monkeypatch):
    """A plan calibrated for J/2 rounds while the fit runs J (an accounting bug no single
    release shows: each release is noised as its record says) is flagged by the fit scope,
    and not by the release scope."""
    real = engine_base.make_plan

    def short(specs, n_iter, **kw):
        plan = real(specs, max(1, n_iter // 2), **kw)
        return dataclasses.replace(plan, releases={
            k: dataclasses.replace(r, count=n_iter) if r.count > 1 else r for k, r in plan.releases.items()})

    assert not audit(_kmeans(init=None), random_state=1, scope="fit", n_trials=50_000).violated
    monkeypatch.setattr(engine_base, "make_plan", short)
    assert not audit(_kmeans(init=None), random_state=1, statistic="sums", n_trials=50_000).violated
    bad = audit(_kmeans(init=None), random_state=1, scope="fit", n_trials=50_000)
    assert bad.violated, (bad.epsilon_lower, bad.epsilon_claimed)


#: LDA's declared Δ over its exact-arithmetic value (issue 34, item 7): the topic-word sum at the
#: public cap with 128 documents per float block, the unigram's exact per-word sums at the cap
_LDA_WIDENING = {"topic_word": float64_rounding_factor(ROUNDING_ROW_CAP, 128, shifts=True, n_components=1),
                 "unigram": float64_exact_sum_factor(ROUNDING_ROW_CAP)}


@pytest.mark.parametrize("statistic", ["topic_word", "unigram"])
def test_lda_release_is_tight_and_an_under_noised_one_is_flagged(monkeypatch, statistic):
    """LDA: the canary document (max_doc_length tokens of one word) attains the clip norm C;
    one release (the canary in the minibatch: the claim has no amplification) is audited to
    0.9 of its claim; 0.8 of the noise is flagged."""
    r = audit(_lda(), random_state=0, statistic=statistic, n_trials=200_000)
    assert r.canary["relation"] == "add_remove" and r.canary["replacement"] is None
    assert r.canary["row"].sum() == 30 and np.count_nonzero(r.canary["row"]) == 1
    # C itself: the declared Δ is C widened by its float rounding at the public cap (issue 34)
    assert r.canary["attained"] == pytest.approx(1.0 / _LDA_WIDENING[statistic], abs=1e-6)
    assert 0.9 * r.epsilon_claimed <= r.epsilon_lower <= r.epsilon_claimed
    if statistic == "topic_word":       # the fit's ε counts on the amplification of this release
        assert r.epsilon_claimed > r.plan_epsilon
    _scaled_noise(monkeypatch, statistic, 0.8)
    assert audit(_lda(), random_state=0, statistic=statistic, n_trials=200_000).violated


@pytest.mark.parametrize("make", [lambda: DPBernoulliMixture(n_components=3, epsilon=1.0, delta=DELTA),
                                  lambda: DPPoissonMixture(n_components=3, epsilon=1.0, delta=DELTA),
                                  lambda: DPGradientEM(epsilon=1.0, delta=DELTA, estimator="clipped",
                                                       noise="gaussian")])
def test_fixed_domain_models_are_audited_on_their_extreme_rows(monkeypatch, make):
    """Models with a fixed domain: canaries among their ``_extreme_rows``; sound, never above
    the declared sensitivity, and half the noise is flagged."""
    r = audit(make(), random_state=0, scope="iteration", n_trials=100_000)
    assert 0.3 <= r.canary["attained"] <= 1.0 + 1e-9
    assert not r.violated
    _scaled_noise_all(monkeypatch, 0.5)
    assert audit(make(), random_state=0, scope="iteration", n_trials=100_000).violated


def test_dp_sep_is_audited_on_its_compiled_step(monkeypatch):
    """DP-SEP: a release is one batch's factor update, computed by the compiled step at a
    public factor with one component per corner of the box; the whole fit (each row in T
    releases) is audited to 0.75 of its ε, and half the noise is flagged."""
    def make():
        return DPStochasticEP(3, epsilon=1.0, delta=DELTA, bounds=(-1.0, 1.0), component_variance=0.05)

    r = audit(make(), random_state=0, scope="fit")
    assert r.canary["relation"] == "replace" and r.statistic == "fit"
    assert 0.75 <= r.canary["attained"] <= 1.0 + 1e-9
    assert r.epsilon_claimed == pytest.approx(r.plan_epsilon, rel=1e-9)
    assert 0.75 * r.epsilon_claimed <= r.epsilon_lower <= r.epsilon_claimed
    _scaled_noise(monkeypatch, "factor", 0.5)
    assert audit(make(), random_state=0, scope="fit").violated


def test_discrete_noise_is_audited_with_the_threshold_method():
    r = audit(DPGradientEM(epsilon=1.0, delta=DELTA), random_state=0, scope="iteration", n_trials=100_000)
    assert r.method == "threshold" and r.mu_lower is None and r.mu_claimed is None
    assert 0.0 < r.epsilon_lower <= r.epsilon_claimed


def test_black_box_audit_of_whole_fits(monkeypatch):
    """Black-box: whole fits, the canary's score under the final model; sound on the real
    estimator, and a fit that adds no noise at all is flagged from its final models alone."""
    X = np.random.default_rng(0).uniform(-0.3, 0.3, (60, 2))

    def make():
        return DPGaussianMixture(n_components=2, epsilon=1.0, delta=DELTA, data_norm=1.0, max_iter=3, n_threads=1)

    r = audit(make(), X, mode="black-box", n_trials=60, random_state=0)
    assert r.mode == "black-box" and r.method == "threshold" and r.claimed_for == "fit"
    assert r.n_trials == 60 and r.statistic == "score"
    assert r.epsilon_claimed == pytest.approx(r.plan_epsilon) and not r.violated
    _scaled_noise_all(monkeypatch, 0.0)
    assert audit(make(), X, mode="black-box", n_trials=60, random_state=0).violated


def _scaled_noise_all(monkeypatch, factor):
    original = _release.add_noise

    def add_noise(value, release, key, n_threads=1):
        value = np.asarray(value, dtype=np.float64)
        return value + factor * (original(value, release, key, n_threads) - value)

    monkeypatch.setattr(_release, "add_noise", add_noise)


def test_a_mixture_of_auto_size_is_audited_as_its_one_fit():
    """``n_components="auto"`` is one fit at ``max_components`` (with the private start); its
    iteration releases are those of that fit's plan.  A size chosen by a private selection
    over candidate fits (DPKMeans' ``"auto"``) is refused."""
    kw = dict(epsilon=1.0, delta=DELTA, data_norm=1.0)
    auto = audit(DPGaussianMixture(n_components="auto", max_components=4, **kw), random_state=0, scope="iteration",
                 n_trials=50_000)
    one = audit(DPGaussianMixture(n_components=4, means_init="private", **kw), random_state=0, scope="iteration",
                n_trials=50_000)
    assert auto.epsilon_claimed == one.epsilon_claimed and auto.epsilon_lower == one.epsilon_lower
    assert auto.canary["attained"] >= 0.99 and not auto.violated
    with pytest.raises(ValueError, match="candidate"):
        audit(DPKMeans(n_clusters="auto", epsilon=1.0, data_norm=1.0), n_trials=1000)


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
    (None, {"mode": "grey-box"}, ValueError, "mode"),
    (None, {"mode": "black-box", "scope": "iteration"}, ValueError, "black-box"),
    (None, {"mode": "black-box", "method": "gdp"}, ValueError, "black-box"),
    (DPStochasticEP(bounds=(-1.0, 1.0), method="ep", epsilon=float("inf")), {}, ValueError, "epsilon"),
    (DPStochasticEP(bounds=(-1.0, 1.0), sampling="uniform", batch_size=10), {"scope": "fit"}, ValueError,
     "Poisson|subsample"),
    (_lda(), {"scope": "fit"}, ValueError, "Poisson"),
    (_lda(total_samples=None), {}, ValueError, "total_samples"),
    (DPGradientEM(epsilon=1.0), {"method": "gdp"}, ValueError, "threshold"),
    (None, {"n_trials": 1}, ValueError, "n_trials"),
    (None, {"n_trials": 2.5}, ValueError, "n_trials"),
    (None, {"confidence": 1.0}, ValueError, "confidence"),
    (None, {"confidence": "high"}, ValueError, "confidence"),
    (None, {"scope": "epoch"}, ValueError, "scope"),
    (None, {"statistic": "nope"}, ValueError, "statistic"),
    (None, {"statistic": 3}, TypeError, "statistic"),
    (None, {"statistic": "counts", "scope": "iteration"}, ValueError, "statistic"),
    (None, {"method": "bayes"}, ValueError, "method"),
    (DPGaussianMixture(n_components=2, epsilon=float("inf"), data_norm=1.0), {}, ValueError, "epsilon"),
    (DPGaussianMixture(n_components=2), {}, ValueError, "declared domain"),
    (DPGaussianMixture(n_components=2, data_norm=1.0, noise="discrete_gaussian"), {"method": "gdp"}, ValueError,
     "discrete_gaussian"),
])
def test_bad_input_is_refused_clearly(est, kw, exc, match):
    with pytest.raises(exc, match=match):
        audit(_gmm() if est is None else est, n_trials=kw.pop("n_trials", 1000), **kw)


def test_the_target_is_the_declared_loops():
    """The audit picks its target by the loop an estimator declares (``_loop``), never by the
    model's class (it imports no model, ``test_layering``): every registered private estimator
    declares one, and an estimator that declares none has no target."""
    from dpem_fast._engine._estimator import PrivateEstimator
    from dpem_fast._registry import estimators

    loops = {name: cls._loop for name, cls in estimators().items() if issubclass(cls, PrivateEstimator)}
    assert loops == {"DPGaussianMixture": "full_pass", "DPMixedMixture": "full_pass",
                       "DPBernoulliMixture": "full_pass", "DPPoissonMixture": "full_pass",
                       "DPKMeans": "full_pass", "DPFactorAnalysis": "full_pass", "DPPCA": "full_pass", "DPGradientEM": "full_pass",
                       "DPLatentDirichletAllocation": "minibatch", "DPStochasticEP": "sequential"}

    class NoLoop(DPGaussianMixture):
        _loop = None

    with pytest.raises(ValueError, match="has no audit target"):
        audit(NoLoop(2, data_norm=1.0, epsilon=1.0), n_trials=1000)


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


def test_command_line_audits_a_fixed_domain_model_and_a_black_box(capsys):
    import json

    from dpem_fast._cli import main

    assert main(["audit", "--model", "bernoulli", "--epsilon", "1", "--scope", "iteration", "--trials", "20000",
                 "--random-state", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "DPBernoulliMixture" and out["violated"] is False and out["method"] == "gdp"
    assert main(["audit", "--model", "gmm", "--epsilon", "1", "--data-norm", "1", "--mode", "black-box",
                 "--trials", "12", "--max-iter", "2", "--random-state", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "black-box" and out["scope"] == "fit" and out["method"] == "threshold"


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


# ---------------------------------------------------------------- (e) issue 34: canaries that matter
#: the confidence of an audit of correct code whose soundness a test asserts: at 0.95 one seed in
#: twenty may land just above the claim (GMM add/remove at seed 3: 0.1965 > 0.1950), so a test
#: at one fixed seed would pass by that seed's luck; at 0.999 any seed fails with probability 1e-3
SOUND = 0.999

def test_the_add_remove_canary_is_the_one_that_moves_the_statistics_most():
    """Under add/remove the canary is the candidate whose own statistics move the releases most
    (GMM: the candidates differ, unlike k-means' which all tie): it attains the sensitivity and
    the audit is tight.  Picking any other candidate (the smallest, say) loses both."""
    r = audit(_gmm(neighbouring="add_remove"), random_state=3, scope="iteration", n_trials=200_000,
              confidence=SOUND)
    assert r.canary["relation"] == "add_remove" and r.canary["replacement"] is None
    assert 0.99 <= r.canary["attained"] <= 1.0 + 1e-9
    assert 0.8 * r.epsilon_claimed <= r.epsilon_lower <= r.epsilon_claimed


def test_an_author_level_lda_plan_is_audited_with_a_canary_author_of_m_documents():
    """Author-level LDA (``max_rows_per_group`` m): the canary is an author of m documents, which
    attains the group-level sensitivity m C; a canary of one document would attain 1/m of it
    and the audit would be loose."""
    r = audit(_lda(max_rows_per_group=3), random_state=0, statistic="unigram", n_trials=200_000, confidence=SOUND)
    assert r.canary["rows_per_group"] == 3 and r.canary["relation"] == "add_remove"
    assert r.canary["attained"] == pytest.approx(1.0 / _LDA_WIDENING["unigram"], abs=1e-6)
    assert 0.9 * r.epsilon_claimed <= r.epsilon_lower <= r.epsilon_claimed


def test_a_person_level_dp_sep_plan_is_audited_with_a_canary_person_filling_m_slots():
    """Person-level DP-SEP: the canary person fills m slots of one batch's release; it attains the
    plan's group-level sensitivity as the row-level audit attains its own, and the fit-scope
    audit is tight.  A canary filling 1 slot would move the factor by about 1/m of that."""
    def make(**kw):
        return DPStochasticEP(3, epsilon=1.0, delta=DELTA, bounds=(-1.0, 1.0), component_variance=0.05, **kw)

    row = audit(make(), random_state=0, scope="fit", n_trials=200_000, confidence=SOUND)
    grp = audit(make(max_rows_per_group=3), random_state=0, scope="fit", n_trials=200_000, confidence=SOUND)
    assert grp.canary["rows_per_group"] == 3 and grp.canary["relation"] == "replace"
    assert grp.canary["attained"] >= 0.9 * row.canary["attained"] and grp.canary["attained"] <= 1.0 + 1e-9
    assert 0.75 * grp.epsilon_claimed <= grp.epsilon_lower <= grp.epsilon_claimed
