"""(DP-)SEP loop speed: N T = 100,000 steps with J = 4, d = 2 (the paper's Section 4 size).

    python bench/bench_sep.py [--repeats 5]

Times, medians of ``--repeats`` in one run: the compiled loop alone (non-private; private with a
precomputed noise array), the numpy twin (``_reference.sep.sep_run``) on 2,000 steps scaled to
100,000, the bulk noise draw through the release layer (``ReleaseLayer.noise_block``) at 1 and
2 threads, and whole fits (EP, SEP, DP-SEP shuffle / uniform, which include the calibration).
The loop is sequential: the thread count only affects the noise draws.
"""
from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

from dpem_fast import DPStochasticEP
from dpem_fast._dpcore import _sep
from dpem_fast._reference import sep as ref
from dpem_fast._rng import make_key
from _timing import median_time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)        # timings: a noise-dominated fit is timed all the same
    rng = np.random.default_rng(0)
    J, d, n, T = 4, 2, 1000, 100
    P = d + d * d
    mu = rng.normal(size=(J, d))
    X = mu[rng.integers(0, J, n)] + 0.5 * rng.normal(size=(n, d))
    th0 = np.concatenate([np.zeros((J, d)), np.tile(np.eye(d).ravel(), (J, 1))], 1)
    tf = np.concatenate([rng.normal(size=(J, d)) / n, np.tile(np.eye(d).ravel() / n, (J, 1))], 1)
    lw = np.log(np.full(J, 1 / J))
    order = np.tile(np.arange(n), T).astype(np.int64)
    noise = rng.normal(size=(n * T, J, P)) * 3e-3
    res = {}
    res["loop, non-private (100k steps)"] = median_time(
        lambda: _sep.sep_loop(X, order, tf.copy(), th0, lw, 0.25, n, 1 / n, math.inf, None), a.repeats)
    res["loop, private (100k steps, noise given)"] = median_time(
        lambda: _sep.sep_loop(X, order, tf.copy(), th0, lw, 0.25, n, 1 / n, 1.0, noise), a.repeats)
    twin = median_time(lambda: ref.sep_run(X, order[:2000], tf, th0, lw, 0.25, n, 1 / n, 1.0, noise[:2000]), 1)
    res["numpy twin, private (2k steps x 50)"] = twin * 50
    res["loop, private, batches of 250 (100k steps, 400 releases)"] = median_time(
        lambda: _sep.sep_loop(X, order, tf.copy(), th0, lw, 0.25, n, 1 / n, 1.0, noise[:400], 250,
                              -np.ones(d), np.ones(d)), a.repeats)
    est = DPStochasticEP(J, epsilon=50.0, component_variance=0.25, random_state=0)
    sizes = [1] * (n * T)                      # the paper's one release per step
    for nt in (1, 2):
        def draw():
            est.set_params(n_threads=nt)
            est._plan(make_key(0), n, T, 1, sizes, J, P, d, 50.0, 1e-5, 1.0, 1.0, "gdp", nt)
        res[f"calibration, {nt} thread(s)"] = median_time(draw, 1)

        def bulk():
            layer, _ = est._plan(make_key(0), n, T, 1, sizes, J, P, d, 50.0, 1e-5, 1.0, 1.0, "gdp", nt)
            layer.noise_block("factor", 0, n * T)
        res[f"calibration + bulk noise (100k releases), {nt} thread(s)"] = median_time(bulk, 1)
    for name, kw in [("fit EP", dict(method="ep", epsilon=math.inf)), ("fit SEP", dict(epsilon=math.inf)),
                     ("fit DP-SEP shuffle", dict(epsilon=5.5, n_epochs=T)),
                     ("fit DP-SEP uniform", dict(epsilon=5.5, n_epochs=T, sampling="uniform"))]:
        res[name] = median_time(lambda: DPStochasticEP(J, component_variance=0.25, bounds=(-5, 5), random_state=0,
                                                       **kw).fit(X),
                        max(1, a.repeats // 2))
    for k, v in res.items():
        print(f"{k:<58}{v:>9.3f} s")
    print(f"numpy twin / compiled loop (private): {res['numpy twin, private (2k steps x 50)'] / res['loop, private (100k steps, noise given)']:.0f}x")


if __name__ == "__main__":
    main()
