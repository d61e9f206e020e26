"""ChaCha20 core, stream addressing, keys and the continuous samplers."""
import io
import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import stats

import dpem_fast
from dpem_fast import random as dr
from dpem_fast._dpcore import _rng
from dpem_fast._rng import KeyDeriver, derive_key, make_key

SIGMA = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]


def _state(key: bytes, counter: int, nonce: bytes) -> np.ndarray:
    st = np.zeros(16, np.uint32)
    st[:4] = SIGMA
    st[4:12] = np.frombuffer(key, "<u4")
    st[12] = counter
    st[13:16] = np.frombuffer(nonce, "<u4")
    return st


def _block(st):
    out = np.zeros(16, np.uint32)
    _rng.chacha20_block(st, out)
    return out.astype("<u4").tobytes()


# RFC 8439 section 2.3.2 (block function) and appendix A.1 test vectors #1 and #2.
RFC_232 = (
    "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
    "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e"
)
RFC_A1_1 = (
    "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
    "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"
)
RFC_A1_2 = (
    "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
    "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f"
)


def test_rfc8439_block_function_vectors():
    assert _block(_state(bytes(range(32)), 1, bytes.fromhex("000000090000004a00000000"))).hex() == RFC_232
    assert _block(_state(bytes(32), 0, bytes(12))).hex() == RFC_A1_1
    assert _block(_state(bytes(32), 1, bytes(12))).hex() == RFC_A1_2


def test_vectorised_blocks_equal_scalar_blocks():
    key = np.arange(8, dtype=np.uint32) * np.uint32(0x01010101)
    counter, stream = (1 << 32) - 3, 0xDEADBEEF12345678  # counter crosses the 32-bit word boundary
    out16 = np.zeros(256, np.uint32)
    _rng.keystream_blocks16(key, counter, stream, out16)
    for j in range(16):
        c = counter + j
        st = np.zeros(16, np.uint32)
        st[:4] = SIGMA
        st[4:12] = key
        st[12], st[13] = c & 0xFFFFFFFF, c >> 32
        st[14], st[15] = stream & 0xFFFFFFFF, stream >> 32
        ref = np.zeros(16, np.uint32)
        _rng.chacha20_block(st, ref)
        assert_array_equal(out16[16 * j: 16 * (j + 1)], ref)


def test_keystream_matches_independent_chacha20():
    crypto = pytest.importorskip("cryptography.hazmat.primitives.ciphers")
    key = make_key(7)
    stream = 123456789
    words = np.zeros(1000, np.uint32)  # spans several 16-block refills
    _rng.keystream(key, stream, words)
    nonce = (0).to_bytes(8, "little") + stream.to_bytes(8, "little")
    enc = crypto.Cipher(crypto.algorithms.ChaCha20(key.astype("<u4").tobytes(), nonce), None).encryptor()
    assert words.astype("<u4").tobytes() == enc.update(bytes(4000))


def test_make_key_sources():
    assert_array_equal(make_key(5), make_key(5))
    assert_array_equal(make_key(5), make_key(np.random.SeedSequence(5)))
    assert not np.array_equal(make_key(5), make_key(6))
    assert not np.array_equal(make_key(None), make_key(None))
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert_array_equal(make_key(g1), make_key(g2))
    with pytest.raises(TypeError, match="random_state"):
        make_key("seed")
    with pytest.raises(TypeError, match="random_state"):
        make_key(1.5)
    with pytest.raises(ValueError, match="random_state"):
        make_key(-1)


def test_derive_key_is_injective_on_tags():
    k = make_key(0)
    assert not np.array_equal(derive_key(k, "a", 12), derive_key(k, "a1", 2))
    assert not np.array_equal(derive_key(k, "x", 1), derive_key(k, "x", 2))
    assert not np.array_equal(derive_key(k, 1), derive_key(k, "1"))
    assert_array_equal(derive_key(k, "x", 1), derive_key(k, "x", 1))
    with pytest.raises(TypeError, match="tags"):
        derive_key(k, 1.0)


def test_key_deriver_equals_derive_key():
    """The release layer's cached keyed hash (issue 26) gives derive_key's sub-keys."""
    k = make_key(3)
    kd = KeyDeriver(k)
    for i in (0, 1, 7, 2**40, -5):
        for prefix, suffix in ((("release",), ("counts",)), (("release",), ("second_moments",)), ((), ()),
                               (("a", 2), ("b", 3))):
            assert_array_equal(kd.derive(prefix, i, suffix), derive_key(k, *prefix, i, *suffix))
    assert not np.array_equal(kd.derive(("release",), 1, ("x",)), KeyDeriver(make_key(4)).derive(("release",), 1, ("x",)))


def test_short_draws_prefill_the_same_keystream():
    """A short draw fills only the blocks it needs first (dpc_stream_prefill): every fill size
    around the block and refill edges equals the same outputs of a long draw."""
    k = make_key(5)
    long = np.empty(600)
    for fill in (_rng.fill_normal, _rng.fill_laplace):
        fill(k, 3, 1.25, long, 1)
        for n in (1, 2, 7, 8, 9, 63, 64, 65, 127, 128, 129, 300):
            short = np.empty(n)
            fill(k, 3, 1.25, short, 1)
            assert_array_equal(short, long[:n])
    _rng.fill_uniform(k, 3, long, 1)
    for n in (1, 8, 9, 120, 127, 128, 129):
        short = np.empty(n)
        _rng.fill_uniform(k, 3, short, 1)
        assert_array_equal(short, long[:n])


SAMPLERS = {
    "uniform": lambda n, **kw: dr.uniform(n, **kw),
    "standard_normal": lambda n, **kw: dr.standard_normal(n, **kw),
    "laplace": lambda n, **kw: dr.laplace(2.5, n, **kw),
    "integers": lambda n, **kw: dr.integers(1000003, n, **kw),
    "symmetric_gaussian": lambda n, **kw: dr.symmetric_gaussian(7, 1.5, batch=n // 40 + 1, **kw),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@pytest.mark.parametrize("n", [0, 1, 4095, 4096, 3 * 4096 + 17])
def test_thread_count_invariance(name, n):
    f = SAMPLERS[name]
    a = f(n, random_state=11, n_threads=1)
    b = f(n, random_state=11, n_threads=2)
    c = f(n, random_state=11, n_threads=4)
    assert_array_equal(a, b)
    assert_array_equal(a, c)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_distinct_seeds_give_distinct_output(name):
    f = SAMPLERS[name]
    assert not np.array_equal(f(1000, random_state=1), f(1000, random_state=2))


def test_block_prefix_is_stable():
    # Outputs are addressed by (block, position): a longer request extends a shorter one.
    a = dr.standard_normal(5000, random_state=3)
    b = dr.standard_normal(9000, random_state=3)
    assert_array_equal(a, b[:5000])


def test_shapes_and_dtypes():
    assert dr.uniform((3, 4), random_state=0).shape == (3, 4)
    assert dr.standard_normal(0, random_state=0).shape == (0,)
    assert dr.integers(5, (2, 2), random_state=0).dtype == np.uint64
    assert dr.symmetric_gaussian(3, 1.0, random_state=0).shape == (3, 3)
    assert dr.symmetric_gaussian(3, 1.0, batch=2, random_state=0).shape == (2, 3, 3)


@pytest.mark.statistical
def test_uniform_moments_and_ks(global_random_seed):
    u = dr.uniform(200_000, random_state=global_random_seed)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # 53-bit resolution: values are multiples of 2^-53
    assert np.all(np.ldexp(u, 53) == np.floor(np.ldexp(u, 53)))


@pytest.mark.statistical
def test_standard_normal_distribution(global_random_seed):
    n = 1_000_000
    x = dr.standard_normal(n, random_state=global_random_seed)
    se = 1 / math.sqrt(n)
    assert abs(x.mean()) < 5 * se
    assert abs(x.var() - 1) < 5 * math.sqrt(2 / n)
    assert abs(stats.kurtosis(x)) < 5 * math.sqrt(24 / n)
    assert stats.kstest(x, "norm").pvalue > 1e-3
    # tail beyond the ziggurat base strip (r ~ 3.654) has the right mass
    r = 3.6541528853610088
    p = 2 * stats.norm.sf(r)
    k = int(np.sum(np.abs(x) > r))
    assert stats.binomtest(k, n, p).pvalue > 1e-3


@pytest.mark.statistical
def test_normal_fails_when_scale_is_wrong():
    # The variance check above is tight enough to catch a 1% error in sigma.
    x = 1.01 * dr.standard_normal(1_000_000, random_state=0)
    assert abs(x.var() - 1) > 5 * math.sqrt(2 / 1_000_000)


@pytest.mark.statistical
def test_laplace_distribution(global_random_seed):
    n = 400_000
    x = dr.laplace(2.0, n, random_state=global_random_seed)
    assert abs(x.var() - 8.0) < 5 * math.sqrt((24 * 16 - 64) / n)  # Var(X^2) = E X^4 - (E X^2)^2, E X^4 = 24 b^4
    assert stats.kstest(x, "laplace", args=(0, 2.0)).pvalue > 1e-3


@pytest.mark.statistical
def test_integers_uniform_over_awkward_range(global_random_seed):
    m = 3 * 2**30 + 1  # rejection region of Lemire's method is large here
    k = 12
    x = dr.integers(m, 240_000, random_state=global_random_seed)
    assert x.max() < m
    counts = np.bincount((x * k // m).astype(np.int64), minlength=k)
    assert stats.chisquare(counts).pvalue > 1e-3
    y = dr.integers(2**64 - 1, 10, random_state=0)
    assert y.dtype == np.uint64


@pytest.mark.statistical
def test_symmetric_gaussian(global_random_seed):
    d, sigma, batch = 6, 2.0, 4000
    m = dr.symmetric_gaussian(d, sigma, batch=batch, random_state=global_random_seed)
    assert np.array_equal(m, np.swapaxes(m, 1, 2))  # exact symmetry, not closeness
    iu = np.triu_indices(d)
    vals = m[:, iu[0], iu[1]]
    n = vals.size
    assert abs(vals.var() - sigma**2) < 5 * sigma**2 * math.sqrt(2 / n)
    # upper-triangle entries are uncorrelated with each other
    c = np.corrcoef(vals.T)
    off = c[~np.eye(c.shape[0], dtype=bool)]
    assert np.max(np.abs(off)) < 5 / math.sqrt(batch)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: dr.uniform(-1), ValueError, "size"),
        (lambda: dr.uniform(2.5), TypeError, "size"),
        (lambda: dr.uniform(True), TypeError, "size"),
        (lambda: dr.laplace(0.0, 3), ValueError, "scale"),
        (lambda: dr.laplace(float("nan"), 3), ValueError, "scale"),
        (lambda: dr.laplace(float("inf"), 3), ValueError, "scale"),
        (lambda: dr.laplace("1", 3), TypeError, "scale"),
        (lambda: dr.integers(0, 3), ValueError, "high"),
        (lambda: dr.integers(2**64, 3), ValueError, "high"),
        (lambda: dr.symmetric_gaussian(0, 1.0), ValueError, "d"),
        (lambda: dr.symmetric_gaussian(3, -1.0), ValueError, "sigma"),
        (lambda: dr.symmetric_gaussian(3, 1.0, batch=-2), ValueError, "batch"),
        (lambda: dr.uniform(3, n_threads=0), ValueError, "n_threads"),
        (lambda: dr.uniform(3, n_threads=1.5), TypeError, "n_threads"),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_show_config_reports_threads_and_flags():
    buf = io.StringIO()
    dpem_fast.show_config(file=buf)
    text = buf.getvalue()
    for field in ("version", "openmp", "n_threads", "chacha20_path", "kmeans_path", "operator_path", "c_args",
                  "compiler"):
        assert field in text
    assert dpem_fast.__version__ in text


def test_operator_path_is_the_one_the_kernels_run():
    from dpem_fast._config import config_dict
    from dpem_fast._dpcore import _basis, _rowprod

    path = config_dict()["operator_path"]
    assert _rowprod.WIDE == _basis.WIDE and _rowprod.FAST == _basis.FAST
    assert path == ("AVX-512F" if _rowprod.WIDE else "AVX2+FMA" if _rowprod.FAST else "portable C")


def test_effective_n_threads(monkeypatch):
    from dpem_fast._threads import effective_n_threads

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    if _rng.openmp_enabled():
        assert effective_n_threads(None) == 3
        assert effective_n_threads(2) == 2
        assert effective_n_threads(-1) == 3
        assert effective_n_threads(-2) == 2
    else:  # pragma: no cover
        assert effective_n_threads(None) == 1


def test_effective_n_threads_checks_before_the_fast_path():
    from dpem_fast._threads import effective_n_threads

    for bad in (True, 1.0, "2"):
        with pytest.raises(TypeError, match="n_threads"):
            effective_n_threads(bad)
    with pytest.raises(ValueError, match="n_threads=0"):
        effective_n_threads(0)
    assert effective_n_threads(np.int64(2)) == (2 if _rng.openmp_enabled() else 1)


def test_blas_single_thread_holds_once_per_thread():
    """The engine's loop holds BLAS to one thread; a kernel's own hold inside it is a no-op
    (no threadpoolctl round trip), and the limit ends with the outer hold."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from dpem_fast._threads import blas_single_thread

    def blas_threads():
        return [m["num_threads"] for m in threadpoolctl.threadpool_info() if m["user_api"] == "blas"]

    before = blas_threads()
    with blas_single_thread():
        assert all(t == 1 for t in blas_threads())
        with blas_single_thread():
            assert all(t == 1 for t in blas_threads())
        assert all(t == 1 for t in blas_threads())         # the inner exit did not restore
    assert blas_threads() == before
    with blas_single_thread(enabled=False):
        assert blas_threads() == before
