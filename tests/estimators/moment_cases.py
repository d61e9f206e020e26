"""Conformance cases shared by the estimators built on one release of the second moments
(:class:`~dpem_fast.DPFactorAnalysis`, :class:`~dpem_fast.DPPCA`): the rows that attain the
replace-one sensitivity of ``Σ y yᵀ`` and the outlier data."""
from __future__ import annotations

import math

import numpy as np

from dpem_fast._kernels.moments import SECOND, SUM

#: the warning filter of the suite's undeclared fits: a private box from few rows may not cover
#: the data (its released outside count says so); these tests check privacy plumbing, not coverage
UNCOVERED = "ignore:the privately estimated data domain may not cover the data:UserWarning"


class SecondMomentCases:
    """Mixed into a :class:`~conformance.PrivateEstimatorConformance` subclass (first base)."""

    def random_parameters(self, est, rng, d):
        # a fixed key: from 257 features the models draw a start basis from it
        return est._initial_parameters(type("S", (), {"n_features": d})(), None, np.zeros(8, dtype=np.uint32), True)

    def random_row(self, est, rng, d):
        v = rng.normal(size=d)
        return v / np.linalg.norm(v) * rng.uniform(0.0, 12.0)

    def check_statistics_bounded(self, stats, n_rows):
        """``Σ y yᵀ`` of unit-ball rows: trace at most n, positive semi-definite; the sum (where
        the model releases it) of norm at most n."""
        S = stats[SECOND]
        if S.dtype == object:                   # held as its rows (the matrix-free path)
            S = S.item().dense()
        assert np.trace(S) <= n_rows * (1 + 1e-12)
        if SUM in stats:
            assert np.linalg.norm(stats[SUM]) <= n_rows * (1 + 1e-12)
        assert np.linalg.eigvalsh(S).min() >= -1e-9 * n_rows

    def perturb_row(self, est, rng, x):
        return x + rng.normal(scale=0.3, size=x.shape)

    def adversarial_cases(self, est, rng, d):
        R = 8.0
        params = self.random_parameters(est, rng, d)
        e = np.eye(d) * R
        cases = [(params, e[0], e[1]), (params, e[0], -e[0])]
        for v in np.linspace(0.0, 1.0, 41):          # x = (c, s), x' = (-s, -c): v = 2cs
            th = 0.5 * math.asin(v)
            x = np.zeros(d)
            xp = np.zeros(d)
            x[:2] = R * math.cos(th), R * math.sin(th)
            xp[:2] = -R * math.sin(th), -R * math.cos(th)
            cases.append((params, x, xp))
        return cases

    def outlier_data(self, n, seed=0):
        X = self.make_data(n, seed)
        X[::50] *= 100.0
        return X
