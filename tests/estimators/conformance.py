"""The full-pass part of the conformance suite: the EM models' tests subclass it.

It extends :class:`privacy_conformance.PrivacyConformance` (the privacy part that every
private estimator runs, LDA and DP-SEP included) with the engine's own checks.

A subclass sets ``estimator_class`` and ``params`` (a private fit with a declared domain)
and implements the hooks below.  The suite then checks, through ``fit`` and the engine:

- seeded reproducibility and identical results for 1 and 2 threads;
- the budget is charged before any statistic of the data is computed, and a refused
  charge computes none;
- ``privacy_.event`` re-accounts to ``epsilon_spent`` and refuses the other relation; the
  release records alone (sensitivity, noise scale, count) account to at most the target,
  and 2 % less noise would not;
- every release's noise, drawn through a real fit, has the recorded scale (enough draws
  to see a 5 % shortfall in any one release) and is uncorrelated across iterations and
  releases;
- nothing but released statistics reaches the update (a fit whose release returns fixed
  values gives the same parameters on two different datasets);
- sensitivities are searched, not restated: over random parameters and adversarial rows
  (beyond the domain too), the change of every statistic never exceeds its declared
  sensitivity, and comes within 5 % of it; the search runs on float32 rows too, against what
  a float32 fit declares (a model's float32 path widens its sensitivities for float rounding,
  ``PrivateEM._iteration_specs``), and the privacy record carries exactly those values;
- clipping holds end to end: the exact statistics a fit on data with outliers hands to
  the release layer respect the model's domain bounds;
- ``epsilon=inf`` equals the non-private reference;
- bad input gives a clear error naming the problem; huge finite rows give finite output;
- scikit-learn's estimator checks;
- the per-feature geometry (:mod:`geometry_conformance`): scale equivariance, released
  locations inside the declared box, each feature's spread on its own scale;
- person-level privacy (:mod:`person_conformance`): the group-level sensitivities searched
  through the kernels with persons of m rows, the joint bound, the sources, the one-offs.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_estimator

from dpem_fast import accounting as acc
from dpem_fast.accounting import DomainCoverageWarning
from dpem_fast._engine import PrivateEM, ReleaseLayer, Statistics, domain_specs
from dpem_fast._engine._radius import radius_specs
from dpem_fast._engine._lattice import LATTICE_RESOLUTION, lattice
from dpem_fast._engine import _base as engine_base
from dpem_fast._engine import _domain as engine_domain
from dpem_fast._engine._sources import _memory as engine_data
from dpem_fast.io import NpyBlocks

from geometry_conformance import GeometryConformance
from person_conformance import PersonLevelEMConformance
from privacy_conformance import PrivacyConformance


#: releases made once before the loop (the private domain estimate: its two histograms, then
#: the count of rows outside its box).  Iteration releases are told apart by name, not by
#: count: a one-round model's releases also have count 1.
_HISTOGRAMS = ("domain_scale", "domain_refine")
_ONE_OFF = _HISTOGRAMS + ("domain_outside",)
#: every release made once before the loop: the domain estimate's and a private start's
_BEFORE_LOOP = _ONE_OFF + ("start_counts", "start_sums", "marginals", "pairs",   # one-offs: start, marginals, pairs
                          "domain_radius")                                       # a declared box's radius


def random_gaussian_components(rng, K, d):
    """Random mixture parameters in working units for a sensitivity search: weights on the
    simplex, means in the ball of radius 1.2, covariances with eigenvalues over six decades;
    returns (weights, means, covariances, precision Cholesky factors)."""
    from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky

    w = rng.dirichlet(np.ones(K))
    means = rng.normal(size=(K, d))
    means *= rng.uniform(0, 1.2, size=(K, 1)) / np.linalg.norm(means, axis=1, keepdims=True)
    covs = np.empty((K, d, d))
    for k in range(K):
        Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
        covs[k] = (Q * 10.0 ** rng.uniform(-5, 1, size=d)) @ Q.T
    return w, means, covs, compute_precision_cholesky(covs)


class PrivateEstimatorConformance(PersonLevelEMConformance, GeometryConformance, PrivacyConformance):
    """Subclass and provide the hooks; every ``test_*`` method then runs for the estimator
    (the privacy part every private estimator runs is inherited from
    :class:`privacy_conformance.PrivacyConformance`; the tests below of the same name are the
    engine's stronger versions)."""

    #: The suite checks the privacy mechanics on small fits (a few hundred rows, K up to 3 at
    #: epsilon=1, zeroed or fixed releases) that are noise-dominated on purpose: the utility
    #: warning is expected there, and each model's own tests check when it is raised.
    pytestmark = [pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")]

    estimator_class: type = None
    #: keyword arguments of a private fit with a declared (or fixed) domain
    params: dict = {}
    #: fitted attributes compared by the reproducibility tests
    fitted_attributes: tuple = ()
    #: keyword arguments under which scikit-learn's estimator checks run
    sklearn_params: tuple = ()
    #: extra per-release weights a_r for the joint-sensitivity search (one per statistic)
    joint_splits = ()
    #: overrides for the sensitivity search and the clipping test: the specs' sensitivities
    #: are sups over the model's unit ball, so a ball model is searched with a declared
    #: data_norm only (a box maps into a subset of the ball, where some sups are smaller)
    ball_params: dict = {}

    # ---------------------------------------------------------------- hooks
    def make_data(self, n, seed=0):
        """A dataset the estimator accepts (n rows)."""
        raise NotImplementedError

    def make_noise_data(self, n):
        """Data for the noise-distribution test (default: ``make_data``).  A one-round model
        may widen it so that a few fits give enough noise draws."""
        return self.make_data(n)

    def make_other_data(self, n, seed=1):
        """A clearly different dataset of the same shape (default: another seed)."""
        return self.make_data(n, seed)

    def exact_reference(self, est, X):
        """{attribute: expected value} of the ``epsilon=inf`` fit ``est`` on X."""
        raise NotImplementedError

    def random_parameters(self, est, rng, d):
        """Model parameters in working units, for the sensitivity search."""
        raise NotImplementedError

    def random_row(self, est, rng, d):
        """A row in the original units (may lie outside the domain)."""
        raise NotImplementedError

    def perturb_row(self, est, rng, x):
        """A small random move of a row (hill climbing in the sensitivity search)."""
        raise NotImplementedError

    def adversarial_cases(self, est, rng, d):
        """Explicit (params, x, x') candidates expected to be (near) worst cases."""
        return []

    def rounding_cases(self, est, rng, d):
        """Worst cases whose rows are not on the axes (e.g. the adversarial cases rotated), tried
        with float32 rows: there an attained sensitivity plus the float rounding of the rows
        exceeds the declared value unless a float32 path widens it.  Default: none."""
        return []

    def outlier_data(self, n, seed=0):
        """Data with rows far outside the declared domain (default: none for fixed domains)."""
        return None

    def check_statistics_bounded(self, stats, n_rows):
        """Assert the domain bounds of exact statistics of n_rows clipped rows."""

    #: True when rows outside the model's fixed domain are refused (then with an error naming X)
    refuses_huge_rows = False

    def statistic_sites(self):
        return [(self.estimator_class, "_statistics")]

    def exact_specs(self, est, X):
        """The model's declared specs (iteration statistics, private start, domain estimate, the
        model's own one-off releases): exact-arithmetic values, before the plan widens them for
        float rounding.  A size chosen in the fit ("auto") is read at the size its one fit used."""
        d = X.shape[1]
        try:
            specs = [*est._statistic_specs(d), *est._start_specs(d)]
        except (ValueError, TypeError):
            key = "n_components" if "n_components" in est.get_params() else "n_clusters"
            over = est._auto_overrides() if hasattr(est, "_auto_overrides") else {}
            sized = clone(est).set_params(**{key: self._components(), **over})
            sized.n_features_in_ = d
            specs = [*sized._statistic_specs(d), *sized._start_specs(d)]
        specs += list(domain_specs(len(self.domain_columns(X)))) + list(est._one_off_releases(d)[0])
        specs += list(radius_specs())      # a declared box's private radius (models that release it)
        return {s.name: s for s in specs}

    # -------------------------------------------------------------- helpers
    def make_estimator(self, **kw):
        return self.estimator_class(**{**self.params, **kw})

    def _fitted(self, est):
        return {a: np.array(getattr(est, a)) for a in self.fitted_attributes}

    def _working_domain(self, est, X):
        """The domain a private fit of ``est`` on X maps rows into (None for fixed domains)."""
        if est._domain_kind != "ball":
            return None
        return est._declared_domain(len(self.domain_columns(X)))

    #: rows of the reproducibility fits: several blocks of the kernels' work layout
    reproducibility_rows = 3000

    #: rows of a fit whose domain is estimated privately: enough for every feature's scale
    #: histogram to resolve at the suite's epsilon (fewer rows are refused, not given a box
    #: built from noise; issue 23)
    estimate_rows = 5000

    def _rows(self, n, declared):
        return n if declared else max(n, self.estimate_rows)

    # ----------------------------------------------------------- the budget
    def _domain_kw(self, declared):
        """No overrides for a declared domain; the private estimate otherwise (ball models)."""
        if declared:
            return {}
        if self.make_estimator()._domain_kind != "ball":
            pytest.skip("the model's domain is fixed: nothing to estimate")
        return dict(bounds=None, data_norm=None)

    @pytest.mark.parametrize("declared", [True, False])
    def test_budget_is_charged_before_any_statistic(self, monkeypatch, declared):
        X = self.make_data(self._rows(500, declared))
        kw = self._domain_kw(declared)
        ledger = acc.BudgetLedger(100.0, 1e-5, accountant="rdp", neighbouring=self.params.get("neighbouring",
                                                                                               "replace"))
        seen = []

        def spy(real):
            def wrapped(*args, **kwargs):
                seen.append(len(ledger.entries))
                return real(*args, **kwargs)
            return wrapped

        monkeypatch.setattr(self.estimator_class, "_statistics", spy(self.estimator_class._statistics))
        monkeypatch.setattr(engine_base, "estimate_domain", spy(engine_base.estimate_domain))
        self.make_estimator(budget=ledger, random_state=0, **kw).fit(X)
        assert seen and all(s == 1 for s in seen) and len(ledger.entries) == 1
        assert len(seen) == self.make_estimator()._n_release_rounds() + (0 if declared else 1)

    @pytest.mark.parametrize("declared", [True, False])
    def test_refused_budget_computes_no_statistic(self, monkeypatch, declared):
        X = self.make_data(self._rows(500, declared))
        kw = self._domain_kw(declared)
        rel = self.params.get("neighbouring", "replace")
        ledger = acc.BudgetLedger(0.01, 1e-9, accountant="rdp", neighbouring=rel)

        def forbidden(*args, **kwargs):
            raise AssertionError("a statistic of the data was computed before the budget was charged")

        monkeypatch.setattr(self.estimator_class, "_statistics", forbidden)
        monkeypatch.setattr(engine_base, "estimate_domain", forbidden)
        est = self.make_estimator(budget=ledger, epsilon=1.0, random_state=0, **kw)
        with pytest.raises(acc.BudgetExceededError):
            est.fit(X)
        assert ledger.entries == [] and not hasattr(est, "privacy_")

    def test_not_private_fits_refuse_a_ledger(self):
        X = self.make_data(200)
        rel = self.params.get("neighbouring", "replace")
        ledger = acc.BudgetLedger(10.0, 1e-5, neighbouring=rel)
        with pytest.raises(ValueError, match="budget"):
            self.make_estimator(epsilon=float("inf"), budget=ledger).fit(X)
        other = "add_remove" if rel == "replace" else "replace"
        with pytest.raises(ValueError, match="budget"):
            self.make_estimator(budget=acc.BudgetLedger(10.0, 1e-5, neighbouring=other)).fit(X)
        assert ledger.entries == []

    # ---------------------------------------------------------- the record
    @pytest.mark.parametrize("declared", [True, False])
    def test_event_reaccounts_to_the_spent_epsilon(self, declared):
        X = self.make_data(self._rows(500, declared))
        est = self.make_estimator(random_state=0, **self._domain_kw(declared)).fit(X)
        rec = est.privacy_
        rel = rec.neighbouring
        again = acc.get_accountant(rec.accountant, rel)().compose(rec.event).get_epsilon(rec.delta)
        assert again == pytest.approx(rec.epsilon_spent, rel=1e-12)
        assert rec.epsilon_spent <= rec.epsilon * (1 + 1e-9)
        other = "add_remove" if rel == "replace" else "replace"
        with pytest.raises(acc.NeighbouringMismatchError):
            acc.get_accountant(rec.accountant, other)().compose(rec.event)

    def _record_event(self, rec, shrink=1.0):
        """The plan rebuilt from the release records alone (noise scaled by ``shrink``); an
        iteration accounted jointly is one Gaussian of the recorded joint multiplier."""
        leaves = []
        for r in rec.releases.values():
            if rec.joint_multiplier is not None and r.name not in _BEFORE_LOOP:
                continue
            if r.mechanism == "gaussian":
                leaf = acc.GaussianEvent(shrink * r.noise_scale / r.sensitivity)
            elif r.mechanism == "laplace":
                leaf = acc.LaplaceEvent(r.sensitivity / (shrink * r.noise_scale))
            else:                   # integer lattice: sigma_Z and the widened Delta_int
                g = r.granularity
                leaf = acc.DiscreteGaussianEvent(shrink * r.noise_scale / g, r.sensitivity / g, r.size)
            assert r.event() == leaf or shrink != 1.0
            leaves.append(acc.SelfComposedEvent(leaf, r.count))
        if rec.joint_multiplier is not None:
            leaves.append(acc.SelfComposedEvent(acc.GaussianEvent(shrink * rec.joint_multiplier), rec.n_iter))
        return acc.NeighbouringEvent(rec.neighbouring, acc.ComposedEvent(leaves))

    @pytest.mark.parametrize("declared", [True, False])
    def test_release_records_alone_meet_the_target_tightly(self, declared):
        X = self.make_data(self._rows(500, declared))
        est = self.make_estimator(random_state=0, **self._domain_kw(declared)).fit(X)
        rec = est.privacy_
        specs = {s.name: s for s in est._iteration_specs(X.shape[1], np.float64, est._public_rows(X.shape[0]))}
        specs.update({s.name: s for s in domain_specs(len(self.domain_columns(X)))})
        specs.update({s.name: s for s in est._start_release_specs(X.shape[1], est._public_rows(X.shape[0]))})
        specs.update({s.name: s for s in est._one_off_releases(X.shape[1])[0]})    # a model's own one-offs
        if declared and est._releases_radius("declared", est._public_rows(X.shape[0])):     # a declared box's radius (models that release it)
            specs.update({s.name: s for s in radius_specs()})
        assert set(rec.releases) == set(specs) if not declared else set(rec.releases) <= set(specs)
        for r in rec.releases.values():
            spec = specs[r.name]
            if r.mechanism == "discrete_gaussian":      # widened by the rounding onto the lattice
                gamma, delta_int, m = lattice(spec, rec.neighbouring)
                assert (r.granularity, r.sensitivity, r.size) == (gamma, gamma * delta_int, m)
                assert r.sensitivity <= spec.sensitivity("l2", rec.neighbouring) * (1 + 1.0 / LATTICE_RESOLUTION)
            else:
                assert r.sensitivity == spec.sensitivity(r.norm, rec.neighbouring)
            assert r.count == (rec.n_iter if r.name not in _BEFORE_LOOP else 1)
        assert {r.mechanism for r in rec.releases.values()} <= (
            {"discrete_gaussian"} if rec.noise == "discrete_gaussian" else {"gaussian", "laplace"})
        if rec.joint_multiplier is not None:
            # the joint multiplier is the model's joint bound at the recorded noise scales
            a = {r.name: (r.sensitivity / r.noise_scale) ** 2 for r in rec.releases.values()
                 if r.name not in _BEFORE_LOOP}
            assert rec.joint_multiplier ** -2 == pytest.approx(est._joint_sensitivity(a, rec.neighbouring),
                                                               rel=1e-12)
            assert rec.joint_multiplier ** -2 <= sum(a.values()) * (1 + 1e-12)
        factory = acc.get_accountant(rec.accountant, rec.neighbouring)
        eps = factory().compose(self._record_event(rec)).get_epsilon(rec.delta)
        assert eps <= rec.epsilon * (1 + 1e-9)
        assert factory().compose(self._record_event(rec, 0.98)).get_epsilon(rec.delta) > rec.epsilon

    # ------------------------------------------------------------ the noise
    def test_every_release_draws_its_recorded_noise(self, monkeypatch):
        """Exact statistics replaced by zeros: what reaches the update is the noise alone.

        J draws of every release are needed; a model with fewer release rounds per fit
        (``_n_release_rounds() < max_iter``, e.g. one release then post-processing) is fitted
        again with further seeds until J rounds are collected (independence is then checked
        across fits)."""
        X = self.make_noise_data(300)
        # enough iterations that the smallest release has 4 std errors <= 2.5 % of its
        # std even for Laplace noise (excess kurtosis 3): a 5 % shortfall is then seen
        smallest = min(int(np.prod(s.shape)) for s in self.make_estimator()._statistic_specs(X.shape[1]))
        J = math.ceil(5 * 6400 / smallest)
        per_fit = self.make_estimator(max_iter=J)._n_release_rounds()
        captured = []

        def zeros(est, X, params, domain, n_threads):
            return Statistics.zeros(est._statistic_specs(X.shape[1]))

        real = ReleaseLayer.release

        def capture(layer, statistics, index):
            out = real(layer, statistics, index)
            if not set(statistics) & set(_BEFORE_LOOP):     # the iterations' releases
                captured.append({k: np.array(v) for k, v in out.items()})
            return out

        monkeypatch.setattr(self.estimator_class, "_statistics", zeros)
        monkeypatch.setattr(self.estimator_class, "_update", lambda est, noisy, params, ctx: params)
        # thousands of rounds on 300 rows are hopeless on purpose: no refusal, only the noise
        monkeypatch.setattr(self.estimator_class, "_check_plan", lambda est, plan, n, rounds: None)
        monkeypatch.setattr(ReleaseLayer, "release", capture)
        for f in range(math.ceil(J / per_fit)):
            est = self.make_estimator(max_iter=J, random_state=5 + f).fit(X)
        captured = captured[:J]
        assert len(captured) == J
        releases = est.privacy_.releases
        first_entries = {}
        for name in captured[0]:
            r = releases[name]
            draws = np.stack([c[name] for c in captured])          # (J, *shape)
            if r.symmetric:
                # the mechanism's coordinates: the diagonal and the upper entries times
                # σ / sd-off-the-diagonal (√2 for the Gaussian, 1 for the discrete Gaussian)
                assert_array_equal(draws, np.swapaxes(draws, -1, -2))
                iu = np.triu_indices(draws.shape[-1])
                off = iu[0] != iu[1]
                draws = draws[..., iu[0], iu[1]]
                draws[..., off] *= r.noise_scale / r.offdiagonal_sd
            if r.mechanism == "discrete_gaussian":      # integers on the lattice, exactly
                assert_array_equal(draws / r.granularity, np.rint(draws / r.granularity))
            flat = draws.reshape(J, -1)
            n = flat.size
            std = math.sqrt(float(np.mean(flat ** 2)))             # mean 0 known
            expected = r.noise_scale * (math.sqrt(2.0) if r.mechanism == "laplace" else 1.0)
            kurt_excess = 3.0 if r.mechanism == "laplace" else 0.0
            se = math.sqrt((2.0 + kurt_excess) / (4.0 * n))        # std error of the std ratio
            assert abs(std / expected - 1.0) < max(4.0 * se, 1e-3), (name, std / expected, n)
            assert 4.0 * se <= 0.0251, f"too few draws of {name!r} to see a 5% shortfall"
            # independent across iterations
            corr = np.corrcoef(flat[:-1, 0], flat[1:, 0])[0, 1]
            assert abs(corr) < 5.0 / math.sqrt(J), (name, corr)
            first_entries[name] = flat[:, 0]
        names = list(first_entries)
        for i in range(len(names)):                                 # and across releases
            for j in range(i + 1, len(names)):
                corr = np.corrcoef(first_entries[names[i]], first_entries[names[j]])[0, 1]
                assert abs(corr) < 5.0 / math.sqrt(J), (names[i], names[j], corr)

    def test_one_off_releases_draw_their_recorded_noise(self, monkeypatch):
        """The private domain estimate's releases (once, before the loop): what the box
        computation reads minus the exact histogram is noise of the recorded scale, and the
        box's thresholds use that scale (enough fits that 4 std errors of the smallest
        histogram are <= 6 %: a 20 % shortfall is seen), independent across the two histograms;
        the outside count's coverage report reads its release, of the recorded scale (within 4
        std errors of its fewer entries), and that scale."""
        self._domain_kw(False)                   # skips models with a fixed domain
        X = self.make_data(self.estimate_rows)
        real = ReleaseLayer.release
        exact = {name: [] for name in _ONE_OFF}
        seen = {name: [] for name in _ONE_OFF}
        sigmas = {name: set() for name in _ONE_OFF}

        def capture(layer, statistics, index):
            for name in set(statistics) & set(_ONE_OFF):
                exact[name].append(np.array(statistics[name], dtype=np.float64))
            return real(layer, statistics, index)

        def reader(name, fn):
            def wrapped(noisy_row, sigma, *args):
                seen[name].append(np.array(noisy_row))
                sigmas[name].add(sigma)
                return fn(noisy_row, sigma, *args)
            return wrapped

        monkeypatch.setattr(ReleaseLayer, "release", capture)
        monkeypatch.setattr(engine_domain, "_scale_box", reader("domain_scale", engine_domain._scale_box))
        monkeypatch.setattr(engine_domain, "_refine_box", reader("domain_refine", engine_domain._refine_box))
        monkeypatch.setattr(engine_domain, "coverage_report",
                            reader("domain_outside", engine_domain.coverage_report))
        d_dom = len(self.domain_columns(X))           # the columns the domain covers
        smallest = min(int(np.prod(s.shape)) for s in domain_specs(d_dom) if s.name in _HISTOGRAMS)
        n_fits = math.ceil((4.0 / 0.06) ** 2 / 2.0 / smallest)       # 4 se = 4 / sqrt(2 n) <= 6 %
        n_fits = max(n_fits, 30)        # and <= 30 % for the three outside counts
        with warnings.catch_warnings():         # small tables: the coverage check may warn
            warnings.simplefilter("ignore", DomainCoverageWarning)
            records = [self.make_estimator(random_state=100 + seed, max_iter=1, bounds=None, data_norm=None)
                       .fit(X).privacy_.releases for seed in range(n_fits)]
        noise = {}
        for name in _ONE_OFF:
            r = records[0][name]
            assert all(rec[name] == r for rec in records) and sigmas[name] == {r.noise_scale}, name
            reads = n_fits * (d_dom if name in _HISTOGRAMS else 1)
            assert len(exact[name]) == n_fits and len(seen[name]) == reads, name
            noise[name] = np.stack(seen[name]).reshape(n_fits, *r.shape) - np.stack(exact[name])
            flat = noise[name].ravel()
            se = math.sqrt(2.0 / (4.0 * flat.size))
            assert abs(math.sqrt(float(np.mean(flat ** 2))) / r.noise_scale - 1.0) < 4.0 * se, name
            assert 4.0 * se <= (0.061 if name in _HISTOGRAMS else 0.3), name
        a, b = (noise[n].reshape(n_fits, -1)[:, :32].ravel() for n in _HISTOGRAMS)
        assert abs(np.corrcoef(a, b)[0, 1]) < 5.0 / math.sqrt(a.size)

    @pytest.mark.parametrize("declared", [True, False])
    def test_update_sees_only_released_statistics(self, monkeypatch, declared):
        """A leak of any exact statistic into the update (or, undeclared, into the domain
        estimate) would make these fits differ."""
        kw = self._domain_kw(declared)

        def fixed(layer, statistics, index):
            out = {name: np.full(layer.releases[name].shape, 0.25) for name in statistics}
            if "domain_scale" in out:        # a fixed stage-1 release that resolves [-8, 8]
                lower, upper = engine_domain._scale_edges()
                out["domain_scale"][:, (np.abs(lower) >= 0.5) & (np.abs(upper) <= 4.0)] = 1e12
            if "domain_outside" in out:      # and a box that covers the data (no warning)
                out["domain_outside"][-1] = 1e12
            return out

        monkeypatch.setattr(ReleaseLayer, "release", fixed)
        n = self._rows(800, declared)
        X, Y = self.make_data(n, seed=0), self.make_other_data(n, seed=1)
        assert not np.array_equal(X, Y)
        a = self.make_estimator(random_state=3, **kw).fit(X)
        b = self.make_estimator(random_state=3, **kw).fit(Y)
        for name, v in self._fitted(a).items():
            assert_array_equal(v, self._fitted(b)[name], err_msg=name)

    # ------------------------------------------------------ sensitivities
    @staticmethod
    def _norm(value, spec):
        # a symmetric statistic's mechanism sees ‖δ‖_F (the Gaussian's weighted upper triangle;
        # the discrete Gaussian's upper triangle is at most that): the full matrix's norm
        v = np.asarray(value)
        return float(np.sqrt(np.sum(v * v)))

    def _change(self, est, domain, params, x, xp, rel, specs, dtype=np.float64):
        """The change of every statistic between the one-row datasets {x} and {x'} (replace-one)
        or {x} and {} (add/remove), the rows given to the kernel as ``dtype`` (float32 rows may
        run a model's float32 path)."""
        one = est._statistics(np.ascontiguousarray(x[None, :], dtype=dtype), params, domain, 1)
        if rel == "add_remove":
            return {s.name: self._norm(one[s.name], s) for s in specs}
        two = est._statistics(np.ascontiguousarray(xp[None, :], dtype=dtype), params, domain, 1)
        return {s.name: self._norm(one[s.name] - two[s.name], s) for s in specs}

    def _declared_specs(self, est, d, dtype, n_rows):
        """The specs a fit on ``n_rows`` rows of ``dtype`` declares (a float32 path's widened ones,
        and the float64 rounding widening where the row count is public), and a check that its
        privacy record carries exactly them."""
        specs = est._iteration_specs(d, dtype, est._public_rows(n_rows))
        for s in specs:
            r = est.privacy_.releases[s.name]
            if r.mechanism in ("gaussian", "laplace"):
                assert r.sensitivity == s.sensitivity(r.norm, est.neighbouring), s.name
        return specs

    @pytest.mark.parametrize("dtype", [np.float64, np.float32])
    @pytest.mark.parametrize("rel", ["add_remove", "replace"])
    def test_sensitivities_are_never_exceeded_and_nearly_attained(self, rel, dtype):
        """Over random parameters and adversarial rows, every statistic's change stays within
        its declared sensitivity and comes within 5 % of it; with float32 rows too (what a
        float32 fit computes, its float rounding included, against what it declares)."""
        X = self.make_data(300)
        est = self.make_estimator(neighbouring=rel, random_state=0, **self.ball_params).fit(X.astype(dtype))
        d = X.shape[1]
        specs = self._declared_specs(est, d, dtype, X.shape[0])
        domain = self._working_domain(est, X)
        rng = np.random.default_rng(2024)
        declared = {s.name: s.sensitivity("l2", rel) for s in specs}
        best = {s.name: 0.0 for s in specs}

        def record(change):
            for name, v in change.items():
                assert v <= declared[name] * (1 + 1e-9), (rel, name, v, declared[name])
                best[name] = max(best[name], v)

        cases = list(self.adversarial_cases(est, rng, d))
        if dtype == np.float32:
            cases += list(self.rounding_cases(est, rng, d))
        for params, x, xp in cases:
            record(self._change(est, domain, params, x, xp, rel, specs, dtype))
        for _ in range(20):                       # random starts, then hill climbing per statistic
            params = self.random_parameters(est, rng, d)
            x, xp = self.random_row(est, rng, d), self.random_row(est, rng, d)
            cur = self._change(est, domain, params, x, xp, rel, specs, dtype)
            record(cur)
            target = specs[int(rng.integers(len(specs)))].name
            for _ in range(15):
                nx, nxp = self.perturb_row(est, rng, x), self.perturb_row(est, rng, xp)
                new = self._change(est, domain, params, nx, nxp, rel, specs, dtype)
                record(new)
                if new[target] > cur[target]:
                    x, xp, cur = nx, nxp, new
        for name in declared:
            assert best[name] >= 0.95 * declared[name], (rel, name, best[name], declared[name])

    @pytest.mark.parametrize("dtype", [np.float64, np.float32])
    @pytest.mark.parametrize("rel", ["add_remove", "replace"])
    def test_joint_sensitivity_is_never_exceeded_and_nearly_attained(self, rel, dtype):
        """sup over neighbours of sum_r a_r |delta_r|^2 / Delta_r^2 (a_r = Delta_r^2 / sigma_r^2):
        the model's joint bound holds at every pair tried and a search comes within 5 % of it,
        for the fitted plan's a and for splits that put each case of the bound on top.  With
        float32 rows where they run the model's float32 path (elsewhere they are upcast, and the
        float64 search covers them)."""
        X = self.make_data(300)
        est = self.make_estimator(neighbouring=rel, random_state=0, **self.ball_params).fit(X.astype(dtype))
        if est._joint_bound() is None:
            pytest.skip("the model composes an iteration's releases separately")
        if dtype == np.float32 and not est._float32_path():
            pytest.skip("float32 rows are computed in float64 here (no float32 path)")
        d = X.shape[1]
        specs = self._declared_specs(est, d, dtype, X.shape[0])
        names = [s.name for s in specs]
        Delta = {s.name: s.sensitivity("l2", rel) for s in specs}
        domain = self._working_domain(est, X)
        rec = est.privacy_
        splits = [{n: (Delta[n] / rec.releases[n].noise_scale) ** 2 for n in names}]
        rng = np.random.default_rng(7)
        for _ in range(3):
            splits.append(dict(zip(names, rng.dirichlet(np.full(len(names), 0.5)) + 1e-3)))
        for base in np.eye(len(names)) * 8.0 + 0.01:
            splits.append(dict(zip(names, base)))
        splits.extend(dict(zip(names, a)) for a in self.joint_splits)
        cases = list(self.adversarial_cases(est, rng, d))
        for a in splits:
            bound = est._joint_sensitivity(a, rel)
            assert bound <= sum(a.values()) * (1 + 1e-12)

            def value(params, x, xp):
                ch = self._change(est, domain, params, x, xp, rel, specs, dtype)
                v = sum(a[n] * ch[n] ** 2 / Delta[n] ** 2 for n in names)
                assert v <= bound * (1 + 1e-9), (rel, a, v, bound)
                return v

            best = max(v for *_, v in self._worst_pairs(est, rng, d, value, cases))
            assert best >= 0.95 * bound, (rel, a, best, bound)

    # ------------------------------------------------------------ clipping
    @pytest.mark.parametrize("ball", [True, False])
    def test_clipping_holds_end_to_end(self, monkeypatch, ball):
        X = self.outlier_data(2000)
        if X is None:
            pytest.skip("the model's domain is fixed; rows outside it are refused")
        seen = []
        real = ReleaseLayer.release

        def spy(layer, statistics, index):
            seen.append({k: np.array(v) for k, v in statistics.items()})
            return real(layer, statistics, index)

        monkeypatch.setattr(ReleaseLayer, "release", spy)
        est = self.make_estimator(random_state=0, max_iter=3, **(self.ball_params if ball else {})).fit(X)
        assert est.diagnostics_["n_rows_clipped"] > 0
        loop = [s for s in seen if set(s) <= {sp.name for sp in est._statistic_specs(X.shape[1])}]
        assert len(loop) == est._n_release_rounds() == est.privacy_.n_iter
        for stats in loop:
            self.check_statistics_bounded(stats, X.shape[0])

    # ---------------------------------------------------- the exact mode
    def test_epsilon_inf_equals_the_nonprivate_reference(self):
        """``epsilon=inf`` is the same model with no noise (issue 35): the non-private reference
        on the rows clipped to the declared domain as a private fit clips them (rows inside it
        are fitted as they are)."""
        X = self.make_data(2000)
        est = self.make_estimator(epsilon=float("inf"), random_state=0).fit(X)
        assert est.privacy_ is None
        Xc = X
        if est._domain_kind == "ball" and est._domain_source() == "declared":
            cols = est._domain_columns(X.shape[1])
            dom = est._declared_domain(X.shape[1] if cols is None else len(cols))
            Xc = engine_base.clip_rows(X, dom, cols)
        for name, expected in self.exact_reference(est, Xc).items():
            assert_allclose(getattr(est, name), expected, rtol=1e-8, atol=1e-10, err_msg=name)

    # ------------------------------------------------------------ bad input
    # the common parameters (epsilon, delta, n_threads, random_state, budget) are checked by the
    # privacy part (test_bad_common_parameters); these are the engine's own
    @pytest.mark.parametrize("kw, exc, match", [
        (dict(max_iter=0), ValueError, "max_iter"),
        (dict(neighbouring="swap"), ValueError, "neighbouring"),
        (dict(accountant="magic"), ValueError, "accountant"),
    ])
    def test_bad_parameters(self, kw, exc, match):
        X = self.make_data(100)
        with pytest.raises(exc, match=match):
            self.make_estimator(**kw).fit(X)

    def test_bounds_of_the_wrong_shape_name_bounds(self):
        """Not numpy's broadcast error: a message that names ``bounds`` and the expected shape."""
        X = self.make_data(100)
        if self.make_estimator()._domain_kind != "ball":
            pytest.skip("the model's domain is fixed: no bounds")
        d = len(self.domain_columns(X))
        for bounds in ((np.zeros(d - 1), np.ones(d - 1)), (np.zeros(d + 1), 1.0), (0.0, np.ones((d, 1)))):
            with pytest.raises(ValueError, match=rf"bounds: the (lower|upper) bound has shape .*\({d},\)"):
                self.make_estimator(bounds=bounds, data_norm=None).fit(X)
        with pytest.raises(TypeError, match="bounds"):
            self.make_estimator(bounds=("low", 1.0), data_norm=None).fit(X)

    def test_bad_data(self):
        X = self.make_data(200)
        est = self.make_estimator(random_state=0)
        bad = X.astype(np.float64)
        bad[3, 0] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            est.fit(bad)
        bad[3, 0] = np.inf
        with pytest.raises(ValueError, match="infinity"):
            est.fit(bad)
        with pytest.raises(ValueError, match="2D"):
            est.fit(X[:, 0])
        with pytest.raises(ValueError, match="0 sample"):
            est.fit(X[:0])
        with pytest.raises(ValueError, match="dim 3"):
            est.fit(X[None])
        with pytest.raises((TypeError, ValueError)):
            est.fit(np.full(X.shape, "a", dtype=object))

    @pytest.mark.parametrize("epsilon", [1.0, float("inf")])
    @pytest.mark.parametrize("declared", [True, False])
    def test_huge_finite_rows_give_finite_output_or_a_clear_error(self, epsilon, declared):
        X = self.make_data(self._rows(500, declared))
        H = X.astype(np.float64)
        H[0, 0] = 1.5e308
        H[1, :] = -np.finfo(np.float64).max
        H[2, -1] = np.finfo(np.float64).max
        kw = {} if declared or self.make_estimator()._domain_kind != "ball" else dict(bounds=None, data_norm=None)
        est = self.make_estimator(epsilon=epsilon, random_state=0, **kw)
        if self.refuses_huge_rows:
            with pytest.raises(ValueError, match="X"):
                est.fit(H)
            return
        try:
            est.fit(H)
        except ValueError as exc:            # only the non-private fit may refuse, naming X
            assert epsilon == float("inf") and "X" in str(exc)
            return
        for name, v in self._fitted(est).items():
            assert np.all(np.isfinite(v)), name
        assert np.all(np.isfinite(est.score_samples(X)))

    # ------------------------------------------------------------ sources
    @pytest.mark.parametrize("declared", [True, False])
    def test_memmap_and_block_sources_give_the_in_memory_fit(self, tmp_path, monkeypatch, declared):
        """Same superblocks, same statistics, same key: the same fit, bit for bit, however the
        rows arrive (several superblocks here: a small superblock size is patched in)."""
        monkeypatch.setattr(engine_data, "superblock_rows", lambda d: 512)
        kw = self._domain_kw(declared)
        X = np.ascontiguousarray(self.make_data(self._rows(1500, declared)))
        path = tmp_path / "x.npy"
        np.save(path, X)
        ref = self.make_estimator(random_state=4, **kw).fit(X)
        for src in (np.load(path, mmap_mode="r"), NpyBlocks(path, block_rows=7), NpyBlocks(path, block_rows=700)):
            est = self.make_estimator(random_state=4, **kw).fit(src)
            assert est.n_features_in_ == X.shape[1]
            assert est.privacy_.epsilon_spent == ref.privacy_.epsilon_spent
            for name, v in self._fitted(ref).items():
                assert_array_equal(self._fitted(est)[name], v, err_msg=f"{type(src).__name__}: {name}")
            assert_array_equal(est.diagnostics_["train_loglik_per_row"], ref.diagnostics_["train_loglik_per_row"])

    def test_a_bad_stream_is_refused_before_the_budget_is_charged(self, tmp_path):
        X = self.make_data(600).astype(np.float64)
        X[550, 0] = np.nan
        path = tmp_path / "x.npy"
        np.save(path, X)
        ledger = acc.BudgetLedger(100.0, 1e-5, neighbouring=self.params.get("neighbouring", "replace"))
        with pytest.raises(ValueError, match="NaN"):
            self.make_estimator(budget=ledger, random_state=0).fit(NpyBlocks(path, block_rows=100))
        assert ledger.entries == []
        with pytest.raises(TypeError, match="X"):
            self.make_estimator(random_state=0).fit(object())

    # ---------------------------------------------------------- scikit-learn
    def test_sklearn_estimator_checks(self):
        for kw in self.sklearn_params or ({},):
            check_estimator(self.make_estimator(**kw), on_skip=None)

    def test_clone_and_base(self):
        est = self.make_estimator()
        assert isinstance(est, PrivateEM)
        assert clone(est).get_params() == est.get_params()
