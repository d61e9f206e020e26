"""Fits on a dask array: statistics per chunk on worker processes, noise once on the client.

The ``client`` and ``guarded`` fixtures are in ``conftest.py`` (one real
``dask.distributed.LocalCluster``, two worker processes with one thread each, for the
module).  Skipped when dask.distributed is not installed (``pip install dpem_fast[dask]``).
"""
import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from dpem_fast._engine._dask import DaskRows            # noqa: E402
from dpem_fast.cluster import DPKMeans                   # noqa: E402
from dpem_fast.decomposition import DPFactorAnalysis     # noqa: E402
from dpem_fast.mixture import DPBernoulliMixture         # noqa: E402
from dpem_fast.mixture import DPGaussianMixture          # noqa: E402

N, D, CHUNK = 3000, 3, 700                               # five row chunks, the last one short


def lazy_data(seed=0):
    """A dask array generated on the workers (no chunk exists on the client), and its rows."""
    def chunk(block_info=None):
        (r0, r1), _ = block_info[None]["array-location"]
        rng = np.random.default_rng([seed, r0])
        centres = np.array([[2.0, 0.0, -1.0], [-2.0, 1.0, 1.0]])
        return centres[rng.integers(0, 2, r1 - r0)] + 0.5 * rng.standard_normal((r1 - r0, D))

    X = da.map_blocks(chunk, chunks=((CHUNK,) * (N // CHUNK) + (N % CHUNK,), (D,)), dtype=np.float64)
    return X


@pytest.fixture(scope="module")
def data(client):
    X = lazy_data()
    return X, X.compute()                                 # the in-memory reference, computed once


MODELS = [
    pytest.param(lambda: DPGaussianMixture(n_components=2, epsilon=1.0, delta=1e-5, max_iter=4,
                                           random_state=3), "means_", id="gmm-private-domain-estimate"),
    pytest.param(lambda: DPGaussianMixture(n_components=2, epsilon=float("inf"), max_iter=4,
                                           random_state=3), "means_", id="gmm-exact"),
    pytest.param(lambda: DPKMeans(n_clusters=2, epsilon=1.0, delta=1e-5, max_iter=4, data_norm=5.0,
                                  random_state=3), "cluster_centers_", id="kmeans-declared"),
    # the model's row transform (binarisation) runs per chunk on the workers
    pytest.param(lambda: DPBernoulliMixture(n_components=2, epsilon=1.0, max_iter=3, binarize=0.0,
                                            noise="discrete_gaussian", random_state=3), "means_",
                 id="bernoulli-binarize-discrete"),
    pytest.param(lambda: DPFactorAnalysis(n_components=1, epsilon=1.0, data_norm=5.0, max_iter=50,
                                          random_state=3), "components_", id="fa-declared"),
]


@pytest.mark.parametrize("make, attr", MODELS)
def test_dask_fit_equals_in_memory_fit_without_gathering(data, guarded, make, attr):
    X_dask, X = data
    ref = make().fit(X)
    model = make().fit(X_dask)
    np.testing.assert_allclose(getattr(model, attr), getattr(ref, attr), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.diagnostics_["train_loglik_per_row"],
                               ref.diagnostics_["train_loglik_per_row"], rtol=1e-10)
    if ref.privacy_ is not None:
        assert model.privacy_.epsilon_spent == ref.privacy_.epsilon_spent
        assert model.privacy_.data_domain["source"] == ref.privacy_.data_domain["source"]
        assert {k: r.noise_scale for k, r in model.privacy_.releases.items()} == \
               {k: r.noise_scale for k, r in ref.privacy_.releases.items()}
    # only per-chunk statistics came back (model-sized), never rows of a chunk
    shapes = {a.shape for a in guarded.arrays()}
    assert shapes and not shapes & {(CHUNK, D), (N % CHUNK, D), (N, D)}
    assert not any(isinstance(r, da.Array) for r in guarded)
    # nothing of the data (nor the dask array, nor its rows) is kept on the model
    for value in vars(model).values():
        assert not isinstance(value, (da.Array, DaskRows))
        assert not (isinstance(value, np.ndarray) and value.shape[:1] == (N,))


def test_noise_is_drawn_on_the_client(data, guarded):
    """Same key, different seeds: the dask fit follows the client's random_state."""
    X_dask, X = data
    a = DPKMeans(n_clusters=2, epsilon=1.0, max_iter=3, data_norm=5.0, random_state=1).fit(X_dask)
    b = DPKMeans(n_clusters=2, epsilon=1.0, max_iter=3, data_norm=5.0, random_state=2).fit(X_dask)
    c = DPKMeans(n_clusters=2, epsilon=1.0, max_iter=3, data_norm=5.0, random_state=1).fit(X_dask)
    assert not np.allclose(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.cluster_centers_, c.cluster_centers_)


def test_a_failing_chunk_fails_the_fit(data, client):
    X_dask, _ = data

    def break_third(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise RuntimeError("chunk 2 could not be read")
        return block

    broken = X_dask.map_blocks(break_third, dtype=X_dask.dtype)
    with pytest.raises(RuntimeError, match="chunk 2 could not be read"):
        DPGaussianMixture(n_components=2, max_iter=2, data_norm=5.0, random_state=0).fit(broken)


def test_validation_runs_per_chunk_on_the_workers(data, guarded):
    X_dask, _ = data

    def poison(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 3:
            block = block.copy()
            block[5, 1] = np.nan
        return block

    with pytest.raises(ValueError, match="NaN"):
        DPGaussianMixture(n_components=2, max_iter=2, data_norm=5.0).fit(X_dask.map_blocks(poison, dtype=X_dask.dtype))
    with pytest.raises(ValueError, match="2-D"):
        DPGaussianMixture(n_components=2).fit(X_dask[:, 0])
    with pytest.raises(ValueError, match="0 sample"):
        DPGaussianMixture(n_components=2, data_norm=5.0).fit(X_dask[:0])
    with pytest.raises(ValueError, match="complex"):
        DPGaussianMixture(n_components=2, data_norm=5.0).fit(X_dask.astype(np.complex128))


def test_columns_in_several_chunks_and_unknown_row_chunks(data, guarded):
    X_dask, X = data
    ref = DPKMeans(n_clusters=2, max_iter=3, data_norm=5.0, random_state=4).fit(X)
    split = X_dask.rechunk((500, 2))
    unknown = X_dask[X_dask[:, 0] > -np.inf]            # row chunk sizes unknown (nan) to the client
    for Xd in (split, unknown):
        model = DPKMeans(n_clusters=2, max_iter=3, data_norm=5.0, random_state=4).fit(Xd)
        np.testing.assert_allclose(model.cluster_centers_, ref.cluster_centers_, rtol=1e-10)


def test_core_does_not_import_dask():
    import subprocess
    import sys

    code = ("import sys, numpy as np; from dpem_fast.mixture import DPGaussianMixture; "
            "DPGaussianMixture(n_components=2, max_iter=1, data_norm=5.0).fit(np.zeros((20, 2))); "
            "assert 'dask' not in sys.modules, 'dask imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
