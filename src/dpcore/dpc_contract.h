/*
 * dpc_contract.h -- the work-layout constants of dpem_fast's kernels, defined once.
 *
 * These numbers fix how rows and samples are cut into blocks, and with that the order
 * of every floating-point reduction and which random stream draws which output.  They
 * are part of the reproducibility contract: changing one changes seeded results (change
 * only with a changelog note and bench evidence).  Python sees them through
 * dpem_fast._dpcore._contract, which reads them from here.
 *
 * E-step kernels (_estep.pyx, _bernoulli.pyx, ...)
 *   DPC_CHUNK_SIZE   rows per chunk; a chunk is transposed into a (d, CHUNK) scratch.
 *   DPC_LANES        fixed lanes of every in-chunk row sum (combined by a fixed tree,
 *                    dpc_simd.h), so rounding does not depend on the SIMD width.
 *   DPC_BLOCK_CHUNKS / DPC_SPREAD_BLOCKS / DPC_MIN_BLOCKS / DPC_PARTIAL_BUDGET
 *                    consecutive chunks form blocks of DPC_BLOCK_CHUNKS chunks, so the
 *                    number of blocks grows with n (no fixed cap: a machine of any core
 *                    count gets work), and small inputs are still cut into up to
 *                    DPC_SPREAD_BLOCKS blocks; block b owns row b of the partial
 *                    statistics; see dpc_block_count().
 *   DPC_BLAS_MIN_D   the GMM E-step uses BLAS from this d on, hand loops below it (25
 *                    since issue 41, 16 before: at 16 <= d <= 24 the hand loops ran 1.1-2.0x
 *                    faster than the 2K small BLAS calls a chunk, one thread, K = 5 and 10;
 *                    beyond 24 neither won consistently).
 *   DPC_F32_TILE_MIN_D   the GMM E-step's float32 path (dpc_f32.h) uses its register-tile
 *                    products (dpc_f32_prod.h, no BLAS) from this d on, its float lanes below
 *                    it (16: the float64 threshold until issue 41, which moved that one alone;
 *                    at 16 <= d <= 24 the tiles ran 1.3-1.7x faster than the float lanes).
 *   DPC_BERNOULLI_BLAS_MIN_D   the same for the Bernoulli-mixture E-step (measured
 *                    crossover: hand loops win below 8 features, BLAS from 16 on).
 *   DPC_F32_FLUSH_CHUNKS / DPC_F32_LANE_ROWS   the float32 path (float32 rows in single
 *                    precision, dpc_f32.h): a float lane is added into its float64 lane every
 *                    DPC_F32_FLUSH_CHUNKS chunks, so it never sums more than DPC_F32_LANE_ROWS
 *                    rows; the float32 sensitivity widening (_engine/_specs.py) is derived
 *                    from this bound.
 *   DPC_LDA_DOC_CHUNK  documents per chunk of the LDA E-step (_lda.pyx); blocks of
 *                    consecutive chunks as above (dpc_lda_block_count), each block
 *                    summing its documents' statistics in document order.
 *                    The block partials are summed exactly (dpc_exactsum.h, _contract.sum_blocks).
 *   dpc_plan_blocks  which chunks each block walks, for every kernel with per-block
 *                    partials; the blocks are run by the one driver of _driver.pxd.
 * Samplers (_rng.pyx, _dgauss.pyx)
 *   DPC_SAMPLER_BLOCK  outputs per ChaCha20 stream: block b draws from stream stream0 + b.
 */
#ifndef DPC_CONTRACT_H
#define DPC_CONTRACT_H

#include <stddef.h>

#define DPC_CHUNK_SIZE 256
#define DPC_LANES 16                     /* DPC_CHUNK_SIZE is a multiple of it */
#define DPC_BLOCK_CHUNKS 4               /* chunks per block (1,024 rows; 128 LDA documents) */
#define DPC_SPREAD_BLOCKS 64             /* blocks of a small input (one chunk each, or more) */
#define DPC_MIN_BLOCKS 8                 /* fewest blocks under the partial budget */
#define DPC_PARTIAL_BUDGET (1 << 23)     /* doubles (64 MiB) of partials before blocks grow */
#define DPC_BLAS_MIN_D 25
#define DPC_F32_TILE_MIN_D 16
#define DPC_BERNOULLI_BLAS_MIN_D 16
#define DPC_F32_FLUSH_CHUNKS 8           /* chunks between float -> float64 lane flushes */
#define DPC_F32_LANE_ROWS (DPC_F32_FLUSH_CHUNKS * DPC_CHUNK_SIZE / DPC_LANES)   /* 128 rows */
#define DPC_LDA_DOC_CHUNK 32
#define DPC_SAMPLER_BLOCK 4096
#define DPC_SUPERBLOCK_DOUBLES (1 << 23)  /* 64 MiB of float64 rows per superblock */

#if DPC_CHUNK_SIZE % DPC_LANES != 0
#error "DPC_CHUNK_SIZE must be a multiple of DPC_LANES"
#endif

/* Number of CHUNK_SIZE-row chunks covering n rows (the last may be partial). */
static inline ptrdiff_t dpc_chunk_count(ptrdiff_t n)
{
    return (n + DPC_CHUNK_SIZE - 1) / DPC_CHUNK_SIZE;
}

/* Rows of chunk c of n rows: CHUNK_SIZE, fewer in the last chunk. */
static inline ptrdiff_t dpc_chunk_rows(ptrdiff_t n, ptrdiff_t c)
{
    ptrdiff_t left = n - c * DPC_CHUNK_SIZE;
    return left < DPC_CHUNK_SIZE ? left : DPC_CHUNK_SIZE;
}

/* nr rounded up to a whole number of lanes (the padded width of a chunk). */
static inline ptrdiff_t dpc_lane_pad(ptrdiff_t nr)
{
    return (nr + DPC_LANES - 1) / DPC_LANES * DPC_LANES;
}

/* Blocks for n_chunks chunks when one block's partials take per_block_doubles doubles:
   ceil(n_chunks / BLOCK_CHUNKS) blocks, at least SPREAD_BLOCKS (so that small inputs are
   still spread over many threads); fewer when their partials would exceed PARTIAL_BUDGET
   doubles (never fewer than MIN_BLOCKS); never more than n_chunks.  The count grows with n
   without a cap, and depends on (n_chunks, per_block_doubles) only, never on the thread
   count. */
static inline ptrdiff_t dpc_blocks_for_chunks(ptrdiff_t n_chunks, ptrdiff_t per_block_doubles)
{
    ptrdiff_t per = per_block_doubles > 1 ? per_block_doubles : 1;
    ptrdiff_t nb = (n_chunks + DPC_BLOCK_CHUNKS - 1) / DPC_BLOCK_CHUNKS;
    ptrdiff_t cap = DPC_PARTIAL_BUDGET / per;
    nb = nb > DPC_SPREAD_BLOCKS ? nb : DPC_SPREAD_BLOCKS;
    cap = cap > DPC_MIN_BLOCKS ? cap : DPC_MIN_BLOCKS;
    nb = nb < cap ? nb : cap;
    return n_chunks < nb ? n_chunks : nb;
}

/* Number of partial-statistic rows (blocks) for n rows (chunks of CHUNK_SIZE rows).  Each
   model passes its own partial size (the GMM: K (d^2 + d + 1)). */
static inline ptrdiff_t dpc_block_count(ptrdiff_t n, ptrdiff_t per_block_doubles)
{
    return dpc_blocks_for_chunks(dpc_chunk_count(n), per_block_doubles);
}

/* Number of DPC_LDA_DOC_CHUNK-document chunks covering n documents (the LDA E-step). */
static inline ptrdiff_t dpc_lda_chunk_count(ptrdiff_t n)
{
    return (n + DPC_LDA_DOC_CHUNK - 1) / DPC_LDA_DOC_CHUNK;
}

/* LDA E-step blocks for n documents whose partials take per_block_doubles (K V) each: the
   same rule over chunks of DPC_LDA_DOC_CHUNK documents. */
static inline ptrdiff_t dpc_lda_block_count(ptrdiff_t n, ptrdiff_t per_block_doubles)
{
    return dpc_blocks_for_chunks(dpc_lda_chunk_count(n), per_block_doubles);
}

/* Chunks per block once the block count nb >= 1 is fixed: ceil(n_chunks / nb).  Blocks
   b * cpb .. are then walked in order; ceil(n_chunks / cpb) <= nb of them are non-empty. */
static inline ptrdiff_t dpc_chunks_per_block(ptrdiff_t n_chunks, ptrdiff_t nb)
{
    return (n_chunks + nb - 1) / nb;
}

/* The block plan of one pass: n_chunks chunks cut into the n_blocks blocks of the count
   above (dpc_block_count, dpc_lda_block_count; one partial row each).  Block b walks chunks
   [dpc_plan_first(p, b), dpc_plan_end(p, b)) in order; only the first n_busy blocks have
   chunks (the rest keep the zeros their partial rows start from).  Every kernel with
   per-block partials cuts its work by this plan, so it depends on what the block count
   depends on, never on the thread count. */
typedef struct {
    ptrdiff_t n_chunks;
    ptrdiff_t chunks_per_block;   /* ceil(n_chunks / n_blocks); 0 when there is no block */
    ptrdiff_t n_busy;             /* blocks with chunks: ceil(n_chunks / chunks_per_block) */
} dpc_block_plan;

static inline dpc_block_plan dpc_plan_blocks(ptrdiff_t n_chunks, ptrdiff_t n_blocks)
{
    dpc_block_plan p;
    p.n_chunks = n_chunks;
    p.chunks_per_block = n_chunks > 0 && n_blocks > 0 ? dpc_chunks_per_block(n_chunks, n_blocks) : 0;
    p.n_busy = p.chunks_per_block > 0 ? dpc_chunks_per_block(n_chunks, p.chunks_per_block) : 0;
    return p;
}

/* First chunk of block b, and one past its last. */
static inline ptrdiff_t dpc_plan_first(const dpc_block_plan *p, ptrdiff_t b)
{
    return b * p->chunks_per_block;
}

static inline ptrdiff_t dpc_plan_end(const dpc_block_plan *p, ptrdiff_t b)
{
    ptrdiff_t e = (b + 1) * p->chunks_per_block;
    return e < p->n_chunks ? e : p->n_chunks;
}

/* Rows of a superblock, the unit in which the engine hands rows to a kernel: about
   SUPERBLOCK_DOUBLES values, a whole number of chunks, at least one chunk.  It depends on
   n_features only, so a fit's statistics are sums over the same superblocks in the same
   order whether X is in memory, memory-mapped or streamed in blocks of any size. */
static inline ptrdiff_t dpc_superblock_rows(ptrdiff_t n_features)
{
    ptrdiff_t d = n_features > 1 ? n_features : 1;
    ptrdiff_t rows = DPC_SUPERBLOCK_DOUBLES / d / DPC_CHUNK_SIZE * DPC_CHUNK_SIZE;
    return rows > DPC_CHUNK_SIZE ? rows : DPC_CHUNK_SIZE;
}

/* Number of SAMPLER_BLOCK-output blocks (= streams) covering n sampler outputs. */
static inline ptrdiff_t dpc_sampler_blocks(ptrdiff_t n)
{
    return (n + DPC_SAMPLER_BLOCK - 1) / DPC_SAMPLER_BLOCK;
}

#endif /* DPC_CONTRACT_H */
