"""Private GMM fits on the same rows: in memory, from disk, and on a dask.distributed cluster.

Writes an n x d float64 ``.npy`` file (default 10^7 x 10, 763 MiB) to ``--dir``, then fits
``DPGaussianMixture(K, epsilon=1, data_norm=..., max_iter=J, random_state=7)`` on it:

* ``memory``: ``np.load(path)`` (not timed), fitted with ``n_threads`` = 1 and 2;
* ``disk``: ``dpem_fast.io.NpyBlocks(path)``, plain reads, ``n_threads`` = 2;
* ``dask-Wx1``: a ``LocalCluster`` of W worker processes (one dask thread each; W = 1 and 2),
  the array built lazily with ``map_blocks`` so that each worker reads its own row chunks
  from the file (memory-mapped, copied per chunk); nothing is persisted, so every pass
  re-reads from the page cache as ``disk`` does.  Each chunk task's kernel runs with
  ``n_threads=1``.  Cluster start-up is not timed.

rows/s = n * J / fit seconds (a fit reads the rows J + 1 times: one validation pass and one
per iteration).  Every fit must equal the in-memory one to 1e-10 relative (means).  The file
is deleted at the end.

    python bench/bench_dask.py [--n 10000000] [--d 10] [--K 5] [--max-iter 3]
        [--chunk-rows 1000000] [--dir DIR]

``--model lda``: ``DPLatentDirichletAllocation(K, noise_multiplier=1, batch_size=S,
max_doc_length=200, n_epochs=1, random_state=7)`` on a synthetic corpus of ``--n`` documents
(default 20,000) over ``--d`` terms (default 1,000), about 100 tokens each, written as a dense
float32 ``.npy`` (80 MB at the defaults): in memory (a CSR matrix, ``n_threads`` = 1 and 2)
and on Dask with 1 and 2 worker processes (one dask thread each, chunks of ``--chunk-rows``
documents read by the workers from the file, the kernel with ``n_threads=1`` per task),
re-read from the page cache at every iteration, or ``persist()``-ed first (the persist
timed with the fit).  The workers import dpem_fast before the timed fits.
documents/s = n_epochs * D / fit seconds (about S documents per iteration, D / S
iterations).  Every fit must equal the in-memory one to 1e-10 relative (components).  The
Dask fit sends one task per chunk per iteration, so with S = 500 each task does little work
and the scheduling cost is large; on 2 cores shared by the client, the scheduler and the
workers Dask only adds cost.

    python bench/bench_dask.py --model lda [--n 20000] [--d 1000] [--K 10] [--batch-size 500]
        [--chunk-rows 2000] [--dir DIR]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def write(path, n, d, seed=0):
    rng = np.random.default_rng(seed)
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
    centres = rng.normal(scale=3.0, size=(5, d))
    step = 1_000_000
    for r0 in range(0, n, step):
        m = min(step, n - r0)
        mm[r0:r0 + m] = centres[rng.integers(0, 5, m)] + rng.standard_normal((m, d))
    mm.flush()
    del mm


def lazy(path, n, d, chunk_rows, dtype=np.float64):
    import dask.array as da

    def chunk(block_info=None):
        (r0, r1), _ = block_info[None]["array-location"]
        return np.array(np.load(path, mmap_mode="r")[r0:r1])

    sizes = (chunk_rows,) * (n // chunk_rows) + ((n % chunk_rows,) if n % chunk_rows else ())
    return da.map_blocks(chunk, chunks=(sizes, (d,)), dtype=dtype)


def fit(X, a, threads):
    from dpem_fast import DPGaussianMixture

    t0 = time.perf_counter()
    g = DPGaussianMixture(a.K, epsilon=1.0, data_norm=a.data_norm, max_iter=a.max_iter,
                          random_state=7, n_threads=threads).fit(X)
    return time.perf_counter() - t0, g.means_


def write_corpus(path, n, V, seed=0):
    """n documents of a 20-topic LDA over V terms, about 100 tokens each, as dense float32."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.05), 20)
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, V))
    step = 5000
    for r0 in range(0, n, step):
        m = min(step, n - r0)
        p = rng.dirichlet(np.full(20, 0.2), m) @ topics
        lengths = rng.poisson(100, m) + 1
        mm[r0:r0 + m] = [rng.multinomial(k, q / q.sum()) for k, q in zip(lengths, p)]
    mm.flush()
    del mm


def fit_lda(X, a, threads):
    from dpem_fast import DPLatentDirichletAllocation

    t0 = time.perf_counter()
    m = DPLatentDirichletAllocation(a.K, noise_multiplier=1.0, batch_size=a.batch_size, max_doc_length=200,
                                    total_samples=a.n,
                                    n_epochs=1, vocabulary=[f"w{i}" for i in range(a.d)], random_state=7,
                                    n_threads=threads).fit(X)
    return time.perf_counter() - t0, m.components_


def _import_lda():
    import dpem_fast.decomposition  # noqa: F401


def main_lda(a):
    import scipy.sparse as sp
    from distributed import Client, LocalCluster, wait

    path = os.path.join(a.dir, f"bench_dask_lda_{a.n}x{a.d}.npy")
    write_corpus(path, a.n, a.d)
    rows = []
    try:
        X = sp.csr_matrix(np.load(path).astype(np.float64))
        t1, ref = fit_lda(X, a, 1)
        rows.append(("memory (CSR)", "n_threads=1", t1))
        t, m = fit_lda(X, a, 2)
        rows.append(("memory (CSR)", "n_threads=2", t))
        assert np.allclose(m, ref, rtol=1e-10, atol=0)
        del X
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None, silence_logs=40) as cluster, Client(cluster) as client:
                client.run(_import_lda)               # worker start-up (imports) is not timed
                for persist in (False, True):
                    t0 = time.perf_counter()
                    X = lazy(path, a.n, a.d, a.chunk_rows, np.float32)
                    if persist:
                        X = X.persist()
                        wait(X)
                    t, m = fit_lda(X, a, 1)
                    if persist:                   # the persist counts as part of the fit
                        t = time.perf_counter() - t0
                    name = f"dask {workers} worker(s) x 1 thread" + (", persisted" if persist else "")
                    rows.append((name, "n_threads=1 per task", t))
                    assert np.allclose(m, ref, rtol=1e-10, atol=0), "dask fit differs from the in-memory fit"
                    del X
    finally:
        os.remove(path)
    n_iter = max(1, round(a.n / a.batch_size))
    print(f"LDA: D={a.n} V={a.d} K={a.K} batch_size={a.batch_size} iterations={n_iter} "
          f"chunk_rows={a.chunk_rows} cores={os.cpu_count()}")
    print(f"{'source':40s} {'threads':22s} {'seconds':>8s} {'docs/s':>12s} {'vs memory 1t':>12s}")
    for name, threads, t in rows:
        print(f"{name:40s} {threads:22s} {t:8.2f} {a.n / t:12.3g} {t1 / t:12.2f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gmm", "lda"], default="gmm")
    p.add_argument("--n", type=int, default=None, help="rows (gmm: 10^7) or documents (lda: 20,000)")
    p.add_argument("--d", type=int, default=None, help="columns (gmm: 10) or terms (lda: 1,000)")
    p.add_argument("--K", type=int, default=None, help="components (gmm: 5) or topics (lda: 10)")
    p.add_argument("--max-iter", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--data-norm", type=float, default=20.0)
    p.add_argument("--chunk-rows", type=int, default=None, help="gmm: 10^6, lda: 2,000")
    p.add_argument("--dir", default=tempfile.gettempdir())
    a = p.parse_args()
    lda_model = a.model == "lda"
    for name, gmm, lda in (("n", 10_000_000, 20_000), ("d", 10, 1000), ("K", 5, 10),
                           ("chunk_rows", 1_000_000, 2000)):
        if getattr(a, name) is None:
            setattr(a, name, lda if lda_model else gmm)
    if lda_model:
        main_lda(a)
        return

    from distributed import Client, LocalCluster

    from dpem_fast.io import NpyBlocks

    path = os.path.join(a.dir, f"bench_dask_{a.n}x{a.d}.npy")
    write(path, a.n, a.d)
    rows = []
    try:
        X = np.load(path)
        t1, ref = fit(X, a, 1)
        rows.append(("memory", "n_threads=1", t1))
        t, m = fit(X, a, 2)
        rows.append(("memory", "n_threads=2", t))
        assert np.allclose(m, ref, rtol=1e-10, atol=0)
        del X
        t, m = fit(NpyBlocks(path), a, 2)
        rows.append(("disk (NpyBlocks)", "n_threads=2", t))
        assert np.allclose(m, ref, rtol=1e-10, atol=0)
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None, silence_logs=40) as cluster, Client(cluster):
                t, m = fit(lazy(path, a.n, a.d, a.chunk_rows), a, 1)
            rows.append((f"dask {workers} worker(s) x 1 thread", "n_threads=1 per task", t))
            assert np.allclose(m, ref, rtol=1e-10, atol=0), "dask fit differs from the in-memory fit"
    finally:
        os.remove(path)
    print(f"n={a.n} d={a.d} K={a.K} J={a.max_iter} chunk_rows={a.chunk_rows} cores={os.cpu_count()}")
    print(f"{'source':34s} {'threads':22s} {'seconds':>8s} {'rows/s':>12s} {'vs memory 1t':>12s}")
    for name, threads, t in rows:
        print(f"{name:34s} {threads:22s} {t:8.2f} {a.n * a.max_iter / t:12.3g} {t1 / t:12.2f}")


if __name__ == "__main__":
    main()
