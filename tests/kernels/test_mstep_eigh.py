"""The compiled M-step's eigendecomposition (``_mstep._eigh_lower``, issue 41): dsyevd's own
steps called directly for small, well-scaled matrices must give dsyevd's bits, and every
other matrix goes through dsyevd itself."""
import numpy as np
import pytest
from scipy.linalg.lapack import dsyevd

from dpem_fast._dpcore import _mstep


def _matrices(d, rng):
    A = rng.normal(size=(d, d))
    yield (A + A.T) / 2 * 10.0 ** rng.uniform(-8, 4)            # indefinite, any scale
    B = rng.normal(size=(d, max(1, d // 3)))
    yield B @ B.T                                                  # rank-deficient PSD
    D = np.diag(rng.uniform(size=d))
    D[0, -1] = D[-1, 0] = 1e-9                                     # nearly diagonal (deflation)
    yield D
    yield np.eye(d)                                                # repeated eigenvalues
    yield np.zeros((d, d))                                         # zero: dsyevd's path
    yield (A + A.T) * 1e-300                                       # below the band: dsyevd's path
    yield (A + A.T) * 1e300                                        # above it: dsyevd's path
    C = (A + A.T) / 2
    C[-1, 0] = C[0, -1] = np.nan                                   # NaN: dsyevd's path
    yield C


@pytest.mark.parametrize("d", [1, 2, 3, 5, 10, 16, 24, 25, 26, 40])
def test_eigh_lower_is_dsyevd_bit_for_bit(d):
    rng = np.random.default_rng(d)
    for _ in range(5):
        for S in _matrices(d, rng):
            w, V, info = _mstep.eigh_lower(np.ascontiguousarray(S))
            w_ref, V_ref, info_ref = dsyevd(S, compute_v=1, lower=1)
            assert info == info_ref
            if info == 0:
                assert np.array_equal(w, w_ref, equal_nan=True)
                assert np.array_equal(V, V_ref, equal_nan=True)


def test_eigh_lower_reads_the_lower_triangle():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6))
    S = np.tril(A + A.T) + np.triu(rng.normal(size=(6, 6)), 1)    # garbage above the diagonal
    w, V, info = _mstep.eigh_lower(np.ascontiguousarray(S))
    w_ref, V_ref, _ = dsyevd(S, compute_v=1, lower=1)
    assert info == 0 and np.array_equal(w, w_ref) and np.array_equal(V, V_ref)
