"""Per-iteration cost of the fused GMM E-step (DP-EM Eq. 10-11) against numpy and scikit-learn.

pytest-benchmark (small shapes, quick)::

    python -m pytest bench/bench_estep.py --benchmark-only

Ratio table on the issue's shapes (medians; the machine is shared, so take ratios from one run)::

    python bench/bench_estep.py [--repeat 7]

What is timed
-------------
* ``dpem_fast``: ``compute_stats`` (the fused kernel, the one pass over X) followed by the M-step
  on the statistics (means, covariances, Cholesky of the precisions: O(K d^3), no data pass),
  i.e. one full EM iteration before noise.
* ``numpy``: the numpy twin ``estep_stats_reference`` plus the same M-step.
* ``sklearn``: ``GaussianMixture(covariance_type='full', init_params='random_from_data',
  tol=0).fit``: (time(max_iter=11) - time(max_iter=1)) / 10, i.e. ten EM iterations without the
  initialisation, per iteration (ConvergenceWarning silenced).  Only public API is used.

Full vs diagonal kernel (covariance types "diag" / "spherical")::

    python bench/bench_estep.py --diag [--repeat 5]

times the E-step pass alone (``compute_stats`` with diagonal factors expanded to (K, d, d), as
diag / spherical fits ran before issue 24, against ``compute_stats_diag``) at n = 100,000,
K = 10, d in {16, 64, 128}, on 1 and 2 threads, and prints the ratios.

Arithmetic floor (flop model)
-----------------------------
Per row and component: triangular Mahalanobis product d(d+1) flops, upper-triangle S2 update
d(d+1), centring/S1/scaling ~6d, log-sum-exp and responsibility ~25 (exp as ~20 flops), so
``flops = n K (2 d (d + 1) + 6 d + 25)``, floor = flops / 45e9 s on one core.
"""
from __future__ import annotations

import argparse
import warnings

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from dpem_fast._dpcore import _contract
from dpem_fast._reference.gmm import estep_stats_reference
from dpem_fast import DPGaussianMixture
from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky as _compute_precision_cholesky
from dpem_fast._kernels.gmm import compute_stats, compute_stats_diag, gmm_statistics
from _timing import median_time

ISSUE_SHAPES = [(1_000_000, 2, 5), (200_000, 10, 5), (50_000, 100, 10), (26_733, 10, 3)]
SKLEARN_ISSUE_MS = {(1_000_000, 2, 5): 549, (200_000, 10, 5): 197, (50_000, 100, 10): 1255,
                    (26_733, 10, 3): 20}
PEAK_FLOPS = 45e9


def make_problem(n, d, K, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=3.0, size=(K, d))
    P = np.empty((K, d, d))
    for k in range(K):
        A = rng.normal(size=(d, d))
        L = np.linalg.cholesky(A @ A.T / d + 0.5 * np.eye(d))
        P[k] = solve_triangular(L, np.eye(d), lower=True).T
    weights = rng.dirichlet(np.ones(K))
    X = means[rng.integers(K, size=n)] + rng.normal(size=(n, d)) * 1.5
    return X.astype(dtype), weights, means, P


_EXACT = DPGaussianMixture(reg_covar=1e-6)


def m_step(stats):
    """Eq. 11 from the statistics with the estimator's own non-private M-step, then the
    precision Cholesky factors (what one EM iteration of ``fit(epsilon=inf)`` computes)."""
    weights, means, covs = _EXACT._exact_m_step(stats)
    return weights, means, _compute_precision_cholesky(covs)


def flops(n, d, K):
    return n * K * (2 * d * (d + 1) + 6 * d + 25)


def iteration_dpem(X, w, means, P, n_threads):
    return m_step(compute_stats(X, w, means, P, n_threads=n_threads))


def iteration_numpy(X, w, means, P):
    s = estep_stats_reference(X, w, means, P)          # a plain dict: packed for the same M-step
    return m_step(gmm_statistics(s["n_rows"], s["counts"], s["first_moments"], s["second_moments"], s["loglik"]))


def sklearn_fit(X, K, max_iter):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(n_components=K, covariance_type="full", max_iter=max_iter, n_init=1,
                         init_params="random_from_data", tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gm.fit(X)
    return gm


# --------------------------------------------------------------------------- pytest-benchmark
@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """Everything (sklearn and numpy included) runs with BLAS on one thread: idle OpenBLAS
    threads otherwise spin and steal the second core from the OpenMP kernel."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, "blas"):
        yield


BENCH_SHAPES = [(100_000, 2, 5), (50_000, 10, 5), (5_000, 100, 10), (26_733, 10, 3)]


@pytest.fixture(scope="module", params=BENCH_SHAPES, ids=lambda s: "n%d-d%d-K%d" % s)
def problem(request):
    return request.param, make_problem(*request.param)


@pytest.mark.benchmark(group="estep")
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_dpem_fast(benchmark, problem, n_threads, dtype):
    shape, (X, w, means, P) = problem
    X = X.astype(dtype)
    benchmark.extra_info.update(shape=shape, n_threads=n_threads, dtype=np.dtype(dtype).name,
                                chunk_size=_contract.CHUNK_SIZE, impl="dpem_fast")
    benchmark.pedantic(iteration_dpem, args=(X, w, means, P, n_threads), rounds=7,
                       warmup_rounds=1)


@pytest.mark.benchmark(group="estep")
def test_numpy_reference(benchmark, problem):
    shape, (X, w, means, P) = problem
    benchmark.extra_info.update(shape=shape, n_threads=1, dtype="float64", impl="numpy")
    benchmark.pedantic(iteration_numpy, args=(X, w, means, P), rounds=3, warmup_rounds=1)


@pytest.mark.benchmark(group="estep")
def test_sklearn_iteration(benchmark, problem):
    """sklearn fit with 3 EM iterations (incl. init) — compare per-iteration with __main__."""
    shape, (X, w, means, P) = problem
    benchmark.extra_info.update(shape=shape, n_threads=1, dtype="float64", impl="sklearn",
                                what="fit(max_iter=3) incl. init")
    benchmark.pedantic(sklearn_fit, args=(X, shape[2], 3), rounds=3, warmup_rounds=0)


# --------------------------------------------------------------------------- table
def main(argv=None):
    from threadpoolctl import threadpool_limits

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-sklearn", action="store_true")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--diag", action="store_true", help="full vs diagonal E-step kernel table")
    args = ap.parse_args(argv)
    with threadpool_limits(1, "blas"):
        return _diag_table(args) if args.diag else _table(args)


DIAG_SHAPES = [(100_000, 16, 10), (100_000, 64, 10), (100_000, 128, 10)]


def _diag_table(args):
    """E-step pass of the full kernel (diagonal factors expanded to (K, d, d)) against the
    diagonal kernel, same data and parameters, 1 and 2 threads."""
    print(f"dtype={args.dtype}; medians of {args.repeat}; E-step pass only, ms")
    print("%-18s %9s %9s %9s %9s %9s %9s" % ("shape (n,d,K)", "full 1t", "diag 1t", "1t ratio",
                                             "full 2t", "diag 2t", "2t ratio"))
    rows = []
    for n, d, K in DIAG_SHAPES:
        rng = np.random.default_rng(0)
        means = rng.normal(scale=3.0, size=(K, d))
        prec = rng.uniform(0.5, 2.0, size=(K, d))
        w = rng.dirichlet(np.ones(K))
        X = (means[rng.integers(K, size=n)] + rng.normal(size=(n, d)) * 1.5).astype(np.dtype(args.dtype))
        P = np.zeros((K, d, d))
        P.reshape(K, d * d)[:, :: d + 1] = prec
        out = [n, d, K]
        for t in (1, 2):
            tf = median_time(lambda: compute_stats(X, w, means, P, n_threads=t), args.repeat, warmup=True)
            td = median_time(lambda: compute_stats_diag(X, w, means, prec, n_threads=t), args.repeat, warmup=True)
            out += [tf, td]
        rows.append(tuple(out))
        _, _, _, f1, d1, f2, d2 = out
        print("%-18s %9.1f %9.1f %8.1fx %9.1f %9.1f %8.1fx" % (
            f"({n},{d},{K})", f1 * 1e3, d1 * 1e3, f1 / d1, f2 * 1e3, d2 * 1e3, f2 / d2), flush=True)
    return rows


def _table(args):
    rows = []
    print(f"dtype={args.dtype}; medians of {args.repeat}; times in ms per EM iteration")
    hdr = ("shape (n,d,K)", "dpem 1t", "dpem 2t", "2t gain", "numpy", "sklearn",
           "vs numpy", "vs sk", "floor", "x floor")
    print("%-18s %9s %9s %7s %9s %9s %8s %7s %7s %7s" % hdr)
    for n, d, K in ISSUE_SHAPES:
        X, w, means, P = make_problem(n, d, K, dtype=np.dtype(args.dtype))
        iteration_dpem(X, w, means, P, 1)
        t1 = median_time(lambda: iteration_dpem(X, w, means, P, 1), args.repeat)
        t2 = median_time(lambda: iteration_dpem(X, w, means, P, 2), args.repeat)
        tn = median_time(lambda: iteration_numpy(X, w, means, P), max(1, args.repeat // 3))
        if args.no_sklearn:
            ts = np.nan
        else:
            Xd = X.astype(np.float64)
            r = max(1, args.repeat // 3)
            ts = (median_time(lambda: sklearn_fit(Xd, K, 11), r)
                  - median_time(lambda: sklearn_fit(Xd, K, 1), r)) / 10
        floor = flops(n, d, K) / PEAK_FLOPS
        rows.append((n, d, K, t1, t2, tn, ts, floor))
        print("%-18s %9.2f %9.2f %6.2fx %9.1f %9.1f %7.1fx %6.1fx %7.2f %6.1fx" % (
            f"({n},{d},{K})", t1 * 1e3, t2 * 1e3, t1 / t2, tn * 1e3, ts * 1e3, tn / t1, ts / t1,
            floor * 1e3, t1 / floor), flush=True)
    print("sklearn: (fit(max_iter=11) - fit(max_iter=1)) / 10; BLAS limited to 1 thread throughout; "
          "issue's sklearn figures (ms): %s" % SKLEARN_ISSUE_MS)
    print("floor: n K (2d(d+1) + 6d + 25) flops / 45 GFLOP/s")
    return rows


if __name__ == "__main__":
    main()
