"""DPLatentDirichletAllocation on a dask array, lost workers and lost chunk results, DP-SEP's
refusal.

The documents are generated chunk by chunk on the workers of the module's LocalCluster
(``conftest.py``: two worker processes, one thread each); the in-memory reference fit gets
the same rows computed once.
"""
import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from dpem_fast import DPLatentDirichletAllocation, DPStochasticEP   # noqa: E402
from dpem_fast._engine._sources import _dask                                  # noqa: E402
from dpem_fast._engine._sources._dask import DaskRows                         # noqa: E402
from dpem_fast._rng import derive_key, make_key                      # noqa: E402

N_DOCS, V, K, CHUNK = 560, 50, 4, 130             # five row chunks, the last one short (40)
VOCAB = [f"w{i}" for i in range(V)]
PARAMS = dict(n_components=K, noise_multiplier=1.0, batch_size=40, max_doc_length=30, clip_fraction=0.5,
              n_epochs=1, vocabulary=VOCAB, random_state=5, total_samples=N_DOCS)


def lda(**kw):
    return DPLatentDirichletAllocation(**{**PARAMS, **kw})


def lazy_corpus(die=None):
    """Documents of a 4-topic LDA generated on the workers, chunk by chunk (the client never
    holds a row).  ``die = (folder, k)``: the k-th chunk computation, counted over all worker
    processes, kills its worker process (once)."""
    def chunk(block_info=None):
        if die is not None:
            folder, k = die
            fd = os.open(os.path.join(folder, "calls"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, b".")
            os.close(fd)
            if os.path.getsize(os.path.join(folder, "calls")) >= k:
                try:
                    os.close(os.open(os.path.join(folder, "died"), os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    pass
                else:
                    os._exit(1)
        (r0, r1), _ = block_info[None]["array-location"]
        topics = np.random.default_rng(0).dirichlet(np.full(V, 0.05), K)
        rng = np.random.default_rng([1, r0])
        theta = rng.dirichlet(np.full(K, 0.3), r1 - r0)
        p = theta @ topics
        return np.array([rng.multinomial(n, pd / pd.sum()) for n, pd in
                         zip(rng.poisson(40, r1 - r0) + 1, p)], dtype=np.float64)

    rows = (CHUNK,) * (N_DOCS // CHUNK) + (N_DOCS % CHUNK,)
    return da.map_blocks(chunk, chunks=(rows, (V,)), dtype=np.float64)


@pytest.fixture(scope="module")
def corpus(client):
    X = lazy_corpus()
    return X, X.compute()                       # the in-memory reference, computed once


@pytest.fixture(scope="module")
def reference(corpus):
    """In-memory fits: private and exact."""
    _, X = corpus
    return {"private": lda().fit(X), "exact": lda(noise_multiplier=None, epsilon=np.inf).fit(X)}


def assert_same_fit(model, ref):
    np.testing.assert_allclose(model.components_, ref.components_, rtol=1e-10, atol=0)
    np.testing.assert_allclose(model.exp_dirichlet_component_, ref.exp_dirichlet_component_, rtol=1e-10, atol=0)
    assert model.diagnostics_ == ref.diagnostics_
    assert model.n_batch_iter_ == ref.n_batch_iter_ and model.n_features_in_ == V


@pytest.mark.parametrize("mode", ["private", "exact"])
def test_lda_dask_fit_equals_in_memory_fit_without_gathering(corpus, reference, guarded, mode):
    X_dask, _ = corpus
    ref = reference[mode]
    model = (lda() if mode == "private" else lda(noise_multiplier=None, epsilon=np.inf)).fit(X_dask)
    assert_same_fit(model, ref)
    # the privacy record of the dask fit is the in-memory one (same plan, same events)
    assert model.privacy_ == ref.privacy_
    if mode == "private":
        assert model.privacy_ is not None
        # the token cap and the per-document clip ran on the workers and did bite
        assert model.diagnostics_["n_capped_documents"] > 0 and sum(model.diagnostics_["n_clipped"]) > 0
    # only per-chunk statistics came back: K x V sums, the clipped word-count sums (V,) of the
    # unigram release (issue 23) and counts, never rows of a chunk
    shapes = {a.shape for a in guarded.arrays()}
    assert (K, V) in shapes and (V,) in shapes and shapes <= {(K, V), (V,), (2,)}
    # nothing of the data is kept on the model
    for value in vars(model).values():
        assert not isinstance(value, (da.Array, DaskRows))
        assert not (isinstance(value, np.ndarray) and value.shape[:1] == (N_DOCS,))


def test_lda_workers_get_no_key_and_the_partition_does_not_matter(corpus, reference, guarded, monkeypatch):
    """The tasks carry the token cap's sub-key only (never the fit's key, from which the
    noise streams derive); re-chunked rows, split columns and unknown chunk sizes fit the
    same model."""
    X_dask, _ = corpus
    sent = []
    real = DaskRows.map_chunks

    def spy(self, fn, args):
        sent.extend(a for a in args if a is not None)
        return real(self, fn, args)

    monkeypatch.setattr(DaskRows, "map_chunks", spy)
    lda().fit(X_dask)
    key = make_key(PARAMS["random_state"])
    cfgs = [a[-1] for a in sent]
    assert cfgs and all(np.array_equal(c[0], derive_key(key, "lda", "cap")) for c in cfgs)
    flat = [x for a in sent for x in (*a[:-1], *a[-1]) if isinstance(x, np.ndarray)]
    assert not any(x.shape == key.shape and np.array_equal(x, key) for x in flat)
    # the documents a task is asked for: disjoint, in its own chunk, together the minibatch
    assert all(a[0].min() >= 0 and a[0].max() < CHUNK for a in sent)
    monkeypatch.undo()
    ref = reference["private"]
    for Xd in (X_dask.rechunk((97, 20)), X_dask[X_dask[:, 0] >= 0]):    # the second: row chunks unknown
        assert_same_fit(lda().fit(Xd), ref)


def test_lda_dask_chunks_are_validated_on_the_workers(corpus, guarded):
    X_dask, _ = corpus

    def poison(value):
        def f(block, block_info=None):
            if block_info[0]["chunk-location"][0] == 3:
                block = block.copy()
                block[7, 2] = value
            return block
        return X_dask.map_blocks(f, dtype=X_dask.dtype)

    for value, match in ((-1.0, "non-negative"), (0.5, "integers"), (np.nan, "NaN"), (2.0 ** 40, "exceed")):
        with pytest.raises(ValueError, match=match):
            lda().fit(poison(value))
    with pytest.raises(ValueError, match="2-D"):
        lda().fit(X_dask[:, 0])
    with pytest.raises(ValueError, match="exceeds total_samples"):
        lda(batch_size=N_DOCS + 1).fit(X_dask)
    with pytest.raises(ValueError, match="vocabulary has 3 terms"):
        lda(vocabulary=["a", "b", "c"]).fit(X_dask)


def test_partial_fit_and_dp_sep_refuse_a_dask_array(corpus, guarded):
    X_dask, _ = corpus
    with pytest.raises(TypeError, match="partial_fit takes one in-memory minibatch"):
        lda().partial_fit(X_dask)
    with pytest.raises(TypeError, match="sequential over the rows"):
        DPStochasticEP(n_components=2, epsilon=1.0).fit(X_dask[:, :2])


@pytest.mark.parametrize("fault", ["lost", "shape", "count"])
def test_a_lost_or_malformed_chunk_result_fails_the_fit(corpus, monkeypatch, fault):
    """The client checks one result per task, each with the K x V shape and the number of
    documents it asked for; a missing or malformed one makes the fit raise."""
    X_dask, _ = corpus
    real = _dask._compute

    def tamper(tasks):
        out = list(real(tasks))
        if out and isinstance(out[0], tuple) and len(out[0]) == 3:       # a minibatch pass
            if fault == "lost":
                out.pop()
            elif fault == "shape":
                out[0] = (out[0][0], out[0][1][:, :-1], out[0][2])
            else:
                out[0] = (out[0][0] - 1, out[0][1], out[0][2])
        return tuple(out)

    monkeypatch.setattr(_dask, "_compute", tamper)
    match = {"lost": "returned \\d+ chunk results for \\d+ chunks", "shape": "expected",
             "count": "expected"}[fault]
    model = lda()
    with pytest.raises(RuntimeError, match=match):
        model.fit(X_dask)
    assert not hasattr(model, "components_")


def test_a_worker_killed_mid_fit_is_retried_and_the_fit_is_unchanged(client, reference, tmp_path):
    """A worker process dies in the first minibatch pass (after the validation and count
    passes); dask reruns its task on a live worker, and the model is the in-memory one."""
    model = lda().fit(lazy_corpus(die=(str(tmp_path), 2 * 5 + 2)))
    assert (tmp_path / "died").exists()
    assert_same_fit(model, reference["private"])
    assert model.privacy_ == reference["private"].privacy_


def test_a_worker_killed_without_retries_fails_the_fit_loudly(client, tmp_path, monkeypatch):
    monkeypatch.setattr(client.cluster.scheduler, "allowed_failures", 0)
    model = lda()
    with pytest.raises(distributed.KilledWorker):
        model.fit(lazy_corpus(die=(str(tmp_path), 2 * 5 + 2)))
    assert (tmp_path / "died").exists()
    assert not hasattr(model, "components_")
