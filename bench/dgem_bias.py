"""Why the clipped baseline beat DG-EM: the bias of the truncated (psi) gradient estimator,
what it does to the fixed point, the correction, and DG-EM against its trivial model.

Model and protocol as ``bench/dgem_figures.py`` (Wu 2021, Sec. 4): y = z beta* + e, z = +-1,
e ~ N(0, I), beta* = (2 / sqrt d) 1 (SNR 2), d = 10.

(1) Bias of the estimate of the mean gradient at beta* (where the true mean gradient is 0):
    h(beta*) = E[s E psi(g (1 + eps)/s)] by quadrature (``symmetric_psi_bias``), for s in
    {0.25, ..., 8} and beta_m in {1, 4, 100}; and, for beta_m = 1, the Monte Carlo mean and sd
    of the estimate (1/n) sum_i s E psi(g_i/s) over R data sets of n rows, n in {10^3, 10^4,
    10^5}: the bias does not shrink with n, the sampling sd does (as 1/sqrt n).
(2) What it does to the iterate: noise-free DG-EM (T = 40, started at beta*) on one sample of
    n = 10^5 rows, |beta_T - beta*| without and with the correction, next to gradient EM.
(3) The trivial model: held-out log-likelihood per row of DG-EM (defaults: random
    data-independent start, s = sigma/2, bias correction) against N(0, I) (beta = 0, the model's
    one-component fit, free), at small n and epsilon, 10 seeds; with and without the rule
    that returns beta = 0 (and warns) where one step's noise is at least the largest signal.

(4) Which s once the bias is corrected: fixed s in {0.25, 0.5, 1, 2}, no tuning, 10 seeds.

Run: python bench/dgem_bias.py [--out bench/out] [--trivial-only | --scale-only]  -> tables on stdout, dgem_bias.png.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from dpem_fast import DPGradientEM
from dpem_fast._kernels.gradem import gradem_stats, symmetric_psi_bias

D, SNR = 10, 2.0
BETA = np.full(D, SNR / math.sqrt(D))
SCALES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def _sample(n, rng, beta=BETA):
    return rng.choice([-1.0, 1.0], size=n)[:, None] * beta + rng.normal(size=(n, beta.size))


def bias_table():
    print("(1) bias of the truncated mean-gradient estimate at beta* (true mean gradient 0), d = 10, |beta*| = 2")
    print("    |h(beta*)| (quadrature); h is along -beta* (shrinks beta):")
    print(f"{'s':>6} " + " ".join(f"{'beta_m=' + format(bm, 'g'):>12}" for bm in (1.0, 4.0, 100.0)))
    tab = {}
    for s in SCALES:
        row = []
        for bm in (1.0, 4.0, 100.0):
            h = symmetric_psi_bias(BETA, 1.0, s, bm)
            tab[(s, bm)] = np.linalg.norm(h)
            row.append(f"{tab[(s, bm)]:12.5f}")
        print(f"{s:6g} " + " ".join(row))
    print("\n    beta_m = 1: Monte Carlo estimate (1/n) sum s E psi(g_i/s) at beta*, R data sets: "
          "|mean| and sd of one coordinate, vs |h|")
    rng = np.random.default_rng(12345)
    mc = {}
    print(f"{'s':>6} {'n':>7} {'R':>4} {'|mean estimate|':>16} {'|h| (quad)':>11} {'sd of coord 1':>14}")
    for s in (0.5, 1.0, 2.0, 4.0):
        h = symmetric_psi_bias(BETA, 1.0, s, 1.0)
        for n, R in ((1000, 200), (10_000, 40), (100_000, 8)):
            est = np.array([gradem_stats(_sample(n, rng), BETA[None], 1.0, symmetric=True, estimator="truncated",
                                         scale=s, beta_m=1.0, n_threads=1)["grad"] / n for _ in range(R)])
            mc[(s, n)] = (np.linalg.norm(est.mean(0)), est[:, 0].std(ddof=1))
            print(f"{s:6g} {n:7d} {R:4d} {mc[(s, n)][0]:16.5f} {np.linalg.norm(h):11.5f} {mc[(s, n)][1]:14.5f}")
    return tab, mc


class _NoiseFree(DPGradientEM):
    """DG-EM's update on the exact (noise-free) truncated statistic: the bias alone."""

    def _exact_update(self, stats, params):
        from dpem_fast._engine import Context
        n = float(stats["count"][0])
        return self._update({"grad": stats["grad"]}, params, Context(0, {}, n))


def _noise_free_fit(X, s, bc):
    from functools import partial
    from dpem_fast.mixture._dg_em import _gradem_statistics
    est = _NoiseFree(epsilon=float("inf"), max_iter=40, means_init=BETA, truncation_scale=s, bias_correction=bc)

    def _stats(X, params, domain, n_threads, **kw):
        # the truncated statistic in the exact path (which otherwise asks the kernel for "raw")
        return _gradem_statistics(X, dict(params, private=True), domain, n_threads, **kw)
    est._statistics_task = lambda: partial(_stats, component_variance=1.0, symmetric=True, estimator="truncated",
                                           scale=s, multiplier_precision=1.0)
    return est.fit(X).beta_


def fixed_points():
    print("\n(2) noise-free DG-EM, T = 40 from beta*, one sample of n = 100,000, beta_m = 1: |beta_T - beta*|")
    X = _sample(100_000, np.random.default_rng(7))
    em = DPGradientEM(epsilon=float("inf"), max_iter=40, means_init=BETA).fit(X).beta_
    print(f"    gradient EM (sampling error only): {np.linalg.norm(em - BETA):.4f}")
    out = {}
    print(f"{'s':>6} {'uncorrected':>12} {'corrected':>10}")
    for s in (0.5, 1.0, 2.0, 4.0):
        out[s] = tuple(np.linalg.norm(_noise_free_fit(X, s, bc) - BETA) for bc in (False, True))
        print(f"{s:6g} {out[s][0]:12.4f} {out[s][1]:10.4f}")
    return out, np.linalg.norm(em - BETA)


def _loglik0(X):
    return float(np.mean(-0.5 * np.sum(X * X, 1) - 0.5 * X.shape[1] * math.log(2 * math.pi)))


class _NoRule(DPGradientEM):
    """DG-EM without the trivial-model rule (the code before it): what the rule replaces."""

    def _trivial_if_noise_driven(self, means, tau):
        return means


def _kappa(est, n):
    """One step's noise norm over the largest signal (public: release noise scale, n, b)."""
    tau = est.privacy_.releases["grad"].noise_scale / n
    return tau * math.sqrt(D) / est._row_bound(D)


def trivial():
    print("\n(3) held-out log-likelihood per row (20,000 test rows) minus the trivial model N(0, I)'s, "
          "DG-EM defaults (random public start, s = sigma/2, bias correction); 10 seeds, mean +- sd; "
          "'no rule': the same fits without the kappa >= 1 rule; kappa = one step's noise / largest signal")
    print(f"{'n':>6} {'eps':>5} {'kappa':>6} {'DG-EM (default)':>18} {'warned':>6} {'no rule':>20} "
          f"{'|beta_T| no rule':>17}")
    Xt = _sample(20_000, np.random.default_rng(999))
    l0 = _loglik0(Xt)
    res = {}
    import warnings
    for n in (50, 100, 300, 1000):
        for eps in (0.3, 1.0):
            diffs, diffs_nr, norms, warned = [], [], [], 0
            for seed in range(10):
                X = _sample(n, np.random.default_rng(seed))
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    est = DPGradientEM(epsilon=eps, random_state=seed, n_threads=1).fit(X)
                warned += any(issubclass(x.category, UserWarning) for x in w)
                nr = _NoRule(epsilon=eps, random_state=seed, n_threads=1).fit(X)
                diffs.append(est.score(Xt) - l0)
                diffs_nr.append(nr.score(Xt) - l0)
                norms.append(np.linalg.norm(nr.beta_))
            res[(n, eps)] = np.array(diffs)
            print(f"{n:6d} {eps:5g} {_kappa(est, n):6.2f} {np.mean(diffs):9.3f} +- {np.std(diffs, ddof=1):6.3f} "
                  f"{warned:6d} {np.mean(diffs_nr):11.3f} +- {np.std(diffs_nr, ddof=1):6.3f} "
                  f"{np.mean(norms):8.2f} +- {np.std(norms, ddof=1):5.2f}")
    return res


def default_scale():
    """(4) Which s once the bias is corrected: fixed s (no tuning), the Sec. 4 protocol."""
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from dgem_figures import _problem
    print("\n(4) DG-EM + bias correction at fixed s (sigma = 1; no tuning), Sec. 4 protocol "
          "(public start in the basin, T = 20), 10 seeds: final |beta_T - beta*|, mean +- sd")
    scales = (0.25, 0.5, 1.0, 2.0)
    print(f"{'config':>22} " + " ".join(f"{'s=' + format(s, 'g'):>16}" for s in scales))
    for eps, n, d in ((0.2, 10_000, 10), (0.5, 10_000, 10), (1.0, 10_000, 10), (0.5, 1000, 10), (0.5, 10_000, 50)):
        cells = []
        for s in scales:
            errs = []
            for seed in range(10):
                X, beta, b0 = _problem(n, d, seed)
                b = DPGradientEM(epsilon=eps, max_iter=20, means_init=b0, truncation_scale=s, random_state=seed,
                                 n_threads=1).fit(X).beta_
                errs.append(min(np.linalg.norm(b - beta), np.linalg.norm(b + beta)))
            cells.append(f"{np.mean(errs):7.4f} +- {np.std(errs, ddof=1):6.4f}")
        print(f"{'eps=%g n=%d d=%d' % (eps, n, d):>22} " + " ".join(f"{c:>16}" for c in cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    ap.add_argument("--trivial-only", action="store_true", help="only part (3)")
    ap.add_argument("--scale-only", action="store_true", help="only part (4)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    if args.trivial_only or args.scale_only:
        trivial() if args.trivial_only else default_scale()
        return
    tab, mc = bias_table()
    fp, em_err = fixed_points()
    trivial()
    default_scale()
    print(f"\n{time.perf_counter() - t0:.0f} s, 1 thread")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG")
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for bm, c in zip((1.0, 4.0, 100.0), ("C0", "C1", "C2")):
        axes[0].plot(SCALES, [tab[(s, bm)] for s in SCALES], "o-", color=c, label=f"|bias| beta_m={bm:g}")
    for n, ls in zip((1000, 10_000, 100_000), (":", "--", "-.")):
        ss = (0.5, 1.0, 2.0, 4.0)
        axes[0].plot(ss, [mc[(s, n)][1] * math.sqrt(D) for s in ss], ls=ls, color="k",
                     label=f"sampling sd x sqrt(d), n={n}")
    axes[0].set(xscale="log", yscale="log", xlabel="truncation scale s", ylabel="|E estimate - E g| at beta*",
                title="bias of the psi estimate vs sampling error")
    ss = sorted(fp)
    axes[1].plot(ss, [fp[s][0] for s in ss], "o-", label="DG-EM (paper)")
    axes[1].plot(ss, [fp[s][1] for s in ss], "o-", label="DG-EM + bias correction")
    axes[1].axhline(em_err, color="k", ls="--", label="gradient EM")
    axes[1].set(xscale="log", yscale="log", xlabel="truncation scale s", ylabel="|beta_T - beta*|, no noise",
                title="noise-free iterate, n=100,000")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    png = os.path.join(args.out, "dgem_bias.png")
    fig.savefig(png, dpi=100)
    print("->", png)


if __name__ == "__main__":
    main()
