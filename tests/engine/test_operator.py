"""The matrix-free symmetric Gaussian release (issue 41): the lazily revealed noise has the law of
the materialised release's (diag sd σ, off-diagonal σ/√2, independent, orthogonally invariant),
the release layer serves it as the same single release, and DPPCA's two paths agree."""
import math
import pickle

import numpy as np
import pytest

from dpem_fast import DPPCA
from dpem_fast._engine._operator import ReleasedOperator, RowProducts
from dpem_fast._engine._release import ReleaseLayer
from dpem_fast._rng import derive_key
from dpem_fast.decomposition import _krylov

D, SIGMA, KEYS = 12, 2.0, 1500


def _op(i, d=D):
    return ReleasedOperator(RowProducts([np.zeros((1, d))], d), SIGMA, derive_key(np.arange(8, dtype=np.uint32), i))


def _basis(d, m, seed=0):
    return np.linalg.qr(np.random.default_rng(seed).normal(size=(d, m)))[0]


def test_revealed_block_has_the_materialised_law():
    Q = _basis(D, 3)
    blocks = np.array([Q.T @ (_op(i) @ Q) for i in range(KEYS)])
    sd = blocks.std(axis=0)
    assert np.allclose(np.diag(sd), SIGMA, rtol=0.08)
    off = sd[np.triu_indices(3, 1)]
    assert np.allclose(off, SIGMA / math.sqrt(2), rtol=0.08)
    # exact symmetry of the revealed block, and no correlation between distinct entries
    assert np.allclose(blocks, np.swapaxes(blocks, 1, 2), atol=1e-12)
    flat = blocks[:, [0, 0, 1], [0, 1, 2]]
    assert np.all(np.abs(np.corrcoef(flat.T)[np.triu_indices(3, 1)]) < 0.1)


def test_sequential_queries_stay_symmetric_and_invariant():
    v = np.random.default_rng(1).normal(size=D)
    v /= np.linalg.norm(v)
    w = np.random.default_rng(2).normal(size=D)
    quad, cross = [], []
    for i in range(KEYS):
        op = _op(i)
        Ev = op @ v
        Ew = op @ (0.3 * v + w)                 # partly along the revealed direction
        quad.append(v @ Ev)
        cross.append(v @ Ew - (0.3 * v + w) @ Ev)
    assert abs(np.std(quad) / SIGMA - 1) < 0.08            # vᵀEv ~ N(0, σ²) for a unit v
    assert np.max(np.abs(cross)) < 1e-10                    # vᵀ E u = uᵀ E v


@pytest.mark.parametrize("weights", ["constant", "varying"])
def test_weighted_trace_has_the_materialised_law(weights):
    w = np.full(D, 0.7) if weights == "constant" else np.linspace(0.2, 1.5, D)
    Q = _basis(D, 4, seed=3)
    t = []
    for i in range(KEYS):
        op = _op(i)
        op @ Q
        t.append(op.weighted_trace(w))
    assert abs(np.std(t) / (SIGMA * np.linalg.norm(w)) - 1) < 0.08     # Σ w_i E_ii: sd σ ‖w‖
    assert abs(np.mean(t)) < 4 * SIGMA * np.linalg.norm(w) / math.sqrt(KEYS)
    with pytest.raises(RuntimeError):
        op @ Q


def test_products_match_the_formed_statistic():
    Y = np.random.default_rng(4).normal(size=(2100, 7)) / 4
    S = RowProducts([Y[:1000], Y[1000:]], 7)
    V = np.random.default_rng(5).normal(size=(7, 3))
    assert np.allclose(S @ V, Y.T @ (Y @ V))
    assert np.allclose(S.row_sum(), np.sum(Y, axis=0))
    assert np.allclose(S.dense(), Y.T @ Y)


def test_release_layer_serves_one_release():
    from dpem_fast._engine._plan import make_plan
    from dpem_fast._engine._specs import second_moments

    plan = make_plan((second_moments("second_moment", (D, D)),), 1, epsilon=1.0, delta=1e-5,
                     neighbouring="replace", accountant="gdp")
    seen = []
    from dpem_fast import observe_releases
    layer = ReleaseLayer(plan, np.arange(8, dtype=np.uint32))
    with observe_releases(lambda r, i: seen.append(r.name)):
        out = layer.release({"second_moment": RowProducts([np.eye(D)[:3] / 2], D)}, 0)
    op = out["second_moment"]
    assert isinstance(op, ReleasedOperator) and seen == ["second_moment"]
    assert op.sigma == plan.releases["second_moment"].noise_scale
    with pytest.raises(ValueError, match="already released"):
        layer.release({"second_moment": RowProducts([np.eye(D)[:3]], D)}, 0)
    with pytest.raises(TypeError):
        pickle.dumps(op)


@pytest.mark.filterwarnings("ignore::dpem_fast.accounting.NoiseDominatedWarning")
def test_dppca_matrix_free_path(tmp_path):
    d, k = 4 * _krylov.krylov_columns(2), 2
    assert _krylov.uses_operator(d, k) and not _krylov.uses_operator(d - 1, k)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, k)) @ rng.normal(size=(k, d)) / 20 + rng.normal(size=(60, d)) / 40
    free = DPPCA(k, epsilon=1.0, data_norm=3.0, random_state=0).fit(X)
    mm = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float64, shape=X.shape)
    mm[:] = X
    dense = DPPCA(k, epsilon=1.0, data_norm=3.0, random_state=0).fit(mm)        # a memory map: dense
    W = free.components_
    assert np.allclose(W @ W.T, np.eye(k), atol=1e-8)
    assert np.all(np.isfinite(free.explained_variance_)) and free.noise_variance_ > 0
    # the same single release, the same record
    assert free.privacy_.epsilon_spent == dense.privacy_.epsilon_spent
    assert {n: r.noise_scale for n, r in free.privacy_.releases.items()} == \
        {n: r.noise_scale for n, r in dense.privacy_.releases.items()}
    assert not any(isinstance(v, ReleasedOperator) for v in vars(free).values())
    pickle.dumps(free)


def test_answers_come_from_released_columns_only():
    """With real rows, every answer is A on the revealed span from the columns released once:
    a repeated or recombined query reads nothing new (no noise-free rounding difference between
    two routes to the same entry), QᵀAQ is exactly symmetric, and the exact rows are read once
    per new direction block."""
    Y = np.random.default_rng(6).normal(size=(300, D)) / 5
    reads = []

    class Counting(RowProducts):
        def products(self, V):
            reads.append(V.shape[1])
            return super().products(V)

    op = ReleasedOperator(Counting([Y], D), SIGMA, derive_key(np.arange(8, dtype=np.uint32), 99))
    V = np.random.default_rng(7).normal(size=(D, 3))
    a = op @ V
    assert reads == [3]
    b = op @ V
    c = op @ (V @ np.array([[1.0], [2.0], [-1.0]]))
    assert reads == [3]                                       # nothing new revealed, nothing read
    assert np.array_equal(a, b)
    assert np.allclose(c[:, 0], a @ np.array([1.0, 2.0, -1.0]), rtol=1e-12, atol=1e-12)
    W = np.random.default_rng(8).normal(size=(D, 2))
    op @ W
    assert reads == [3, 2]
    Q, AQ = op._Q, op._AQ
    QAQ = Q.T @ AQ
    assert np.max(np.abs(QAQ - QAQ.T)) < 1e-12 * np.max(np.abs(QAQ))
    # the exact part is S on the span (the noise is the lazily drawn part)
    E = Q.T @ AQ - Q.T @ (Y.T @ (Y @ Q))
    assert np.max(np.abs(E - E.T)) < 1e-10


def test_operator_widening_is_tiny_and_larger_than_the_dense_one():
    from dpem_fast._engine._specs import float64_rounding_factor, operator_rounding_factor

    f = operator_rounding_factor(400, 1024, 4096, 80)
    assert float64_rounding_factor(400, 1024) < f < 1 + 1e-6


def test_orthonormal_block_is_taken_as_it_is_and_others_are_orthogonalised():
    """A query block already orthonormal and orthogonal to the revealed basis (a Krylov solver's)
    becomes the new directions as it is (no second orthogonalisation); anything else is
    orthogonalised: the basis stays orthonormal and A on it keeps exact symmetry either way."""
    Y = np.random.default_rng(9).normal(size=(200, D)) / 5
    op = ReleasedOperator(RowProducts([Y], D), SIGMA, derive_key(np.arange(8, dtype=np.uint32), 7))
    B = _basis(D, 6, seed=10)
    op.reserve(6)
    store = op._store_Q
    op @ B[:, :3]
    assert np.array_equal(op._Q, B[:, :3])                 # taken exactly as given
    skew = B[:, 3:] + 1e-6 * B[:, :1]                    # 1e-6 along a revealed direction: redone
    op @ skew
    Q = op._Q
    assert op._store_Q is store                          # reserved: no regrowth
    assert Q.shape[1] == 6 and not np.array_equal(Q[:, 3:], skew / np.linalg.norm(skew, axis=0))
    assert np.max(np.abs(Q.T @ Q - np.eye(6))) < 1e-14
    QAQ = Q.T @ op._AQ
    assert np.max(np.abs(QAQ - QAQ.T)) < 1e-12 * np.max(np.abs(QAQ))


def test_trace_from_the_rows_read_with_the_products():
    """The trace's new coordinate tr(P S) comes from the rows' ‖Qᵀ y_r‖² accumulated while the
    blocks were read (no further pass over the rows): with σ = 0 the weighted trace is Σ w_i S_ii."""
    Y = np.random.default_rng(11).normal(size=(2100, D)) / 5
    S = RowProducts([Y[:1500], Y[1500:]], D)
    Q = _basis(D, 5, seed=12)
    _, sq = S.products(Q)
    P = np.eye(D) - Q @ Q.T
    assert math.isclose(S.projected_trace(sq), float(np.trace(P @ Y.T @ Y)), rel_tol=1e-12)
    for w in (np.full(D, 0.7), np.linspace(0.2, 1.5, D)):
        op = ReleasedOperator(RowProducts([Y[:1500], Y[1500:]], D), 0.0, derive_key(np.arange(8, dtype=np.uint32), 3))
        op @ Q[:, :3]
        op @ Q[:, 3:]
        t = op.weighted_trace(w)
        if np.all(w == w[0]):
            assert math.isclose(t, float(w[0] * np.sum(Y * Y)), rel_tol=1e-12)
        else:        # the complement's part weighted by w's mean there (an estimate)
            assert abs(t / float(np.sum(w * np.sum(Y * Y, axis=0))) - 1) < 0.2


@pytest.mark.parametrize("rank", [4, 12])
def test_krylov_stops_on_the_recurrence_residual(rank):
    """The residuals read off the block recurrence stop the solver once the top pairs are exact
    (a low-rank matrix: an invariant subspace within a few blocks, QR's filler columns
    orthogonalised again), and the pairs match the exact ones."""
    rng = np.random.default_rng(13)
    d, k = 200, 2
    U = np.linalg.qr(rng.normal(size=(d, rank)))[0]
    M = U @ np.diag(np.linspace(5.0, 2.0, rank)) @ U.T

    class Counted:
        shape, calls = (d, d), []

        def __matmul__(self, V):
            self.calls.append(V.shape[1])
            return M @ V

    C = Counted()
    theta, V = _krylov.top_eigenpairs_krylov(C, k, rng.normal(size=(d, _krylov.BLOCK)), 80)
    assert sum(C.calls) < 80
    lam, E = np.linalg.eigh(M)
    assert np.allclose(theta, lam[::-1][:2], rtol=1e-10)
    assert np.allclose(np.abs(V.T @ E[:, ::-1][:, :2]), np.eye(2), atol=1e-8)


def test_the_widening_assumes_the_operators_orthonormality_check():
    from dpem_fast._engine import _operator, _specs

    assert _operator.ORTHO_TOL == _specs.OPERATOR_ORTHO_TOL
    # every block the operator keeps meets it, on both routes (a solver's block and a raw query)
    op = _op(3, d=40)
    op @ np.random.default_rng(11).normal(size=(40, 5))
    op @ np.linalg.qr(np.random.default_rng(12).normal(size=(40, 3)))[0]
    Q = op._Q
    G = Q.T @ Q - np.eye(Q.shape[1])
    assert np.max(np.abs(G)) <= _operator.ORTHO_TOL


def _complement(Q, p, seed):
    """p orthonormal directions orthogonal to Q (two projections)."""
    V = np.random.default_rng(seed).normal(size=(Q.shape[0], p))
    for _ in range(2):
        V -= Q @ (Q.T @ V)
    return np.linalg.qr(V)[0]


def test_reveal_block_returns_the_released_coordinates():
    """A solver's block (orthonormal, orthogonal to the basis) is taken exactly as given and its
    coordinates returned: ``A V = Q K + V B + W`` with W off the basis, read from the released
    columns (nothing read again); a block that is not is declined with nothing revealed, and
    after a query the operator redid, no block is taken as given any more."""
    Y = np.random.default_rng(15).normal(size=(300, D)) / 5
    reads = []

    class Counting(RowProducts):
        def products(self, V):
            reads.append(V.shape[1])
            return super().products(V)

    op = ReleasedOperator(Counting([Y], D), SIGMA, derive_key(np.arange(8, dtype=np.uint32), 5))
    V1 = _basis(D, 3, seed=16)
    K, B, W = op.reveal_block(V1)
    assert K.shape == (0, 3) and np.array_equal(op._Q, V1) and np.array_equal(B, B.T)
    V2 = _complement(V1, 3, 17)
    assert op.reveal_block(V2 + 1e-9 * V1) is None and op.reveal_block(2 * V2) is None
    assert reads == [3] and op._Q.shape[1] == 3                     # declined: nothing revealed
    K, B, W = op.reveal_block(V2)
    assert reads == [3, 3] and np.array_equal(op._Q[:, 3:], V2)
    Q = op._Q
    AV = op @ V2                                                    # answered from the columns
    assert reads == [3, 3]
    assert np.allclose(AV, V1 @ K + V2 @ B + W, rtol=0, atol=1e-12 * np.max(np.abs(AV)))
    assert np.max(np.abs(Q.T @ W)) < 1e-12 * np.max(np.abs(W))
    QAQ = Q.T @ op._AQ
    assert np.max(np.abs(QAQ - QAQ.T)) < 1e-12 * np.max(np.abs(QAQ))
    assert np.allclose(QAQ[:3, 3:], K, rtol=0, atol=1e-12 * np.max(np.abs(QAQ)))
    op @ np.random.default_rng(18).normal(size=(D, 2))              # a raw query: redone
    assert op.reveal_block(_complement(op._Q, 2, 19)) is None


def _released_covariance(seed, hide_reveal=False, decline=False):
    rng = np.random.default_rng(seed)
    d, n = 400, 250
    Y = (rng.normal(size=(n, 3)) @ rng.normal(size=(3, d)) + rng.normal(size=(n, d))) / 40
    reads = []

    class Counting(RowProducts):
        def products(self, V):
            reads.append(V.shape[1])
            return super().products(V)

    A = ReleasedOperator(Counting([Y], d), 0.5, derive_key(np.arange(8, dtype=np.uint32), 21))
    mean = np.mean(Y, axis=0)
    C = _krylov.ReleasedCovariance(A, n, mean, 1e-4, np.ones(d))
    if hide_reveal or decline:
        class Wrapped:
            shape, offers = C.shape, []

            def __matmul__(self, V):
                return C @ V

            def reserve(self, cols):
                C.reserve(cols)

        if decline:         # the first offer of every block is declined: the second pass, again
            def reveal(V):
                Wrapped.offers.append(V.shape[1])
                return None if len(Wrapped.offers) % 2 == 0 else C.reveal(V)
            Wrapped.reveal = staticmethod(reveal)
        return Wrapped(), reads, rng
    return C, reads, rng


@pytest.mark.parametrize("variant", ["generic", "declined"])
def test_krylov_from_the_released_coordinates_matches_the_products(variant):
    """The solver reading T and the next block from the operator's coordinates (one read of the
    rows a block) gives the Ritz pairs of the generic route (C @ V, T = Qᵀ C V; the same
    operator key, the same blocks up to rounding, hence the same noise), and so does a run
    whose blocks are declined once each (Gram–Schmidt's second pass, offered again)."""
    C, reads, rng = _released_covariance(20)
    start = np.random.default_rng(22).normal(size=(400, _krylov.BLOCK))
    theta, V = _krylov.top_eigenpairs_krylov(C, 3, start, 80)
    assert reads == [_krylov.BLOCK] * 10
    C2, reads2, _ = _released_covariance(20, hide_reveal=variant == "generic", decline=variant == "declined")
    theta2, V2 = _krylov.top_eigenpairs_krylov(C2, 3, start, 80)
    assert reads2 == [_krylov.BLOCK] * 10
    assert np.allclose(theta, theta2, rtol=1e-9)
    assert np.allclose(np.abs(np.sum(V * V2, axis=0)), 1.0, atol=1e-8)


def test_covariance_reveal_needs_every_block_seen():
    """The covariance's coordinates track the operator's basis block by block: once a block was
    revealed past it (a direct product), it declines and the solver takes the products route."""
    C, reads, _ = _released_covariance(23)
    V1 = _basis(400, 8, seed=24)
    assert C.reveal(V1) is not None
    C.A @ _complement(V1, 8, 25)                    # taken as given, but not through C.reveal
    assert C.A.revealed == 16
    assert C.reveal(_complement(C.A._Q, 8, 26)) is None and reads == [8, 8]
