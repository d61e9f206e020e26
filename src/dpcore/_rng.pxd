# Declarations of the C random-stream core (dpc_rng.h, dpc_normal.h) for use
# by every kernel module.  The functions are static inline C: each module
# that cimports this gets its own copy, so a module that draws normals must
# call dpc_normal_init() once at import.
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "dpc_rng.h" nogil:
    ctypedef struct dpc_stream:
        pass
    int DPC_NBLK
    int DPC_BUF_WORDS
    void dpc_chacha20_block(const uint32_t *inp, uint32_t *out)
    void dpc_chacha20_blocks16(const uint32_t *key, uint64_t counter, uint64_t stream, uint32_t *out)
    int dpc_simd_level()
    void dpc_stream_init(dpc_stream *s, const uint32_t *key, uint64_t stream)
    void dpc_stream_prefill(dpc_stream *s, int words)
    void dpc_chacha20_streams8(const uint32_t *key, uint64_t counter, uint64_t stream, uint32_t *out)
    int dpc_prefill_blocks(int words)
    void dpc_stream_from_lanes(dpc_stream *s, const uint32_t *lanes, int lane, int words)
    uint32_t dpc_next_u32(dpc_stream *s)
    uint64_t dpc_next_u64(dpc_stream *s)
    int dpc_bit(dpc_stream *s)
    double dpc_uniform(dpc_stream *s)
    uint32_t dpc_below_u32(dpc_stream *s, uint32_t m)
    uint64_t dpc_below_u64(dpc_stream *s, uint64_t m)

cdef extern from "dpc_normal.h" nogil:
    void dpc_normal_init()
    double dpc_normal(dpc_stream *s)
    double dpc_laplace(dpc_stream *s, double scale)
