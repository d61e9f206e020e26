"""k-means assignment kernel (dpem_fast._dpcore._kmeans) against its numpy twin.

The kernel finds the nearest centre from the scores ``|c|^2 / 2 - x . c`` (fma chains), the
twin from direct squared distances: labels agree except at near-ties within rounding, the
distances and sums to the assigned centres are the twin's.  The AVX2 path and the portable
C path run the same arithmetic: they agree bit for bit.
"""
import numpy as np
import pytest

from dpem_fast._reference.exactsum import sum_blocks_reference
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _contract, _kmeans
from dpem_fast._preprocess import resolve_domain
from dpem_fast._reference.kmeans import (
    kmeans_assign_reference, kmeans_stats_reference, sq_distances_reference,
)
from dpem_fast.cluster import nicv
from dpem_fast._kernels.kmeans import kmeans_assign, kmeans_stats

CHUNK = _contract.CHUNK_SIZE

SHAPES = [
    (1, 1, 1),
    (CHUNK - 7, 2, 5),        # n < chunk
    (3 * CHUNK + 17, 10, 3),  # n % chunk != 0
    (2000, 1, 4),             # d == 1
    (1500, 4, 1),             # K == 1
    (700, 8, 9),              # largest d with an unrolled feature loop
    (700, 9, 60),             # generic d, many clusters
    (300, 100, 7),
    (70 * CHUNK + 5, 2, 50),  # more chunks than BLOCK_CHUNKS: several chunks per block
]


def problem(n, d, K, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(K, d))
    X = C[rng.integers(K, size=n)] + 0.7 * rng.normal(size=(n, d))
    return X.astype(dtype), C


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n, d, K", SHAPES)
def test_stats_and_labels_equal_the_numpy_twin(n, d, K, dtype):
    X, C = problem(n, d, K, dtype)
    got = kmeans_stats(X, C, n_threads=2)
    ref = kmeans_stats_reference(X, C)
    assert_array_equal(got["counts"], ref["counts"])           # integers: exact
    assert_allclose(got["sums"], ref["sums"], rtol=1e-12, atol=1e-12 * n)
    assert got.loglik == pytest.approx(ref["loglik"], rel=1e-12)
    assert got.n_rows == n and got["counts"].sum() == n
    lab, sq = kmeans_assign(X, C, n_threads=2)
    rlab, rsq = kmeans_assign_reference(X, C)
    assert_array_equal(lab, rlab)                               # these draws have no near-ties
    assert sq.dtype == dtype
    assert_array_equal(sq, rsq.astype(dtype))                   # the twin's distance to it


@pytest.mark.parametrize("bounds", [None, (-1.5, 1.5)])
def test_domain_clipping_inside_the_kernel_equals_scale_and_clip(bounds):
    X, C = problem(5000, 3, 4, seed=3)
    X[::7] *= 40.0                                              # far outside the domain
    dom = resolve_domain(3, 2.0, bounds)
    Cw = C / 4.0
    got = kmeans_stats(X, Cw, n_threads=2, domain=dom)
    ref = kmeans_stats_reference(X, Cw, domain=dom)
    assert_array_equal(got["counts"], ref["counts"])
    assert_allclose(got["sums"], ref["sums"], rtol=1e-12, atol=1e-12)
    assert got.n_clipped == ref["n_clipped"] > 0
    # every row in the unit ball: each cluster's sum is at most its count in norm
    assert np.all(np.linalg.norm(got["sums"], axis=1) <= got["counts"] * (1 + 1e-12))


@pytest.mark.parametrize("d, K", [(2, 50), (100, 9)])
def test_thread_count_does_not_change_a_bit(d, K):
    X, C = problem(40 * CHUNK + 3, d, K, seed=5)
    dom = resolve_domain(d, 5.0, None)
    a = kmeans_stats(X, C / 5, n_threads=1, domain=dom)
    for nt in (2, 4):
        b = kmeans_stats(X, C / 5, n_threads=nt, domain=dom)
        for name in ("counts", "sums"):
            assert_array_equal(a[name], b[name])
        assert a.loglik == b.loglik and a.n_clipped == b.n_clipped
        assert_array_equal(kmeans_assign(X, C, 1)[0], kmeans_assign(X, C, nt)[0])
        assert_array_equal(kmeans_assign(X, C, 1)[1], kmeans_assign(X, C, nt)[1])


def _raw_stats(X, C, path, domain=None, n_threads=2):
    """The Cython kernel's partials summed in block order, on the chosen path (None: this
    CPU's; "fma": the portable score path; "direct": direct distances)."""
    n, d = X.shape
    K = C.shape[0]
    nb = _kmeans.block_count(n, d, K)
    parts = [np.empty((nb, K)), np.empty((nb, K, d)), np.empty(nb)]
    kw = {}
    if domain is not None:
        kw = dict(domain=domain.loader_array(), clip_target=0.99, part_clipped=np.zeros(nb, np.int64))
    _kmeans.kmeans_stats(X, C, *parts, n_threads, path=path, **kw)
    return [sum_blocks_reference(p) for p in parts] + [kw["part_clipped"].sum() if kw else 0]


def _ties(n, d, K, dtype, seed):
    """Rows and centres with exact and near ties: duplicated centres, rows on the bisector
    of two centres (exactly, on a grid), rows nudged by an ulp off it."""
    rng = np.random.default_rng(seed)
    C = rng.integers(-4, 5, size=(K, d)).astype(np.float64) / 4
    C[K // 2] = C[0]                                            # a duplicated centre
    a, b = rng.integers(K, size=n), rng.integers(K, size=n)
    X = (C[a] + C[b]) / 2                                       # equidistant from a and b
    X[1::3] = np.nextafter(X[1::3], np.inf)                     # off the bisector by an ulp
    X[2::3] += 0.3 * rng.normal(size=X[2::3].shape)             # ordinary rows
    return X.astype(dtype), C


@pytest.mark.skipif(_kmeans.simd_path() != "AVX2+FMA", reason="this CPU has no AVX2 + FMA path")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n, d, K", [(CHUNK + 5, 1, 3), (2 * CHUNK + 3, 2, 50), (CHUNK - 1, 3, 7),
                                     (CHUNK + 2, 4, 5), (3 * CHUNK + 7, 3, 90), (2 * CHUNK + 1, 4, 40),
                                     (CHUNK + 9, 5, 6), (300, 7, 13),
                                     (CHUNK + 1, 9, 4), (130, 100, 64)])
def test_simd_and_portable_paths_agree_bit_for_bit(n, d, K, dtype):
    """Loader (box, ball, huge rows), scores, ties, distances and sums: the same numbers on
    the AVX2 path as on the portable C path, near-ties included."""
    X, C = _ties(n, d, K, dtype, seed=d)
    X[::11] *= 50.0                                             # beyond the box and the ball
    if dtype == np.float64:
        X[5] = 1e300                                            # squared norm overflows
    boxed, ball = resolve_domain(d, 1.5, (-2.0, 2.0)), resolve_domain(d, 1.5, None)
    for domain in (None, boxed, ball):                          # ball: 1e300 overflows |v|^2
        fast, slow = _raw_stats(X, C / 4, None, domain), _raw_stats(X, C / 4, "fma", domain)
        for f, s_ in zip(fast, slow):
            assert_array_equal(f, s_)
    for dom in (boxed, ball):
        got = _kmeans._load_rows_wrapper(X[:CHUNK], dom.loader_array(), 0.99)
        ref = _kmeans._load_rows_wrapper(X[:CHUNK], dom.loader_array(), 0.99, simd=False)
        assert_array_equal(got[0], ref[0])
        assert got[1] == ref[1] > 0
        assert np.all(np.linalg.norm(got[0], axis=0) <= 1.0 + 1e-12)     # in the unit ball
    out = []
    for path in (None, "fma"):
        lab, sq = np.empty(n, np.int64), np.empty(n, dtype)
        _kmeans.kmeans_assign(X, C, lab, sq, 2, path=path)
        out.append((lab, sq))
    assert_array_equal(out[0][0], out[1][0])
    assert_array_equal(out[0][1], out[1][1])


@pytest.mark.parametrize("n, d, K", [(3000, 2, 50), (2000, 3, 8), (500, 30, 16), (300, 100, 64)])
def test_labels_equal_the_twin_except_at_near_ties(n, d, K):
    """Where the twin's two nearest squared distances differ by more than rounding, the
    labels are the twin's; elsewhere the kernel's centre is as near to rounding."""
    X, C = _ties(n, d, K, np.float64, seed=7)
    lab, sq = kmeans_assign(X, C)
    D = sq_distances_reference(X, C)
    rlab = D.argmin(axis=1)
    two = np.sort(D, axis=1)[:, :2]
    scale = 1.0 + np.max(np.abs(X)) * np.max(np.abs(C)) * d
    clear = two[:, 1] - two[:, 0] > 1e-12 * scale
    assert clear.mean() > 0.3                                   # the check is not vacuous
    assert_array_equal(lab[clear], rlab[clear])
    assert np.all(D[np.arange(n), lab] - two[:, 0] <= 1e-12 * scale)
    assert_array_equal(sq, D[np.arange(n), lab])                # the twin's distance, exactly
    # exact ties (duplicate centres, bisectors on the grid: every score and distance of
    # the rows X[0::3] is exact dyadic arithmetic) go to the lowest index
    exact = (two[:, 1] == two[:, 0]) & (np.arange(n) % 3 == 0)
    assert exact.sum() > 10
    assert_array_equal(lab[exact], rlab[exact])
    s, ref = kmeans_stats(X[clear], C), kmeans_stats_reference(X[clear], C)
    assert_array_equal(s["counts"], ref["counts"])
    assert_allclose(s["sums"], ref["sums"], rtol=1e-12, atol=1e-12 * n)
    assert s.loglik == pytest.approx(ref["loglik"], rel=1e-12)


@pytest.mark.parametrize("path", [None, "fma", "direct"])
def test_scores_that_would_overflow_use_the_direct_distances(path):
    """|x| |c| near the double range: the scores |c|^2/2 - x.c would overflow (inf - inf),
    so the chunk is labelled by the direct distances, as the twin labels it."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(CHUNK + 20, 2))
    C = np.array([[0.0, 0.0], [1e200, 0.0], [3.0, 3.0]])
    X[7] = [1e200, 1.0]                                         # nearest: centre 1 (distance 1)
    X[CHUNK + 3] = [1e200, -5.0]
    lab, sq = np.empty(len(X), np.int64), np.empty(len(X))
    _kmeans.kmeans_assign(X, C, lab, sq, 2, path=path)
    with np.errstate(over="ignore"):                            # the twin's far distances: inf
        rlab, rsq = kmeans_assign_reference(X, C)
    assert lab[7] == 1 and lab[CHUNK + 3] == 1
    assert_array_equal(lab, rlab)
    assert_array_equal(sq, rsq)
    assert_array_equal(_raw_stats(X, C, path)[0], np.bincount(rlab, minlength=3))


def test_ties_go_to_the_lowest_index_and_empty_input():
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    C = np.array([[0.5, 1.0], [0.5, -1.0], [0.5, 1.0]])   # every row equidistant from all
    assert_array_equal(kmeans_assign(X, C)[0], [0, 0])
    s = kmeans_stats(X, C)
    assert_array_equal(s["counts"], [2, 0, 0])
    e = kmeans_stats(np.zeros((0, 2)), C)
    assert_array_equal(e["counts"], np.zeros(3)) and e["sums"].shape == (3, 2)


def test_shape_errors():
    X, C = problem(100, 3, 2)
    with pytest.raises(ValueError, match="centers"):
        kmeans_stats(X, C[:, :2])
    with pytest.raises(ValueError, match="centers"):
        kmeans_assign(X, np.full((2, 3), np.nan))
    nb = _kmeans.block_count(100, 3, 2)
    with pytest.raises(ValueError, match="partial"):
        _kmeans.kmeans_stats(X, C, np.empty((nb + 1, 2)), np.empty((nb, 2, 3)), np.empty(nb), 1)


def test_nicv_equals_numpy():
    X, C = problem(3000, 4, 6, seed=9)
    expected = np.mean(np.min(((X[:, None, :] - C[None]) ** 2).sum(-1), axis=1))
    assert nicv(X, C) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="X"):
        nicv(np.array([[np.nan, 0, 0, 0]]), C)
    with pytest.raises(ValueError, match="centers"):
        nicv(X, C[:, :3])


@pytest.mark.parametrize("n, d, K", [(2 * CHUNK + 3, 2, 50), (300, 100, 64)])
def test_direct_path_is_the_twin_bit_for_bit(n, d, K):
    """The path of a CPU without FMA labels by the twin's own arithmetic: labels, distances
    and counts equal the twin's, near-ties included; bad path names are refused."""
    X, C = _ties(n, d, K, np.float64, seed=11)
    lab, sq = np.empty(n, np.int64), np.empty(n)
    _kmeans.kmeans_assign(X, C, lab, sq, 2, path="direct")
    rlab, rsq = kmeans_assign_reference(X, C)
    assert_array_equal(lab, rlab)
    assert_array_equal(sq, rsq)
    counts, sums, inertia, _ = _raw_stats(X, C, "direct")
    ref = kmeans_stats_reference(X, C)
    assert_array_equal(counts, ref["counts"])
    assert_allclose(sums, ref["sums"], rtol=1e-12, atol=1e-12 * n)
    with pytest.raises(ValueError, match="path"):
        _kmeans.kmeans_assign(X, C, lab, sq, 2, path="avx")


@pytest.mark.skipif(_kmeans.simd_path() != "AVX2+FMA", reason="this CPU has no AVX2 + FMA path")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d", [1, 2, 3, 5, 8])
def test_lane_loader_is_the_scalar_loader_bit_for_bit(d, dtype):
    """Signed zeros, values on the box's faces and beyond, rows beyond the ball, a box with
    infinite faces on some features and none at all: the lane-wise loader writes the scalar
    loader's bits (signs of zero included) and counts the same clipped rows."""
    rng = np.random.default_rng(d)
    n = CHUNK - 3
    X = rng.choice([-0.0, 0.0, 0.5, 1.0, -1.0, 2.5, -3.0], size=(n, d))
    X *= rng.choice([1.0, 1.0, 0.3], size=(n, d))
    lo, hi = np.zeros(d), np.ones(d)
    lo[::2], hi[1::3] = -np.inf, np.inf                         # some faces open
    zeros = []
    for dom in (np.array([lo, hi, np.zeros(d), np.full(d, 1.5)]),
                np.array([np.full(d, -np.inf), np.full(d, np.inf), np.full(d, 0.25), np.full(d, 0.7)])):
        got = _kmeans._load_rows_wrapper(X.astype(dtype), dom, 0.99)
        ref = _kmeans._load_rows_wrapper(X.astype(dtype), dom, 0.99, simd=False)
        assert_array_equal(got[0].view(np.uint64), ref[0].view(np.uint64))
        assert got[1] == ref[1] > 0
        zeros.append(np.any(np.signbit(got[0]) & (got[0] == 0)))
    assert zeros[0]                                             # a -0.0 went through the box
