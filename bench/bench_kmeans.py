"""k-means: one Lloyd iteration of dpem_fast against scikit-learn, numpy and diffprivlib.

pytest-benchmark (the kernel pass and scikit-learn's iteration, 1 and 2 threads)::

    python -m pytest bench/bench_kmeans.py --benchmark-only

Ratio table from one run (medians; the machine is shared, so take ratios from one run)::

    python bench/bench_kmeans.py [--repeat 5] [--no-diffprivlib]

Data: 1,256,384 x 2 (the size of the DP-EM paper's Gowalla check-ins): the 28,298 airport
locations of ``dpem_fast.datasets.load_airports`` replicated with Gaussian jitter (0.5 degrees)
and clipped to the globe, float64.  What is timed, per iteration:

* ``kernel``: ``kmeans_stats`` with the declared domain (assignment, clipping into the unit
  ball, counts, sums), the pass a private fit makes per iteration;
* ``fit/J``: a whole private ``DPKMeans`` fit (``method="dpem"``, declared bounds, J = 10) / J:
  kernel + noise + update + the fit's fixed costs;
* ``sklearn``: ``KMeans(init=<array>, n_init=1, max_iter=10, tol=0, algorithm="lloyd")`` fit
  time / ``n_iter_`` (its Cython Lloyd kernel), OpenMP threads limited by threadpoolctl;
* ``numpy``: the numpy twin ``kmeans_stats_reference`` (one run: it is slow and needs
  n x K x 8 bytes twice);
* ``diffprivlib``: ``diffprivlib.models.KMeans`` total fit time at the same epsilon and bounds
  (it picks its own iteration count), beside our total fit time (one run each).
BLAS is held to one thread throughout.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pytest
from _timing import median_time

N_ROWS = 1_256_384
KS = (5, 50)
J = 10


def make_data(n=N_ROWS, seed=0):
    """Airports replicated with 0.5-degree jitter to n rows, clipped to the globe."""
    from dpem_fast.datasets import AIRPORTS_BOUNDS, load_airports

    A = load_airports()
    rng = np.random.default_rng(seed)
    X = A[rng.integers(A.shape[0], size=n)] + rng.normal(scale=0.5, size=(n, 2))
    return np.clip(X, *AIRPORTS_BOUNDS)


def initial_centers(K, seed=1):
    """Public, data-independent start: K points uniform on the globe's box."""
    from dpem_fast.datasets import AIRPORTS_BOUNDS

    lo, hi = AIRPORTS_BOUNDS
    return np.random.default_rng(seed).uniform(lo, hi, size=(K, 2))


def _kernel_args(K):
    from dpem_fast._preprocess import resolve_domain
    from dpem_fast.datasets import AIRPORTS_BOUNDS

    dom = resolve_domain(2, None, AIRPORTS_BOUNDS)
    return dom.to_scaled(initial_centers(K)), dom


def _sklearn_iteration(X, K, n_threads):
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    km = KMeans(K, init=initial_centers(K), n_init=1, max_iter=J, tol=0.0, algorithm="lloyd")
    with threadpool_limits(n_threads, "openmp"):
        t0 = time.perf_counter()
        km.fit(X)
        t = time.perf_counter() - t0
    return t / km.n_iter_, km.n_iter_


# --------------------------------------------------------------------------- pytest-benchmark
@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, "blas"):
        yield


@pytest.fixture(scope="module")
def data():
    return make_data()


@pytest.mark.benchmark(group="kmeans")
@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_dpem_fast_kernel(benchmark, data, K, n_threads):
    from dpem_fast._dpcore import _contract
    from dpem_fast._kernels.kmeans import kmeans_stats

    C, dom = _kernel_args(K)
    benchmark.extra_info.update(shape=data.shape, K=K, n_threads=n_threads, chunk_size=_contract.CHUNK_SIZE)
    benchmark.pedantic(kmeans_stats, args=(data, C), kwargs=dict(n_threads=n_threads, domain=dom),
                       rounds=5, warmup_rounds=1)


@pytest.mark.benchmark(group="kmeans")
@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_sklearn_lloyd_fit(benchmark, data, K, n_threads):
    """scikit-learn's fit (J iterations at most); divide by n_iter_ (extra_info) per iteration."""
    benchmark.extra_info.update(shape=data.shape, K=K, n_threads=n_threads)
    benchmark.pedantic(lambda: benchmark.extra_info.update(n_iter=_sklearn_iteration(data, K, n_threads)[1]),
                       rounds=3, warmup_rounds=0)


# --------------------------------------------------------------------------- table
def main(argv=None):
    from threadpoolctl import threadpool_limits

    from dpem_fast import DPKMeans
    from dpem_fast._reference.kmeans import kmeans_stats_reference
    from dpem_fast._kernels.kmeans import kmeans_stats
    from dpem_fast.datasets import AIRPORTS_BOUNDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-diffprivlib", action="store_true")
    args = ap.parse_args(argv)
    X = make_data()
    print(f"X: {X.shape}, float64; medians of {args.repeat}; ms per iteration; BLAS limited to 1 thread")
    print("%-4s %-8s %9s %9s %9s %12s %12s" % ("K", "threads", "kernel", "fit/J", "sklearn", "sklearn/kern",
                                                "sklearn/fitJ"))
    rows = []
    with threadpool_limits(1, "blas"):
        for K in KS:
            C, dom = _kernel_args(K)
            for t in (1, 2):
                kern = median_time(lambda: kmeans_stats(X, C, n_threads=t, domain=dom), args.repeat)
                fit = median_time(lambda: DPKMeans(K, epsilon=1.0, delta=1e-4, init=initial_centers(K), max_iter=J,
                                                   bounds=AIRPORTS_BOUNDS, n_threads=t, random_state=0).fit(X),
                                  max(1, args.repeat // 2)) / J
                sk = float(np.median([_sklearn_iteration(X, K, t)[0] for _ in range(max(1, args.repeat // 2))]))
                rows.append((K, t, kern, fit, sk))
                print("%-4d %-8d %9.2f %9.2f %9.2f %11.1fx %11.1fx" % (K, t, 1e3 * kern, 1e3 * fit, 1e3 * sk,
                                                                       sk / kern, sk / fit))
        print("\nnumpy twin (one run, 1 thread) against the kernel at 1 thread:")
        for K, t, kern, _, _ in rows:
            if t != 1:
                continue
            C, dom = _kernel_args(K)
            ref = median_time(lambda: kmeans_stats_reference(X, C, domain=dom), 1)
            print("K=%-3d numpy %8.1f ms  kernel %7.2f ms  ratio %6.1fx" % (K, 1e3 * ref, 1e3 * kern, ref / kern))
        if not args.no_diffprivlib:
            try:
                import diffprivlib
                from diffprivlib.models import KMeans as DPLKMeans
            except ImportError as exc:    # 0.6.6 imports names scikit-learn 1.9 no longer has
                print(f"\ndiffprivlib could not be imported ({exc}): skipped")
                return
            print(f"\ndiffprivlib {diffprivlib.__version__} KMeans, total fit (one run, epsilon=1, same bounds):")
            for K in KS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    dpl = DPLKMeans(K, epsilon=1.0, bounds=AIRPORTS_BOUNDS, random_state=0)
                    t0 = time.perf_counter()
                    dpl.fit(X)
                    t_dpl = time.perf_counter() - t0
                for t in (1, 2):
                    ours = median_time(lambda: DPKMeans(K, epsilon=1.0, delta=1e-4, max_iter=J, bounds=AIRPORTS_BOUNDS,
                                                        n_threads=t, random_state=0).fit(X), 1)
                    print("K=%-3d diffprivlib %8.2f s (%d iterations, %.0f ms each)   dpem_fast %d thread(s), "
                          "J=%d: %6.3f s   ratio %6.1fx" % (K, t_dpl, dpl.n_iter_, 1e3 * t_dpl / dpl.n_iter_, t, J,
                                                             ours, t_dpl / ours))


if __name__ == "__main__":
    main()
