# Declarations of the exact discrete samplers (dpc_dgauss.h; Canonne, Kamath & Steinke 2020,
# Algorithms 1-3), integer arithmetic only.  Static inline C: a module that cimports this gets
# its own copy.  Parameters come from dpem_fast.random.discrete_gaussian_parameters (exact
# integers; 128-bit values split into (hi, lo) 64-bit halves).  Installed with the package so
# other Cython code can cimport it (see dpem_fast.get_include()).
from libc.stdint cimport uint64_t, int64_t

from ._rng cimport dpc_stream

cdef extern from "dpc_dgauss.h" nogil:
    ctypedef struct dpc_dgauss_params:
        pass
    void dpc_dgauss_setup(dpc_dgauss_params *g, uint64_t t, uint64_t vcap, uint64_t ymax,
                          uint64_t a_hi, uint64_t a_lo, uint64_t bt_hi, uint64_t bt_lo,
                          uint64_t D_hi, uint64_t D_lo)
    int dpc_dgauss(dpc_stream *st, const dpc_dgauss_params *g, int64_t *out)
    int dpc_dlaplace(dpc_stream *st, uint64_t t, uint64_t s, uint64_t vcap, int64_t *out)
    int dpc_bern_frac64(dpc_stream *s, uint64_t p, uint64_t q)
    int dpc_bern_exp64(dpc_stream *s, uint64_t p, uint64_t q)
