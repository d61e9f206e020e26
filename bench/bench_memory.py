"""Peak resident memory of DPGaussianMixture.fit relative to the size of X.

Target (issue 4): on (1e6, 10, 5) float64 the fit's peak RSS stays below
1.5x the size of X.  Run in a fresh process per case:

    python bench/bench_memory.py [--n 1000000 --d 10 --k 5]

Reports the process's peak RSS net of the interpreter and imports (measured
before X is created), and (VmHWM, reset just before ``fit`` through
/proc/self/clear_refs) minus the RSS before ``fit`` -- i.e. what ``fit``
itself adds on top of X and the interpreter -- and the whole-process peak,
both as multiples of ``X.nbytes``.  Linux only.
"""
from __future__ import annotations

import argparse


def _status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def measure(n, d, K, epsilon=1.0, n_threads=None):
    import numpy as np

    from dpem_fast import DPGaussianMixture

    DPGaussianMixture(K, epsilon=1.0, data_norm=1.0, max_iter=1, random_state=0).fit(
        np.random.default_rng(1).standard_normal((1000, d)))  # import everything first
    base = _status("VmRSS")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    X += rng.integers(0, K, size=n)[:, None] * 3.0
    g = DPGaussianMixture(K, epsilon=epsilon, delta=1e-5, max_iter=3, data_norm=20.0, random_state=0,
                          n_threads=n_threads)
    g.fit(X[:1000])  # warm imports and caches
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current RSS
    g.fit(X)
    peak = _status("VmHWM")
    return dict(n=n, d=d, K=K, X_MiB=X.nbytes / 2**20, rss_before_MiB=before / 2**20,
                peak_MiB=peak / 2**20, fit_extra_over_X=(peak - before) / X.nbytes,
                process_peak_over_X=peak / X.nbytes, base_MiB=base / 2**20,
                peak_over_X_net_of_interpreter=(peak - base) / X.nbytes)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--k", type=int, default=5)
    a = p.parse_args()
    r = measure(a.n, a.d, a.k)
    print(f"(n, d, K) = ({r['n']}, {r['d']}, {r['K']}), X = {r['X_MiB']:.1f} MiB float64")
    print(f"RSS before fit {r['rss_before_MiB']:.1f} MiB, peak during fit {r['peak_MiB']:.1f} MiB")
    print(f"interpreter + imports before X: {r['base_MiB']:.1f} MiB")
    print(f"fit adds {r['fit_extra_over_X']:.3f} x size(X); peak net of the interpreter = "
          f"{r['peak_over_X_net_of_interpreter']:.3f} x size(X) (target: < 1.5); "
          f"whole-process peak = {r['process_peak_over_X']:.2f} x size(X)")
