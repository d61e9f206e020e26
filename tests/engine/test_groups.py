"""Person-level privacy in the engine (issue 27): the keyed streams, the contribution bounding,
the group-level specs and plans, the group sampling of the minibatch loop."""
import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import stats

from dpem_fast import accounting as acc
from dpem_fast._dpcore import _rng as core_rng
from dpem_fast._engine import StatSpec, make_plan
from dpem_fast._engine import _groups
from dpem_fast._engine._specs import row_count, second_moments, soft_counts, weighted_sums
from dpem_fast._rng import make_key

KEY = make_key(5)


def grouping(ids):
    return _groups.check_groups(np.asarray(ids), len(ids))


def kept(ids, key=KEY, m=2, n_threads=1):
    return _groups.bound_mask(grouping(ids), _groups.bounding_key(key), m, n_threads)


# ------------------------------------------------------------------ keyed words
def test_keyed_words_are_the_streams_words_for_any_thread_count():
    key = make_key(1)
    streams = np.array([0, 7, 7, 2 ** 64 - 1, 123456789] * 300, dtype=np.uint64)
    counters = np.array([0, 1, 8, 31, 2 ** 40 + 3] * 300, dtype=np.uint64)
    one, two = np.empty(streams.size, np.uint64), np.empty(streams.size, np.uint64)
    core_rng.fill_keyed_words(key, streams, counters, one, 1)
    core_rng.fill_keyed_words(key, streams, counters, two, 2)
    assert_array_equal(one, two)
    for s, c, w in zip(streams[:4], counters[:4], one[:4]):
        words = np.empty(2 * int(c) + 2, dtype=np.uint32)
        core_rng.keystream(key, int(s), words)
        assert int(w) == int(words[2 * int(c)]) | (int(words[2 * int(c) + 1]) << 32)
    with pytest.raises(ValueError, match="same length"):
        core_rng.fill_keyed_words(key, streams[:3], counters[:2], one[:3], 1)


# ------------------------------------------------------------------ the bounding
def test_each_group_keeps_min_size_m_rows():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, 2000)
    for m in (1, 3, 40, 1000):
        keep = kept(ids, m=m)
        sizes = np.bincount(ids, minlength=50)
        assert_array_equal(np.bincount(ids[keep], minlength=50), np.minimum(sizes, m))


def test_the_bounding_of_a_group_depends_on_its_own_rows_only():
    """B(D ∪ P) = B(D) ∪ B(P) for a fixed key: adding a group, or other groups' rows anywhere,
    changes no other group's choice (the person-level relation holds for every key)."""
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 30, 600)
    keep = kept(ids, m=4)
    extra = np.full(25, 999)                     # a new group, inserted in the middle
    ids2 = np.concatenate([ids[:300], extra, ids[300:]])
    keep2 = kept(ids2, m=4)
    assert_array_equal(np.concatenate([keep2[:300], keep2[325:]]), keep)
    assert keep2[300:325].sum() == 4
    # any order of the rows across groups (each group's own row order kept), any numbering
    order = np.argsort(ids, kind="stable")
    assert_array_equal(kept(ids[order], m=4), keep[order])
    assert_array_equal(kept(ids.astype(float), m=4), keep)
    assert_array_equal(kept(ids.astype(object), m=4), keep)
    assert_array_equal(kept(ids, m=4, n_threads=2), keep)
    assert not np.array_equal(kept(ids, key=make_key(6), m=4), keep)


def test_the_kept_rows_of_a_group_are_a_uniform_subset():
    """Over keys, each of the C(5, 2) = 10 subsets of a 5-row group is kept equally often."""
    ids = np.array([3] * 5 + [4, 4])
    counts = {}
    n = 3000
    for seed in range(n):
        k = kept(ids, key=make_key(seed), m=2)
        assert k[5:].all()
        counts[tuple(np.flatnonzero(k[:5]))] = counts.get(tuple(np.flatnonzero(k[:5])), 0) + 1
    assert len(counts) == 10
    assert stats.chisquare(list(counts.values())).pvalue > 1e-4


def test_string_ids_hash_to_streams_and_integer_ids_are_their_stream():
    assert_array_equal(_groups.group_streams(np.array([5, -1])), np.array([5, 2 ** 64 - 1], dtype=np.uint64))
    s = _groups.group_streams(np.array(["a", "b", 5, 5.0, b"a"], dtype=object))
    assert s[2] == s[3] == 5 and len({int(x) for x in s}) == 4


@pytest.mark.parametrize("groups, exc, match", [
    (np.arange(9), ValueError, "one entry per row"),
    (np.arange(10).reshape(5, 2), ValueError, "1-D"),
    (np.r_[np.arange(9.0), np.nan], ValueError, "missing"),
    (np.array(["a"] * 9 + [None], dtype=object), ValueError, "missing"),
    (np.array([1.0] * 9 + [np.inf]), ValueError, "infinite"),
    (np.ones(10, dtype=complex), TypeError, "groups"),
    (np.array([(1, 2)] * 10 + [None], dtype=object)[:10], TypeError, "groups"),
])
def test_bad_groups_name_groups_and_quote_no_count(groups, exc, match):
    with pytest.raises(exc, match=match) as info:
        _groups.check_groups(groups, 10)
    assert "groups" in str(info.value) and "10" not in str(info.value) and "9" not in str(info.value)


@pytest.mark.parametrize("m, exc", [(0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError),
                                    ("3", TypeError)])
def test_bad_max_rows_per_group(m, exc):
    with pytest.raises(exc, match="max_rows_per_group"):
        _groups.check_max_rows_per_group(m)


# ------------------------------------------------------------ specs and plans
def test_group_spec_is_m_times_the_row_spec_padded_under_replace():
    odd = StatSpec("odd", (3,), l2={"add_remove": 3.0, "replace": 2.0}, l1={"add_remove": 5.0, "replace": 7.0})
    for spec in (soft_counts("c", 4), weighted_sums("s", (4, 3), 3), second_moments("q", (3, 3)), row_count("n"),
                 odd):
        g = _groups.group_spec(spec, 7)
        for norm in ("l2", "l1"):
            if getattr(spec, norm) is None:
                assert getattr(g, norm) is None
                continue
            ar, rep = spec.sensitivity(norm, "add_remove"), spec.sensitivity(norm, "replace")
            assert g.sensitivity(norm, "add_remove") == 7 * ar
            assert g.sensitivity(norm, "replace") == 7 * max(ar, rep)       # a padded pair is an addition
        assert (g.shape, g.symmetric, g.integer) == (spec.shape, spec.symmetric, spec.integer)


@pytest.mark.parametrize("rel", ["add_remove", "replace"])
@pytest.mark.parametrize("noise", ["gaussian", "discrete_gaussian"])
def test_a_group_plan_scales_every_release_by_m_and_tags_the_unit(rel, noise):
    specs = (soft_counts("c", 3), weighted_sums("s", (3, 2), 2))
    one_off = (soft_counts("o", 5, integer=True),)
    kw = dict(epsilon=1.0, delta=1e-5, neighbouring=rel, accountant="zcdp", noise=noise, one_off_specs=one_off,
              one_off_share=0.1)
    row = make_plan(specs, 5, **kw)
    grp = make_plan(specs, 5, max_rows_per_group=4, **kw)
    assert set(row.releases) == set(grp.releases) == {"c", "s", "o"}
    for name, r in row.releases.items():
        g = grp.releases[name]
        if noise == "gaussian":
            assert g.sensitivity == pytest.approx(4 * r.sensitivity, rel=1e-15)
            assert g.noise_scale == pytest.approx(4 * r.noise_scale, rel=1e-12)
        else:                                    # the lattice is built from the scaled Δ
            assert g.sensitivity >= 4 * r.sensitivity / 1.02
        assert g.noise_multiplier == pytest.approx(r.noise_multiplier, rel=1e-9)
    assert (grp.privacy_unit, grp.max_rows_per_group) == ("group", 4)
    assert (row.privacy_unit, row.max_rows_per_group) == ("row", None)
    assert grp.event.privacy_unit == "group" and row.event.privacy_unit == "row"
    assert grp.epsilon_spent == pytest.approx(row.epsilon_spent, rel=1e-9)
    with pytest.raises(acc.NeighbouringMismatchError):
        acc.BudgetLedger(10.0, 1e-5, "zcdp", neighbouring=rel).spend(grp.event)


# ------------------------------------------------------------ group sampling
def test_group_batches_take_whole_groups_at_rate_q_whatever_the_row_order():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 400, 3000)
    g = grouping(ids)
    rounds = list(_groups.group_batches(KEY, g, 0.25, 40, ("t",)))
    frac = []
    for t, idx in rounds:
        chosen = np.unique(ids[idx])
        assert_array_equal(np.sort(idx), idx)
        assert_array_equal(np.flatnonzero(np.isin(ids, chosen)), idx)     # whole groups
        frac.append(chosen.size / np.unique(ids).size)
    assert abs(np.mean(frac) - 0.25) < 4 * math.sqrt(0.25 * 0.75 / (40 * np.unique(ids).size))
    order = rng.permutation(ids.size)
    again = list(_groups.group_batches(KEY, grouping(ids[order]), 0.25, 40, ("t",)))
    for (_, a), (_, b) in zip(rounds, again):
        assert_array_equal(np.unique(ids[a]), np.unique(ids[order][b]))
