"""Issue 41: the non-private fit (``epsilon=inf``) of PCA and factor analysis reads the rows
through products where the private fit's Krylov basis is small against d: the d x d second
moment is never formed, and the answer is the dense fit's to the solvers' tolerance."""
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from dpem_fast import DPPCA, DPFactorAnalysis
from dpem_fast.decomposition import _krylov, _moment_release

K = 3
D = 4 * _krylov.krylov_columns(K)       # the smallest d of the matrix-free path


def _rows(n=150, d=D, seed=3):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(K, d)) * np.linspace(2.0, 1.0, K)[:, None]
    return rng.normal(size=(n, K)) @ W + 0.3 * rng.normal(size=(n, d)) + 1.0


def _forms_no_matrix(monkeypatch):
    def formed(*args, **kwargs):
        raise AssertionError("the d x d second moment was formed")
    monkeypatch.setattr(_moment_release, "second_moment_stats", formed)


def _same_model(free, dense, rtol, mean_tol=1e-13):
    """The same fitted model up to each component's sign (rows of ``components_``): unit
    directions to the iterative solvers' tolerance (residuals below 10⁻⁸ of the top eigenvalue,
    both paths), variances to ``rtol``."""
    signs = np.sign(np.sum(free.components_ * dense.components_, axis=1))
    assert_allclose(free.components_ * signs[:, None], dense.components_, rtol=0, atol=max(rtol, 1e-8))
    assert_allclose(free.noise_variance_, dense.noise_variance_, rtol=rtol)
    assert_allclose(free.mean_, dense.mean_, rtol=mean_tol, atol=mean_tol)
    if hasattr(dense, "explained_variance_"):
        assert_allclose(free.explained_variance_, dense.explained_variance_, rtol=rtol)
        assert_allclose(free.explained_variance_ratio_, dense.explained_variance_ratio_, rtol=rtol)


@pytest.mark.parametrize("kw", [{}, {"data_norm": 40.0}, {"bounds": (-4.0, 6.0)}], ids=["none", "data_norm", "box"])
@pytest.mark.parametrize("model", [DPPCA, DPFactorAnalysis])
def test_epsilon_inf_reads_the_rows_through_products(model, kw, monkeypatch):
    """Without forming the matrix (the kernel that forms it refuses to run): the dense fit's
    model, for float32 rows too; bit for bit across thread counts at a fixed
    random_state (the Krylov and subspace starts come from the key, as the dense path's do)."""
    X = _rows()
    with monkeypatch.context() as mp:
        mp.setattr(model, "_operator_path", False)
        dense = model(K, epsilon=math.inf, random_state=0, **kw).fit(X)
    _forms_no_matrix(monkeypatch)
    fits = [model(K, epsilon=math.inf, n_threads=t, random_state=0, **kw).fit(X) for t in (1, 2)]
    _same_model(fits[0], dense, 1e-9)
    for name in ("components_", "noise_variance_", "mean_"):
        assert np.array_equal(getattr(fits[0], name), getattr(fits[1], name)), name
    _same_model(model(K, epsilon=math.inf, random_state=0, **kw).fit(X.astype(np.float32)), dense, 1e-4, 1e-6)


@pytest.mark.parametrize("model", [DPPCA, DPFactorAnalysis])
def test_the_dense_path_answers_below_the_operators_size(model, monkeypatch):
    _forms_no_matrix(monkeypatch)
    with pytest.raises(AssertionError, match="formed"):
        model(K, epsilon=math.inf).fit(_rows(d=D - 1))


def test_a_public_centre_keeps_the_dense_path(monkeypatch):
    """PCA about a public centre adds a second rank-one term: formed densely."""
    _forms_no_matrix(monkeypatch)
    with pytest.raises(AssertionError, match="formed"):
        DPPCA(K, epsilon=math.inf, center=0.0, data_norm=80.0).fit(_rows())
