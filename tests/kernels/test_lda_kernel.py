"""The LDA E-step kernel against its numpy twin, at 1 and 2 threads, and its digamma."""
import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import digamma

from dpem_fast._dpcore import _contract, _lda
from dpem_fast._reference import lda as ref


def _corpus(n, V, seed=0, density=0.05):
    rng = np.random.default_rng(seed)
    X = sp.random(n, V, density=density, format="csr", random_state=seed,
                  data_rvs=lambda m: rng.integers(1, 6, m)).astype(np.float64)
    X.sort_indices()
    return X


def _run(X, eb, gamma0, clip, n_threads, alpha=0.1, max_iter=100, tol=1e-3):
    n, K = gamma0.shape
    g = gamma0.copy()
    s = np.zeros((eb.shape[1], K))
    norms = np.zeros(n)
    upd = np.zeros(n, np.int32)
    c = _lda.lda_estep(X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data,
                       np.ascontiguousarray(eb.T), alpha, max_iter, tol, clip, g, s, norms, upd, n_threads)
    return g, s.T, norms, c


def test_digamma_matches_scipy():
    x = np.concatenate([np.geomspace(1e-4, 1e6, 500), [0.5, 1.0, 5.99, 6.0, 6.01]])
    out = np.empty_like(x)
    _lda.digamma(x, out)
    assert_allclose(out, digamma(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 300])
@pytest.mark.parametrize("clip", [np.inf, 2.5])
def test_kernel_equals_numpy_twin_and_is_thread_invariant(n, clip):
    V, K = 400, 7
    X = _corpus(n, V, seed=n)
    rng = np.random.default_rng(1)
    eb = ref.exp_dirichlet_expectation(rng.gamma(100, 0.01, (K, V)))
    g0 = rng.gamma(100, 0.01, (n, K))
    g_r, s_r, n_r = ref.estep(X, eb, 0.1, g0, 100, 1e-3, clip)
    g1, s1, n1, c1 = _run(X, eb, g0, clip, 1)
    g2, s2, n2, c2 = _run(X, eb, g0, clip, 2)
    assert_allclose(g1, g_r, rtol=1e-9)
    assert_allclose(s1, s_r, rtol=1e-9, atol=1e-12)
    assert_allclose(n1, n_r, rtol=1e-9)
    assert c1 == np.sum(n_r > clip)
    for a, b in ((g1, g2), (s1, s2), (n1, n2)):
        assert_array_equal(a, b)


def test_per_document_clip_bounds_each_document_and_sum():
    V, K, n = 50, 4, 64
    X = _corpus(n, V, density=0.3)
    eb = ref.exp_dirichlet_expectation(np.random.default_rng(2).gamma(100, 0.01, (K, V)))
    g0 = np.ones((n, K))
    _, s_all, norms, clipped = _run(X, eb, g0, 1.0, 2)
    assert clipped == n and np.all(norms > 1.0)
    # each clipped document contributes norm <= 1: the sum of n documents has norm <= n
    for d in range(n):
        _, s_d, _, _ = _run(X[d:d + 1], eb, g0[d:d + 1], 1.0, 1)
        assert np.linalg.norm(s_d) <= 1.0
        assert np.linalg.norm(s_d) > 1.0 - 1e-9
    assert np.linalg.norm(s_all) <= n


def test_block_count_is_the_contract():
    assert _lda.block_count(2000, 50, 8000) == _contract.lda_block_count(2000, 50 * 8000)
    assert _contract.lda_block_count(1, 10) == 1
    assert _contract.lda_block_count(10 ** 6, 1) == -(-10 ** 6 // (_contract.LDA_DOC_CHUNK * _contract.BLOCK_CHUNKS))


def test_empty_documents_and_empty_batch():
    V, K = 20, 3
    X = sp.csr_matrix((3, V))
    eb = np.full((K, V), 0.05)
    g, s, norms, c = _run(X, eb, np.ones((3, K)), 1.0, 2)
    assert_array_equal(g, 0.1)          # alpha: no words
    assert not s.any() and not norms.any() and c == 0
    g, s, norms, c = _run(sp.csr_matrix((0, V)), eb, np.ones((0, K)), 1.0, 2)
    assert g.shape == (0, K) and not s.any()


def test_block_partials_are_summed_exactly():
    """Issue 34, item 7: the kernel's block partials are reduced exactly (the correctly rounded
    sum, whatever the order of the blocks), so a document's rounding stays in its block.  With
    40 chunks of 32 documents each block is one chunk; a call on one chunk's documents alone
    computes that block's partial bit for bit (each document's fixed point is its own), so the
    whole call must equal math.fsum over the 40 chunk results, entry by entry (block-order
    float64 additions of main do not, on these magnitudes), at any thread count."""
    import math

    V, K, n = 30, 3, 40 * _contract.LDA_DOC_CHUNK
    X = _corpus(n, V, seed=3, density=0.4)
    rng = np.random.default_rng(3)
    X.data *= 10.0 ** rng.integers(0, 7, X.data.size)            # counts of very different sizes
    assert _contract.lda_block_count(n, K * V) == 40
    eb = ref.exp_dirichlet_expectation(rng.gamma(100, 0.01, (K, V)))
    g0 = rng.gamma(100, 0.01, (n, K))
    C = _contract.LDA_DOC_CHUNK
    parts = np.stack([_run(X[i:i + C], eb, g0[i:i + C], np.inf, 1)[1] for i in range(0, n, C)])
    want = np.array([[math.fsum(parts[:, k, v]) for v in range(V)] for k in range(K)])
    for nt in (1, 2, 3):
        assert_array_equal(_run(X, eb, g0, np.inf, nt)[1], want)
    sequential = parts[0].copy()
    for p in parts[1:]:
        sequential += p
    assert not np.array_equal(sequential, want)        # the data shows the difference


def test_a_large_minibatch_goes_to_the_kernel_in_calls_of_a_public_size(monkeypatch):
    """``estep_csr`` cuts a minibatch into calls of at most ``max_call_documents(K, V)`` documents
    (public: K and V), so that no block of any minibatch, whatever its (private) size, sums more
    than ``max_block_documents()`` = 128 documents in floats (issue 34, item 7); the calls' sums
    are added by Sum2, gamma is each document's own."""
    from dpem_fast._kernels import lda as klda

    assert klda.max_block_documents() == 128
    assert klda.max_call_documents(100, 100_000) == 128 * _contract.MIN_BLOCKS
    for K, V in ((3, 30), (10, 1000), (100, 100_000), (50, 10 ** 7)):
        step = klda.max_call_documents(K, V)
        for m in (1, step // 2 + 1, step):
            c = -(-m // _contract.LDA_DOC_CHUNK)
            plan = _contract.block_plan(c, _contract.lda_block_count(m, K * V))
            assert max(e - f for f, e in plan) * _contract.LDA_DOC_CHUNK <= 128
    V, K, n = 40, 3, 1000
    X = _corpus(n, V, seed=5, density=0.3)
    rng = np.random.default_rng(5)
    eb = ref.exp_dirichlet_expectation(rng.gamma(100, 0.01, (K, V)))
    g0 = rng.gamma(100, 0.01, (n, K))
    whole = klda.estep_csr(X, np.ascontiguousarray(eb.T), g0, 0.1, 100, 1e-3, 2.5, 1)
    sizes, real = [], _lda.lda_estep
    monkeypatch.setattr(klda, "max_call_documents", lambda K, V: 300)
    monkeypatch.setattr(_lda, "lda_estep", lambda *a: (sizes.append(a[8].shape[0]), real(*a))[1])
    cut = [klda.estep_csr(X, np.ascontiguousarray(eb.T), g0, 0.1, 100, 1e-3, 2.5, t) for t in (1, 2)]
    assert sizes == [300, 300, 300, 100] * 2
    for name, i in (("gamma", 0), ("sstats", 1), ("clipped", 2)):
        assert_array_equal(cut[0][i], cut[1][i], err_msg=name)
    assert_array_equal(cut[0][0], whole[0])
    assert cut[0][2] == whole[2]
    assert_allclose(cut[0][1], whole[1], rtol=1e-13)
