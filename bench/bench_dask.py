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


def lazy(path, n, d, chunk_rows):
    import dask.array as da

    def chunk(block_info=None):
        (r0, r1), _ = block_info[None]["array-location"]
        return np.array(np.load(path, mmap_mode="r")[r0:r1])

    sizes = (chunk_rows,) * (n // chunk_rows) + ((n % chunk_rows,) if n % chunk_rows else ())
    return da.map_blocks(chunk, chunks=(sizes, (d,)), dtype=np.float64)


def fit(X, a, threads):
    from dpem_fast import DPGaussianMixture

    t0 = time.perf_counter()
    g = DPGaussianMixture(a.K, epsilon=1.0, data_norm=a.data_norm, max_iter=a.max_iter,
                          random_state=7, n_threads=threads).fit(X)
    return time.perf_counter() - t0, g.means_


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--K", type=int, default=5)
    p.add_argument("--max-iter", type=int, default=3)
    p.add_argument("--data-norm", type=float, default=20.0)
    p.add_argument("--chunk-rows", type=int, default=1_000_000)
    p.add_argument("--dir", default=tempfile.gettempdir())
    a = p.parse_args()

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
