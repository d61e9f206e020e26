"""Exact discrete Laplace and discrete Gaussian samplers (CKS 2020, Algorithms 1-3).

Canonne, Kamath, Steinke (2020), "The Discrete Gaussian for Differential
Privacy".  The C kernels (``dpc_dgauss.h``) use integer arithmetic only; the
parameters arrive here as exact integers computed by the Python layer
(``dpem_fast.random``), 128-bit values split into (hi, lo) 64-bit halves.

Blocks: as in ``_rng.pyx``, block ``b`` of ``SAMPLER_BLOCK`` consecutive
outputs draws only from stream ``stream0 + b``, so output does not depend on
the thread count.  Symmetric matrices: row ``i`` of matrix ``m`` uses stream
``stream0 + m * d + i`` (as ``_symnoise.pyx``).  Blocks and matrix rows are run
by the kernels' one parallel driver (``_driver.pxd``).

A draw that would leave the exact integer range (probability below
``exp(-64)``) sets a per-block flag instead of writing a wrong value; the
flags are reduced after the parallel loop and the Python layer raises
``OverflowError``.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t

from ._driver cimport run_blocks
from ._rng cimport dpc_stream, dpc_stream_init
from .dpc_contract cimport DPC_SAMPLER_BLOCK, dpc_sampler_blocks

from .dpc_dgauss cimport (dpc_bern_exp64, dpc_bern_frac64, dpc_dgauss, dpc_dgauss_params,
                         dpc_dgauss_setup, dpc_dlaplace)

_M64 = 2**64 - 1
cdef uint64_t _T_MAX = 2**56
cdef uint64_t _X_MAX = 2**62
cdef uint64_t _Q_MAX = 2**56


cdef int _dgauss_setup(dpc_dgauss_params *g, object params) except -1:
    """Unpack ``(t, vcap, ymax, a, bt, D)`` (Python ints, checked by the caller)."""
    t, vcap, ymax, a, bt, D = params
    if not (1 <= t < 2**62 and 0 <= ymax < 2**63 and 0 < a < 2**126
            and 0 < bt < 2**126 and 0 < D < 2**126):
        raise ValueError("discrete Gaussian parameters out of range")
    dpc_dgauss_setup(g, t, vcap, ymax, a >> 64, a & _M64, bt >> 64, bt & _M64,
                     D >> 64, D & _M64)
    return 0


cdef uint8_t _dgauss_block(const uint32_t *key, uint64_t stream, const dpc_dgauss_params *g,
                           int64_t *out, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef dpc_stream st
    cdef Py_ssize_t i, j
    dpc_stream_init(&st, key, stream)
    for i in range(lo, hi):
        if dpc_dgauss(&st, g, &out[i]):
            for j in range(i, hi):
                out[j] = 0
            return 1
    return 0


cdef uint8_t _dlaplace_block(const uint32_t *key, uint64_t stream, uint64_t t, uint64_t s,
                             uint64_t vcap, int64_t *out, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef dpc_stream st
    cdef Py_ssize_t i, j
    dpc_stream_init(&st, key, stream)
    for i in range(lo, hi):
        if dpc_dlaplace(&st, t, s, vcap, &out[i]):
            for j in range(i, hi):
                out[j] = 0
            return 1
    return 0


cdef uint8_t _sym_dgauss_row(const uint32_t *key, uint64_t stream, const dpc_dgauss_params *g,
                             int64_t *mat, Py_ssize_t d, Py_ssize_t i) noexcept nogil:
    cdef dpc_stream st
    cdef Py_ssize_t j
    cdef int64_t v = 0
    cdef uint8_t bad = 0
    dpc_stream_init(&st, key, stream)
    for j in range(i, d):
        if not bad and dpc_dgauss(&st, g, &v):
            bad = 1
        if bad:
            v = 0
        mat[i * d + j] = v
        mat[j * d + i] = v
    return bad


cdef struct _Args:
    # what a block (or a matrix row) of the fills reads and writes
    const uint32_t *key
    uint64_t stream0              # block b (row r) draws from stream stream0 + b (+ r)
    Py_ssize_t n, d               # outputs; the matrices' order
    dpc_dgauss_params g           # discrete Gaussian
    uint64_t t, s, vcap           # discrete Laplace
    int64_t *out
    uint8_t *overflow             # one flag per block (matrix row)


cdef int _dgauss_body(const void *args, Py_ssize_t b, double *unused) noexcept nogil:
    """Block ``b`` of fill_discrete_gaussian (the driver's body)."""
    cdef const _Args *a = <const _Args *> args
    a.overflow[b] = _dgauss_block(a.key, a.stream0 + <uint64_t> b, &a.g, a.out,
                                  b * DPC_SAMPLER_BLOCK, min(a.n, (b + 1) * DPC_SAMPLER_BLOCK))
    return 0


cdef int _dlaplace_body(const void *args, Py_ssize_t b, double *unused) noexcept nogil:
    """Block ``b`` of fill_discrete_laplace (the driver's body)."""
    cdef const _Args *a = <const _Args *> args
    a.overflow[b] = _dlaplace_block(a.key, a.stream0 + <uint64_t> b, a.t, a.s, a.vcap, a.out,
                                    b * DPC_SAMPLER_BLOCK, min(a.n, (b + 1) * DPC_SAMPLER_BLOCK))
    return 0


cdef int _sym_dgauss_body(const void *args, Py_ssize_t r, double *unused) noexcept nogil:
    """Row ``r % d`` of matrix ``r // d`` of fill_symmetric_discrete_gaussian (the driver's
    body)."""
    cdef const _Args *a = <const _Args *> args
    a.overflow[r] = _sym_dgauss_row(a.key, a.stream0 + <uint64_t> r, &a.g,
                                    a.out + (r // a.d) * a.d * a.d, a.d, r % a.d)
    return 0


def fill_discrete_gaussian(const uint32_t[::1] key,    # IN  (8,) stream key
                           uint64_t stream0,           # block b uses stream0 + b
                           tuple params,               # IN  (t, vcap, ymax, a, bt, D) Python ints
                           int64_t[::1] out,           # OUT (n,) N_Z(0, a/b) integers
                           uint8_t[::1] overflow,      # OUT (n_blocks,) 1 where a block overflowed
                           int n_threads):
    """Fill ``out`` with exact discrete Gaussian draws N_Z(0, a/b) (CKS 2020, Algorithm 3).

    Equivalent to: ``[discrete_gaussian(Fraction(a, b), u) for _ in range(n)]`` with
    ``dpem_fast._reference.samplers.discrete_gaussian`` (same law, different random source).
    """
    cdef _Args a
    cdef Py_ssize_t n = out.shape[0], nb = dpc_sampler_blocks(n)
    _dgauss_setup(&a.g, params)
    if overflow.shape[0] != nb:
        raise ValueError("overflow must have one entry per block")
    if n == 0:
        return
    a.key, a.stream0, a.n, a.out, a.overflow = &key[0], stream0, n, &out[0], &overflow[0]
    run_blocks(_dgauss_body, &a, nb, 0, n_threads, "discrete Gaussian blocks")


def fill_discrete_laplace(const uint32_t[::1] key,     # IN  (8,)
                          uint64_t stream0,
                          uint64_t t,                  # scale numerator, 1 <= t <= 2^56
                          uint64_t s,                  # scale denominator, s >= 1
                          uint64_t vcap,               # floor((2^62 - t) / t)
                          int64_t[::1] out,            # OUT (n,)
                          uint8_t[::1] overflow,       # OUT (n_blocks,)
                          int n_threads):
    """Fill ``out`` with exact discrete Laplace draws, P(y) ∝ exp(-|y| s/t) (CKS 2020, Algorithm 2).

    Equivalent to: ``[discrete_laplace(Fraction(t, s), u) for _ in range(n)]`` with
    ``dpem_fast._reference.samplers.discrete_laplace`` (same law, different random source).
    """
    cdef _Args a
    cdef Py_ssize_t n = out.shape[0], nb = dpc_sampler_blocks(n)
    if t == 0 or s == 0 or t > _T_MAX or vcap == 0 or vcap > (_X_MAX - t) // t:
        raise ValueError("discrete Laplace parameters out of range")
    if overflow.shape[0] != nb:
        raise ValueError("overflow must have one entry per block")
    if n == 0:
        return
    a.key, a.stream0, a.n, a.out, a.overflow = &key[0], stream0, n, &out[0], &overflow[0]
    a.t, a.s, a.vcap = t, s, vcap
    run_blocks(_dlaplace_body, &a, nb, 0, n_threads, "discrete Laplace blocks")


def fill_symmetric_discrete_gaussian(const uint32_t[::1] key,      # IN  (8,)
                                     uint64_t stream0,
                                     tuple params,                 # IN  as fill_discrete_gaussian
                                     int64_t[:, :, ::1] out,       # OUT (batch, d, d)
                                     uint8_t[::1] overflow,        # OUT (batch * d,) per row
                                     int n_threads):
    """Symmetric integer matrices, i.i.d. N_Z(0, a/b) on and above the diagonal (CKS 2020, Alg. 3).

    Equivalent to: ``U = np.triu(Z); U + np.triu(U, 1).T`` per matrix, with
    ``Z`` exact discrete Gaussian integers.
    """
    cdef _Args a
    cdef Py_ssize_t nb = out.shape[0], d = out.shape[1], n_tasks = nb * d
    _dgauss_setup(&a.g, params)
    if out.shape[2] != d:
        raise ValueError("out must have shape (batch, d, d)")
    if overflow.shape[0] != n_tasks:
        raise ValueError("overflow must have one entry per matrix row")
    if n_tasks == 0:
        return
    a.key, a.stream0, a.d, a.out, a.overflow = &key[0], stream0, d, &out[0, 0, 0], &overflow[0]
    run_blocks(_sym_dgauss_body, &a, n_tasks, 0, n_threads, "discrete Gaussian matrices")


def _bernoulli_count_wrapper(const uint32_t[::1] key, uint64_t stream, uint64_t p, uint64_t q,
                             Py_ssize_t n, bint exp):
    """Test hook: number of successes in ``n`` Bernoulli(p/q) (``exp=False``,
    0 <= p < q <= 2^56) or Bernoulli(exp(-p/q)) (``exp=True``, 0 <= p, 0 < q <= 2^56)
    trials on one stream."""
    cdef dpc_stream st
    cdef Py_ssize_t i, k = 0
    if q == 0 or q > _Q_MAX or (not exp and p >= q):
        raise ValueError("need 0 <= p < q <= 2^56")
    dpc_stream_init(&st, &key[0], stream)
    with nogil:
        if exp:
            for i in range(n):
                k += dpc_bern_exp64(&st, p, q)
        else:
            for i in range(n):
                k += dpc_bern_frac64(&st, p, q)
    return k
