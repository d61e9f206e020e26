"""The compiled stream core equals its plain-Python twin bit for bit."""
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _rng, _symnoise
from dpem_fast._reference import rng as ref
from dpem_fast._rng import make_key

KEY = make_key(2026)
N = ref.BLOCK + 300  # two blocks, the second one partial


def test_reference_block_function_rfc8439():
    st = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574,
          *np.frombuffer(bytes(range(32)), "<u4").tolist(),
          1, 0x09000000, 0x4A000000, 0]
    out = ref.chacha20_block(st)
    assert np.asarray(out, dtype="<u4").tobytes().hex().startswith("10f1e7e4d13b5915500fdd1fa32071c4")


def test_keystream_equals_reference():
    words = np.zeros(300, np.uint32)
    _rng.keystream(KEY, 77, words)
    s = ref.Stream(KEY, 77)
    assert words.tolist() == [s.next_u32() for _ in range(300)]


@pytest.mark.parametrize("stream0", [0, 2**40 + 3])
def test_uniform_equals_reference(stream0):
    out = np.empty(N)
    _rng.fill_uniform(KEY, stream0, out, 2)
    assert out.tolist() == ref.uniform(KEY, N, stream0)


def test_normal_equals_reference():
    out = np.empty(N)
    _rng.fill_normal(KEY, 5, 2.5, out, 2)
    assert_array_equal(out, ref.standard_normal(KEY, N, 2.5, stream0=5))


def test_normal_tail_and_wedge_paths_equal_reference():
    # enough draws that the tail (i == 0) and wedge branches both run
    n = 3 * ref.BLOCK
    out = np.empty(n)
    _rng.fill_normal(KEY, 0, 1.0, out, 1)
    assert np.max(np.abs(out)) > 3.6541528853610088
    assert_array_equal(out, ref.standard_normal(KEY, n))


def test_laplace_equals_reference():
    out = np.empty(N)
    _rng.fill_laplace(KEY, 0, 0.7, out, 2)
    assert_array_equal(out, ref.laplace(KEY, N, 0.7))


@pytest.mark.parametrize("m", [1, 7, 3 * 2**30 + 1, 2**32, 2**32 + 1, 2**63 + 12345])
def test_integers_equal_reference(m):
    out = np.empty(1000, np.uint64)
    _rng.fill_integers(KEY, 0, m, out, 1)
    assert out.tolist() == ref.integers(KEY, 1000, m)


@pytest.mark.parametrize("offdiag", [1.0, 2.0 ** -0.5])
@pytest.mark.parametrize("d", [5, 64, 65, 130])
def test_symmetric_normal_equals_reference(d, offdiag):
    """Rows drawn, then mirrored one tile row per task (tile edges at 64): the twin's values,
    exactly symmetric, for 1 and 3 threads; with ``value`` the same noise added to it; the
    off-diagonal scale multiplies the same draws."""
    want = np.asarray(ref.symmetric_normal(KEY, d, 1.5, batch=2, stream0=9, offdiag=offdiag)) if d <= 65 else None
    outs = []
    for nt in (1, 3):
        out = np.empty((2, d, d))
        _symnoise.fill_symmetric_normal(KEY, 9, 1.5, out, nt, offdiag=offdiag)
        outs.append(out)
    plain = np.empty((2, d, d))
    _symnoise.fill_symmetric_normal(KEY, 9, 1.5, plain, 1)
    iu = np.triu_indices(d, 1)
    assert_array_equal(np.diagonal(outs[0], axis1=1, axis2=2), np.diagonal(plain, axis1=1, axis2=2))
    assert_allclose(outs[0][:, iu[0], iu[1]], offdiag * plain[:, iu[0], iu[1]], rtol=1e-15)
    assert_array_equal(outs[0], outs[1])
    assert_array_equal(outs[0], np.swapaxes(outs[0], 1, 2))
    if want is not None:
        assert_array_equal(outs[0], want)
    value = np.random.default_rng(d).normal(size=(2, d, d))
    added = np.empty((2, d, d))
    _symnoise.fill_symmetric_normal(KEY, 9, 1.5, added, 2, value=value, offdiag=offdiag)
    assert_array_equal(added, value + outs[0])
    with pytest.raises(ValueError, match="overlap"):
        _symnoise.fill_symmetric_normal(KEY, 9, 1.5, value, 2, value=value)


@pytest.mark.parametrize("seed", [0, 7, 2026, 2**63 + 5])
def test_key_derivation_equals_reference(seed):
    """A seed's key and a release's sub-key (keyed BLAKE2b of a typed tag) as the twin derives them."""
    from dpem_fast._engine._release import release_key

    key = make_key(seed)
    assert key.tolist() == ref.make_key_reference(seed)
    for index, name in ((0, "sum"), (3, "second_moment"), (2**70, "é")):
        assert release_key(key, index, name).tolist() == ref.release_key_reference(ref.make_key_reference(seed),
                                                                                  index, name)
