"""The person-level part of the conformance suite (issue 27): what every private estimator
must satisfy when it is fitted with ``groups`` and ``max_rows_per_group`` m.

:class:`PersonLevelConformance` runs for every estimator (it is a base of
``privacy_conformance.PrivacyConformance``); :class:`PersonLevelEMConformance` adds, for the
full-pass EM models (a base of ``conformance.PrivateEstimatorConformance``), the adversarial
search of the group-level sensitivities through the kernels and the sources.  Checked:

- every release of a grouped fit has m times the row-level sensitivity and noise (the same
  multipliers, the same ε), the event and the record say ``privacy_unit="group"`` and m, the
  loader's cross-check re-accounts it, and an accountant holding row-level events refuses it;
- the budget ledger must be of the fit's unit, and is charged before the bounding reads the
  groups (a refused charge bounds nothing);
- bad input (groups of the wrong length, missing ids, m < 1, a non-integer m, groups with
  ``epsilon=inf``, groups without m, m without groups) names the parameter and charges nothing;
- seeded grouped fits are reproducible, thread-count invariant, and do not depend on how
  the rows of different groups are interleaved;
- nothing about the groups (their number, their sizes) reaches the record, the saved file,
  the pickle or the diagnostics' keys;
- (EM models) a person of m rows at the worst-case points changes each statistic by m times a
  row's sensitivity, never more than the recorded (calibrated) sensitivity; their joint change
  never exceeds the recorded joint multiplier's bound and nearly attains it; memmaps and block
  sources give the in-memory grouped fit bit for bit; the one-off releases (the private
  domain estimate, the private start) are scaled too.
"""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast import ModelFormatError, _persist
from dpem_fast import accounting as acc
from dpem_fast._engine import _groups as engine_groups
from dpem_fast._engine import domain_specs
from dpem_fast._engine._radius import radius_specs
from dpem_fast._engine._sources import _memory as engine_data
from dpem_fast.io import NpyBlocks

#: m of the suite's grouped fits
M = 3
#: the suite's grouped fits are small and noise-dominated on purpose (each model's own tests
#: check when the utility warning is raised)
_noisy = pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")


class PersonLevelConformance:
    """Person-level checks every private estimator runs (see the module docstring)."""

    #: False for an estimator whose record states the public number of slots G m (DP-SEP:
    #: replace-one-group keeps G fixed, as the row-level DP-SEP publishes N)
    record_independent_of_group_count = True
    #: False where the release sensitivities of a grouped fit are not m times the row-level
    #: fit's (DP-SEP: its per-release sensitivity is over G m slots, not n rows)
    releases_scale_by_m = True
    #: False where the fit reads its rows in an order that matters beyond rounding (LDA's
    #: token cap is drawn per document position)
    group_interleaving_invariant = True

    def make_groups(self, n, seed=0):
        """One group id per row: about 5 rows per group, so that m = 3 drops some."""
        return np.random.default_rng([seed, 27]).integers(0, max(n // 5, 1), n)

    def person_params(self):
        return {"max_rows_per_group": M}

    def _grouped(self, **kw):
        return self.make_estimator(**{**self.person_params(), **kw})

    def _unit_ledger(self, unit, epsilon=1e3, delta=1e-5):
        return acc.BudgetLedger(epsilon, delta, accountant="rdp", neighbouring=self._relation(), privacy_unit=unit)

    # ------------------------------------------------------------ the record
    @_noisy
    def test_person_level_scales_every_release_by_m_and_reaccounts(self):
        X = self.make_data(400)
        g = self.make_groups(X.shape[0])
        grp = self._grouped(random_state=0).fit(X, groups=g)
        rec = grp.privacy_
        assert (rec.privacy_unit, rec.max_rows_per_group) == ("group", M)
        assert f"at most {M} rows per group" in str(rec)
        assert acc._events.tagged_units(rec.event) == {"group"}
        _persist.check_record(rec, getattr(grp, "_joint_sensitivity", None))       # the loader's cross-check
        factory = acc.get_accountant(rec.accountant, rec.neighbouring)
        assert factory().compose(rec.event).get_epsilon(rec.event_delta) == pytest.approx(rec.epsilon_spent,
                                                                                           rel=1e-9)
        holds_rows = factory().compose(acc.NeighbouringEvent(rec.neighbouring, acc.GaussianEvent(50.0)))
        with pytest.raises(acc.NeighbouringMismatchError):
            holds_rows.compose(rec.event)
        if not self.releases_scale_by_m:
            return
        row = self.make_estimator(random_state=0).fit(X)
        assert set(row.privacy_.releases) <= set(rec.releases)
        # a release only the grouped fit makes: a model's row count, public per row under replace
        # but private per group (it changes by up to m), released as under add/remove
        extra = set(rec.releases) - set(row.privacy_.releases)
        specs = {sp.name: sp for sp in radius_specs()}     # a declared box's radius: n private per group
        if extra - set(specs):
            specs.update({sp.name: sp for sp in grp._statistic_specs(X.shape[1])})
        for name in extra:
            assert rec.releases[name].sensitivity == pytest.approx(M * max(specs[name].l2.values()), rel=1e-12)
        same_plan = set(rec.releases) == set(row.privacy_.releases)
        # both fits widen their non-integer statistics for float64 rounding (issue 34, _specs
        # "Rounding"): the row-level one at its public n under replace, the grouped one at the
        # public cap (its row count is private); compare each against the exact-arithmetic value
        d, n = X.shape[1], X.shape[0]
        try:
            plain = {sp.name: sp for sp in (*row._statistic_specs(d), *row._start_specs(d))}
            w_row = {sp.name: sp for sp in (*row._iteration_specs(d, np.float64, row._public_rows(n)),
                                            *row._start_release_specs(d, row._public_rows(n)))}
            w_grp = {sp.name: sp for sp in (*grp._iteration_specs(d, np.float64, None),
                                            *grp._start_release_specs(d, None))}
        except (ValueError, AttributeError):   # a size chosen in the fit ("auto"), or not a PrivateEM
            # (LDA, DP-SEP): the factors from the records
            plain = None
        ratios = set()
        for name, r in row.privacy_.releases.items():
            q = rec.releases[name]
            if plain is None:
                # the grouped fit's widening at the cap over the row-level one's (at its public n
                # under replace, else the same cap): 1 for integer statistics
                w = q.sensitivity / (M * r.sensitivity)
                assert 1.0 - 1e-8 <= w <= 1.0 + 3e-3, (name, w)
                ratios.add(round(w, 15))
                assert len(ratios) <= 3, ratios            # 1, the iteration and the one-off factors
            elif name in plain:
                exact = plain[name].sensitivity(r.norm, row.neighbouring)
                w = w_grp[name].sensitivity(r.norm, row.neighbouring) / w_row[name].sensitivity(r.norm, row.neighbouring)
                if not plain[name].integer:             # the grouped fit carries the cap's widening
                    assert w_grp[name].sensitivity(r.norm, row.neighbouring) / exact > 1.0 + 1e-3, name
            else:
                w = 1.0
            # a lattice release's sensitivity is widened by at most 1 % (its own step)
            tol = 1e-12 if r.mechanism != "discrete_gaussian" else 0.0201
            assert q.sensitivity == pytest.approx(M * r.sensitivity * w, rel=tol), name
            if same_plan:           # the same multipliers (an extra count takes a share otherwise)
                assert q.noise_multiplier == pytest.approx(r.noise_multiplier, rel=1e-9), name
            assert q.count == r.count
        if same_plan:
            assert rec.epsilon_spent == pytest.approx(row.privacy_.epsilon_spent, rel=1e-9)

    # ------------------------------------------------------------ the ledger
    @_noisy
    def test_person_level_ledger_is_of_the_unit_and_charged_before_the_bounding(self, monkeypatch):
        X = self.make_data(400)
        g = self.make_groups(X.shape[0])
        ledger = self._unit_ledger("group")
        seen = []
        real = engine_groups.bound_mask

        def spy(*args, **kw):
            seen.append(len(ledger.entries))
            return real(*args, **kw)

        for module in self._bounding_modules():
            monkeypatch.setattr(module, "bound_mask", spy)
        self._grouped(budget=ledger, random_state=0).fit(X, groups=g)
        assert seen and all(s == 1 for s in seen) and len(ledger.entries) == 1
        # a refused charge bounds nothing
        seen.clear()
        tiny = self._unit_ledger("group", epsilon=1e-3, delta=1e-9)
        with pytest.raises(acc.BudgetExceededError):
            self._grouped(budget=tiny, random_state=0).fit(X, groups=g)
        assert seen == [] and tiny.entries == []
        # the other unit is refused before anything
        rows_ledger = self._unit_ledger("row")
        with pytest.raises(ValueError, match="budget"):
            self._grouped(budget=rows_ledger).fit(X, groups=g)
        with pytest.raises(ValueError, match="budget"):
            self.make_estimator(budget=ledger).fit(X)
        assert rows_ledger.entries == [] and len(ledger.entries) == 1

    def _bounding_modules(self):
        """The modules whose ``bound_mask`` an estimator calls (spied on)."""
        from dpem_fast.decomposition import _dp_lda
        from dpem_fast.mixture import _dp_sep
        from dpem_fast.model_selection import _selection
        return engine_groups, _dp_lda, _dp_sep, _selection

    # ------------------------------------------------------------ bad input
    @_noisy
    def test_person_level_bad_input_names_the_parameter_and_charges_nothing(self):
        X = self.make_data(100)
        n = X.shape[0]
        g = self.make_groups(n)
        ledger = self._unit_ledger("group")
        nan = g.astype(float)
        nan[3] = np.nan
        cases = [
            (dict(max_rows_per_group=M), dict(groups=g[:-1]), ValueError, "groups"),
            (dict(max_rows_per_group=M), dict(groups=nan), ValueError, "groups"),
            (dict(max_rows_per_group=M), dict(groups=np.c_[g, g]), ValueError, "groups"),
            (dict(max_rows_per_group=0), dict(groups=g), ValueError, "max_rows_per_group"),
            (dict(max_rows_per_group=-2), dict(groups=g), ValueError, "max_rows_per_group"),
            (dict(max_rows_per_group=2.5), dict(groups=g), TypeError, "max_rows_per_group"),
            (dict(max_rows_per_group=True), dict(groups=g), TypeError, "max_rows_per_group"),
            (dict(max_rows_per_group=None), dict(groups=g), ValueError, "max_rows_per_group"),
            (dict(max_rows_per_group=M), dict(), ValueError, "groups"),
            (dict(max_rows_per_group=M), dict(groups="author"), ValueError, "groups"),
        ]
        for params, fit_kw, exc, match in cases:
            with pytest.raises(exc, match=match):
                self.make_estimator(budget=ledger, **{**self.person_params(), **params}).fit(X, **fit_kw)
        with pytest.raises(ValueError, match="groups|finite epsilon"):     # "auto" refuses epsilon=inf first
            self._grouped(**self.non_private_params()).fit(X, groups=g)
        assert ledger.entries == []

    # ------------------------------------------------------------ determinism
    @_noisy
    def test_person_level_fit_is_seeded_thread_invariant_and_interleaving_free(self):
        X = self.make_data(self.reproducibility_rows)
        g = self.make_groups(X.shape[0])
        a = self._grouped(random_state=11, n_threads=1).fit(X, groups=g)
        b = self._grouped(random_state=11, n_threads=2).fit(X, groups=g)
        c = self._grouped(random_state=12, n_threads=2).fit(X, groups=g)
        for name, v in self._fitted(a).items():
            assert_array_equal(v, self._fitted(b)[name], err_msg=name)
        assert any(not np.array_equal(v, self._fitted(c)[k]) for k, v in self._fitted(a).items())
        if not self.group_interleaving_invariant:
            return
        order = np.argsort(g, kind="stable")          # groups contiguous, each group's rows in order
        d = self._grouped(random_state=11).fit(X[order], groups=g[order])
        for name, v in self._fitted(a).items():
            assert_allclose(self._fitted(d)[name], v, rtol=1e-9, atol=1e-12, err_msg=name)

    # --------------------------------------------------- nothing about the groups
    @_noisy
    def test_nothing_about_the_groups_leaves_the_fit(self, tmp_path):
        X = self.make_data(400)
        n = X.shape[0]
        rng = np.random.default_rng(4)
        G = n // 8
        even = np.arange(n) % G                                       # G groups of 8
        skewed = np.minimum(rng.geometric(0.05, n), G) - 1            # G groups, heavy-tailed sizes
        skewed[:G] = np.arange(G)
        fits = [self._grouped(random_state=5).fit(X, groups=gg) for gg in (even, skewed)]
        if self.record_independent_of_group_count:
            fits.append(self._grouped(random_state=5).fit(X, groups=np.arange(n) % 3))     # 3 groups
        recs = [f.privacy_ for f in fits]
        for r in recs[1:]:
            assert str(r) == str(recs[0])
            assert r.releases == recs[0].releases and r.event == recs[0].event
        files = []
        for i, f in enumerate(fits):
            f.save(tmp_path / f"m{i}.npz")
            files.append(_persist._read(tmp_path / f"m{i}.npz")[0]["privacy"])
        assert all(json.dumps(x, sort_keys=True) == json.dumps(files[0], sort_keys=True) for x in files)
        keys = set(getattr(self.make_estimator(random_state=5).fit(X), "diagnostics_", {}))
        for f in fits:
            assert set(getattr(f, "diagnostics_", {})) == keys
            blob = pickle.dumps(f)
            assert skewed.tobytes()[:64] not in blob and even.tobytes()[:64] not in blob

    @_noisy
    def test_person_level_update_reads_no_row_count(self, monkeypatch):
        """With every release fixed, grouped fits on data of different row counts (and group
        sizes) give the same model: nothing but released values, not even the row count — public
        per row under replace-one, private per group under both relations — reaches the update."""
        if not self.releases_statistics:
            pytest.skip("the compiled sequential step adds the released noise itself (its own tests)")
        from dpem_fast._engine import ReleaseLayer

        def fixed(layer, statistics, index):
            out = {name: np.full(layer.releases[name].shape, 0.25) for name in statistics}
            if "domain_scale" in out:
                from dpem_fast._engine import _domain
                lower, upper = _domain._scale_edges()
                out["domain_scale"][:, (np.abs(lower) >= 0.5) & (np.abs(upper) <= 4.0)] = 1e12
            if "domain_outside" in out:      # a box that covers the data (no coverage warning)
                out["domain_outside"][-1] = 1e12
            return out

        monkeypatch.setattr(ReleaseLayer, "release", fixed)
        X, Y = self.make_data(400, seed=0), self.make_other_data(700, seed=1)
        a = self._grouped(random_state=3).fit(X, groups=self.make_groups(X.shape[0]))
        b = self._grouped(random_state=3).fit(Y, groups=self.make_groups(Y.shape[0], seed=1))
        for name, v in self._fitted(a).items():
            assert_array_equal(v, self._fitted(b)[name], err_msg=name)

    @_noisy
    def test_a_person_level_file_keeps_its_unit_and_a_forged_unit_is_refused(self, tmp_path):
        X = self.make_data(300)
        est = self._grouped(random_state=0).fit(X, groups=self.make_groups(X.shape[0]))
        path = tmp_path / "m.npz"
        est.save(path)
        back = _persist.load(path)
        assert (back.privacy_.privacy_unit, back.privacy_.max_rows_per_group) == ("group", M)
        assert back.privacy_.releases == est.privacy_.releases and back.privacy_.event == est.privacy_.event
        for edit, match in ((lambda p: p.pop("privacy_unit"), "privacy_unit"),
                            (lambda p: p.__setitem__("max_rows_per_group", 0), "max_rows_per_group")):
            meta, arrays = _persist._read(path)
            edit(meta["privacy"])
            meta_bytes = json.dumps(meta, allow_nan=False, sort_keys=True).encode()
            entries = dict(arrays)
            entries["__meta__"] = np.frombuffer(meta_bytes, dtype=np.uint8)
            entries["__sha256__"] = np.frombuffer(_persist._digest(meta_bytes, arrays).encode(), dtype=np.uint8)
            forged = tmp_path / "forged.npz"
            with open(forged, "wb") as fh:
                np.savez(fh, **entries)
            with pytest.raises(ModelFormatError, match=match):
                _persist.load(forged)


class PersonLevelEMConformance:
    """The full-pass EM models' person-level checks: the kernels' group-level sensitivities,
    searched; the sources; the one-off releases."""

    def _person_change(self, est, domain, params, P, Pp, specs):
        """‖S(P) − S(P')‖ per statistic for two persons' rows (P' may be empty)."""
        one = est._statistics(np.ascontiguousarray(P), params, domain, 1)
        if len(Pp) == 0:
            return {s.name: self._norm(one[s.name], s) for s in specs}
        two = est._statistics(np.ascontiguousarray(Pp), params, domain, 1)
        return {s.name: self._norm(one[s.name] - two[s.name], s) for s in specs}

    def _random_persons(self, est, rng, d, rel, count=8):
        """Random persons of m rows against k <= m rows (k = 0 under add/remove)."""
        out = []
        for _ in range(count):
            params = self.random_parameters(est, rng, d)
            k = int(rng.integers(0, M + 1)) if rel == "replace" else 0
            P = np.stack([self.random_row(est, rng, d) for _ in range(M)])
            Pp = np.stack([self.random_row(est, rng, d) for _ in range(k)]) if k else np.empty((0, d))
            out.append((params, P, Pp))
        return out

    def _climb(self, est, rng, P, Pp):
        P = P.copy()
        i = int(rng.integers(P.shape[0]))
        P[i] = self.perturb_row(est, rng, P[i])
        if len(Pp):
            Pp = Pp.copy()
            j = int(rng.integers(Pp.shape[0]))
            Pp[j] = self.perturb_row(est, rng, Pp[j])
        return P, Pp

    def _worst_pairs(self, est, rng, d, score, cases=None, steps=40):
        """``(params, x, x', score)`` of row pairs found by hill climbing ``score(params, x, x')``
        from the model's adversarial cases and six random starts (the suite's row-level search)."""
        cases = list(self.adversarial_cases(est, rng, d)) if cases is None else list(cases)
        starts = cases + [(self.random_parameters(est, rng, d), self.random_row(est, rng, d),
                           self.random_row(est, rng, d)) for _ in range(6)]
        found = []
        for params, x, xp in starts:
            cur = score(params, x, xp)
            for _ in range(steps):
                nx, nxp = self.perturb_row(est, rng, x), self.perturb_row(est, rng, xp)
                new = score(params, nx, nxp)
                if new > cur:
                    x, xp, cur = nx, nxp, new
            found.append((params, x, xp, cur))
        return found

    def _person_of(self, x, xp, rel, d):
        """m copies of x against m copies of x' (replace) or against nothing (add/remove)."""
        return np.repeat(x[None], M, 0), (np.repeat(xp[None], M, 0) if rel == "replace" else np.empty((0, d)))

    def _grouped_fit(self, rel):
        X = self.make_data(300)
        est = self.make_estimator(neighbouring=rel, random_state=0, max_rows_per_group=M,
                                  **self.ball_params).fit(X, groups=self.make_groups(X.shape[0]))
        return est, X.shape[1], self._working_domain(est, X)

    @_noisy
    @pytest.mark.parametrize("rel", ["add_remove", "replace"])
    def test_person_sensitivities_are_never_exceeded_and_attained(self, rel):
        """A person of m rows at the worst-case points changes each statistic by m times a row's
        sensitivity, and no person changes it by more than the grouped fit's recorded (calibrated)
        sensitivity — a plan that forgot to scale one release by m fails here.  The persons are
        evaluated through the kernel (m rows in one block), never by multiplying."""
        est, d, domain = self._grouped_fit(rel)
        specs = est._statistic_specs(d)
        rec = est.privacy_.releases
        declared = {}
        for sp in specs:
            r = rec[sp.name]
            declared[sp.name] = (r.sensitivity if (r.mechanism, r.norm) == ("gaussian", "l2")
                                 else M * sp.sensitivity("l2", rel))
            assert declared[sp.name] >= M * sp.sensitivity("l2", rel) * (1 - 1e-12), sp.name
        best = {sp.name: 0.0 for sp in specs}
        rng = np.random.default_rng(27)

        def record(change):
            for name, v in change.items():
                assert v <= declared[name] * (1 + 1e-9), (rel, name, v, declared[name])
                best[name] = max(best[name], v)

        for sp in specs:                          # the worst row pair of each statistic, m times
            pairs = self._worst_pairs(est, rng, d, lambda p, x, xp, n=sp.name: self._person_change(
                est, domain, p, x[None], xp[None] if rel == "replace" else np.empty((0, d)), specs)[n], steps=30)
            for params, x, xp, _ in pairs:
                record(self._person_change(est, domain, params, *self._person_of(x, xp, rel, d), specs))
        for params, P, Pp in self._random_persons(est, rng, d, rel):      # mixed persons, climbed
            record(self._person_change(est, domain, params, P, Pp, specs))
            for _ in range(6):
                P, Pp = self._climb(est, rng, P, Pp)
                record(self._person_change(est, domain, params, P, Pp, specs))
        for name in declared:
            assert best[name] >= 0.95 * declared[name], (rel, name, best[name], declared[name])

    @_noisy
    @pytest.mark.parametrize("rel", ["add_remove", "replace"])
    def test_person_joint_change_is_within_the_recorded_joint_multiplier(self, rel):
        """Σ_r ‖δ_r‖²/σ_r² of a person's change, with the grouped fit's recorded noise scales, never
        exceeds joint_multiplier⁻² and nearly attains it (m copies of the worst pair)."""
        est, d, domain = self._grouped_fit(rel)
        if est.privacy_.joint_multiplier is None:
            pytest.skip("the model composes an iteration's releases separately")
        specs = est._statistic_specs(d)
        sigma = {sp.name: est.privacy_.releases[sp.name].noise_scale for sp in specs}
        bound = est.privacy_.joint_multiplier ** -2
        rng = np.random.default_rng(72)

        def value(params, P, Pp):
            ch = self._person_change(est, domain, params, P, Pp, specs)
            v = sum(ch[n] ** 2 / sigma[n] ** 2 for n in sigma)
            assert v <= bound * (1 + 1e-9), (rel, v, bound)
            return v

        pairs = self._worst_pairs(est, rng, d, lambda p, x, xp: value(
            p, x[None], xp[None] if rel == "replace" else np.empty((0, d))), steps=30)
        best = max(value(params, *self._person_of(x, xp, rel, d)) for params, x, xp, _ in pairs)
        for params, P, Pp in self._random_persons(est, rng, d, rel, 4):
            for _ in range(6):
                value(params, P, Pp)
                P, Pp = self._climb(est, rng, P, Pp)
        assert best >= 0.95 * bound, (rel, best, bound)

    @_noisy
    def test_person_level_one_off_releases_are_scaled_too(self):
        """The private domain estimate's histograms and a private start's releases (data-free:
        the plan from public quantities)."""
        X = self.make_data(50)
        d = X.shape[1]
        kinds = [{}]
        if self.make_estimator()._domain_kind == "ball":
            kinds.append(dict(bounds=None, data_norm=None))
        for extra in self._private_start_params():
            kinds.append(extra)
        checked = set()
        for kw in kinds:
            plans = []
            for m in (None, M):
                est = self.make_estimator(max_rows_per_group=m, **kw)
                est._validate_params()
                est.n_features_in_ = d
                plans.append(est._private_plan(None, d)[0])
            row, grp = plans
            assert grp.event.privacy_unit == "group"
            for name, r in row.releases.items():
                tol = 1e-12 if r.mechanism != "discrete_gaussian" else 0.0201
                assert grp.releases[name].sensitivity == pytest.approx(M * r.sensitivity, rel=tol), name
                checked.add(name)
        if self.make_estimator()._domain_kind == "ball":
            assert {s.name for s in domain_specs(d)} <= checked

    def _private_start_params(self):
        """Overrides that make the model start privately (none by default)."""
        names = self.make_estimator().get_params(deep=False)
        if "means_init" in names and "n_components" in names and names.get("covariance_type") is not None:
            return [dict(means_init="private")]
        if "init" in names and "n_clusters" in names:
            return [dict(init="private")]
        return []

    @_noisy
    def test_person_level_memmap_and_block_sources_give_the_in_memory_fit(self, tmp_path, monkeypatch):
        monkeypatch.setattr(engine_data, "superblock_rows", lambda d: 512)
        X = np.ascontiguousarray(self.make_data(1500))
        g = self.make_groups(X.shape[0])
        path = tmp_path / "x.npy"
        np.save(path, X)
        ref = self._grouped(random_state=4).fit(X, groups=g)
        for src in (np.load(path, mmap_mode="r"), NpyBlocks(path, block_rows=7), NpyBlocks(path, block_rows=700)):
            est = self._grouped(random_state=4).fit(src, groups=g)
            for name, v in self._fitted(ref).items():
                assert_array_equal(self._fitted(est)[name], v, err_msg=f"{type(src).__name__}: {name}")
            assert_array_equal(est.diagnostics_["train_loglik_per_row"], ref.diagnostics_["train_loglik_per_row"])
