"""A Krylov basis' passes against a block of 8 columns (issue 41, ``dpc_basis.h``): numpy's values
to rounding, the same bits on the AVX2 path and the portable one."""
import numpy as np
import pytest

from dpem_fast._dpcore import _basis


@pytest.mark.parametrize("m, d", [(0, 5), (1, 1), (7, 13), (13, 300), (40, 4096), (7, 513)])
def test_tdot_and_sub_match_numpy_and_both_paths_agree(m, d):
    rng = np.random.default_rng(m * 100 + d)
    Qt, V, C, X = rng.normal(size=(m, d)), rng.normal(size=(d, 8)), rng.normal(size=(m, 8)), rng.normal(size=(d, 8))
    out, out_c = np.full((m, 8), np.nan), np.full((m, 8), np.nan)
    _basis.tdot8(Qt, V, out)
    _basis.tdot8(Qt, V, out_c, False)
    assert np.array_equal(out, out_c)
    assert np.allclose(out, Qt @ V, rtol=0, atol=1e-13 * max(d, 1))
    X1, X2 = X.copy(), X.copy()
    _basis.sub8(Qt, C, X1)
    _basis.sub8(Qt, C, X2, False)
    assert np.array_equal(X1, X2)
    assert np.allclose(X1, X - Qt.T @ C, rtol=0, atol=1e-13 * max(m, 1))
    sq, sq_c = np.empty(8), np.empty(8)
    _basis.colsq8(X, sq)
    _basis.colsq8(X, sq_c, False)
    assert np.array_equal(sq, sq_c) and np.allclose(sq, np.sum(X * X, axis=0), rtol=1e-13, atol=0)


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
