"""DPFactorAnalysis: total fit time and peak memory vs scikit-learn's FactorAnalysis.

Shapes of issue 10: (400, 4096) (the paper's Olivetti size; d = 4096) and (100,000, 100).
Every case runs in a fresh subprocess (peak RSS from /proc/self/status VmHWM, reset just
before the fit through /proc/self/clear_refs, minus the RSS before the fit), with the thread
count set by OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (scikit-learn's BLAS) and n_threads
(ours: OpenMP kernels; BLAS held to one thread inside the fit).  Median of ``--repeat``
fits per case; same data, same run:

    python bench/bench_fa.py [--repeat 3] [--shapes 400x4096 100000x100] [--threads 1 2]

Ours is timed private (epsilon=1, declared data_norm, the default tol=1e-2 and max_iter)
and non-private (epsilon=inf); scikit-learn with its defaults (randomized SVD, tol=1e-2).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time, warnings
import numpy as np
n, d, k, which, nt, repeat = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
rng = np.random.default_rng(0)
W = rng.normal(size=(k, d))
X = rng.normal(size=(n, k)) @ W + rng.normal(size=(n, d))
X /= np.sqrt(np.mean(np.sum(X * X, axis=1)))          # rows of norm about 1
from sklearn.decomposition import FactorAnalysis
from dpem_fast import DPFactorAnalysis
def make():
    if which == "sklearn":
        return FactorAnalysis(k, random_state=0)
    eps = float("inf") if which == "ours_inf" else 1.0
    return DPFactorAnalysis(k, epsilon=eps, delta=1e-5, data_norm=3.0, random_state=0, n_threads=nt)
make().fit(X[: min(n, 500), : min(d, 64)] if which == "sklearn" else X[:500, :64])   # warm imports
times = []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for r in range(repeat):
        base = status("VmRSS")
        open("/proc/self/clear_refs", "w").write("5")
        t = time.perf_counter()
        est = make().fit(X)
        times.append(time.perf_counter() - t)
        peak = status("VmHWM") - base
ll = float(est.score(X[:2000]))
print(json.dumps({"times": times, "peak_mb": peak / 2**20, "x_mb": X.nbytes / 2**20,
                  "n_iter": int(est.n_iter_), "score": ll}))
"""


def run(n, d, k, which, nt, repeat):
    env = dict(os.environ, OMP_NUM_THREADS=str(nt), OPENBLAS_NUM_THREADS=str(nt), MKL_NUM_THREADS=str(nt))
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(d), str(k), which, str(nt), str(repeat)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shapes", nargs="+", default=["400x4096", "100000x100"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--k", type=int, default=10)
    a = ap.parse_args()
    print(f"{'shape':>12} {'thr':>3} {'method':>10} {'median s':>9} {'peak MB':>8} {'X MB':>6} "
          f"{'iters':>5} {'score':>9} {'vs sklearn':>10}")
    for shape in a.shapes:
        n, d = map(int, shape.split("x"))
        for nt in a.threads:
            res = {w: run(n, d, a.k, w, nt, a.repeat) for w in ("sklearn", "ours_inf", "ours_eps1")}
            ref = sorted(res["sklearn"]["times"])[len(res["sklearn"]["times"]) // 2]
            for w, r in res.items():
                med = sorted(r["times"])[len(r["times"]) // 2]
                print(f"{shape:>12} {nt:>3} {w:>10} {med:>9.3f} {r['peak_mb']:>8.0f} {r['x_mb']:>6.0f} "
                      f"{r['n_iter']:>5} {r['score']:>9.3f} {med / ref:>9.2f}x", flush=True)


if __name__ == "__main__":
    main()
