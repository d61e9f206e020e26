"""The released operator's fused product Yᵀ(Y V) (issue 41, ``dpc_rowprod.h``): its numpy twin's
values to rounding, the same bits on the AVX-512 path, the AVX2 one and the portable one, none for any block
split of the rows, and RowProducts' answer whether or not the kernel serves it."""
import numpy as np
import pytest

from dpem_fast._dpcore import _rowprod
from dpem_fast._engine import _operator
from dpem_fast._engine._operator import RowProducts
from dpem_fast._reference.rowprod import row_products_reference


def _run(Y, V, fast=2):
    out, sq = np.full((Y.shape[1], 8), np.nan), np.full(Y.shape[0], np.nan)
    _rowprod.products8(np.ascontiguousarray(Y), np.ascontiguousarray(V), out, sq, fast)
    return out, sq


# n across the AVX2 path's groups of 6 rows and the AVX-512 path's 8 (17 = 2 x 8 + 1)
@pytest.mark.parametrize("n, d", [(0, 5), (1, 1), (5, 7), (6, 33), (13, 64), (400, 300), (8, 9), (17, 40)])
def test_matches_twin_and_every_path_agrees(n, d):
    rng = np.random.default_rng(n * 100 + d)
    Y, V = rng.normal(size=(n, d)), rng.normal(size=(d, 8))
    out, sq = _run(Y, V)
    ref, ref_sq = row_products_reference(Y, V)
    scale = max(float(np.max(np.abs(Y), initial=0.0)) ** 2 * d * n, 1.0) * float(np.max(np.abs(V)))
    assert np.max(np.abs(out - ref), initial=0.0) <= 1e-13 * scale
    assert np.allclose(sq, ref_sq, rtol=1e-12, atol=1e-12 * d)
    for fast in (1, 0):                                 # AVX2 at most; C's fma(): the same operations
        out_c, sq_c = _run(Y, V, fast)
        assert np.array_equal(out, out_c) and np.array_equal(sq, sq_c)


def test_row_groups_do_not_change_bits():
    # the AVX-512 path takes rows in groups of 8 (13 = 8 + 5 single rows), the AVX2 one in
    # groups of 6 (6 + 6 + 1), the portable one a row at a time: the same bits, and each row's
    # squared norm is that of the row alone
    rng = np.random.default_rng(3)
    Y, V = rng.normal(size=(13, 40)), rng.normal(size=(40, 8))
    whole, sq = _run(Y, V)
    assert np.array_equal(sq, np.array([_run(Y[i:i + 1], V)[1][0] for i in range(13)]))
    for fast in (1, 0):
        assert np.array_equal(whole, _run(Y, V, fast)[0])


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="shapes"):
        _rowprod.products8(np.zeros((3, 4)), np.zeros((4, 7)), np.zeros((4, 7)), np.zeros(3))


def test_row_products_with_and_without_the_kernel(monkeypatch):
    rng = np.random.default_rng(5)
    Y = rng.normal(size=(50, 30)) / 10
    S = RowProducts([Y[:20], Y[20:]], 30)
    V = rng.normal(size=(30, 8))
    fused, sq = S.products(V)
    monkeypatch.setattr(_rowprod, "FAST", False)
    slabs, sq2 = S.products(V)
    assert np.allclose(fused, slabs, rtol=1e-13, atol=1e-15) and np.allclose(fused, Y.T @ (Y @ V))
    for a, b in zip(sq, sq2):
        assert np.allclose(a, b, rtol=1e-13)
    assert _operator._rowprod is _rowprod


@pytest.mark.parametrize("n, d, box", [(0, 5, False), (1, 1, True), (13, 7, True), (50, 33, False), (600, 100, True),
                                       (300, 1030, False)])
def test_clip_rows_is_the_clip_to_rounding_on_both_paths(n, d, box):
    # the operator's rows: scale_and_clip's map and clip count, the norm summed in the kernel's
    # order (every row still in the ball), its squared norms and block sums; the same bits on
    # the AVX2 path and the portable one
    from dpem_fast._preprocess import DataDomain, clip_target, scale_and_clip
    rng = np.random.default_rng(n + d)
    X = rng.normal(size=(n, d)) * rng.choice([0.01, 0.5, 3.0], size=(n, 1))
    if n > 2:
        X[1, 0], X[2, -1] = 1e300, -np.inf          # huge rows: the loader's own row code
    dom = DataDomain(center=rng.normal(size=d) * 0.1, scale=np.full(d, np.sqrt(d) * 0.5), from_data=False,
                     bounds=(np.full(d, -1.5), np.full(d, 1.5)) if box else None)
    tile = 256
    nb = max(-(-n // tile), 1)
    runs = []
    for fast in (True, False):
        Z, sq, sums = np.full((n, d), np.nan), np.full(n, np.nan), np.full((nb, d), np.nan)
        runs.append((_rowprod.clip_rows(X, dom.loader_array(), clip_target(d, np.float64), Z, sq, sums, tile, fast),
                     Z, sq, sums))
    (c, Z, sq, sums), (c2, Z2, sq2, sums2) = runs
    assert c == c2 and np.array_equal(Z, Z2) and np.array_equal(sq, sq2) and np.array_equal(sums, sums2)
    ref, ref_c = scale_and_clip(X, dom)
    assert c == ref_c
    assert np.allclose(Z, ref, rtol=0, atol=1e-14)
    assert np.all(np.sqrt(np.einsum("ij,ij->i", Z, Z)) <= 1.0) and np.allclose(sq, np.sum(Z * Z, axis=1), atol=1e-14)
    for b in range(-(-n // tile)):
        assert np.allclose(sums[b], Z[b * tile:(b + 1) * tile].sum(axis=0), rtol=0, atol=1e-12)


def _clip_runs(X, dom, tile=256):
    from dpem_fast._preprocess import clip_target
    n, d = X.shape
    nb = max(-(-n // tile), 1)
    runs = []
    for fast in (True, False):
        Z, sq, sums = np.full((n, d), np.nan), np.full(n, np.nan), np.full((nb, d), np.nan)
        c = _rowprod.clip_rows(X, dom, clip_target(d, np.float64), Z, sq, sums, tile, fast)
        runs.append((c, Z, sq, sums))
    return runs


def _same_bits(a, b):
    # NaN-aware bit equality (a NaN row's entries come from the loader's own row code)
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


@pytest.mark.parametrize("n, d", [(13, 7), (50, 33), (300, 1030), (9, 8)])
def test_clip_rows_uniform_scale_skips_the_centre_with_the_same_bits(n, d):
    # a declared data_norm (no box, centre +0, one scale) takes the AVX2 path's x * inv0 branch;
    # signed zeros, huge, infinite and NaN entries and rows the ball rescales give the portable
    # path's bits, and a centre of -0.0 (x - (-0) is not x for x = -0) or one differing scale
    # keeps the general map, with the same bits again
    from dpem_fast._preprocess import DataDomain
    rng = np.random.default_rng(7 * n + d)
    X = rng.normal(size=(n, d)) * rng.choice([0.01, 0.5, 3.0], size=(n, 1))
    X[0, : min(d, 3)] = [-0.0, 0.0, -0.0][: min(d, 3)]
    X[0, -1] = -0.0                                  # where the -0.0 centre below lies
    X[1, 0], X[2, -1], X[3, d // 2] = 1e300, -np.inf, np.nan
    norm = 2.5
    dom = DataDomain(center=np.zeros(d), scale=np.full(d, norm), from_data=False, bounds=None).loader_array()
    assert np.all(np.isneginf(dom[0])) and np.all(np.isposinf(dom[1])) and not np.signbit(dom[2]).any()
    variants = [dom]
    neg = dom.copy()
    neg[2, -1] = -0.0
    odd = dom.copy()
    odd[3, 0] = np.nextafter(odd[3, 0], 1.0)
    # a box with the same centre and scale: the box clip, not the uniform map
    boxed = DataDomain(center=np.zeros(d), scale=np.full(d, norm), from_data=False,
                       bounds=(np.full(d, -1.5), np.full(d, 1.5))).loader_array()
    assert np.array_equal(boxed[2:], dom[2:]) and np.all(np.isfinite(boxed[:2]))
    variants += [neg, odd, boxed]
    for D in variants:
        (c, Z, sq, sums), (c2, Z2, sq2, sums2) = _clip_runs(X, D)
        assert c == c2 and _same_bits(Z, Z2) and _same_bits(sq, sq2) and _same_bits(sums, sums2)
    (c, Z, sq, _), _ = _clip_runs(X, dom)
    keep = np.isfinite(X).all(axis=1) & (np.abs(X).max(axis=1) < 1e200)
    expect = X[keep] / norm
    big = np.sqrt(np.einsum("ij,ij->i", expect, expect)) > 1.0
    assert np.allclose(Z[keep][~big], expect[~big], rtol=1e-15, atol=0)   # x * inv0: x / norm to rounding
    assert np.array_equal(np.signbit(Z[0, : min(d, 3)]), np.signbit(X[0, : min(d, 3)]))
    from dpem_fast._preprocess import scale_and_clip
    ref, ref_c = scale_and_clip(X, DataDomain(center=np.zeros(d), scale=np.full(d, norm), from_data=False, bounds=None))
    assert c == ref_c and c >= int(big.sum())                             # the loader's count
    assert np.allclose(Z[keep], ref[keep], rtol=0, atol=1e-14)
