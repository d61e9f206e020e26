"""A Krylov basis' passes against a block of 8 columns (issue 41, ``dpc_basis.h``): numpy's values
to rounding, the same bits on the AVX-512 path, the AVX2 one and the portable one."""
import numpy as np
import pytest

from dpem_fast._dpcore import _basis


#: the paths: 2 the widest this CPU runs (AVX-512 where ``_basis.WIDE``), 1 at most AVX2, 0 portable
PATHS = (2, 1, 0)


# m: below, at and across the AVX-512 path's 8 columns a group and the AVX2 path's 6; d: across
# a 256-row chunk and the AVX-512 sub8's 12 rows a group (13 = 12 + 1, 300 = 25 x 12, 4096 =
# 341 x 12 + 4)
@pytest.mark.parametrize("m, d", [(0, 5), (1, 1), (7, 13), (13, 300), (40, 4096), (7, 513), (8, 12), (17, 25)])
def test_tdot_and_sub_match_numpy_and_every_path_agrees(m, d):
    rng = np.random.default_rng(m * 100 + d)
    Qt, V, C, X = rng.normal(size=(m, d)), rng.normal(size=(d, 8)), rng.normal(size=(m, 8)), rng.normal(size=(d, 8))
    outs, subs, sqs = [], [], []
    for fast in PATHS:
        out = np.full((m, 8), np.nan)
        _basis.tdot8(Qt, V, out, fast)
        outs.append(out)
        X1 = X.copy()
        _basis.sub8(Qt, C, X1, fast)
        subs.append(X1)
        sq = np.full(8, np.nan)
        _basis.colsq8(X, sq, fast)
        sqs.append(sq)
    for got in (outs, subs, sqs):
        assert all(np.array_equal(got[0], g) for g in got[1:])
    assert np.allclose(outs[0], Qt @ V, rtol=0, atol=1e-13 * max(d, 1))
    assert np.allclose(subs[0], X - Qt.T @ C, rtol=0, atol=1e-13 * max(m, 1))
    assert np.allclose(sqs[0], np.sum(X * X, axis=0), rtol=1e-13, atol=0)


def test_the_wide_path_is_the_default_where_it_runs():
    # the default serves the AVX-512 path where the CPU runs it: a path's bits are only
    # comparable if the default is the one the operator calls
    assert _basis.WIDE <= _basis.FAST
    rng = np.random.default_rng(11)
    Qt, V = rng.normal(size=(9, 600)), rng.normal(size=(600, 8))
    a, b = np.empty((9, 8)), np.empty((9, 8))
    _basis.tdot8(Qt, V, a)
    _basis.tdot8(Qt, V, b, 2)
    assert np.array_equal(a, b)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="shapes"):
        _basis.tdot8(np.zeros((3, 4)), np.zeros((4, 7)), np.zeros((3, 7)))
    with pytest.raises(ValueError, match="shapes"):
        _basis.sub8(np.zeros((3, 4)), np.zeros((3, 8)), np.zeros((5, 8)))
    with pytest.raises(ValueError, match="shapes"):
        _basis.colsq8(np.zeros((4, 7)), np.zeros(8))


@pytest.mark.parametrize("r, c", [(0, 3), (1, 1), (4, 4), (5, 9), (17, 8), (8, 17), (4097, 8), (8, 4096)])
def test_transpose_moves_the_values(r, c):
    A = np.random.default_rng(r + 7 * c).normal(size=(r, c))
    out = np.full((c, r), np.nan)
    _basis.transpose(A, out)
    assert np.array_equal(out, A.T)
    with pytest.raises(ValueError, match="shapes"):
        _basis.transpose(A, np.zeros((c + 1, r)))
