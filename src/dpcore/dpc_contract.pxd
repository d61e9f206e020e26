# Declarations of dpc_contract.h: the work-layout constants (reproducibility contract)
# and the block arithmetic shared by every kernel.  Python sees the constants through
# the _contract module, which reads them from the header.
from libc.stddef cimport ptrdiff_t

cdef extern from "dpc_contract.h" nogil:
    enum:
        DPC_CHUNK_SIZE
        DPC_LANES
        DPC_BLOCK_CHUNKS
        DPC_SPREAD_BLOCKS
        DPC_MIN_BLOCKS
        DPC_PARTIAL_BUDGET
        DPC_BLAS_MIN_D
        DPC_F32_TILE_MIN_D
        DPC_BERNOULLI_BLAS_MIN_D
        DPC_SAMPLER_BLOCK
        DPC_LDA_DOC_CHUNK
        DPC_SUPERBLOCK_DOUBLES
        DPC_F32_FLUSH_CHUNKS
        DPC_F32_LANE_ROWS
    ptrdiff_t dpc_chunk_count(ptrdiff_t n)
    ptrdiff_t dpc_chunk_rows(ptrdiff_t n, ptrdiff_t c)
    ptrdiff_t dpc_lane_pad(ptrdiff_t nr)
    ptrdiff_t dpc_blocks_for_chunks(ptrdiff_t n_chunks, ptrdiff_t per_block_doubles)
    ptrdiff_t dpc_block_count(ptrdiff_t n, ptrdiff_t per_block_doubles)
    ptrdiff_t dpc_lda_block_count(ptrdiff_t n, ptrdiff_t per_block_doubles)
    ptrdiff_t dpc_lda_chunk_count(ptrdiff_t n)
    ptrdiff_t dpc_chunks_per_block(ptrdiff_t n_chunks, ptrdiff_t nb)
    ctypedef struct dpc_block_plan:
        ptrdiff_t n_chunks
        ptrdiff_t chunks_per_block
        ptrdiff_t n_busy
    dpc_block_plan dpc_plan_blocks(ptrdiff_t n_chunks, ptrdiff_t n_blocks)
    ptrdiff_t dpc_plan_first(const dpc_block_plan *p, ptrdiff_t b)
    ptrdiff_t dpc_plan_end(const dpc_block_plan *p, ptrdiff_t b)
    ptrdiff_t dpc_sampler_blocks(ptrdiff_t n)
    ptrdiff_t dpc_superblock_rows(ptrdiff_t n_features)
