"""Exact discrete Gaussian noise in a nogil prange loop, from dpem_fast's cimported core."""
from cython.parallel cimport prange
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t

from dpem_fast._dpcore._rng cimport dpc_stream, dpc_stream_init
from dpem_fast._dpcore.dpc_contract cimport DPC_SAMPLER_BLOCK, dpc_sampler_blocks
from dpem_fast._dpcore.dpc_dgauss cimport dpc_dgauss, dpc_dgauss_params, dpc_dgauss_setup

_M64 = 2**64 - 1


cdef uint8_t _block(const uint32_t *key, uint64_t stream, const dpc_dgauss_params *g,
                    int64_t *out, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef dpc_stream st
    cdef Py_ssize_t i
    dpc_stream_init(&st, key, stream)
    for i in range(lo, hi):
        if dpc_dgauss(&st, g, &out[i]):
            return 1
    return 0


def fill_discrete_gaussian(const uint32_t[::1] key, tuple params, int64_t[::1] out, int n_threads):
    """Block b of DPC_SAMPLER_BLOCK outputs from stream b of ``key``; returns True on overflow."""
    cdef dpc_dgauss_params g
    cdef Py_ssize_t n = out.shape[0], nb = dpc_sampler_blocks(n), b
    cdef uint8_t bad = 0
    t, vcap, ymax, a, bt, D = params
    dpc_dgauss_setup(&g, t, vcap, ymax, a >> 64, a & _M64, bt >> 64, bt & _M64, D >> 64, D & _M64)
    with nogil:
        for b in prange(nb, num_threads=max(1, n_threads), schedule='static'):
            bad |= _block(&key[0], <uint64_t>b, &g, &out[0], b * DPC_SAMPLER_BLOCK,
                          min(n, (b + 1) * DPC_SAMPLER_BLOCK))
    return bool(bad)
