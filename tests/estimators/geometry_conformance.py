"""The per-feature geometry part of the conformance suite (issue 23, contract 4 and 5).

Every engine estimator inherits these through
:class:`conformance.PrivateEstimatorConformance`; a model whose rows live in a fixed domain
of their own (``_domain_kind = "fixed"``: Bernoulli, Poisson, gradient EM) has no declared
scale to be equivariant in and skips them.  For a ball model (mixture, k-means, factor
analysis) with a declared box:

- **scale equivariance**: fitting ``X * c`` (a positive factor per feature, the box scaled
  the same) with the same seed gives the same model up to ``diag(c)``, to rounding;
- **locations inside the box**: released means / centres lie in the declared box, at small
  n and small epsilon too;
- **per-feature scale**: on a table with one feature 0.03 wide beside one 4,000 wide, the
  narrow feature's fitted spread, loadings and locations are on its own scale.

How each fitted attribute moves under ``x -> c * x`` is read from its name
(:data:`SCALE_TRANSFORMS`); a subclass may extend ``scale_transforms``.
"""
from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

#: attribute name -> how it changes when every row x becomes c * x (c > 0 per feature)
SCALE_TRANSFORMS = {
    "means_": "location", "cluster_centers_": "location", "mean_": "location",
    "covariances_": "covariance", "precisions_": "precision", "precisions_cholesky_": "precision_cholesky",
    "weights_": "invariant", "components_": "loading", "noise_variance_": "variance",
}

#: per-feature factors of the equivariance test (cycled over the features): five decades
FACTORS = np.array([1e-2, 30.0, 1.0, 4e3, 0.5])


def _undo(kind, v, c):
    """The attribute ``v`` of the fit on ``X * c`` mapped back to the units of ``X``."""
    v = np.asarray(v, dtype=np.float64)
    if kind == "location":
        return v / c
    if kind == "covariance":
        return v / np.outer(c, c)
    if kind == "precision":
        return v * np.outer(c, c)
    if kind == "precision_cholesky":        # P = diag(1/c) P_X: rows scale by 1/c
        return v * c[:, None]
    if kind == "loading":                   # W diag(c): columns scale by c
        return v / c
    if kind == "variance":
        return v / (c * c)
    if kind == "inverse_variance":          # diagonal precisions 1 / variance
        return v * c * c
    if kind == "inverse_sd":                # diagonal precision Cholesky factors 1 / sd
        return v * c
    # one value for all features (spherical covariances): needs one factor for all features
    if kind in ("isotropic_variance", "isotropic_precision", "isotropic_inverse_sd"):
        assert np.all(c == c[0]), "an isotropic attribute is equivariant under one common factor only"
        return {"isotropic_variance": v / c[0] ** 2, "isotropic_precision": v * c[0] ** 2,
                "isotropic_inverse_sd": v * c[0]}[kind]
    return v


def _box(X, widen=0.1):
    lo, hi = X.min(axis=0), X.max(axis=0)
    w = hi - lo
    return lo - widen * w, hi + widen * w


class GeometryConformance:
    """Mixin of :class:`conformance.PrivateEstimatorConformance` (hooks: ``make_estimator``,
    ``make_data``, ``fitted_attributes``)."""

    #: extra or overriding entries of :data:`SCALE_TRANSFORMS`
    scale_transforms: dict = {}
    #: per-feature factors of the equivariance test (one value: a model equivariant under a
    #: common factor only, e.g. spherical covariances)
    equivariance_factors = FACTORS

    def domain_columns(self, X):
        """The columns a ball model's declared domain covers (default: all; a mixed table's
        numeric columns).  The geometry tests scale and box these columns only."""
        return np.arange(np.shape(X)[1])

    def _transforms(self):
        table = {**SCALE_TRANSFORMS, **self.scale_transforms}
        return {a: table[a] for a in self.fitted_attributes if a in table}

    def _ball_model_or_skip(self):
        if self.make_estimator()._domain_kind != "ball":
            pytest.skip("the model's domain is fixed: no declared scale")

    def _boxed(self, bounds, **kw):
        return self.make_estimator(bounds=bounds, data_norm=None, **kw)

    # ------------------------------------------------------------------ contract 4
    def test_scale_equivariance(self):
        """Fitting X * c (per-feature c > 0, the declared box scaled the same) with the same
        seed gives the model of X mapped by diag(c): locations c * m, covariances
        diag(c) S diag(c), loadings W diag(c), variances c² psi, to 1e-9 relative."""
        self._ball_model_or_skip()
        X = np.asarray(self.make_data(600, seed=4), dtype=np.float64)
        cols = self.domain_columns(X)
        d = cols.size
        c = np.resize(self.equivariance_factors, d)
        lo, hi = _box(X[:, cols])
        Xc = X.copy()
        Xc[:, cols] *= c
        a = self._boxed((lo, hi), epsilon=1.0, random_state=7).fit(X)
        b = self._boxed((lo * c, hi * c), epsilon=1.0, random_state=7).fit(Xc)
        checked = self._transforms()
        assert checked, "no fitted attribute with a known scale transform"
        for name, kind in checked.items():
            want = np.asarray(getattr(a, name), dtype=np.float64)
            got = _undo(kind, getattr(b, name), c)
            assert_allclose(got, want, rtol=1e-9, atol=1e-12 * max(1.0, float(np.max(np.abs(want)))),
                            err_msg=name)

    # ------------------------------------------------------------------ contract 5
    @pytest.mark.parametrize("n", [40, 400])
    @pytest.mark.parametrize("epsilon", [0.1, 1.0])
    def test_locations_inside_the_declared_box(self, n, epsilon):
        """Released means / centres lie in the declared box, however noisy the release (under
        add/remove: replace-one refuses the hopeless small fits before the charge)."""
        self._ball_model_or_skip()
        X = np.asarray(self.make_data(n, seed=5), dtype=np.float64)
        lo, hi = _box(X[:, self.domain_columns(X)], widen=0.0)
        est = self._boxed((lo, hi), epsilon=epsilon, random_state=11, neighbouring="add_remove").fit(X)
        tol = 1e-12 * (hi - lo)
        for name, kind in self._transforms().items():
            if kind != "location":
                continue
            v = np.asarray(getattr(est, name), dtype=np.float64)
            assert np.all(np.isfinite(v)), name
            assert np.all(v >= lo - tol) and np.all(v <= hi + tol), (name, v, lo, hi)

    def test_each_feature_on_its_own_scale(self):
        """One feature 0.03 wide beside one 4,000 wide, both declared: the narrow feature's
        fitted locations, standard deviations, loadings and noise are within its own width
        (one radius for all features gave them the wide feature's size)."""
        self._ball_model_or_skip()
        X = np.asarray(self.make_data(2000, seed=6), dtype=np.float64)
        cols = self.domain_columns(X)
        d = cols.size
        widths = np.ones(d)
        widths[0], widths[1] = 0.03, 4000.0
        Z = X[:, cols]
        lo0, hi0 = Z.min(axis=0), Z.max(axis=0)
        X[:, cols] = (Z - lo0) / (hi0 - lo0) * widths + np.arange(d)      # feature j in [j, j + width_j]
        lo, hi = _box(X[:, cols])
        est = self._boxed((lo, hi), epsilon=1.0, random_state=13).fit(X)
        box_w = hi - lo
        for name, kind in self._transforms().items():
            v = np.asarray(getattr(est, name), dtype=np.float64)
            if kind == "location":
                spread = np.abs(v - (lo + hi) / 2)
                assert np.all(spread <= box_w / 2 * (1 + 1e-12)), (name, v)
            elif kind == "covariance":
                sd = np.sqrt(np.diagonal(v, axis1=-2, axis2=-1))
                assert np.all(sd <= box_w), (name, sd, box_w)
            elif kind == "variance":
                assert np.all(np.sqrt(v) <= box_w), (name, np.sqrt(v), box_w)
            elif kind == "loading":
                assert np.all(np.abs(v) <= box_w), (name, v, box_w)
