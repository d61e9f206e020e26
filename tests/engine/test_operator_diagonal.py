"""The released operator's diagonal (issue 41, factor analysis): jointly with the released columns
it has the law of the materialised release's (exact joint covariance against the real sampler,
both the cheap sampler and the exact fallback), its mean is the statistic's diagonal, and the
plan's widening covers its rounding."""
import math

import numpy as np
import pytest

from dpem_fast._engine._diagonal import DIAGONAL_TAU
from dpem_fast._engine._operator import ReleasedOperator, RowProducts
from dpem_fast._engine._specs import operator_diagonal_rounding_factor, operator_rounding_factor
from dpem_fast._rng import derive_key

SIGMA, KEYS = 1.0, 4000


def _dense_covariance(Q):
    """Exact covariance of ``(vec(E Q), diag E)`` for the materialised symmetric draw (σ = 1 on the
    diagonal, 1/√2 above): E = Σ_t ξ_t U_t over the orthonormal basis U_t of the symmetric matrices."""
    d = Q.shape[0]
    rows = []
    for i in range(d):
        for j in range(i, d):
            U = np.zeros((d, d))
            if i == j:
                U[i, i] = 1.0
            else:
                U[i, j] = U[j, i] = math.sqrt(0.5)
            rows.append(np.concatenate([(U @ Q).ravel(), np.diag(U)]))
    L = np.array(rows).T
    return L @ L.T


def _draws(Q, split):
    d = Q.shape[0]
    out = []
    for i in range(KEYS):
        op = ReleasedOperator(RowProducts([np.zeros((1, d))], d), SIGMA, derive_key(np.arange(8, dtype=np.uint32), i))
        AQ = np.hstack([op @ Q[:, :split], op @ Q[:, split:]])      # two reveals, as a Krylov solver's
        out.append(np.concatenate([AQ.ravel(), op.diagonal()]))
        with pytest.raises(RuntimeError):
            op @ Q
    return np.array(out)


@pytest.mark.parametrize("sampler", ["cheap", "fallback"])
def test_columns_and_diagonal_have_the_materialised_joint_law(sampler):
    rng = np.random.default_rng(5)
    d, m = (16, 3) if sampler == "cheap" else (8, 3)
    G = rng.normal(size=(d, m))
    if sampler == "fallback":
        G[:, 0] = np.eye(d)[0]                   # a coordinate axis inside span Q: p_0 = 1 > 1/2
    Q = np.linalg.qr(G)[0]
    p = np.sum(Q * Q, axis=1)
    assert (p.max() <= 0.5) == (sampler == "cheap")
    X = _draws(Q, 2)
    want = _dense_covariance(Q) * SIGMA ** 2
    want[d * m:, d * m:] += np.eye(d) * (DIAGONAL_TAU * SIGMA) ** 2
    got = np.cov(X.T)
    # each entry's estimate has sd about σ² √(2 / KEYS) ≈ 0.022: 0.1 is 4.5 sd
    assert np.max(np.abs(got - want)) < 0.1, np.max(np.abs(got - want))
    assert np.max(np.abs(X.mean(axis=0))) < 4.5 * SIGMA / math.sqrt(KEYS) * 1.5
    # the diagonal's correlation with the revealed columns: Cov(A_ii, (A Q)_ij) = σ² q_ij
    cross = got[d * m:, :d * m].reshape(d, d, m)[np.arange(d), np.arange(d)]
    assert np.allclose(cross, Q * SIGMA ** 2, atol=0.1)


def test_diagonal_mean_is_the_statistic_and_the_rows_projection_is_exact():
    rng = np.random.default_rng(3)
    d = 60
    Y = rng.normal(size=(2100, d)) / 20
    S = RowProducts([Y[:1000], Y[1000:]], d)
    Q = np.linalg.qr(rng.normal(size=(d, 16)))[0]
    R = np.eye(d) - Q @ Q.T
    assert np.allclose(S.projected_diagonal(Q), np.diag(R @ (Y.T @ Y) @ R), rtol=1e-12, atol=1e-12)
    op = ReleasedOperator(S, 1e-9, derive_key(np.arange(8, dtype=np.uint32), 1))
    op @ Q[:, :8]
    op @ Q[:, 8:]
    assert np.allclose(op.diagonal(), np.sum(Y * Y, axis=0), rtol=1e-9, atol=1e-7)


def test_diagonal_widening_is_tiny_and_above_the_columns_one():
    for n, b, d, m in [(400, 1024, 4096, 80), (10 ** 6, 1024, 4096, 80), (5000, 1024, 320, 80)]:
        col = operator_rounding_factor(n, b, d, m)
        diag = operator_diagonal_rounding_factor(n, b, d, m)
        assert col < diag < 1 + 1e-5


@pytest.mark.filterwarnings("ignore::dpem_fast.accounting.NoiseDominatedWarning")
def test_dpfa_plan_widens_where_the_diagonal_may_be_read(monkeypatch):
    from dpem_fast import DPFactorAnalysis
    from dpem_fast.decomposition._krylov import krylov_columns

    d, k = 4 * krylov_columns(2), 2
    X = np.random.default_rng(0).normal(size=(300, d)) / 30
    free = DPFactorAnalysis(k, epsilon=1.0, data_norm=3.0, random_state=0).fit(X)
    monkeypatch.setattr(DPFactorAnalysis, "_operator_path", False)
    dense = DPFactorAnalysis(k, epsilon=1.0, data_norm=3.0, random_state=0).fit(X)
    s_free = free.privacy_.releases["second_moment"].noise_scale
    s_dense = dense.privacy_.releases["second_moment"].noise_scale
    want = operator_diagonal_rounding_factor(300, free._block_rows(300, d), d, krylov_columns(k))
    assert s_free > s_dense and s_free / s_dense == pytest.approx(want / dense._rounding_factor(d, 300), rel=1e-12)
