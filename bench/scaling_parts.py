"""Where the many-core time of the memory-heavy kernels goes (issue 41): a companion of
``bench/scaling.py`` for the shapes that fall short of its 90 % target.

For each shape, at 1 and ``P`` threads, the call of the public layer (:mod:`dpem_fast.kernels`)
and its parts, timed alone (median of ``--repeat`` calls after a warm-up, wall clock):

* ``check``: the input check, ``_contract.all_finite`` (the public face's one pass over X);
* ``kernel``: the compiled kernel with partials allocated once (no page faults);
* ``stats``: the kernel's Python face, its partials allocated every call as the public face
  does (the first touch of every page inside the timed call); with a declared domain (the
  private fits' path), the rows mapped into a row-major copy first;
* second moments only: the exact lower-triangle reduction, and numpy's ``X.T @ X`` with
  OpenBLAS at the same thread count (what a BLAS reaches on this machine).

Last, each kernel that calls BLAS from its threads (the GMM E-step from ``BLAS_MIN_D``
features, the Bernoulli one from ``BERNOULLI_BLAS_MIN_D``) just below and at its threshold: the
same pass with and without BLAS calls.

Two ceilings frame them: DGEMM (``bench/scaling.py``'s: ``P`` single-threaded DGEMM processes
against one) and memory bandwidth (``P`` processes each copying a 64 MB array against one; GB/s
counts the bytes read and written).  A part whose speed-up sits near the bandwidth ceiling
rather than the DGEMM one is bound by memory, not by its schedule.

Usage::

    python bench/scaling_parts.py [--threads 1 16] [--repeat 3] [--quick]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dpem_fast import kernels
from dpem_fast._dpcore import _contract, _moments
from dpem_fast._kernels.gmm import compute_stats
from dpem_fast._kernels.kmeans import kmeans_stats
from dpem_fast._kernels.moments import second_moment_stats
from dpem_fast._preprocess import resolve_domain

from scaling import ceiling, concurrent, timed


def _copy_rate(seconds, out):
    """GB/s (read + write) of one process copying a 64 MB array over ``seconds``."""
    a = np.random.default_rng(os.getpid()).random(8 << 20)
    b = np.empty_like(a)
    np.copyto(b, a)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        np.copyto(b, a)
        n += 1
    out.put(n * 2 * a.nbytes / (time.perf_counter() - t0) / 1e9)


def bandwidth(p, seconds=3.0):
    """(GB/s of one copying process alone, the copy-bandwidth ceiling at P processes)."""
    return concurrent(_copy_rate, p, seconds)


def moments_parts(n, d, rng):
    X = rng.normal(size=(n, d))
    dom = resolve_domain(d, 1.5 * np.sqrt(d), None)      # a data_norm: the private fits' map
    nb2, nb1 = _moments.block_count(n, d)
    p2, p1, pc = np.empty((nb2, d, d)), np.empty((nb1, d)), np.zeros(nb1, dtype=np.int64)

    def kernel(t):
        _moments.second_moment(X, p2, p1, pc, t)

    def blas(t):
        with threadpool_limits(t):
            X.T @ X

    return f"second moments ({n}, {d})", [
        ("public", lambda t: kernels.second_moments(X, n_threads=t)),
        ("check", lambda t: _contract.all_finite(X, t)),
        ("stats (fresh partials)", lambda t: second_moment_stats(X, None, t)),
        ("stats, declared domain (row copy)", lambda t: second_moment_stats(X, dom, t)),
        ("kernel", kernel),
        ("reduction (lower)", lambda t: _contract.sum_blocks_lower(p2, t)),
        ("numpy X.T @ X (BLAS threads)", blas),
    ]


def kmeans_parts(n, d, K, rng):
    X, C = rng.normal(size=(n, d)), rng.normal(size=(K, d))
    return f"kmeans ({n}, {d}, {K})", [
        ("public", lambda t: kernels.kmeans_statistics(X, C, n_threads=t)),
        ("check", lambda t: _contract.all_finite(X, t)),
        ("kernel face (fresh partials)", lambda t: kmeans_stats(X, C, t)),
    ]


def gmm_parts(n, d, K, rng):
    X = rng.normal(size=(n, d))
    means = rng.normal(scale=0.5, size=(K, d))
    P = np.stack([np.linalg.cholesky(np.eye(d) * 2.0)] * K)
    w = np.full(K, 1.0 / K)
    return f"gmm full ({n}, {d}, {K})", [
        ("public", lambda t: kernels.gmm_statistics(X, w, means, P, n_threads=t)),
        ("check", lambda t: _contract.all_finite(X, t)),
        ("kernel face (fresh partials)", lambda t: compute_stats(X, w, means, P, t, None)),
    ]


def blas_pairs(rng, s):
    """The same kernel just below and at its BLAS threshold (issue 41's hypothesis for the next
    lent machine: in four runs the kernels that call BLAS from every thread reached 56-80 % at
    16 threads, those that do not 82-102 %; a pair whose speed-ups differ by more than the
    work's 7 % says the BLAS calls, not the pass, cost the scaling)."""
    from dpem_fast._kernels.bernoulli import bernoulli_stats

    lo_g, lo_b = _contract.BLAS_MIN_D - 1, _contract.BERNOULLI_BLAS_MIN_D - 1
    n_g, n_b = int(200_000 * s), int(1_000_000 * s)
    out = []
    for d in (lo_g, lo_g + 1):
        X = rng.normal(size=(n_g, d))
        means = rng.normal(scale=0.5, size=(10, d))
        P = np.stack([np.linalg.cholesky(np.eye(d) * 2.0)] * 10)
        w = np.full(10, 0.1)
        path = "BLAS" if d >= _contract.BLAS_MIN_D else "no BLAS"
        out.append((f"gmm full d={d} ({path})", lambda t, X=X, m=means, P=P, w=w: compute_stats(X, w, m, P, t, None)))
    for d in (lo_b, lo_b + 1):
        X = (rng.random(size=(n_b, d)) < 0.3).astype(np.float64)
        means = rng.uniform(0.1, 0.9, size=(10, d))
        w = np.full(10, 0.1)
        path = "BLAS" if d >= _contract.BERNOULLI_BLAS_MIN_D else "no BLAS"
        out.append((f"bernoulli d={d} ({path})", lambda t, X=X, m=means, w=w: bernoulli_stats(X, w, m, t)))
    return f"below and at the BLAS threshold (gmm n={n_g}, bernoulli n={n_b}, K=10)", out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count()])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    threads = sorted(set(args.threads) | {1})
    top = threads[-1]
    s = 0.1 if args.quick else 1.0
    if top > 1:
        dg, dc = ceiling(top)
        bw, bc = bandwidth(top)
        print(f"machine: {os.cpu_count()} CPUs; at {top} procs: DGEMM ceiling {dc:.2f}x "
              f"(alone {dg:.1f} GFLOP/s), copy-bandwidth ceiling {bc:.2f}x (alone {bw:.1f} GB/s)", flush=True)
    rng = np.random.default_rng(0)
    shapes = [moments_parts(int(50_000 * s), 784, rng), kmeans_parts(int(100_000 * s), 100, 64, rng),
              gmm_parts(int(1_000_000 * s), 10, 5, rng), blas_pairs(rng, s)]
    with threadpool_limits(1):
        for title, parts in shapes:
            print(f"\n{title}")
            print("  part".ljust(34) + "".join(f"{'t=' + str(p) + ' ms':>11s}" for p in threads)
                  + "".join(f"{'x' + str(p):>8s}" for p in threads if p > 1), flush=True)
            for label, fn in parts:
                ts = {p: timed(fn, p, args.repeat) for p in threads}
                print(("  " + label).ljust(34) + "".join(f"{ts[p] * 1e3:11.2f}" for p in threads)
                      + "".join(f"{ts[1] / ts[p]:8.2f}" for p in threads if p > 1), flush=True)


if __name__ == "__main__":
    main()
