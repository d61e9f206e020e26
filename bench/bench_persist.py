"""Saved models: file size and save / load time of a fitted DPGaussianMixture, and the CLI's
start-up.  ``python bench/bench_persist.py [--repeat 5]`` (one run; medians)."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import dpem_fast
from _timing import median_time


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        for n, dim, k in ((20000, 10, 5), (20000, 100, 10)):
            X = rng.normal(size=(n, dim))
            m = dpem_fast.DPGaussianMixture(k, epsilon=1.0, max_iter=5, data_norm=12.0, random_state=0,
                                            n_threads=1)
            t_fit = median_time(lambda: m.fit(X), 1)
            path = os.path.join(d, "m.npz")
            t_save = median_time(lambda: m.save(path), args.repeat)
            t_load = median_time(lambda: dpem_fast.load(path), args.repeat)
            print(f"GMM (n={n}, d={dim}, K={k}): file {os.path.getsize(path) / 1024:.1f} KiB, "
                  f"save {t_save * 1e3:.2f} ms, load {t_load * 1e3:.2f} ms (fit, 5 iterations, 1 thread: "
                  f"{t_fit * 1e3:.0f} ms)")
        t_cli = median_time(lambda: subprocess.run([sys.executable, "-m", "dpem_fast", "report", path],
                                               capture_output=True, check=True), args.repeat)
        print(f"python -m dpem_fast report MODEL: {t_cli * 1e3:.0f} ms wall (interpreter start-up included)")


if __name__ == "__main__":
    main()
