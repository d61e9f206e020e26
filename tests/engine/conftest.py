"""Fixtures of the Dask tests of this directory: one real ``dask.distributed.LocalCluster``
(two worker processes, one thread each) per test module, and a guard against the client
materialising a dask array.  Module scope, not session: a live cluster's threads in the
test process would show up in other modules' tracemalloc measurements."""
import numpy as np
import pytest


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=50) as cluster:   # any free port
        with distributed.Client(cluster) as c:
            yield c


class Received(list):
    """Everything that came back from the workers, one entry per task result."""

    def arrays(self):
        """Every ndarray in the results (inside tuples, lists and Statistics)."""
        def walk(obj):
            if isinstance(obj, np.ndarray):
                yield obj
            elif isinstance(obj, (tuple, list)):
                for o in obj:
                    yield from walk(o)
            elif hasattr(obj, "arrays"):
                yield from obj.arrays.values()
        return list(walk(list(self)))


@pytest.fixture
def guarded(monkeypatch):
    """Fail if the client converts a dask array to numpy or computes it, and record
    everything that comes back from the workers."""
    da = pytest.importorskip("dask.array")
    from dpem_fast._engine._sources import _dask

    def refuse(*args, **kwargs):
        raise AssertionError("the client tried to materialise the dask array")

    monkeypatch.setattr(da.Array, "__array__", refuse)
    monkeypatch.setattr(da.Array, "compute", refuse)
    received = Received()
    real = _dask._compute

    def spy(tasks):
        out = real(tasks)
        received.extend(out)
        return out

    monkeypatch.setattr(_dask, "_compute", spy)
    return received
