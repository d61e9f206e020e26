"""DPLatentDirichletAllocation.

The shared conformance suite drives ``PrivateEM.fit`` (the EM loop, its domain and its
monkeypatch points), which an SVI estimator does not use; ``TestLDAConformance`` below
checks the same properties through this estimator's own seams (the E-step kernel and the
release layer): reproducibility and thread invariance, budget charged before any
statistic, re-accounting, recorded noise drawn, update sees only released values,
sensitivities searched by brute force, clipping end to end, epsilon=inf against
scikit-learn, bad input.
"""
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast import DPLatentDirichletAllocation, PrivacyLeakWarning
from dpem_fast import accounting as acc
from dpem_fast._engine import ReleaseLayer, StatSpec, make_plan
from dpem_fast._engine._specs import ROUNDING_ROW_CAP, float64_exact_sum_factor, float64_rounding_factor
from dpem_fast._reference import lda as ref
from dpem_fast._rng import derive_key, make_key
from dpem_fast.decomposition import _dp_lda, _dp_unigram, _lda_math
from dpem_fast.decomposition import _lda_svi as _dp_lda_svi

from privacy_conformance import PrivacyConformance
from dpem_fast._kernels import lda as _klda

K, V = 4, 60
#: The declared sensitivities' float64 rounding widening (issue 34, item 7), at the public cap on
#: the (private) document count: the topic-word sum (128 documents per float block), and the
#: unigram's exact per-word sums.
W_SVI = float64_rounding_factor(ROUNDING_ROW_CAP, 128, shifts=True, n_components=1)
W_UNI = float64_exact_sum_factor(ROUNDING_ROW_CAP)

# The privacy-mechanics tests below fit 100-400 synthetic documents at noise multiplier 1: the
# released statistics are noise-dominated by design, and where the plan predicts it the fit warns
# before the charge.  That warning has its own tests (test_topic_outlook_*).
pytestmark = pytest.mark.filterwarnings("ignore:.*noise-dominated:UserWarning")


def make_corpus(n, seed=0, V=V, mean_len=40):
    """Documents from a 4-topic LDA with peaked topics (synthetic)."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.05), K)
    rows = []
    for _ in range(n):
        theta = rng.dirichlet(np.full(K, 0.3))
        rows.append(rng.multinomial(rng.poisson(mean_len) + 1, theta @ topics))
    return sp.csr_matrix(np.array(rows, dtype=np.float64))


VOCAB = [f"w{i}" for i in range(V)]
PARAMS = dict(n_components=K, noise_multiplier=1.0, batch_size=50, max_doc_length=30, clip_fraction=0.5,
              n_epochs=2, vocabulary=VOCAB, random_state=0, total_samples=200)


def est(**kw):
    return DPLatentDirichletAllocation(**{**PARAMS, **kw})


class _Spy:
    """Records the calls of the kernel (and what the ledger held at each)."""

    def __init__(self, monkeypatch, ledger=None, zero=False):
        self.calls, self.ledger, self.zero = [], ledger, zero
        real = _klda._lda.lda_estep

        def spy(*args):
            self.calls.append({"clip": args[7], "entries": len(ledger.entries) if ledger else None})
            out = real(*args)
            if zero:
                args[9][...] = 0.0
            return out
        monkeypatch.setattr(_klda._lda, "lda_estep", spy)


class _ReleaseSpy:
    def __init__(self, monkeypatch, replace=None):
        self.inputs, self.outputs = [], []
        real = ReleaseLayer.release

        def release(layer, stats, index):
            self.inputs.append({k: np.array(v) for k, v in stats.items()})
            out = real(layer, stats, index)
            if replace is not None:
                out = {k: np.full_like(v, replace) for k, v in out.items()}
            self.outputs.append({k: np.array(v) for k, v in out.items()})
            return out
        monkeypatch.setattr(ReleaseLayer, "release", release)


class TestLDAConformance(PrivacyConformance):
    """The privacy part of the conformance suite (inherited) and LDA's own versions below."""
    estimator_class = DPLatentDirichletAllocation
    params = PARAMS
    fitted_attributes = ("components_",)
    # the token cap draws per document position: interleaving other authors' documents moves it
    group_interleaving_invariant = False
    sklearn_params = (dict(n_components=2, noise_multiplier=None, epsilon=1.0, total_samples=100, batch_size=5,
                           vocabulary=None, random_state=0),
                      dict(n_components=2, noise_multiplier=None, epsilon=np.inf, batch_size=5, vocabulary=None,
                           random_state=0))

    def make_data(self, n, seed=0):
        return make_corpus(n, seed=seed)

    def statistic_sites(self):
        return [(_klda._lda, "lda_estep")]

    def exact_specs(self, est, X):
        """Δ₂ = C (add/remove), √2 C (replace) of both releases (class docstring), unwidened."""
        C, V = est._clip_norm(X.shape[1]), X.shape[1]
        table = {"add_remove": C, "replace": math.sqrt(2.0) * C}
        return {"topic_word": StatSpec("topic_word", (est.n_components, V), table),
                "unigram": StatSpec("unigram", (V,), table)}

    def non_private_params(self):
        return {"noise_multiplier": None, "epsilon": np.inf}

    def epsilon_params(self):
        return {"noise_multiplier": None, "epsilon": 1.0}

    @pytest.mark.filterwarnings("ignore::dpem_fast.PrivacyLeakWarning")   # the checks' data: no vocabulary
    def test_sklearn_estimator_checks(self):
        super().test_sklearn_estimator_checks()

    # ---------------------------------------------------------- determinism
    def test_seeded_fit_is_reproducible_and_thread_count_invariant(self):
        X = make_corpus(300)
        a = est(n_threads=1).fit(X)
        b = est(n_threads=2).fit(X)
        c = est(n_threads=2, random_state=1).fit(X)
        assert_array_equal(a.components_, b.components_)
        assert_array_equal(a.transform(X[:20]), b.transform(X[:20]))
        assert not np.array_equal(a.components_, c.components_)

    # ------------------------------------------------------------ the budget
    def test_budget_is_charged_before_any_statistic(self, monkeypatch):
        ledger = acc.BudgetLedger(100.0, 1e-5, neighbouring="add_remove")
        spy = _Spy(monkeypatch, ledger)
        est(budget=ledger).fit(make_corpus(200))
        assert spy.calls and all(c["entries"] == 1 for c in spy.calls)

    def test_refused_budget_computes_no_statistic(self, monkeypatch):
        ledger = acc.BudgetLedger(0.01, 1e-5, neighbouring="add_remove")
        spy = _Spy(monkeypatch, ledger)
        with pytest.raises(acc.BudgetExceededError):
            est(budget=ledger).fit(make_corpus(200))
        assert spy.calls == [] and ledger.entries == []

    def test_ledger_of_the_other_relation_is_refused(self):
        with pytest.raises(ValueError, match="add_remove"):
            est(budget=acc.BudgetLedger(10.0, 1e-5, neighbouring="replace")).fit(make_corpus(100))

    def test_partial_fit_charges_each_call(self, monkeypatch):
        ledger = acc.BudgetLedger(5.0, 1e-5, neighbouring="add_remove")
        m = est(noise_multiplier=2.0, budget=ledger)
        X = make_corpus(100)
        m.partial_fit(X[:50]).partial_fit(X[50:])
        assert len(ledger.entries) == 2
        assert m.privacy_.n_iter == 2
        spent = acc.RDPAccountant(neighbouring="add_remove").compose(m.privacy_.event).get_epsilon(1e-5)
        assert_allclose(spent, m.privacy_.epsilon_spent)
        spy = _Spy(monkeypatch, ledger)
        with pytest.raises(acc.BudgetExceededError):
            for _ in range(20):
                m.partial_fit(X[:50])
        assert len(spy.calls) == len(ledger.entries) - 2     # the refused call computed nothing

    # ------------------------------------------------------------ accounting
    @pytest.mark.parametrize("accountant, name", [("rdp", "rdp"), ("strong", "advanced")])
    def test_event_reaccounts_and_meets_the_target_tightly(self, accountant, name):
        X = make_corpus(200)
        m = est(noise_multiplier=None, epsilon=2.0, accountant=accountant).fit(X)
        p = m.privacy_
        assert p.neighbouring == "add_remove" and p.accountant == name
        fresh = acc.get_accountant(name, "add_remove")
        assert_allclose(fresh().compose(p.event).get_epsilon(1e-5), p.epsilon_spent)
        assert p.epsilon_spent <= 2.0 * (1 + 1e-9)
        r, u = p.releases["topic_word"], p.releases["unigram"]
        a, N = PARAMS["clip_fraction"], PARAMS["max_doc_length"]
        assert r.sensitivity == a * N * W_SVI and r.count == p.n_iter == 2 * round(200 / 50)
        assert u.sensitivity == a * N * W_UNI and u.count == 1 and u.shape == (V,)
        assert 1 + 1e-3 < W_UNI < W_SVI < 1 + 3e-3
        # the records alone: one Gaussian (the unigram) and T Poisson(q)-subsampled Gaussians of
        # multiplier sigma; 2 % less SVI noise overspends
        q = 50 / 200

        def eps(z):
            ev = acc.ComposedEvent([acc.GaussianEvent(u.noise_multiplier),
                                    acc.SelfComposedEvent(acc.PoissonSampledEvent(q, acc.GaussianEvent(z)), r.count)])
            return fresh().compose(ev).get_epsilon(1e-5)
        assert eps(r.noise_multiplier) <= 2.0 * (1 + 1e-6)
        assert eps(0.98 * r.noise_multiplier) > 2.0
        with pytest.raises(acc.NeighbouringMismatchError):
            acc.get_accountant(name, "replace")().compose(p.event)

    def test_rdp_beats_strong_composition(self):
        X = make_corpus(200)
        e_rdp = est(accountant="rdp").fit(X).privacy_.epsilon_spent
        e_str = est(accountant="strong").fit(X).privacy_.epsilon_spent
        assert e_rdp < e_str

    def test_subsampled_rdp_matches_dp_accounting(self):
        dpa = pytest.importorskip("dp_accounting")
        X = make_corpus(400)
        p = est(batch_size=20, n_epochs=1, total_samples=400).fit(X).privacy_
        a = dpa.rdp.RdpAccountant()
        a.compose(dpa.GaussianDpEvent(p.releases["unigram"].noise_multiplier))
        a.compose(dpa.PoissonSampledDpEvent(20 / 400, dpa.GaussianDpEvent(1.0)), 20)
        assert_allclose(p.epsilon_spent, a.get_epsilon(1e-5), rtol=0.02)

    # ----------------------------------------------------------------- noise
    def test_every_release_draws_its_recorded_noise(self, monkeypatch):
        _Spy(monkeypatch, zero=True)             # exact statistics are zero: the release is the noise
        rel = _ReleaseSpy(monkeypatch)
        m = est(n_epochs=3, noise_multiplier=1.3).fit(make_corpus(200))
        r = m.privacy_.releases["topic_word"]
        assert_allclose(r.noise_scale, 1.3 * r.sensitivity)
        draws = np.array([o["topic_word"].ravel() for o in rel.outputs if "topic_word" in o])
        assert draws.shape[0] == m.privacy_.n_iter
        sd = draws.std(axis=1)
        assert np.all(np.abs(sd / r.noise_scale - 1) < 0.2)           # 240 draws each
        assert abs(draws.std() / r.noise_scale - 1) < 0.03            # 2,880 draws
        c = np.corrcoef(draws)
        assert np.max(np.abs(c[~np.eye(len(c), dtype=bool)])) < 0.25

    def test_update_sees_only_released_statistics(self, monkeypatch):
        _ReleaseSpy(monkeypatch, replace=1.0)
        a = est().fit(make_corpus(200, seed=1))
        b = est().fit(make_corpus(200, seed=2))
        assert_array_equal(a.components_, b.components_)

    def test_update_is_the_papers_step_on_the_signed_release_then_the_projection(self, monkeypatch):
        """λ_T = a_T Λ_0 + (1 − a_T) η + shrink(M_T): the paper's recursion on the signed releases
        (nothing clamped), projected with the plan's own noise sd towards the released unigram."""
        rel = _ReleaseSpy(monkeypatch)
        m = est(n_epochs=1, batch_size=100).fit(make_corpus(200))
        key = make_key(0)
        lam0 = np.random.Generator(np.random.PCG64(derive_key(key, "lda", "init"))).gamma(100, 0.01, (K, V))
        eta, q = 1 / K, 0.5
        r, ru = m.privacy_.releases["topic_word"], m.privacy_.releases["unigram"]
        u = _lda_math.unigram_distribution(rel.outputs[0]["unigram"], ru.noise_scale, eta)
        assert_allclose(m.unigram_distribution_, u, rtol=1e-12)
        lam, a, M, var = lam0, 1.0, np.zeros((K, V)), 0.0
        unclamped = lam0
        for t, out in enumerate(rel.outputs[1:]):
            rho = (10.0 + t + 1) ** -0.7
            unclamped = (1 - rho) * unclamped + rho * (eta + out["topic_word"] / q)   # the paper's step
            a, M = a * (1 - rho), (1 - rho) * M + rho * out["topic_word"] / q
            var = (1 - rho) ** 2 * var + (rho * r.noise_scale / q) ** 2
        assert_allclose(a * lam0 + (1 - a) * eta + M, unclamped, rtol=1e-10)          # the split is exact
        shrunk, kept = _lda_math.shrink_to_unigram(M, math.sqrt(var), u)
        assert_allclose(m.components_, a * lam0 + (1 - a) * eta + shrunk, rtol=1e-12)
        assert_allclose(m.noise_dominance_, 1 - kept, rtol=1e-12)
        assert np.all(m.components_ > 0) and np.all(np.isfinite(m.components_))

    # ---------------------------------------------------------- sensitivity
    def test_poisson_batches(self):
        m = est(n_epochs=25, batch_size=40).fit(make_corpus(200))
        sizes = np.array(m.diagnostics_["batch_sizes"])
        assert len(sizes) == 25 * 5
        assert abs(sizes.mean() - 40) < 3 * math.sqrt(200 * 0.2 * 0.8 / len(sizes))
        assert 0.5 < sizes.var() / (200 * 0.2 * 0.8) < 1.6

    def test_token_cap(self):
        X = make_corpus(100, mean_len=80)
        m = est()
        Xc, n_capped = m._cap_tokens(m._check_X(X), make_key(0))
        lengths = np.asarray(Xc.sum(axis=1)).ravel()
        assert lengths.max() <= 30 and n_capped == np.sum(np.asarray(X.sum(axis=1)).ravel() > 30)
        assert np.all((Xc - X).toarray() <= 0)
        assert np.all(lengths == np.minimum(np.asarray(X.sum(axis=1)).ravel(), 30))

    @pytest.mark.parametrize("seed", [0, 1])
    def test_sensitivity_is_never_exceeded_and_nearly_attained(self, seed):
        """Brute force: add one document to a minibatch; the clipped sum moves by <= aN."""
        rng = np.random.default_rng(seed)
        m = est()
        a, N = 0.5, 30
        worst = 0.0
        base = m._check_X(make_corpus(20, seed=seed))
        base, _ = m._cap_tokens(base, make_key(seed))
        for trial in range(40):
            lam = rng.gamma(rng.uniform(0.05, 2), 1.0, (K, V)) + 1e-3
            eb = ref.exp_dirichlet_expectation(lam)
            if trial % 2:                       # adversarial: one term, N times, under peaked topics
                doc = np.zeros((1, V))
                doc[0, rng.integers(V)] = N
                eb = ref.exp_dirichlet_expectation(np.where(rng.random((K, V)) < 0.5, 1e-3, 50.0))
            else:
                doc = rng.multinomial(N, rng.dirichlet(np.full(V, 0.1)))[None].astype(float)
            Xp = sp.vstack([base, sp.csr_matrix(doc)]).tocsr()
            g0 = np.ones((Xp.shape[0], K))
            _, s_with, _ = m._estep(Xp, eb, g0, 0.25, a * N, 1)
            _, s_without, _ = m._estep(base, eb, g0[:-1], 0.25, a * N, 1)
            change = np.linalg.norm(s_with - s_without)
            assert change <= a * N * (1 + 1e-12)
            worst = max(worst, change)
            # unclipped: a document moves it by at most N (the paper's Eq. 8, times S)
            _, u_with, _ = m._estep(Xp, eb, g0, 0.25, np.inf, 1)
            _, u_without, _ = m._estep(base, eb, g0[:-1], 0.25, np.inf, 1)
            assert np.linalg.norm(u_with - u_without) <= N * (1 + 1e-12)
        assert worst > 0.95 * a * N
        spec = m._plan(K, V, 4, 0.5).releases["topic_word"]
        assert spec.sensitivity == a * N * W_SVI

    def test_aggregate_clipping_exceeds_the_papers_bound(self):
        """The paper's Eq. 9 (clip the sum to C) does not give sensitivity C: sqrt(2) C."""
        C = 1.0

        def project(z):
            n = np.linalg.norm(z)
            return z if n <= C else z * (C / n)
        z = np.zeros(2 * V)
        z[: V] = C / math.sqrt(V)                # the other documents' sum, on the sphere
        s = np.zeros(2 * V)
        s[V:] = 1e6 / math.sqrt(V)               # one document, orthogonal, large
        change = np.linalg.norm(project(z + s) - project(z))
        assert change > 1.41 * C
        # and never more than sqrt(2) C for non-negative statistics
        rng = np.random.default_rng(0)
        for _ in range(2000):
            z, s = rng.exponential(size=(2, 10)) * rng.exponential(3, size=(2, 1))
            assert np.linalg.norm(project(z + s) - project(z)) <= math.sqrt(2) * C + 1e-12

    def test_clipping_holds_end_to_end(self, monkeypatch):
        spy = _Spy(monkeypatch)
        rel = _ReleaseSpy(monkeypatch)
        X = make_corpus(200, mean_len=500)       # long documents: the cap and the clip both bite
        m = est().fit(X)
        assert all(c["clip"] == 0.5 * 30 for c in spy.calls)
        assert "unigram" in rel.inputs[0]                  # the floor's release comes first
        u = rel.inputs[0]["unigram"]
        assert np.all(u >= 0) and u.sum() <= 200 * 30 * (1 + 1e-12)   # at most N tokens per document
        inputs = [i for i in rel.inputs if "topic_word" in i]
        for size, inp, clipped in zip(m.diagnostics_["batch_sizes"], inputs, m.diagnostics_["n_clipped"]):
            s = inp["topic_word"]
            assert np.all(s >= 0) and np.linalg.norm(s) <= size * 15 * (1 + 1e-12)
            assert s.sum() <= size * 30 * (1 + 1e-12)      # at most N tokens per document
        # the clip bites (how often depends on how sharp the topics the E-step uses are)
        assert sum(m.diagnostics_["n_clipped"]) > 0

    # ---------------------------------------------------------- non-private
    # lda.datasets.load_reuters leaves its file open (the warning is raised at collection)
    @pytest.mark.filterwarnings("ignore::ResourceWarning")
    @pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
    def test_epsilon_inf_matches_scikit_learn(self):
        lda_datasets = pytest.importorskip("lda.datasets")
        from sklearn.decomposition import LatentDirichletAllocation
        X = sp.csr_matrix(lda_datasets.load_reuters()).astype(np.float64)
        kw = dict(learning_offset=10.0, learning_decay=0.7, max_doc_update_iter=100, mean_change_tol=1e-3)
        ours, theirs = [], []
        for seed in range(3):
            sk = LatentDirichletAllocation(10, learning_method="online", batch_size=64, max_iter=10,
                                           random_state=seed, total_samples=X.shape[0], **kw).fit(X)
            m = DPLatentDirichletAllocation(10, epsilon=np.inf, batch_size=64, n_epochs=10, random_state=seed,
                                            **kw).fit(X)
            theirs.append(sk.perplexity(X))
            ours.append(m.perplexity(X))        # the same bound (scikit-learn's definition) of our model
            # our bound of scikit-learn's model equals scikit-learn's own
            gamma = sk._unnormalized_transform(X)
            assert_allclose(ref.perplexity(X, gamma, sk.components_, 0.1, 0.1), sk.perplexity(X), rtol=1e-10)
        assert abs(np.mean(ours) / np.mean(theirs) - 1) < 0.05
        assert m.privacy_ is None

    def test_epsilon_inf_step_equals_the_reference(self):
        X = make_corpus(80)
        m = DPLatentDirichletAllocation(K, epsilon=np.inf, batch_size=80, n_epochs=1, random_state=3).fit(X)
        key = make_key(3)
        lam = np.random.Generator(np.random.PCG64(derive_key(key, "lda", "init"))).gamma(100, 0.01, (K, V))
        g0 = np.random.Generator(np.random.PCG64(derive_key(key, "lda", "gamma", 1))).gamma(100, 0.01, (80, K))
        _, s, _ = ref.estep(m._check_X(X), ref.exp_dirichlet_expectation(lam), 1 / K, g0, 100, 1e-3)
        rho = 11.0 ** -0.7
        assert_allclose(m.components_, (1 - rho) * lam + rho * (1 / K + s), rtol=1e-9)
        assert_allclose(m.transform(X).sum(axis=1), 1.0)
        assert np.isfinite(m.perplexity(X)) and m.score(X) < 0

    # ------------------------------------------------------------ bad input
    @pytest.mark.parametrize("kw, exc, match", [
        ({"epsilon": 0.0, "noise_multiplier": None}, ValueError, "epsilon"),
        ({"epsilon": -1.0, "noise_multiplier": None}, ValueError, "epsilon"),
        ({"epsilon": 1.0}, ValueError, "exactly one"),
        ({"noise_multiplier": None}, ValueError, "epsilon"),
        ({"noise_multiplier": 0.0}, ValueError, "noise_multiplier"),
        ({"delta": 0.0}, ValueError, "delta"),
        ({"delta": 1.0}, ValueError, "delta"),
        ({"n_components": 0}, ValueError, "n_components"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 10 ** 6}, ValueError, "batch_size"),
        ({"clip_fraction": 1.5}, ValueError, "clip_fraction"),
        ({"clip_fraction": 0.0}, ValueError, "clip_fraction"),
        ({"max_doc_length": 0}, ValueError, "max_doc_length"),
        ({"learning_decay": 2.0}, ValueError, "learning_decay"),
        ({"mean_change_tol": float("nan")}, ValueError, "mean_change_tol"),
        ({"accountant": "gdp"}, ValueError, "accountant"),
        ({"vocabulary": VOCAB[:-1]}, ValueError, "vocabulary"),
        ({"budget": "x"}, TypeError, "budget"),
        ({"n_threads": 0}, ValueError, "n_threads"),
    ])
    def test_bad_parameters(self, kw, exc, match):
        with pytest.raises(exc, match=match):
            est(**kw).fit(make_corpus(100))

    def test_bad_data(self):
        X = make_corpus(100).toarray()
        # scikit-learn's messages for shape, NaN, inf and emptiness (validate_data), ours for counts
        for bad, match in [(-X, "non-negative"), (X + 0.5, "integers"), (np.full_like(X, np.nan), "NaN"),
                           (np.full_like(X, np.inf), "infinity"), (X[:0], "0 sample"), (X[:, :0], "0 feature"),
                           (X[0], "2D array"), (np.full_like(X, 1e300), "exceed")]:
            with pytest.raises(ValueError, match=match):
                est(vocabulary=None if bad.ndim != 2 else [f"w{i}" for i in range(bad.shape[1])]).fit(bad)
        with pytest.raises(TypeError, match="numeric"):
            est().fit(np.array([["a", "b"]]))
        m = est().fit(X)
        with pytest.raises(ValueError, match="expecting 60 features"):
            m.transform(X[:, :-1])
        with pytest.raises(ValueError, match="expecting 60 features"):
            m.perplexity(X[:, :-1])

    def test_empty_documents_are_counted_and_skipped(self):
        X = make_corpus(100).tolil()
        X[:10] = 0
        m = est().fit(X.tocsr())
        assert m.diagnostics_["n_empty_documents"] == 10
        assert np.all(np.isfinite(m.components_)) and np.all(m.components_ > 0)

    def test_huge_counts_are_capped(self):
        X = make_corpus(100)
        X.data[:5] = 1e9
        m = est().fit(X)
        assert np.all(np.isfinite(m.components_)) and np.isfinite(m.perplexity(make_corpus(10)))

    def test_private_vocabulary_warning(self):
        with pytest.warns(PrivacyLeakWarning, match="public vocabulary"):
            est(vocabulary=None).fit(make_corpus(100))


# ------------------------------------------------------------------ engine plan
def _spec():
    return StatSpec("s", (3, 4), {"add_remove": 2.0, "replace": 2.8})


def test_make_plan_sampling_rate_wraps_each_iteration():
    p = make_plan([_spec()], 30, epsilon=1.0, delta=1e-5, neighbouring="add_remove", accountant="rdp",
                  sampling_rate=0.05)
    inner = p.event.event
    assert isinstance(inner, acc.SelfComposedEvent) and inner.count == 30
    assert isinstance(inner.event, acc.PoissonSampledEvent) and inner.event.sampling_probability == 0.05
    assert_allclose(p.releases["s"].noise_multiplier, inner.event.event.noise_multiplier)
    assert abs(p.epsilon_spent - 1.0) < 1e-3
    full = make_plan([_spec()], 30, epsilon=1.0, delta=1e-5, neighbouring="add_remove", accountant="rdp")
    assert p.releases["s"].noise_scale < full.releases["s"].noise_scale     # amplification


def test_make_plan_sampling_rate_refusals_and_fixed_multiplier():
    with pytest.raises(ValueError, match="add_remove"):
        make_plan([_spec()], 3, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="rdp",
                  sampling_rate=0.1)
    with pytest.raises(ValueError, match="sampling_rate"):
        make_plan([_spec()], 3, epsilon=1.0, delta=1e-5, neighbouring="add_remove", accountant="rdp",
                  sampling_rate=1.5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        make_plan([_spec()], 3, epsilon=None, delta=1e-5, neighbouring="add_remove", accountant="rdp",
                  noise_multiplier=-1.0)
    p = make_plan([_spec()], 3, epsilon=None, delta=1e-5, neighbouring="add_remove", accountant="rdp",
                  sampling_rate=0.1, noise_multiplier=1.5)
    assert_allclose(p.releases["s"].noise_multiplier, 1.5)
    assert_allclose(acc.RDPAccountant(neighbouring="add_remove").compose(p.event).get_epsilon(1e-5),
                    p.epsilon_spent)


# ------------------------------------------- issue 21: the corpus size, partial_fit's key and paths
def _record_without_values(m):
    """What a private fit publishes besides the released values: the record and public attributes."""
    import json
    from dpem_fast import _persist
    return (json.dumps(_persist.record_to_json(m.privacy_, _persist._Inline()), sort_keys=True),
            m.n_batch_iter_, m.n_iter_, m.components_.shape)


def test_the_record_and_the_saved_file_do_not_depend_on_the_document_count(tmp_path):
    """Add/remove: D is private.  Fits on D and D + 1 documents (the issue's 1,050 / 1,051 at
    S = 100, where round(D / S) changes) publish the same plan, record and file metadata."""
    import json
    X = make_corpus(1051, mean_len=10)
    kw = dict(batch_size=100, n_epochs=1, total_samples=1000, max_doc_update_iter=5)
    a, b = est(**kw).fit(X[:1050]), est(**kw).fit(X)
    assert _record_without_values(a) == _record_without_values(b)
    assert a.privacy_.n_iter == 10 and a.privacy_.event.event.events[1].event.sampling_probability == 0.1
    metas = []
    for name, m in (("a", a), ("b", b)):
        m.save(tmp_path / f"{name}.npz")
        with np.load(tmp_path / f"{name}.npz") as z:
            meta = json.loads(z["__meta__"].tobytes())
        metas.append({k: v for k, v in meta.items() if k != "fitted"})
        assert set(meta["fitted"]) == set(metas and meta["fitted"])
    assert metas[0] == metas[1]
    assert not np.array_equal(a.components_, b.components_)     # the released values do differ


def test_a_private_fit_without_a_public_document_count_is_refused_before_the_budget():
    ledger = acc.BudgetLedger(10.0, 1e-5, neighbouring="add_remove")
    X = make_corpus(123)
    for call in ("fit", "partial_fit"):
        with pytest.raises(ValueError, match="total_samples") as info:
            getattr(est(total_samples=None, budget=ledger), call)(X)
        assert "123" not in str(info.value)                      # no message reads D
    with pytest.raises(ValueError, match="total_samples"):
        est(batch_size=300, total_samples=200).fit(X)
    assert ledger.entries == []
    # epsilon=inf is not private: the true D is used, total_samples is not needed
    DPLatentDirichletAllocation(K, epsilon=np.inf, batch_size=50, n_epochs=1).fit(X)


def test_partial_fit_keeps_no_key_and_its_next_noise_is_not_in_the_pickle():
    import pickle
    X = make_corpus(120)
    m = est(random_state=None).partial_fit(X[:60])
    assert not any(k in vars(m) for k in ("_key", "_partial_events"))
    for v in vars(m).values():                                     # nothing shaped like a key
        assert not (isinstance(v, np.ndarray) and v.dtype == np.uint32)
    blob = pickle.dumps(m)
    one, two = pickle.loads(blob).partial_fit(X[60:]), pickle.loads(blob).partial_fit(X[60:])
    assert not np.array_equal(one.components_, two.components_)   # fresh noise per call
    # with a seed, the pickle of the fitted model drops it (like a saved file)
    s = est(random_state=5).partial_fit(X[:60])
    assert pickle.loads(pickle.dumps(s)).random_state is None


def test_partial_fit_with_a_seed_is_reproducible_and_each_call_draws_new_noise(monkeypatch):
    rel = _ReleaseSpy(monkeypatch)
    X = make_corpus(120)
    a = est(random_state=7).partial_fit(X[:60]).partial_fit(X[60:])
    b = est(random_state=7).partial_fit(X[:60]).partial_fit(X[60:])
    assert_array_equal(a.components_, b.components_)
    noise = [o["topic_word"] - i["topic_word"] for o, i in zip(rel.outputs, rel.inputs)]
    assert not np.allclose(noise[0], noise[1])                     # calls of one fit: new streams


def test_partial_fit_update_sees_only_released_statistics(monkeypatch):
    _ReleaseSpy(monkeypatch, replace=1.0)
    a = est().partial_fit(make_corpus(60, seed=1)).partial_fit(make_corpus(60, seed=3))
    b = est().partial_fit(make_corpus(60, seed=2)).partial_fit(make_corpus(60, seed=4))
    assert_array_equal(a.components_, b.components_)


def test_partial_fit_releases_its_recorded_sensitivity_and_noise(monkeypatch):
    """Each call's release: Δ = aN, σ = noise_multiplier · aN, and noise of that scale."""
    _Spy(monkeypatch, zero=True)
    rel = _ReleaseSpy(monkeypatch)
    m = est(noise_multiplier=1.7)
    X = make_corpus(40)
    for _ in range(12):
        m.partial_fit(X)
    r = m.privacy_.releases["topic_word_partial"]
    a, N = PARAMS["clip_fraction"], PARAMS["max_doc_length"]
    assert r.sensitivity == a * N * W_SVI and r.noise_scale == pytest.approx(1.7 * a * N * W_SVI, rel=1e-12)
    assert r.count == m.privacy_.n_iter == 12
    draws = np.concatenate([o["topic_word"].ravel() for o in rel.outputs])     # 2,880 draws
    assert abs(draws.std() / r.noise_scale - 1) < 0.04
    spent = acc.RDPAccountant(neighbouring="add_remove").compose(
        acc.NeighbouringEvent("add_remove", acc.SelfComposedEvent(acc.GaussianEvent(1.7), 12))).get_epsilon(1e-5)
    assert m.privacy_.epsilon_spent == pytest.approx(spent, rel=1e-9)


def test_partial_fit_clips_each_document(monkeypatch):
    spy = _Spy(monkeypatch)
    rel = _ReleaseSpy(monkeypatch)
    doc = np.zeros((1, V))
    doc[0, 3] = 500.0                              # one term 500 times: capped to N = 30 tokens
    m = est(clip_fraction=0.2)
    for _ in range(3):
        m.partial_fit(doc)
    assert all(c["clip"] == 0.2 * 30 for c in spy.calls)
    for inp in rel.inputs:                         # unclipped, its norm is at least 30 / sqrt(K) = 15
        s = inp["topic_word"]
        assert s.sum() <= 30 * (1 + 1e-12) and np.linalg.norm(s) <= 6.0 * (1 + 1e-12)
        assert np.linalg.norm(s) > 5.9


def test_partial_fit_continues_a_fit():
    X = make_corpus(200)
    m = est(noise_multiplier=None, epsilon=1.0).fit(X)
    fitted = m.privacy_
    m.partial_fit(X[:50])
    p = m.privacy_
    assert p.n_iter == fitted.n_iter + 1 and m.n_batch_iter_ == fitted.n_iter + 2
    assert set(p.releases) == {"unigram", "topic_word", "topic_word_partial"}
    again = acc.get_accountant(p.accountant, "add_remove")().compose(p.event).get_epsilon(p.delta)
    assert again == pytest.approx(p.epsilon_spent, rel=1e-12) and p.epsilon_spent > fitted.epsilon_spent


# ------------------------------------------------ issue 23: the utility floor and its pieces
def _split_corpus(n_train, n_test, seed=0, **kw):
    X = make_corpus(n_train + n_test, seed=seed, **kw)
    return X[:n_train], X[n_train:]


def test_default_clip_follows_the_token_cap_and_vocabulary():
    """C = N / sqrt(min(N, V)) by default (public); an N-token document of distinct terms is never
    clipped, one term N times is; the release's sensitivity is C under add/remove."""
    m = est(clip_fraction=None, max_doc_length=16)
    assert m._clip_norm(V) == pytest.approx(4.0)
    assert est(clip_fraction=None, max_doc_length=240)._clip_norm(V) == pytest.approx(240 / math.sqrt(V))
    spec = m._spec(K, V)
    assert spec.sensitivity("l2", "add_remove") == pytest.approx(4.0 * W_SVI, rel=1e-14)
    assert spec.sensitivity("l2", "replace") == pytest.approx(4.0 * math.sqrt(2) * W_SVI, rel=1e-14)
    spread = np.zeros((1, V))
    spread[0, :16] = 1                           # 16 distinct terms: norm <= 4 for any phi
    lump = np.zeros((1, V))
    lump[0, 0] = 16                              # one term 16 times: norm 16 / sqrt(K) at least
    eb = ref.exp_dirichlet_expectation(np.random.default_rng(0).gamma(1.0, 1.0, (K, V)))
    for doc, clipped in ((spread, 0), (lump, 1)):
        _, s, n = m._estep(m._check_X(doc), eb, np.ones((1, K)), 0.25, 4.0, 1)
        assert n == clipped and np.linalg.norm(s) <= 4.0 * (1 + 1e-12)


def test_no_topic_gets_mass_on_words_the_corpus_never_uses():
    """Contract item 1: noise alone puts no mass on a word.  270 of 300 words never occur; λ
    there stays at the prior's pseudo-counts (η = 1/K plus the decayed data-independent
    initialisation, below 1.5), where the paper's clamp-then-scale put ~0.4 σC/q on every
    entry (90 % of each topic on the unused words)."""
    X = make_corpus(3000, seed=2, mean_len=20, V=30)
    X = sp.hstack([X, sp.csr_matrix((X.shape[0], 270))]).tocsr()
    m = DPLatentDirichletAllocation(K, epsilon=3.0, batch_size=300, total_samples=3000, max_doc_length=30,
                                    n_epochs=1, random_state=0, vocabulary=[str(i) for i in range(300)]).fit(X)
    assert np.all(m.components_[:, 30:] < 1.5)
    assert m.unigram_distribution_[30:].sum() < 0.02
    assert np.all(np.isfinite(m.components_)) and np.all(m.components_ > 0)


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_fit_is_never_worse_than_the_private_unigram_model(eps):
    """Contract item 2: held-out perplexity at most the unigram model released with the same
    (ε, δ) and relation, up to the comparison's noise (5 %), and never above V.  Short texts
    (10 tokens) over 400 words: the paper's default clip and clamp-then-scale gave 332 at
    ε = 1 (unigram 124)."""
    Vb = 400
    Xtr, Xte = _split_corpus(3000, 500, seed=2, mean_len=10, V=Vb)
    kw = dict(max_doc_length=30, random_state=0)
    m = DPLatentDirichletAllocation(K, epsilon=eps, batch_size=300, total_samples=3000, n_epochs=1,
                                    vocabulary=[str(i) for i in range(Vb)], **kw).fit(Xtr)
    u = _dp_unigram.private_unigram(Xtr, epsilon=eps, **kw)
    assert m.plugin_perplexity(Xte) <= 1.05 * u.perplexity(Xte)
    assert m.plugin_perplexity(Xte) < Vb and u.perplexity(Xte) < Vb


def test_perplexity_does_not_grow_as_the_test_set_shrinks():
    """Per-token plug-in perplexity: 5 documents and 500 give the same value up to sampling;
    scikit-learn's bound adds a global topic-word term divided by the test set's token count."""
    Xtr, Xte = _split_corpus(1000, 500, seed=3, mean_len=20)
    m = est(noise_multiplier=None, epsilon=1.0, batch_size=200, total_samples=1000, clip_fraction=None).fit(Xtr)
    full = m.plugin_perplexity(Xte)
    small = [m.plugin_perplexity(Xte[i:i + 5]) for i in range(0, 500, 50)]
    assert 0.8 < np.exp(np.mean(np.log(small))) / full < 1.25
    assert np.isfinite(full) and full < V


def test_perplexity_closed_forms():
    """One topic: the unigram perplexity of E[β] exactly.  Two topics, a tiny case: the
    plug-in formula by hand, with θ̂ from the E-step's γ."""
    X = make_corpus(200, seed=5)
    m = DPLatentDirichletAllocation(1, epsilon=np.inf, batch_size=200, n_epochs=2, random_state=0).fit(X)
    p = m.components_[0] / m.components_[0].sum()
    Xc = m._check_X(X)
    assert m.plugin_perplexity(X) == pytest.approx(np.exp(-(Xc.data @ np.log(p[Xc.indices])) / Xc.data.sum()),
                                                   rel=1e-12)
    lam = np.array([[3.0, 1.0, 0.5], [0.2, 2.0, 4.0]])
    doc = sp.csr_matrix(np.array([[2.0, 0.0, 1.0]]))
    gamma = np.array([[1.5, 0.5]])
    beta, theta = lam / lam.sum(axis=1, keepdims=True), gamma / gamma.sum()
    by_hand = 2 * np.log(theta[0] @ beta[:, 0]) + np.log(theta[0] @ beta[:, 2])
    assert _lda_math.plugin_log_likelihood(doc, gamma, lam)[0] == pytest.approx(by_hand, rel=1e-14)
    for method in (m.perplexity, m.plugin_perplexity):
        with pytest.raises(ValueError, match="no tokens"):
            method(np.zeros((2, V)))


@pytest.mark.parametrize("private", [False, True])
def test_score_and_perplexity_are_scikit_learns_and_the_plug_in_ones_keep_their_values(private):
    """Issue 39: ``score`` / ``perplexity`` are scikit-learn's (the variational bound, and
    exp(-bound / tokens)) of the fitted model: a scikit-learn ``LatentDirichletAllocation``
    given our topics and priors computes the same numbers, E-step included.  ``plugin_score`` /
    ``plugin_perplexity`` are what score / perplexity returned before (the plug-in formula)."""
    from sklearn.decomposition import LatentDirichletAllocation
    Xtr, Xte = _split_corpus(300, 40, seed=6, mean_len=20)
    m = est(n_epochs=1) if private else DPLatentDirichletAllocation(K, epsilon=np.inf, batch_size=50, random_state=0)
    m.fit(Xtr)
    assert (m.privacy_ is not None) == private
    sk = LatentDirichletAllocation(K, max_doc_update_iter=m.max_doc_update_iter, mean_change_tol=m.mean_change_tol)
    sk.components_, sk.exp_dirichlet_component_ = m.components_, m.exp_dirichlet_component_
    sk.doc_topic_prior_ = sk.topic_word_prior_ = 1.0 / K
    sk.n_features_in_, sk.n_batch_iter_, sk.n_iter_ = V, 1, 1
    for X in (Xte, Xte[:3], Xtr):
        # the E-steps agree to ~1e-9 (scikit-learn adds 1e-16 to each φ normaliser), and the
        # perplexity's exponent multiplies a bound's relative error by log(perplexity)
        assert m.score(X) == pytest.approx(sk.score(X), rel=1e-8)
        assert m.perplexity(X) == pytest.approx(sk.perplexity(X), rel=1e-7)
        Xc, gamma = m._unnormalized_transform(X)
        old = _lda_math.plugin_log_likelihood(Xc, gamma, m.components_).sum()
        assert m.plugin_score(X) == old
        assert m.plugin_perplexity(X) == np.exp(-old / Xc.data.sum())
    # the bound's global term is divided by the test set's tokens: three documents' bound
    # perplexity is far above the plug-in one
    assert m.perplexity(Xte[:3]) > m.plugin_perplexity(Xte[:3])


def test_shrink_to_fallback_is_the_identity_without_noise_and_removes_pure_noise():
    rng = np.random.default_rng(0)
    M = rng.gamma(1.0, 5.0, (4, 500))
    fallback = np.full(500, 1 / 500)
    P, kept = _lda_math.shrink_to_fallback(M, 0.0, fallback)
    assert_array_equal(P, M) and kept == 1.0
    noise = rng.normal(0, 3.0, (4, 500))
    P, kept = _lda_math.shrink_to_fallback(noise, 3.0, fallback)
    assert kept < 0.01                           # pure noise: nothing clears the threshold
    assert np.all(P >= 0) and np.all(np.abs(P.sum(axis=1) - np.maximum(noise.sum(axis=1), 0)) < 1e-9 + 3.0)
    signal = np.zeros((4, 500))
    signal[:, :5] = 500.0                        # 5 strong words per topic, plus noise
    P, kept = _lda_math.shrink_to_fallback(signal + noise, 3.0, fallback)
    assert kept > 0.9 and np.all(P[:, :5] > 400) and np.all(P[:, 5:] < 5)


def test_shrink_to_unigram_keeps_only_deviations_above_the_noise():
    rng = np.random.default_rng(0)
    V, tau = 500, 3.0
    u = rng.dirichlet(np.ones(V))
    M = rng.gamma(1.0, 5.0, (4, V))
    P, kept = _lda_math.shrink_to_unigram(M, 0.0, u)
    assert_array_equal(P, M) and kept == 1.0
    null = 2000.0 * u[None, :] + rng.normal(0, tau, (4, V))      # every topic is the unigram
    P, kept = _lda_math.shrink_to_unigram(null, tau, u)
    assert kept < 0.01                                              # noise alone shows no deviation
    assert_allclose(P / P.sum(axis=1, keepdims=True), np.broadcast_to(u, P.shape), atol=1e-12)
    topic = 2000.0 * u[None, :] + rng.normal(0, tau, (4, V))
    topic[:, :5] += 300.0                                           # 5 words each topic over-uses
    P, kept = _lda_math.shrink_to_unigram(topic, tau, u)
    assert np.all(P[:, :5] - 2000.0 * u[:5] > 250) and np.all(P >= 0)


def test_the_topics_shrink_towards_the_released_unigram_not_the_true_one(monkeypatch):
    """Mutation-style: the unigram the topic statistic is shrunk towards is the *release* (the
    layer's noisy output, post-processed), never the corpus's exact word counts."""
    X = make_corpus(200)
    seen = []
    real = _lda_math.shrink_to_unigram

    def spy(M, tau, unigram):
        seen.append(np.array(unigram))
        return real(M, tau, unigram)
    monkeypatch.setattr(_dp_lda_svi, "shrink_to_unigram", spy)
    m = est(noise_multiplier=None, epsilon=1.0).fit(X)
    exact = _lda_math.unigram_distribution(np.asarray(X.sum(axis=0)).ravel(), 0.0, m._priors(4)[1])
    assert seen and all(np.array_equal(s, m.unigram_distribution_) for s in seen)
    assert not np.allclose(seen[0], exact, atol=1e-6)               # the noisy release, not the truth


def test_topic_outlook_auto_gives_the_unigram_nearly_all_the_budget_and_says_so():
    """A plan whose separated-topic signal is below its final threshold (public quantities only):
    "auto" moves the unigram's share to 0.99 without a warning (the fit is the private unigram
    model, which the attribute and the record state); the plan is the one privacy_plan shows."""
    X = make_corpus(200)
    m = est(noise_multiplier=None, epsilon=0.1)
    plan, T, q, outlook = m._planned(K, V)
    assert outlook.hopeless and outlook.share == _dp_lda_svi._NULL_SHARE
    assert outlook.signal == pytest.approx(200 * 30 / V * (1 - 1 / K), rel=1e-12)     # D_pub N (1-1/K) / V
    var, at_075 = 0.0, m._plan(K, V, T, q, 0.75)     # the prediction is made at the topics' share
    for t in range(T):
        rho = (10.0 + t + 1) ** -0.7
        var = (1 - rho) ** 2 * var + (rho * at_075.releases["topic_word"].noise_scale / q) ** 2
    assert outlook.threshold == pytest.approx(math.sqrt(2 * math.log(K * V) * var), rel=1e-12)
    z = acc.calibrate_noise_multiplier(lambda z: acc.NeighbouringEvent("add_remove", acc.GaussianEvent(z)), 0.1,
                                       1e-5, accountant=acc.get_accountant("rdp", "add_remove"))
    assert plan.releases["unigram"].noise_multiplier == pytest.approx(z / math.sqrt(0.99), rel=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.NoiseDominatedWarning)
        m.fit(X)
    assert m.noise_dominance_ == 1.0
    shown = m.privacy_plan(V).releases
    for name in ("unigram", "topic_word"):
        assert m.privacy_.releases[name].noise_multiplier == plan.releases[name].noise_multiplier
        assert shown[name].noise_multiplier == plan.releases[name].noise_multiplier
    notes = " ".join(m.privacy_.notes)
    assert "unigram_share = 0.99" in notes and "no topic word clears" in notes and "every topic is the private unigram" in notes
    beta = m.components_ / m.components_.sum(axis=1, keepdims=True)
    assert np.max(np.abs(beta - m.unigram_distribution_)) < 0.05          # the topics are the unigram
    # a plan with room for topics keeps 0.75 and says what its outlook is
    big = est(noise_multiplier=None, epsilon=10.0, total_samples=10 ** 6, batch_size=5000)
    assert not big._planned(K, V)[3].hopeless and big._planned(K, V)[3].share == 0.75


@pytest.mark.parametrize("kw", [{"unigram_share": 0.75, "noise_multiplier": None, "epsilon": 0.1},
                                {"noise_multiplier": 20.0}])
def test_topic_outlook_warns_before_the_charge_where_the_user_fixed_the_split(kw):
    """A numeric unigram_share (or noise_multiplier) with a hopeless plan: a NoiseDominatedWarning
    before anything is charged, naming what to declare; the share is the user's."""
    ledger = acc.BudgetLedger(100.0, 1e-4, neighbouring="add_remove")
    m = est(budget=ledger, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.NoiseDominatedWarning)
        with pytest.raises(acc.NoiseDominatedWarning,
                           match="no topic word can clear.*total_samples = 200.*epsilon.*vocabulary.*n_components"):
            m.fit(make_corpus(200))
    assert ledger.entries == [] or len(ledger.entries) == 0          # before the charge
    with pytest.warns(acc.NoiseDominatedWarning, match="unigram_share = 0.75"):
        m.fit(make_corpus(200))
    assert "unigram_share = 0.75" in " ".join(m.privacy_.notes)


def test_private_unigram_release():
    """Δ₂ = C (add/remove), √2 C (replace); noise sd zC recorded and drawn; ε = inf: the
    (capped) word frequencies plus the pseudo-count; the budget is charged before the count."""
    X = make_corpus(300, seed=6)
    exact = _dp_unigram.private_unigram(X, epsilon=np.inf, max_doc_length=10 ** 6)
    counts = np.asarray(X.sum(axis=0)).ravel() + 0.5
    assert_allclose(exact.distribution_, counts / counts.sum(), rtol=1e-12)
    assert exact.privacy_ is None
    ledger = acc.BudgetLedger(1.0, 1e-5, neighbouring="add_remove")
    u = _dp_unigram.private_unigram(X, epsilon=1.0, max_doc_length=30, budget=ledger, random_state=0)
    r = u.privacy_.releases["unigram"]
    assert r.sensitivity == pytest.approx(30 / math.sqrt(30) * W_UNI, rel=1e-14) and len(ledger.entries) == 1
    assert u.privacy_.epsilon_spent <= 1.0 + 1e-9
    z = acc.calibrate_noise_multiplier(lambda z: acc.NeighbouringEvent("add_remove", acc.GaussianEvent(z)), 1.0,
                                       1e-5, accountant=acc.get_accountant("rdp", "add_remove"))
    assert r.noise_scale == pytest.approx(z * r.sensitivity, rel=1e-9)
    rr = _dp_unigram.private_unigram(X, epsilon=1.0, neighbouring="replace", max_doc_length=30).privacy_
    # replace: the document count is public, the widening is at n = 300
    assert rr.releases["unigram"].sensitivity == pytest.approx(
        math.sqrt(2) * 30 / math.sqrt(30) * float64_exact_sum_factor(300), rel=1e-14)
    assert np.all(u.distribution_ > 0) and u.distribution_.sum() == pytest.approx(1.0)
    with pytest.raises(acc.BudgetExceededError):
        _dp_unigram.private_unigram(X, epsilon=1.0, max_doc_length=30, budget=ledger)
    for kw, match in (({"epsilon": 0.0}, "epsilon"), ({"epsilon": 1.0, "max_doc_length": 0}, "max_doc_length"),
                      ({"epsilon": 1.0, "neighbouring": "x"}, "neighbouring"),
                      ({"epsilon": 1.0, "delta": 2.0}, "delta")):
        with pytest.raises(ValueError, match=match):
            _dp_unigram.private_unigram(X, **kw)


def test_unigram_share_validation_and_zero_share_plan():
    with pytest.raises(ValueError, match="unigram_share"):
        est(unigram_share=1.0).fit(make_corpus(100))
    m = est(unigram_share=0.0).fit(make_corpus(200))
    assert set(m.privacy_.releases) == {"topic_word"}
    assert_allclose(m.unigram_distribution_, np.full(V, 1 / V))


def test_partial_fit_puts_no_noise_mass_on_unused_words():
    """partial_fit thresholds each call's noise at its public sd: λ on never-used words stays at
    the prior's level (η plus the decayed initialisation), where the paper's clamp added about
    0.4 σC · total_samples / batch_size · ρ to every entry at every call."""
    X = make_corpus(400, seed=2, mean_len=20, V=30)
    X = sp.hstack([X, sp.csr_matrix((X.shape[0], 270))]).tocsr()
    m = DPLatentDirichletAllocation(K, noise_multiplier=2.0, batch_size=100, total_samples=400, max_doc_length=30,
                                    random_state=0, vocabulary=[str(i) for i in range(300)])
    for i in range(4):
        m.partial_fit(X[100 * i:100 * (i + 1)])
    excess = np.maximum(m.components_[:, 30:] - 1.5, 0.0).sum()     # above the prior's level, all topics
    # what the paper's clamp adds there in expectation: E[max(Z, 0)] σC (D_pub / S) per entry and
    # call, weighted by the step sizes that survive the later calls (main: 4,560 here)
    r = m.privacy_.releases["topic_word_partial"]
    rho = [(10.0 + t) ** -0.7 for t in range(1, 5)]
    weight = sum(rho[t] * np.prod([1 - x for x in rho[t + 1:]]) for t in range(4))
    clamp_bias = 270 * K * r.noise_scale / math.sqrt(2 * math.pi) * (400 / 100) * weight
    assert excess < 0.1 * clamp_bias, (excess, clamp_bias)   # the sub-threshold mass, spread by the topics


# ------------------------------------------------------------------ author-level (issue 27)
def test_an_author_of_m_documents_moves_the_statistic_by_m_c_and_the_plan_says_so():
    """Brute force: an author's m clipped documents (one term N times each, the per-document worst
    case) move the minibatch sum by m a N; the author-level plan records m a N for both releases."""
    rng = np.random.default_rng(0)
    m_rows, a, N = 3, 0.5, 30
    model = est(max_rows_per_group=m_rows)
    base, _ = model._cap_tokens(model._check_X(make_corpus(20)), make_key(0))
    worst = 0.0
    for trial in range(20):
        eb = ref.exp_dirichlet_expectation(np.where(rng.random((K, V)) < 0.5, 1e-3, 50.0))
        docs = np.zeros((m_rows, V))
        docs[np.arange(m_rows), rng.integers(V, size=m_rows) if trial % 2 else rng.integers(V)] = N
        Xp = sp.vstack([base, sp.csr_matrix(docs)]).tocsr()
        g0 = np.ones((Xp.shape[0], K))
        _, s_with, _ = model._estep(Xp, eb, g0, 0.25, a * N, 1)
        _, s_without, _ = model._estep(base, eb, g0[:-m_rows], 0.25, a * N, 1)
        change = np.linalg.norm(s_with - s_without)
        assert change <= m_rows * a * N * (1 + 1e-12)
        worst = max(worst, change)
    assert worst > 0.95 * m_rows * a * N
    plan = model._plan(K, V, 4, 0.5)
    assert plan.releases["topic_word"].sensitivity == pytest.approx(m_rows * a * N * W_SVI, rel=1e-14)
    assert plan.releases["unigram"].sensitivity == pytest.approx(m_rows * a * N * W_UNI, rel=1e-14)
    assert plan.event.privacy_unit == "group"


def test_author_level_batches_hold_whole_authors_with_their_bounded_documents(monkeypatch):
    X = make_corpus(300)
    authors = np.random.default_rng(2).integers(0, 60, 300)
    seen = []
    real = _dp_lda._MemoryDocs.minibatch

    def spy(docs, idx, *args):
        seen.append(np.array(idx))
        return real(docs, idx, *args)

    monkeypatch.setattr(_dp_lda._MemoryDocs, "minibatch", spy)
    kept = {}
    real_keep = _dp_lda._MemoryDocs.keep

    def keep(docs, mask):
        kept["authors"] = authors[mask]
        return real_keep(docs, mask)

    monkeypatch.setattr(_dp_lda._MemoryDocs, "keep", keep)
    m = est(max_rows_per_group=2, total_samples=60, batch_size=10, n_epochs=3).fit(X, groups=authors)
    a = kept["authors"]
    assert_array_equal(np.bincount(a, minlength=60), np.minimum(np.bincount(authors, minlength=60), 2))
    assert len(seen) == m.privacy_.n_iter == 3 * 6
    for idx in seen:
        chosen = np.unique(a[idx])
        assert_array_equal(np.flatnonzero(np.isin(a, chosen)), idx)       # every kept document of an author
    sizes = [np.unique(a[idx]).size for idx in seen]
    assert 0.5 * 10 < np.mean(sizes) < 1.5 * 10                          # q = 10 / 60 of the authors
    with pytest.raises(ValueError, match="max_rows_per_group"):
        est(max_rows_per_group=2).partial_fit(X)


def test_the_private_unigram_release_is_author_level_with_groups():
    X = make_corpus(300)
    authors = np.arange(300) % 50
    m = _dp_unigram.private_unigram(X, epsilon=1.0, groups=authors, max_rows_per_group=3, random_state=0)
    row = _dp_unigram.private_unigram(X, epsilon=1.0, random_state=0)
    r, q = m.privacy_.releases["unigram"], row.privacy_.releases["unigram"]
    assert r.sensitivity == 3 * q.sensitivity and r.noise_multiplier == pytest.approx(q.noise_multiplier)
    assert (m.privacy_.privacy_unit, m.privacy_.max_rows_per_group) == ("group", 3)
    with pytest.raises(ValueError, match="max_rows_per_group"):
        _dp_unigram.private_unigram(X, epsilon=1.0, groups=authors)
    with pytest.raises(ValueError, match="budget"):
        _dp_unigram.private_unigram(X, epsilon=1.0, groups=authors, max_rows_per_group=3,
                                    budget=acc.BudgetLedger(10.0, 1e-5, neighbouring="add_remove"))


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
def test_the_author_level_unigram_statistic_changes_by_at_most_its_recorded_sensitivity(monkeypatch, neighbouring):
    """The released statistic itself, not only the record: an author of many documents (each
    clipped to norm C) moves the exact statistic handed to the release layer by at most m C
    (m √2 C under replace), the recorded sensitivity — a release that skipped the per-author
    bounding would move it by 12 C (issue 34's mutation list)."""
    from dpem_fast._engine import ReleaseLayer

    seen = []
    real = ReleaseLayer.release

    def spy(layer, statistics, index):
        seen.append(np.array(statistics["unigram"], dtype=np.float64))
        return real(layer, statistics, index)

    monkeypatch.setattr(ReleaseLayer, "release", spy)
    base = make_corpus(120).toarray()
    V, m, C = base.shape[1], 3, 2.0
    heavy = np.zeros((12, V))
    heavy[:, 0] = 50.0                  # one word: clipped to C, and orthogonal to its replacement
    light = np.zeros((12, V))
    light[:, 1] = 50.0
    authors = np.r_[np.arange(120), np.full(12, 999)]
    kw = dict(epsilon=1.0, neighbouring=neighbouring, clip_norm=C, max_doc_length=100, random_state=0,
              max_rows_per_group=m)
    rec = _dp_unigram.private_unigram(np.vstack([base, heavy]), groups=authors, **kw).privacy_
    if neighbouring == "add_remove":
        _dp_unigram.private_unigram(base, groups=authors[:120], **kw)
    else:
        _dp_unigram.private_unigram(np.vstack([base, light]), groups=authors, **kw)
    change = np.linalg.norm(seen[0] - seen[1])
    sens = rec.releases["unigram"].sensitivity
    assert sens == pytest.approx(m * C * (1.0 if neighbouring == "add_remove" else math.sqrt(2.0)) * W_UNI, rel=1e-14)
    assert change <= sens * (1 + 1e-12)
    assert change >= 0.999 * sens / W_UNI    # attained: the bound is the released statistic's own


def test_unigram_and_partial_fit_refuse_more_documents_than_the_cap_before_the_charge(monkeypatch):
    """Where the document count is private (add/remove, author-level) the rounding bound holds up
    to ROUNDING_ROW_CAP documents (issue 34, item 7): ``private_unigram`` and a private
    ``partial_fit`` on more refuse with a ValueError naming the cap, never the count, before the
    ledger is charged.  A document-level replace-one unigram (n public) is not capped.  (The cap
    is lowered for the test.)"""
    from dpem_fast._engine import _specs

    monkeypatch.setattr(_specs, "ROUNDING_ROW_CAP", 150)
    X = make_corpus(200)
    ledger = acc.BudgetLedger(10.0, 1e-5, neighbouring="add_remove")
    with pytest.raises(ValueError, match="ROUNDING_ROW_CAP = 150") as err:
        _dp_unigram.private_unigram(X, epsilon=1.0, budget=ledger, random_state=0)
    assert "200" not in str(err.value) and len(ledger.entries) == 0
    group_ledger = acc.BudgetLedger(10.0, 1e-5, neighbouring="add_remove", privacy_unit="group")
    with pytest.raises(ValueError, match="ROUNDING_ROW_CAP = 150"):
        _dp_unigram.private_unigram(X, epsilon=1.0, budget=group_ledger, groups=np.arange(200) // 2,
                                    max_rows_per_group=2, random_state=0)
    assert len(group_ledger.entries) == 0
    _dp_unigram.private_unigram(X, epsilon=1.0, neighbouring="replace", random_state=0)     # n public
    m = est(budget=ledger)
    with pytest.raises(ValueError, match="ROUNDING_ROW_CAP = 150"):
        m.partial_fit(X)
    assert len(ledger.entries) == 0
    m.partial_fit(X[:150])
    assert len(ledger.entries) == 1


def test_the_unigram_statistic_is_summed_exactly_per_word():
    """Each word's clipped counts ``c_dv s_d`` are summed exactly and rounded once (issue 34,
    item 7): the statistic equals math.fsum over the documents, word by word."""
    from dpem_fast._kernels.lda_docs import _clipped_count_sum

    X = make_corpus(600, seed=4)
    X.data *= 10.0 ** np.random.default_rng(4).integers(0, 9, X.data.size)
    got = _clipped_count_sum(X, 7.5)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    scale = np.where(norms > 7.5, 7.5 * (1 - 1e-12) / np.where(norms > 0, norms, 1.0), 1.0)
    T = X.multiply(scale[:, None]).tocsc()
    want = [math.fsum(T.data[T.indptr[v]:T.indptr[v + 1]]) for v in range(X.shape[1])]
    assert got.tolist() == want
