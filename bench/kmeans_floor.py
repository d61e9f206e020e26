"""k-means: the Lloyd kernel against scikit-learn's Lloyd iteration, the numpy twin and the
arithmetic floor, from one run (issue 26).

Two shapes:

* ``airports``: 1,256,384 x 2, K = 50 (the DP-EM paper's Gowalla size; ``bench_kmeans.py``'s
  airports replicated with jitter), centres uniform on the globe's box;
* ``google``: 100,000 x 100, K = 64 (Google's DP clustering benchmark regenerated,
  ``kmeans_google.py``), centres 64 rows of a second draw.

What is timed (medians of ``--repeat`` calls, ms, float64, BLAS held to one thread):

* ``kernel dom``: ``kmeans_stats`` with the declared domain (rows clipped into the unit ball as
  they are loaded, assignment, counts, sums, inertia): the pass a private fit makes;
* ``kernel raw``: the same pass on the raw rows (no domain), the work scikit-learn does;
* ``sklearn``: one call of scikit-learn's Lloyd iteration
  ``sklearn.cluster._k_means_lloyd.lloyd_iter_chunked_dense`` (assignment by chunked GEMM, labels,
  per-cluster weights and sums, new centres; private API, checked to be that work: it is what
  ``KMeans(algorithm="lloyd")`` calls once per iteration), with ``n_threads`` threads; if the
  import fails, ``KMeans(max_iter=10, tol=0).fit`` time / ``n_iter_``;
* ``numpy``: the numpy twin ``kmeans_stats_reference`` on the raw rows (one run, one thread);
* ``floor``: 2 n K d flops (4 n K at d = 2: two multiply-adds per row and centre) at the
  machine's nominal 50 GFLOP/s per core (PERF_NOTES) and at the single-thread DGEMM rate
  measured in this run (a 2000 x 2000 matmul), divided by the thread count.

Every one-thread row is also timed in process CPU time (``time.process_time``, medians): on
a shared machine a busy neighbour inflates wall time but not the CPU time of a one-thread
pass (the ``cpu`` lines).

Run: ``python bench/kmeans_floor.py [--repeat 7] [--shapes airports google] [--threads 1 2]``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import median_time

NOMINAL_GFLOPS = 50.0


def cpu_time(fn, repeat):
    """Median process CPU seconds of ``repeat`` calls of ``fn`` (after one untimed call)."""
    return median_time(fn, repeat, warmup=True, clock=time.process_time)


def airports(K=50):
    """(X, C raw, C in the domain's units, domain)."""
    from bench_kmeans import _kernel_args, initial_centers, make_data

    X = make_data()
    Cs, dom = _kernel_args(K)
    return X, initial_centers(K), Cs, dom


def google(K=64):
    """(X, C raw, C in the domain's units, domain): data_norm = 1 (centre 0, scale 1)."""
    from kmeans_google import make_data

    from dpem_fast._preprocess import resolve_domain

    X = make_data(0)
    C = make_data(1)[np.random.default_rng(2).choice(X.shape[0], K, replace=False)]
    return X, C, C, resolve_domain(X.shape[1], 1.0, None)


def dgemm_gflops():
    """Single-thread DGEMM rate of this machine now (best of 3)."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).normal(size=(2000, 2000))
    with threadpool_limits(1, "blas"):
        best = min(median_time(lambda: a @ a, 1) for _ in range(3))
    return 2 * 2000 ** 3 / best / 1e9


def sklearn_iteration(X, C, n_threads, repeat, timer=median_time):
    """Median seconds of one scikit-learn Lloyd iteration, and how it was measured."""
    try:
        from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_dense
    except ImportError:                                         # private API moved
        from sklearn.cluster import KMeans
        from threadpoolctl import threadpool_limits

        def fit():
            km = KMeans(C.shape[0], init=C, n_init=1, max_iter=10, tol=0.0, algorithm="lloyd")
            with threadpool_limits(n_threads, "openmp"):
                t0 = time.perf_counter()
                km.fit(X)
            return (time.perf_counter() - t0) / km.n_iter_

        return float(np.median([fit() for _ in range(max(1, repeat // 2))])), "KMeans.fit / n_iter_"
    n, K = X.shape[0], C.shape[0]
    w = np.ones(n)
    new, wic = np.empty_like(C), np.empty(K)
    labels, shift = np.empty(n, dtype=np.int32), np.empty(K)
    old = np.ascontiguousarray(C, dtype=np.float64)
    run = lambda: lloyd_iter_chunked_dense(X, w, old, new, wic, labels, shift, n_threads)  # noqa: E731
    run()
    return timer(run, repeat), "lloyd_iter_chunked_dense"


def main(argv=None):
    from threadpoolctl import threadpool_limits

    from dpem_fast._dpcore import _kmeans
    from dpem_fast._kernels.kmeans import kmeans_stats
    from dpem_fast._reference.kmeans import kmeans_stats_reference

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--shapes", nargs="+", default=["airports", "google"], choices=["airports", "google"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--no-numpy", action="store_true")
    args = ap.parse_args(argv)
    with threadpool_limits(1, "blas"):
        gf = dgemm_gflops()
        print(f"assignment path: {_kmeans.simd_path()}; single-thread DGEMM now: {gf:.1f} GFLOP/s "
              f"(nominal {NOMINAL_GFLOPS:.0f}); medians of {args.repeat}; ms per pass")
        print("%-9s %-7s %9s %9s %9s %9s %9s %9s %9s %9s" % (
            "shape", "threads", "kern dom", "kern raw", "sklearn", "floor50", "floorNow", "sk/dom", "dom/f50",
            "dom/fNow"))
        for shape in args.shapes:
            X, C, Cs, dom = airports() if shape == "airports" else google()
            n, d = X.shape
            K = C.shape[0]
            flops = 2.0 * n * K * d
            for t in args.threads:
                kd = median_time(lambda: kmeans_stats(X, Cs, n_threads=t, domain=dom), args.repeat, warmup=True)
                kr = median_time(lambda: kmeans_stats(X, C, n_threads=t), args.repeat, warmup=True)
                sk, how = sklearn_iteration(X, C, t, args.repeat)
                f50, fnow = flops / (NOMINAL_GFLOPS * 1e9 * t), flops / (gf * 1e9 * t)
                print("%-9s %-7d %9.2f %9.2f %9.2f %9.2f %9.2f %8.1fx %8.2fx %8.2fx" % (
                    shape, t, 1e3 * kd, 1e3 * kr, 1e3 * sk, 1e3 * f50, 1e3 * fnow, sk / kd, kd / f50, kd / fnow))
                if t == 1:
                    kd = cpu_time(lambda: kmeans_stats(X, Cs, n_threads=1, domain=dom), args.repeat)
                    kr = cpu_time(lambda: kmeans_stats(X, C, n_threads=1), args.repeat)
                    sk = sklearn_iteration(X, C, 1, args.repeat, timer=cpu_time)[0]
                    print("%-9s %-7s %9.2f %9.2f %9.2f %9.2f %9.2f %8.1fx %8.2fx %8.2fx" % (
                        "", "1 cpu", 1e3 * kd, 1e3 * kr, 1e3 * sk, 1e3 * f50, 1e3 * fnow, sk / kd, kd / f50,
                        kd / fnow))
            if not args.no_numpy:
                ref = median_time(lambda: kmeans_stats_reference(X, C), 1)
                kr1 = median_time(lambda: kmeans_stats(X, C, n_threads=1), args.repeat)
                print(f"{'':9s} numpy twin (1 run, 1 thread): {1e3 * ref:.0f} ms = {ref / kr1:.0f}x the raw "
                      f"kernel at 1 thread ({1e3 * kr1:.2f} ms); scikit-learn timed with {how}")
    print("(n, d, K): airports (1256384, 2, 50), google (100000, 100, 64); floor = 2 n K d flops / rate / threads")


if __name__ == "__main__":
    main()
