"""The private start of DPKMeans (``init="private"``, :mod:`dpem_fast._engine._start`): its
releases are in the plan at the stated share and the recorded noise, their sensitivities
hold, the start lands in the declared domain, bad values are refused, and it finds clusters
that the data-independent start merges.  (The whole conformance suite runs with it in
``test_dp_kmeans.py::TestConformancePrivateStart``.)"""
import math
import warnings

import numpy as np
import pytest

from dpem_fast import DPKMeans, NoiseDominatedWarning, _persist, accounting as acc
from dpem_fast._engine import ReleaseLayer, make_plan
from dpem_fast._engine import _start
from dpem_fast._engine._domain import DOMAIN_SHARE
from dpem_fast._engine._specs import ROUNDING_ROW_CAP, float64_exact_sum_factor, soft_counts, weighted_sums
from dpem_fast._preprocess import DataDomain
from dpem_fast._rng import make_key

START = (_start.START_COUNTS, _start.START_SUMS)


def _blobs(n, d, K, seed, spread=0.02):
    """K clusters with centres on the sphere of radius 0.8 (well apart), sd ``spread``."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(K, d))
    c *= 0.8 / np.linalg.norm(c, axis=1, keepdims=True)
    y = rng.integers(K, size=n)
    return c[y] + rng.normal(scale=spread, size=(n, d)), c


def _loss(X, C):
    d2 = (X * X).sum(1)[:, None] - 2 * X @ C.T + (C * C).sum(1)[None, :]
    return float(np.maximum(d2.min(1), 0).mean())


def _mu2(r):
    return (r.sensitivity / r.noise_scale) ** 2


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
@pytest.mark.parametrize("declared", [True, False])
def test_the_start_holds_its_stated_share_of_the_plan(rel, declared):
    """In Gaussian units (μ² under the exact GDP accountant) the two start releases hold
    START_SHARE of the whole plan, split Δ_c : √d Δ_s; the domain estimate its DOMAIN_SHARE;
    the event re-accounts to the recorded spend."""
    X, _ = _blobs(6000, 3, 4, 0)
    kw = dict(data_norm=1.5) if declared else {}
    km = DPKMeans(4, epsilon=1.0, delta=1e-6, init="private", neighbouring=rel, max_iter=5,
                  random_state=0, **kw).fit(X)
    rec = km.privacy_
    rs = rec.releases
    assert set(START) <= set(rs) and all(rs[n].count == 1 for n in START)
    it = [r for n, r in rs.items() if r.count == rec.n_iter]
    per_iter = rec.joint_multiplier ** -2 if rec.joint_multiplier is not None else sum(map(_mu2, it))
    one_off = {n: _mu2(r) for n, r in rs.items() if r.count == 1}
    total = rec.n_iter * per_iter + sum(one_off.values())
    ratio = 1.0 / math.sqrt(3) if rel == "add_remove" else 1.0 / math.sqrt(6)      # 1 : sqrt(d), 1 : sqrt(2 d)
    assert one_off[START[0]] / total == pytest.approx(_start.START_SHARE * ratio / (1 + ratio), rel=1e-9)
    assert one_off[START[1]] / total == pytest.approx(_start.START_SHARE / (1 + ratio), rel=1e-9)
    if not declared:
        dom = one_off["domain_scale"] + one_off["domain_refine"] + one_off["domain_outside"]
        assert dom / total == pytest.approx(DOMAIN_SHARE, rel=1e-9)
    # the sensitivities the records carry are the derived ones: the integer counts' exact, the
    # sums' widened by the float rounding of their exact per-cell sums (issue 34, item 7) at the
    # public row count under replace, at the public cap under add/remove
    widening = float64_exact_sum_factor(6000 if rel == "replace" else ROUNDING_ROW_CAP)
    assert widening > 1.0
    assert rs[START[0]].sensitivity == (1.0 if rel == "add_remove" else math.sqrt(2.0))
    assert rs[START[1]].sensitivity == pytest.approx((1.0 if rel == "add_remove" else 2.0) * widening, rel=1e-15)
    again = acc.get_accountant(rec.accountant, rel)().compose(rec.event).get_epsilon(rec.delta)
    assert again == pytest.approx(rec.epsilon_spent, rel=1e-12) and rec.epsilon_spent <= 1.0 + 1e-9
    # the loader's cross-check: every release, the start's included, is in the event
    _persist.check_record(rec, km._joint_sensitivity)


def test_start_releases_draw_their_recorded_noise(monkeypatch):
    """What the start's post-processing reads minus the exact statistic is Gaussian noise of
    the recorded scale (a 5 % shortfall, let alone a halved noise, is seen), and the candidate
    weights are the noisy counts, not the exact ones."""
    X, _ = _blobs(3000, 3, 3, 1)
    real = ReleaseLayer.release
    noise = {n: [] for n in START}
    weights_seen = []

    def capture(layer, statistics, index):
        out = real(layer, statistics, index)
        for n in set(statistics) & set(START):
            noise[n].append(np.ravel(out[n] - statistics[n]))
            if n == START[0]:
                capture.noisy = out[n]
        return out

    real_choose = _start.choose_centres

    def choose(cands, weights, K, fallback, key):
        weights_seen.append((np.array(weights), capture.noisy))
        return real_choose(cands, weights, K, fallback, key)

    monkeypatch.setattr(ReleaseLayer, "release", capture)
    monkeypatch.setattr(_start, "choose_centres", choose)
    records = []
    for seed in range(20):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatedWarning)
            records.append(DPKMeans(8, epsilon=1.0, init="private", max_iter=2, data_norm=5.0,
                                    neighbouring="add_remove", random_state=seed).fit(X).privacy_.releases)
    for n in START:
        flat = np.concatenate(noise[n])
        sigma = records[0][n].noise_scale
        assert all(r[n].noise_scale == sigma for r in records)
        se = math.sqrt(2.0 / (4.0 * flat.size))
        assert 4 * se < 0.05
        assert abs(math.sqrt(float(np.mean(flat ** 2))) / sigma - 1.0) < 4 * se, n
    for w, noisy in weights_seen:      # the weights are released counts (some of them), never exact
        assert w.size and np.all(np.isin(w, noisy)) and not np.all(w == np.rint(w))


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
def test_start_sensitivities_are_never_exceeded(rel):
    """One row's change of the cell counts and the selected cells' sums, over random
    hyperplanes, selections and rows (clipped into the ball), never exceeds the spec; the count
    and add/remove sum bounds are attained."""
    d, K = 4, 3
    specs = {s.name: s for s in _start.start_specs(K, d)}
    m, M = _start.start_bits(K), _start.start_candidates(K)
    dom = DataDomain(np.zeros(d), 1.0, None, False)
    rng = np.random.default_rng(0)
    top = {n: 0.0 for n in specs}
    for t in range(300):
        U, b = _start.hyperplanes(make_key(t), m, d)
        slot = np.full(2 ** m, -1, dtype=np.int64)
        chosen = rng.choice(2 ** m, size=M, replace=False)
        slot[chosen] = np.arange(M)
        x, xp = rng.normal(size=(2, d)) * rng.uniform(0.2, 3.0, size=(2, 1))

        def stats(row):
            row = np.ascontiguousarray(row[None])
            return (_start.cell_counts(dom, U, b, row)[START[0]], _start.cell_sums(dom, U, b, slot, M, row)[START[1]])
        a = stats(x)
        if rel == "add_remove":
            ch = [np.linalg.norm(v) for v in a]
        else:
            bb = stats(xp)
            ch = [np.linalg.norm(u - v) for u, v in zip(a, bb)]
        for n, c in zip(START, ch):
            top[n] = max(top[n], c)
    for n, spec in specs.items():
        assert top[n] <= spec.sensitivity("l2", rel) * (1 + 1e-12), n
    assert top[START[0]] == pytest.approx(specs[START[0]].sensitivity("l2", rel))
    if rel == "add_remove":
        assert top[START[1]] == pytest.approx(1.0, rel=1e-9)


def test_the_start_lands_inside_the_declared_domain(monkeypatch):
    """Every initial centre is in the image of the declared box (and the unit ball)."""
    X, _ = _blobs(5000, 3, 5, 2, spread=0.3)
    X[::7] *= 5.0                                   # rows far outside the box, clipped
    lo, hi = np.array([-1.0, -0.5, -2.0]), np.array([1.0, 0.6, 0.3])
    seen = []
    real = DPKMeans._private_start

    def spy(est, *args):
        out = real(est, *args)
        seen.append(out)
        return out

    monkeypatch.setattr(DPKMeans, "_private_start", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatedWarning)
        km = DPKMeans(6, epsilon=0.5, init="private", bounds=(lo, hi), max_iter=2, random_state=3).fit(X)
    (C,) = seen
    img = km._domain.box_image
    assert C.shape == (6, 3) and np.all(np.abs(C) <= img * (1 + 1e-12))
    assert np.all(np.linalg.norm(C, axis=1) <= 1 + 1e-12)
    assert np.all((km.cluster_centers_ >= lo - 1e-12) & (km.cluster_centers_ <= hi + 1e-12))


@pytest.mark.parametrize("init, match", [("kmeans++", "init must be 'auto', 'private'"),
                                         ("Private", "init must be 'auto', 'private'"),
                                         (np.zeros((2, 3)), r"init must have shape \(3, 3\)")])
def test_bad_init_is_refused_naming_init(init, match):
    X, _ = _blobs(500, 3, 3, 0)
    with pytest.raises(ValueError, match=match):
        DPKMeans(3, init=init, data_norm=2.0).fit(X)


def test_private_start_finds_clusters_the_data_independent_start_merges():
    """24 clusters of ~670 rows in R^20 at ε = 1: from the data-independent start Lloyd merges
    clusters (loss several times the clusters' own spread); the private start seeds them apart
    (loss within 2.5 times the non-private optimum), for each of three seeds."""
    X, centres = _blobs(16000, 20, 24, 5)
    opt = _loss(X, centres)
    for seed in range(3):
        kw = dict(epsilon=1.0, delta=1e-6, neighbouring="add_remove", data_norm=1.0, max_iter=5, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatedWarning)
            ours = _loss(X, DPKMeans(24, init="private", **kw).fit(X).cluster_centers_)
            old = _loss(X, DPKMeans(24, init=None, **kw).fit(X).cluster_centers_)
        assert ours <= 2.5 * opt < old, (ours, opt, old)


def test_choose_centres_fills_in_and_weights_count():
    """Post-processing of the candidates: fewer than K fill in from the fallback; a heavy
    candidate is always a centre of K = 1's neighbourhood (the weighted mean)."""
    fallback = np.full((3, 2), 0.25)
    out = _start.choose_centres(np.array([[0.5, 0.0]]), np.array([10.0]), 3, fallback, make_key(0))
    assert np.array_equal(out, [[0.5, 0.0], [0.25, 0.25], [0.25, 0.25]])
    cands = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    out = _start.choose_centres(cands, np.array([2.0, 1.0, 1.0]), 1, fallback[:1], make_key(0))
    assert np.allclose(out, [[0.25, 0.25]])


def test_make_plan_takes_a_fraction_per_one_off_release():
    """``one_off_share`` as a mapping: each one-off release holds its own fraction of the plan
    (μ² under GDP); a mapping that misses a one-off or a non-positive fraction is refused."""
    its = (soft_counts("c", 3), weighted_sums("s", (3, 2), 2))
    ones = (soft_counts("a", 5), weighted_sums("b", (4, 2), 2))
    plan = make_plan(its, 6, epsilon=1.0, delta=1e-6, neighbouring="add_remove", accountant="gdp",
                     one_off_specs=ones, one_off_share={"a": 0.05, "b": 0.25})
    mu2 = {n: _mu2(r) * r.count for n, r in plan.releases.items()}
    total = sum(mu2.values())
    assert mu2["a"] / total == pytest.approx(0.05, rel=1e-9)
    assert mu2["b"] / total == pytest.approx(0.25, rel=1e-9)
    for bad in ({"a": 0.1}, {"a": 0.1, "b": 0.0}, {"a": 0.6, "b": 0.5}):
        with pytest.raises(ValueError, match="one_off_share"):
            make_plan(its, 6, epsilon=1.0, delta=1e-6, neighbouring="add_remove", accountant="gdp",
                      one_off_specs=ones, one_off_share=bad)


def test_cell_sums_are_exact_per_cell():
    """Each entry of a cell sum is the exact sum of its rows' values, rounded once (issue 34,
    item 7: the plan widens the release only by the final roundings, not by a float sum's
    order-dependent error): equal to math.fsum over the cell's rows, at rows of very different
    sizes; rows in no selected cell add nothing."""
    rng = np.random.default_rng(7)
    n, d, m = 3000, 3, 4
    dom = DataDomain(np.zeros(d), np.full(d, 2.0), None, False)
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-8, 1, (n, 1))
    U, b = _start.hyperplanes(make_key(1), m, d)
    slot = np.full(2 ** m, -1, dtype=np.int64)
    slot[[0, 3, 5, 9, 15]] = np.arange(5)
    got = _start.cell_sums(dom, U, b, slot, 5, X)[_start.START_SUMS]
    Z, cells = _start._rows_and_cells(dom, U, b, X)
    for cell, s in zip(np.flatnonzero(slot >= 0), slot[slot >= 0]):
        rows = Z[cells == cell]
        assert got[s].tolist() == [math.fsum(rows[:, j]) for j in range(d)]
