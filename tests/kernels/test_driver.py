"""The kernels' one parallel driver (issue 22): the block plan, the single skeleton, int64 row counts."""
import pathlib
import re

import numpy as np
import pytest

from dpem_fast._dpcore import _contract, _estep, _gradem, _kmeans, _moments, _poisson
from dpem_fast._kernels import gradem

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "dpcore"
#: prange loops that are reductions over finished partials, not passes over blocks of work
REDUCTIONS = {"_contract.pyx": 1, "_lda.pyx": 1}


@pytest.mark.parametrize("n_chunks", [0, 1, 2, 7, 63, 64, 65, 257, 1000, 4099])
@pytest.mark.parametrize("n_blocks", [0, 1, 3, 8, 64, 65, 300])
def test_block_plan_cuts_the_chunks_in_order(n_chunks, n_blocks):
    plan = _contract.block_plan(n_chunks, n_blocks)
    if n_chunks == 0 or n_blocks == 0:
        assert plan == []
        return
    cpb = -(-n_chunks // n_blocks)
    assert len(plan) == -(-n_chunks // cpb) <= n_blocks
    assert plan[0][0] == 0 and plan[-1][1] == n_chunks
    for (a0, a1), (b0, b1) in zip(plan, plan[1:]):
        assert a1 == b0
    assert all(0 < e - f <= cpb for f, e in plan)
    assert all(e - f == cpb for f, e in plan[:-1])


def test_lda_blocks_come_from_the_contract():
    """The LDA E-step's blocks: the generic count over chunks of LDA_DOC_CHUNK documents."""
    c = _contract
    for n in (1, 31, 32, 33, 5000, 10**6):
        chunks = -(-n // c.LDA_DOC_CHUNK)
        for per in (0, 7 * 400, 10**6):
            assert c.lda_block_count(n, per) == min(
                chunks, max(c.SPREAD_BLOCKS, -(-chunks // c.BLOCK_CHUNKS)),
                max(c.MIN_BLOCKS, c.PARTIAL_BUDGET // max(1, per)))


@pytest.mark.skipif(not SRC.is_dir(), reason="needs the source tree")
def test_every_parallel_pass_runs_through_the_driver():
    """One skeleton: only _driver.pxd opens a parallel region or allocates per-thread scratch;
    the other prange loops are the block-order reductions."""
    for path in sorted(SRC.glob("*.p[yx][xd]")):
        text = path.read_text()
        code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
        if path.name == "_driver.pxd":
            assert "parallel(" in code and "prange(" in code
            continue
        assert "parallel(" not in code, path.name
        assert len(re.findall(r"\bprange\(", code)) == REDUCTIONS.get(path.name, 0), path.name


@pytest.mark.parametrize("n", [1, 3000, 70001])
def test_row_counts_are_int64_in_every_kernel(n):
    """Clipped (and left-out) rows are counted in int64 by every kernel; float64 counts are refused."""
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 3)) * 3.0
    dom = np.ascontiguousarray(np.stack([np.full(3, -2.0), np.full(3, 2.0), np.zeros(3), np.full(3, 0.5)]))
    means = rng.standard_normal((2, 3))
    nb = _kmeans.block_count(n, 3, 2)
    parts = [np.empty((nb, 2)), np.empty((nb, 2, 3)), np.empty(nb)]
    for bad in (np.zeros(nb), np.zeros(nb, np.int32)):
        with pytest.raises(ValueError):
            _kmeans.kmeans_stats(X, means, *parts, 2, domain=dom, part_clipped=bad)
    nb2, nb1 = _moments.block_count(n, 3)
    with pytest.raises(ValueError):
        _moments.second_moment(X, np.empty((nb2, 3, 3)), np.empty((nb1, 3)), np.zeros(nb1), 2)
    P = np.tile(np.eye(3), (2, 1, 1))
    nb = _estep.block_count(n, 3, 2)
    with pytest.raises(ValueError):
        _estep.estep_stats(X, means, P, np.zeros(2), np.empty((nb, 2)), np.empty((nb, 2, 3)),
                           np.empty((nb, 2, 3, 3)), np.empty(nb), True, 2, domain=dom, part_clipped=np.zeros(nb))
    m = 6
    nb = _gradem.block_count(n, m)
    args = (X, means, 1.0, 0, 2, 1.0, 1.0, gradem._GLX, gradem._GLW, np.empty((nb, m)), np.empty((nb, m)), np.empty(nb))
    with pytest.raises(ValueError):
        _gradem.gradem_stats(*args, np.zeros(nb), np.zeros(nb), 2)
    nbp = _poisson.block_count(n, 3, 2)
    pparts = (np.empty((nbp, 2)), np.empty((nbp, 2, 3)), np.empty(nbp))
    with pytest.raises(ValueError):
        _poisson.poisson_stats(np.abs(X), np.ones((2, 3)), np.full(2, 0.5), 4.0, *pparts, np.zeros(nbp), 2)
    _poisson.poisson_stats(np.abs(X), np.ones((2, 3)), np.full(2, 0.5), 4.0, *pparts, np.empty(nbp, np.int64), 2)
    clipped, nonfinite = np.empty(nb, np.int64), np.empty(nb, np.int64)
    _gradem.gradem_stats(*args, clipped, nonfinite, 2)
    s = gradem.gradem_stats(X, means, 1.0, symmetric=False, estimator="clipped", scale=1.0, n_threads=2)
    assert s.n_clipped == clipped.sum() and isinstance(s.n_clipped, int)
    assert s["n_nonfinite"].dtype == np.float64 and s["n_nonfinite"][0] == nonfinite.sum() == 0
