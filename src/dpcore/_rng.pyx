"""ChaCha20 random streams and the continuous samplers (uniform, normal, Laplace).

Work is cut into blocks of ``SAMPLER_BLOCK`` consecutive outputs; block ``b``
draws only from stream ``stream0 + b`` of the given key.  Blocks are spread
over OpenMP threads by the kernels' one parallel driver (``_driver.pxd``);
which thread draws a block never matters, so the output is bit-identical for
any thread count.  Changing ``SAMPLER_BLOCK`` changes seeded outputs: it
is part of the reproducibility contract; it is defined once, in ``dpc_contract.h``
(Python: ``dpem_fast._dpcore._contract.SAMPLER_BLOCK``).
"""
from libc.stdint cimport uint32_t, uint64_t, int64_t

from ._driver cimport run_blocks
from ._omp cimport DPC_OPENMP_ENABLED, omp_get_max_threads
from .dpc_contract cimport DPC_SAMPLER_BLOCK, dpc_sampler_blocks
from ._rng cimport (
    dpc_stream, dpc_stream_init, dpc_stream_prefill, dpc_chacha20_block, dpc_chacha20_blocks16,
    dpc_simd_level, dpc_next_u32, dpc_uniform, dpc_normal, dpc_laplace,
    dpc_normal_init, dpc_below_u64,
)


dpc_normal_init()


def openmp_enabled():
    """True when the core was compiled with OpenMP (every dpcore module shares the flag)."""
    return bool(DPC_OPENMP_ENABLED)


def omp_max_threads():
    """``omp_get_max_threads()`` (1 without OpenMP)."""
    return omp_get_max_threads()


def simd_level():
    """Keystream code path: 0 = baseline x86-64 / generic, 1 = AVX2, 2 = AVX-512."""
    return dpc_simd_level()


def chacha20_block(const uint32_t[::1] state,   # IN  (16,) raw input state
                   uint32_t[::1] out):          # OUT (16,) keystream block
    """RFC 8439 ChaCha20 block function on a raw 16-word state (scalar path)."""
    if state.shape[0] != 16 or out.shape[0] != 16:
        raise ValueError("state and out must have 16 words")
    dpc_chacha20_block(&state[0], &out[0])


def keystream(const uint32_t[::1] key,          # IN  (8,)
              uint64_t stream,
              uint32_t[::1] out):               # OUT (n,) words of stream, from counter 0
    """Raw keystream words of one stream through the buffered, vectorised path."""
    cdef dpc_stream st
    cdef Py_ssize_t i
    dpc_stream_init(&st, &key[0], stream)
    with nogil:
        for i in range(out.shape[0]):
            out[i] = dpc_next_u32(&st)


def keystream_blocks16(const uint32_t[::1] key, uint64_t counter, uint64_t stream,
                       uint32_t[::1] out):      # OUT (256,)
    """Sixteen consecutive blocks from the multi-block (SIMD) path, for tests."""
    if out.shape[0] != 256:
        raise ValueError("out must have 256 words")
    dpc_chacha20_blocks16(&key[0], counter, stream, &out[0])


cdef enum:
    _UNIFORM = 0
    _NORMAL = 1
    _LAPLACE = 2


cdef struct _Args:
    # what a block of the fills reads and writes
    const uint32_t *key
    uint64_t stream0              # block b draws from stream stream0 + b
    Py_ssize_t n                  # outputs
    int kind                      # _UNIFORM, _NORMAL or _LAPLACE
    double scale
    uint64_t m                    # integers below m
    double *out_double
    uint64_t *out_integers


cdef int _double_block(const void *args, Py_ssize_t b, double *unused) noexcept nogil:
    """Block ``b`` of a continuous fill (the driver's body): its outputs, all from stream
    ``stream0 + b`` (counter 0 upwards)."""
    cdef const _Args *a = <const _Args *> args
    cdef dpc_stream st
    cdef Py_ssize_t i, hi = min(a.n, (b + 1) * DPC_SAMPLER_BLOCK)
    cdef double *out = a.out_double
    cdef double scale = a.scale
    dpc_stream_init(&st, a.key, a.stream0 + <uint64_t> b)
    if hi - b * DPC_SAMPLER_BLOCK < 128:     # a short draw: two words an output
        dpc_stream_prefill(&st, <int> (2 * (hi - b * DPC_SAMPLER_BLOCK)))
    if a.kind == _UNIFORM:
        for i in range(b * DPC_SAMPLER_BLOCK, hi):
            out[i] = dpc_uniform(&st)
    elif a.kind == _NORMAL:
        for i in range(b * DPC_SAMPLER_BLOCK, hi):
            out[i] = scale * dpc_normal(&st)
    else:
        for i in range(b * DPC_SAMPLER_BLOCK, hi):
            out[i] = dpc_laplace(&st, scale)
    return 0


cdef int _integers_block(const void *args, Py_ssize_t b, double *unused) noexcept nogil:
    """Block ``b`` of fill_integers (the driver's body)."""
    cdef const _Args *a = <const _Args *> args
    cdef dpc_stream st
    cdef Py_ssize_t i
    dpc_stream_init(&st, a.key, a.stream0 + <uint64_t> b)
    for i in range(b * DPC_SAMPLER_BLOCK, min(a.n, (b + 1) * DPC_SAMPLER_BLOCK)):
        a.out_integers[i] = dpc_below_u64(&st, a.m)
    return 0


cdef void _fill_double(int kind, const uint32_t[::1] key, uint64_t stream0, double scale,
                       double[::1] out, int n_threads):
    """Block driver: block b fills out[b*BLOCK : (b+1)*BLOCK] from stream stream0 + b."""
    cdef Py_ssize_t n = out.shape[0]
    cdef _Args a
    if n == 0:
        return
    a.key, a.stream0, a.n, a.kind, a.scale, a.out_double = &key[0], stream0, n, kind, scale, &out[0]
    run_blocks(_double_block, &a, dpc_sampler_blocks(n), 0, n_threads, "sampler blocks")


def fill_uniform(const uint32_t[::1] key,   # IN  (8,) stream key
                 uint64_t stream0,          # first stream id; block b uses stream0 + b
                 double[::1] out,           # OUT (n,) uniform doubles in [0, 1)
                 int n_threads):
    """Fill ``out`` with 53-bit uniform doubles in [0, 1).

    Equivalent to: ``(words64 >> 11) * 2**-53`` per output, one 64-bit word each.
    """
    _fill_double(_UNIFORM, key, stream0, 1.0, out, n_threads)


def fill_normal(const uint32_t[::1] key,    # IN  (8,)
                uint64_t stream0,
                double scale,               # standard deviation
                double[::1] out,            # OUT (n,)
                int n_threads):
    """Fill ``out`` with N(0, scale^2) draws (256-strip ziggurat)."""
    _fill_double(_NORMAL, key, stream0, scale, out, n_threads)


def fill_laplace(const uint32_t[::1] key,   # IN  (8,)
                 uint64_t stream0,
                 double scale,              # Laplace scale b (variance 2 b^2)
                 double[::1] out,           # OUT (n,)
                 int n_threads):
    """Fill ``out`` with Laplace(0, scale) draws: random sign times scale * -log(1 - U)."""
    _fill_double(_LAPLACE, key, stream0, scale, out, n_threads)


def fill_integers(const uint32_t[::1] key,  # IN  (8,)
                  uint64_t stream0,
                  uint64_t m,               # exclusive upper bound, m >= 1
                  uint64_t[::1] out,        # OUT (n,) uniform in {0..m-1}
                  int n_threads):
    """Fill ``out`` with unbiased uniform integers below ``m`` (Lemire's rejection method)."""
    cdef Py_ssize_t n = out.shape[0]
    cdef _Args a
    if m == 0:
        raise ValueError("m must be >= 1")
    if n == 0:
        return
    a.key, a.stream0, a.n, a.m, a.out_integers = &key[0], stream0, n, m, &out[0]
    run_blocks(_integers_block, &a, dpc_sampler_blocks(n), 0, n_threads, "sampler blocks")


cdef struct _WordArgs:
    const uint32_t *key
    const uint64_t *streams
    const uint64_t *counters
    uint64_t *out
    Py_ssize_t n


cdef int _words_block(const void *args, Py_ssize_t b, double *unused) noexcept nogil:
    """Block ``b`` of fill_keyed_words: each output is one ChaCha20 block of its own (stream,
    counter), so the value of element i depends on (key, streams[i], counters[i]) only."""
    cdef const _WordArgs *a = <const _WordArgs *> args
    cdef uint32_t state[16]
    cdef uint32_t block[16]
    cdef Py_ssize_t i, k
    cdef uint64_t c, w
    state[0] = 0x61707865u
    state[1] = 0x3320646eu
    state[2] = 0x79622d32u
    state[3] = 0x6b206574u
    for k in range(8):
        state[4 + k] = a.key[k]
    for i in range(b * DPC_SAMPLER_BLOCK, min(a.n, (b + 1) * DPC_SAMPLER_BLOCK)):
        c = a.counters[i]
        state[12] = <uint32_t> ((c >> 3) & 0xFFFFFFFFu)
        state[13] = <uint32_t> (c >> 35)
        state[14] = <uint32_t> (a.streams[i] & 0xFFFFFFFFu)
        state[15] = <uint32_t> (a.streams[i] >> 32)
        dpc_chacha20_block(state, block)
        w = 2 * (c & 7)
        a.out[i] = (<uint64_t> block[w]) | ((<uint64_t> block[w + 1]) << 32)
    return 0


def fill_keyed_words(const uint32_t[::1] key,      # IN  (8,)
                     const uint64_t[::1] streams,  # IN  (n,) stream id of each output
                     const uint64_t[::1] counters, # IN  (n,) 64-bit word index in that stream
                     uint64_t[::1] out,            # OUT (n,)
                     int n_threads):
    """``out[i]``: the 64-bit word ``counters[i]`` of the ChaCha20 stream ``streams[i]`` of
    ``key`` — random access into many streams at once (a keyed pseudorandom function of
    (stream, counter)).  Thread-count independent: every output is computed alone.

    Equivalent to: ``w = keystream(key, streams[i], words)``, ``out[i] = w[2c] | w[2c + 1] << 32``
    with ``c = counters[i]`` (little-endian words, as :func:`fill_uniform` reads them).
    """
    cdef Py_ssize_t n = out.shape[0]
    cdef _WordArgs a
    if streams.shape[0] != n or counters.shape[0] != n:
        raise ValueError("streams, counters and out must have the same length")
    if n == 0:
        return
    a.key, a.streams, a.counters, a.out, a.n = &key[0], &streams[0], &counters[0], &out[0], n
    run_blocks(_words_block, &a, dpc_sampler_blocks(n), 0, n_threads, "keyed words")
