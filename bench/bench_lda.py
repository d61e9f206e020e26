"""One minibatch E-step of online LDA: dpem_fast's kernel vs scikit-learn (issue 13).

K = 50 topics, V = 8,000 terms, 2,000 documents of Poisson(100) tokens drawn from a
synthetic LDA (peaked topics).  Both sides do the same work: per-document fixed point from
the same start (max_doc_update_iter=100, mean_change_tol=1e-3) and the K x V sufficient
statistics.  scikit-learn: ``LatentDirichletAllocation._e_step(X, cal_sstats=True,
random_init=False)`` with ``n_jobs=1`` (one process; it has no threads) and, for reference,
``n_jobs=2`` (joblib worker processes).  dpem_fast: ``_lda.lda_estep`` at 1 and 2 OpenMP
threads (with per-document clipping switched off and on: clipping costs one more pass),
and the numpy twin on 200 documents.  Medians of --repeat runs, all in one process.

Run:  python bench/bench_lda.py [--repeat 5]
"""
import argparse

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import LatentDirichletAllocation
from threadpoolctl import threadpool_limits

from dpem_fast._dpcore import _lda
from dpem_fast._reference import lda as ref
from _timing import median_time


def corpus(n=2000, V=8000, K=50, mean_len=100, seed=0):
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.02), K)
    rows = []
    for _ in range(n):
        theta = rng.dirichlet(np.full(K, 0.1))
        rows.append(sp.csr_matrix(rng.multinomial(max(1, rng.poisson(mean_len)), theta @ topics)))
    return sp.vstack(rows).tocsr().astype(np.float64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    K, V, n = 50, 8000, 2000
    X = corpus(n, V, K)
    lam = np.random.default_rng(1).gamma(100, 0.01, (K, V))
    eb = ref.exp_dirichlet_expectation(lam)
    eb_t = np.ascontiguousarray(eb.T)
    indptr, indices = X.indptr.astype(np.int64), X.indices.astype(np.int32)
    print(f"corpus: {n} documents, V={V}, K={K}, {X.nnz} non-zeros, {int(X.sum())} tokens")

    def ours(threads, clip):
        def run():
            g = np.ones((n, K))
            _lda.lda_estep(indptr, indices, X.data, eb_t, 1 / K, 100, 1e-3, clip, g, np.zeros((V, K)),
                           np.zeros(n), np.zeros(n, np.int32), threads)
        return run

    def sklearn(jobs):
        m = LatentDirichletAllocation(K, learning_method="online", max_doc_update_iter=100,
                                      mean_change_tol=1e-3, n_jobs=jobs, random_state=0)
        m.components_ = lam.copy()
        m.exp_dirichlet_component_ = eb.copy()
        m.doc_topic_prior_ = 1 / K
        m.n_features_in_ = V

        def run():
            m._e_step(X, cal_sstats=True, random_init=False)
        return run

    res = {}
    with threadpool_limits(1, user_api="blas"):
        res["sklearn n_jobs=1"] = median_time(sklearn(1), args.repeat, warmup=True)
        res["sklearn n_jobs=2 (processes)"] = median_time(sklearn(2), args.repeat, warmup=True)
        for th in (1, 2):
            res[f"dpem_fast {th} thread(s), no clip"] = median_time(ours(th, np.inf), args.repeat, warmup=True)
            res[f"dpem_fast {th} thread(s), clip"] = median_time(ours(th, 50.0), args.repeat, warmup=True)
        Xs = X[:200]
        t = median_time(lambda: ref.estep(Xs, eb, 1 / K, np.ones((200, K)), 100, 1e-3, 50.0), 1) * n / 200
        res["numpy twin (200 docs, scaled)"] = t
    base = res["sklearn n_jobs=1"]
    print(f"{'':40s} {'seconds':>9s} {'docs/s':>9s} {'vs sklearn(1)':>14s}")
    for k, v in res.items():
        print(f"{k:40s} {v:9.4f} {n / v:9.0f} {base / v:13.2f}x")
    one, two = res["dpem_fast 1 thread(s), clip"], res["dpem_fast 2 thread(s), clip"]
    print(f"dpem_fast clip: 2 threads / 1 thread speed-up {one / two:.2f}x")


if __name__ == "__main__":
    main()
