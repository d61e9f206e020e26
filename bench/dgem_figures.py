"""DG-EM Section 4 on synthetic data: estimation error of DG-EM, the clipped baseline and
non-private gradient EM on the symmetric two-component Gaussian mixture.

Protocol (Wu 2021, Sec. 4.2; Wang et al. 2020, Sec. 6): y = z beta* + e, z = +-1,
e ~ N(0, I), beta* = (SNR / sqrt d) 1 with SNR = |beta*| / sigma = 2, delta = 1e-5,
T = 20 iterations of step eta = 1, the initial beta_0 = beta* + (|beta*| / 2) u with u
uniform on the sphere (a public start inside the basin, as BWY's theory and both papers
assume; drawn per seed, never from the data).  Error |beta_t - beta*| after each iteration,
mean and standard error over ``--seeds`` seeds (default 20).

Three experiments: (1) error vs t for epsilon in {0.2, 0.5, 1} (n = 10,000, d = 10);
(2) final error vs n in {1,000, 2,000, 5,000, 10,000} (d = 10, epsilon = 0.5);
(3) final error vs d in {2, 5, 10, 20, 50} (n = 10,000, epsilon = 0.5).

The truncation scale s (DG-EM) and the clipping norm C (baseline) are tuned per
configuration over {0.5, 1, 2, 4} on 3 separate tuning seeds by the final error against
beta*: non-private hyper-parameter selection, as in the paper's Figure 1 ("the optimal
value of s ... is"), and the same for both methods.

Methods: "DG-EM" is the paper's update (``bias_correction=False``); "DG-EM+bc" subtracts the
truncation's bias at the released beta (``bias_correction=True``, the estimator's default: the
population fixed point is then beta* instead of a point shrunk towards 0; see
``bench/dgem_bias.py`` for the bias itself); "clipped" is the baseline; "EM" non-private.

Run: python bench/dgem_figures.py [--seeds 20] [--out bench/out]  -> CSV + PNG; prints mean +- sd
and mean +- s.e. over the seeds.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from dpem_fast import DPGradientEM

SNR, T, DELTA = 2.0, 20, 1e-5
GRID = (0.5, 1.0, 2.0, 4.0)
METHODS = {
    "DG-EM": dict(estimator="truncated", noise="discrete_gaussian", bias_correction=False),
    "DG-EM+bc": dict(estimator="truncated", noise="discrete_gaussian", bias_correction=True),
    "clipped": dict(estimator="clipped", noise="gaussian"),
    "EM": dict(),
}


class _Tracing(DPGradientEM):
    """Records beta after every update (post-processing of released values)."""

    def _update(self, noisy, params, ctx):
        p = super()._update(noisy, params, ctx)
        self.trace_.append(p["means"][0].copy())
        return p

    def _exact_update(self, stats, params):
        p = super()._exact_update(stats, params)
        self.trace_.append(p["means"][0].copy())
        return p


def _problem(n, d, seed):
    rng = np.random.default_rng(seed)
    beta = np.full(d, SNR / math.sqrt(d))
    X = rng.choice([-1.0, 1.0], size=n)[:, None] * beta + rng.normal(size=(n, d))
    u = rng.normal(size=d)
    b0 = beta + 0.5 * np.linalg.norm(beta) * u / np.linalg.norm(u)
    return X, beta, b0


def _run(method, eps, n, d, seed, scale):
    X, beta, b0 = _problem(n, d, seed)
    kw = dict(METHODS[method])
    if method == "EM":
        kw["epsilon"] = float("inf")
    else:
        kw.update(epsilon=eps, delta=DELTA, truncation_scale=scale, clip_norm=scale)
    est = _Tracing(max_iter=T, means_init=b0, random_state=seed, n_threads=1, **kw)
    est.trace_ = []
    est.fit(X)
    return [min(np.linalg.norm(b - beta), np.linalg.norm(b + beta)) for b in est.trace_]


def _job(args):
    return args, _run(*args)


def _tune(pool, method, eps, n, d):
    jobs = [(method, eps, n, d, 10_000 + s, g) for g in GRID for s in range(3)]
    final = {}
    for (m, e, nn, dd, s, g), errs in pool.map(_job, jobs):
        final.setdefault(g, []).append(errs[-1])
    return min(GRID, key=lambda g: np.mean(final[g]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    configs = {("eps", e): (e, 10_000, 10) for e in (0.2, 0.5, 1.0)}
    configs.update({("n", n): (0.5, n, 10) for n in (1000, 2000, 5000, 10_000)})
    configs.update({("d", d): (0.5, 10_000, d) for d in (2, 5, 10, 20, 50)})
    rows, t0 = [], time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        tuned = {}
        for key, (e, n, d) in configs.items():
            for method in ("DG-EM", "DG-EM+bc", "clipped"):
                cfg = (method, e, n, d)
                if cfg not in tuned:
                    tuned[cfg] = _tune(pool, method, e, n, d)
        jobs = []
        for key, (e, n, d) in configs.items():
            for method in METHODS:
                scale = tuned.get((method, e, n, d), float("nan"))
                jobs += [(method, e, n, d, s, scale) for s in range(args.seeds)]
        seen = set()
        for (method, e, n, d, s, scale), errs in pool.map(_job, jobs):
            if (method, e, n, d, s) in seen:
                continue
            seen.add((method, e, n, d, s))
            for t, err in enumerate(errs, 1):
                rows.append(dict(method=method, epsilon=e, n=n, d=d, seed=s, scale=scale, t=t, error=err))
    wall = time.perf_counter() - t0
    path = os.path.join(args.out, "dgem_errors.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows in {wall:.0f} s (2 worker processes, 1 thread each) -> {path}")
    _summarise_and_plot(rows, configs, args.out)


def _stats(rows, method, e, n, d, t=T):
    v = np.array([r["error"] for r in rows if (r["method"], r["epsilon"], r["n"], r["d"], r["t"]) == (method, e, n, d, t)])
    return v.mean(), v.std(ddof=1) / math.sqrt(v.size), v.std(ddof=1)


def _summarise_and_plot(rows, configs, out):
    nseed = len({r["seed"] for r in rows})
    print(f"final error |beta_T - beta*| (T = {T}), mean +- sd over {nseed} seeds; scale = tuned s / C")
    print(f"{'config':>12} " + " ".join(f"{m:>24}" for m in METHODS))
    for key, (e, n, d) in configs.items():
        cells = []
        for m in METHODS:
            mean, se, sd = _stats(rows, m, e, n, d)
            sc = next(r["scale"] for r in rows if (r["method"], r["epsilon"], r["n"], r["d"]) == (m, e, n, d))
            cells.append(f"{mean:8.4f} +- {sd:6.4f}" + ("" if m == "EM" else f" ({sc:g})"))
        print(f"{key[0]}={key[1]:<10} " + " ".join(f"{c:>24}" for c in cells))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG")
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ts = np.arange(1, T + 1)
    for e, ls in zip((0.2, 0.5, 1.0), (":", "--", "-")):
        for m, c in zip(METHODS, ("C0", "C2", "C1", "k")):
            if m == "EM" and e != 1.0:
                continue
            st = [_stats(rows, m, e, 10_000, 10, t) for t in ts]
            axes[0].errorbar(ts, [s[0] for s in st], yerr=[s[1] for s in st], color=c, ls=ls, capsize=2,
                             label=m if m == "EM" else f"{m} eps={e}")
    axes[0].set(xlabel="iteration t", ylabel="|beta_t - beta*|", yscale="log", title="n=10,000, d=10")
    for ax, (name, vals, fix) in zip(axes[1:], (("n", (1000, 2000, 5000, 10_000), "d=10, eps=0.5"),
                                                ("d", (2, 5, 10, 20, 50), "n=10,000, eps=0.5"))):
        for m, c in zip(METHODS, ("C0", "C2", "C1", "k")):
            st = [_stats(rows, m, *configs[(name, v)]) for v in vals]
            ax.errorbar(vals, [s[0] for s in st], yerr=[s[1] for s in st], color=c, marker="o", capsize=2, label=m)
        ax.set(xlabel=name, ylabel=f"|beta_T - beta*|, T={T}", xscale="log", yscale="log", title=fix)
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    png = os.path.join(out, "dgem_errors.png")
    fig.savefig(png, dpi=110)
    print("->", png)


if __name__ == "__main__":
    main()
