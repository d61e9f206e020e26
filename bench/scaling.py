"""Thread scaling of every compiled kernel as a share of the machine's ceiling (issue 26).

The ceiling is what the machine gives to perfectly independent work: ``P`` processes, each
running single-threaded DGEMM (numpy's BLAS held to one thread) at the same time, against one
such process alone.  ``ceiling(P) = P * rate_each(P) / rate_alone`` (1 < ceiling <= P; shared
caches, memory bandwidth, SMT siblings and turbo clocks all lower it).  A kernel's share at P
threads is ``(t(1) / t(P)) / ceiling(P)``: 100 % means it scales like independent DGEMMs.

Every kernel goes through the public :mod:`dpem_fast.kernels` layer (the estimators' kernels),
on float64 rows generated here; time per call is the median of ``--repeat`` calls after one
warm-up call, wall clock.  Results of every kernel are bit-identical for every thread count
(the project's contract; tested in ``tests/``), so only time is compared here.

Usage::

    python bench/scaling.py [--threads 1 16] [--repeat 5] [--quick]

``--quick``: a tenth of the rows (a check of the script on a small machine).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dpem_fast import kernels
from dpem_fast.kernels import make_key


def _dgemm_rate(seconds, out):
    """GFLOP/s of single-threaded 512 x 512 DGEMM over ``seconds`` of wall time."""
    with threadpool_limits(1):
        rng = np.random.default_rng(os.getpid())
        a, b = rng.normal(size=(512, 512)), rng.normal(size=(512, 512))
        a @ b
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            a @ b
            n += 1
        out.put(n * 2 * 512 ** 3 / (time.perf_counter() - t0) / 1e9)


def concurrent(rate, p, seconds):
    """(``rate(seconds, queue)`` of one process alone, P * its mean over P concurrent processes /
    alone): how far P independent copies of one piece of work scale on this machine."""
    rates = {}
    for procs in sorted({1, p}):
        q = mp.Queue()
        ps = [mp.Process(target=rate, args=(seconds, q)) for _ in range(procs)]
        for x in ps:
            x.start()
        got = [q.get() for _ in ps]
        for x in ps:
            x.join()
        rates[procs] = statistics.mean(got)
    return rates[1], p * rates[p] / rates[1]


def ceiling(p, seconds=5.0):
    """(DGEMM GFLOP/s of one process alone, the DGEMM ceiling at P processes)."""
    return concurrent(_dgemm_rate, p, seconds)


def _gmm(n, d, K, rng):
    X = rng.normal(size=(n, d))
    means = rng.normal(scale=0.5, size=(K, d))
    P = np.stack([np.linalg.cholesky(np.eye(d) * 2.0)] * K)
    w = np.full(K, 1.0 / K)
    return lambda t: kernels.gmm_statistics(X, w, means, P, n_threads=t)


def _kmeans(n, d, K, rng):
    X = rng.normal(size=(n, d))
    C = rng.normal(size=(K, d))
    return lambda t: kernels.kmeans_statistics(X, C, n_threads=t)


def _bernoulli(n, d, K, rng):
    X = (rng.random(size=(n, d)) < 0.3).astype(np.float64)
    means = rng.uniform(0.1, 0.9, size=(K, d))
    w = np.full(K, 1.0 / K)
    from dpem_fast._kernels.bernoulli import bernoulli_stats

    # the kernel itself, as every run since issue 26 timed it (kernels.bernoulli_statistics
    # also checks that X is binary: a serial numpy pass until issue 41, now threaded)
    return lambda t: bernoulli_stats(X, w, means, t)


def _moments(n, d, rng):
    X = rng.normal(size=(n, d))
    return lambda t: kernels.second_moments(X, n_threads=t)


def _noise(d):
    value = np.zeros((d, d))
    key = make_key(0)
    return lambda t: kernels.add_noise(value, 1.0, key, symmetric=True, n_threads=t)


def _lda(n_docs, V, K, rng):
    import scipy.sparse as sp

    X = sp.random(n_docs, V, density=30 / V, format="csr", random_state=1,
                  data_rvs=lambda s: rng.integers(1, 4, size=s).astype(float))
    eb = rng.uniform(0.1, 1.0, size=(K, V))
    g0 = np.ones((n_docs, K))
    return lambda t: kernels.lda_estep(X, eb, g0, 0.1, max_iter=20, n_threads=t)


def cases(scale):
    rng = np.random.default_rng(0)
    s = lambda n: max(1000, int(n * scale))     # noqa: E731
    return [
        ("gmm full (1e6, 10, 5)", _gmm(s(1_000_000), 10, 5, rng)),
        ("gmm full (1e6, 2, 5)", _gmm(s(1_000_000), 2, 5, rng)),
        ("gmm full (1e5, 100, 10) BLAS", _gmm(s(100_000), 100, 10, rng)),
        ("kmeans (1.26M, 2, 50)", _kmeans(s(1_260_000), 2, 50, rng)),
        ("kmeans (1e5, 100, 64)", _kmeans(s(100_000), 100, 64, rng)),
        ("bernoulli (1e6, 20, 10)", _bernoulli(s(1_000_000), 20, 10, rng)),
        ("second moments (5e4, 784)", _moments(s(50_000), 784, rng)),
        ("symmetric noise (4096 x 4096)", _noise(4096 if scale >= 1 else 1024)),
        ("lda e-step (5e4 docs, V=5000, K=20)", _lda(s(50_000), 5000, 20, rng)),
    ]


def timed(fn, t, repeat):
    fn(t)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(t)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count()])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    threads = sorted(set(args.threads) | {1})
    ceil = {p: ceiling(p) for p in threads if p > 1}
    alone = next(iter(ceil.values()))[0] if ceil else float("nan")
    print(f"machine: {os.cpu_count()} CPUs; one DGEMM process alone {alone:.1f} GFLOP/s; ceiling "
          + ", ".join(f"{p} procs {c[1]:.2f}x" for p, c in ceil.items()), flush=True)
    head = "kernel".ljust(38) + "".join(f"{'t=' + str(p) + ' ms':>12s}" for p in threads)
    head += "".join(f"{'speedup ' + str(p):>12s}{'share':>8s}" for p in threads if p > 1)
    print(head, flush=True)
    with threadpool_limits(1):
        for label, fn in cases(0.1 if args.quick else 1.0):
            ts = {p: timed(fn, p, args.repeat) for p in threads}
            line = label.ljust(38) + "".join(f"{ts[p] * 1e3:12.2f}" for p in threads)
            for p in threads:
                if p > 1:
                    sp_ = ts[1] / ts[p]
                    line += f"{sp_:12.2f}{100 * sp_ / ceil[p][1]:7.0f}%"
            print(line, flush=True)


if __name__ == "__main__":
    main()
