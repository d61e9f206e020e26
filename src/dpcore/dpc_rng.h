/*
 * dpc_rng.h -- counter-based ChaCha20 random streams for dpem_fast.
 *
 * The block function is RFC 8439 section 2.3 (20 rounds, 16 32-bit words:
 * 4 constants, 8 key words, then words 12..15).  dpem_fast lays out words
 * 12..15 as a 64-bit block counter (12 = low, 13 = high) followed by a
 * 64-bit stream id (14 = low, 15 = high), as in Bernstein's original
 * ChaCha.  A stream is (key, stream id); the keystream of a stream is the
 * concatenation of blocks with counter 0, 1, 2, ...  The RFC's test vectors
 * exercise the block function through dpc_chacha20_block(), whose input is a
 * raw 16-word state.
 *
 * Keystream is produced DPC_NBLK blocks at a time with GCC vector extensions:
 * 16 lanes in one pass with AVX-512, two passes of 8 lanes compiled for AVX2
 * and baseline x86-64 (target_clones), so that the default build stays portable.
 *
 * Everything drawn from a stream is built from two primitives:
 *   dpc_next_u32 / dpc_next_u64  -- keystream words, in order;
 *   dpc_bit                      -- one bit at a time from a 64-bit reservoir
 *                                   (fair coins cost one bit, not one word).
 * Bounded integers use Lemire's multiply-and-reject method (never modulo),
 * doubles take the top 53 bits of a 64-bit word.
 */
#ifndef DPC_RNG_H
#define DPC_RNG_H

#include <stdint.h>
#include <string.h>

#define DPC_NBLK 16                      /* blocks per refill */
#define DPC_BUF_WORDS (16 * DPC_NBLK)    /* 256 32-bit words = 1 KiB */

typedef struct {
    uint32_t key[8];
    uint64_t stream;    /* words 14, 15 */
    uint64_t counter;   /* next block counter, words 12, 13 */
    uint32_t buf[DPC_BUF_WORDS];
    int pos;            /* next unread word of buf */
    int end;            /* words of buf filled (DPC_BUF_WORDS but after dpc_stream_prefill) */
    int nbits;          /* bits left in the reservoir */
    uint64_t bits;
} dpc_stream;

#define DPC_ROTL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
#define DPC_QR(a, b, c, d)                     \
    a += b; d ^= a; d = DPC_ROTL(d, 16);       \
    c += d; b ^= c; b = DPC_ROTL(b, 12);       \
    a += b; d ^= a; d = DPC_ROTL(d, 8);        \
    c += d; b ^= c; b = DPC_ROTL(b, 7);

static const uint32_t DPC_SIGMA[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};

/* RFC 8439 block function on a raw 16-word input state (scalar reference). */
static void dpc_chacha20_block(const uint32_t in[16], uint32_t out[16])
{
    uint32_t x[16];
    int i;
    memcpy(x, in, sizeof(x));
    for (i = 0; i < 10; i++) {
        DPC_QR(x[0], x[4], x[8],  x[12]);
        DPC_QR(x[1], x[5], x[9],  x[13]);
        DPC_QR(x[2], x[6], x[10], x[14]);
        DPC_QR(x[3], x[7], x[11], x[15]);
        DPC_QR(x[0], x[5], x[10], x[15]);
        DPC_QR(x[1], x[6], x[11], x[12]);
        DPC_QR(x[2], x[7], x[8],  x[13]);
        DPC_QR(x[3], x[4], x[9],  x[14]);
    }
    for (i = 0; i < 16; i++) out[i] = x[i] + in[i];
}

typedef uint32_t dpc_v16u __attribute__((vector_size(64)));
typedef uint32_t dpc_v8u __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DPC_NO_CLONES)
#define DPC_X86_CLONES 1
#endif

/* The 20 rounds on one state vector per word, the input added back, then lane j (block
 * counter + j * cstep of stream stream + j * sstep) written out as 16 consecutive words. */
#define DPC_CHACHA_LANES(vtype, lanes, cstep, sstep)                            \
    vtype x[16], in[16];                                                        \
    uint32_t t[16][lanes];                                                      \
    int i, j;                                                                   \
    for (i = 0; i < 4; i++) in[i] = (vtype){0} + DPC_SIGMA[i];                  \
    for (i = 0; i < 8; i++) in[4 + i] = (vtype){0} + key[i];                    \
    for (j = 0; j < lanes; j++) {                                               \
        uint64_t c = counter + (uint64_t)j * (cstep);                           \
        uint64_t st = stream + (uint64_t)j * (sstep);                           \
        in[12][j] = (uint32_t)c;                                                \
        in[13][j] = (uint32_t)(c >> 32);                                        \
        in[14][j] = (uint32_t)st;                                               \
        in[15][j] = (uint32_t)(st >> 32);                                       \
    }                                                                           \
    for (i = 0; i < 16; i++) x[i] = in[i];                                      \
    for (i = 0; i < 10; i++) {                                                  \
        DPC_QR(x[0], x[4], x[8],  x[12]);                                       \
        DPC_QR(x[1], x[5], x[9],  x[13]);                                       \
        DPC_QR(x[2], x[6], x[10], x[14]);                                       \
        DPC_QR(x[3], x[7], x[11], x[15]);                                       \
        DPC_QR(x[0], x[5], x[10], x[15]);                                       \
        DPC_QR(x[1], x[6], x[11], x[12]);                                       \
        DPC_QR(x[2], x[7], x[8],  x[13]);                                       \
        DPC_QR(x[3], x[4], x[9],  x[14]);                                       \
    }                                                                           \
    for (i = 0; i < 16; i++) {                                                  \
        x[i] += in[i];                                                          \
        memcpy(t[i], &x[i], sizeof(t[i]));                                      \
    }                                                                           \
    for (j = 0; j < lanes; j++)                                                 \
        for (i = 0; i < 16; i++)                                                \
            out[16 * j + i] = t[i][j];

/* 8 consecutive blocks (counters c .. c+7) of one stream, vectorised across blocks: one
 * ymm register per state word with AVX2 (16 registers: the 16-lane form needed 32 and
 * spilled, at 0.67 GB/s against 1.7 here). */
#ifdef DPC_X86_CLONES
__attribute__((target_clones("avx2", "default")))
#endif
static void dpc_chacha20_blocks8(const uint32_t key[8], uint64_t counter, uint64_t stream, uint32_t *out)
{
    DPC_CHACHA_LANES(dpc_v8u, 8, 1, 0)
}

#ifdef DPC_X86_CLONES
/* 16 blocks at once with AVX-512: one zmm register per state word (32 registers). */
__attribute__((target("avx512f")))
static void dpc_chacha20_blocks16_avx512(const uint32_t key[8], uint64_t counter, uint64_t stream,
                                         uint32_t *out)
{
    DPC_CHACHA_LANES(dpc_v16u, 16, 1, 0)
}
#endif

/* DPC_NBLK = 16 consecutive blocks (counters c .. c+15) of one stream: AVX-512 does them
 * in one pass, AVX2 and the baseline in two of 8.  The keystream is the same either way. */
static void dpc_chacha20_blocks16(const uint32_t key[8], uint64_t counter, uint64_t stream, uint32_t *out)
{
#ifdef DPC_X86_CLONES
    if (__builtin_cpu_supports("avx512f")) {
        dpc_chacha20_blocks16_avx512(key, counter, stream, out);
        return;
    }
#endif
    dpc_chacha20_blocks8(key, counter, stream, out);
    dpc_chacha20_blocks8(key, counter + 8u, stream, out + 128);
}

/* Block `counter` of each of the 8 consecutive streams stream .. stream + 7 in one 8-lane
 * pass (lane j: stream + j): what eight short draws (the rows of a small symmetric noise
 * matrix, each its own stream) need first, at about the cost of three scalar blocks. */
#ifdef DPC_X86_CLONES
__attribute__((target_clones("avx2", "default")))
#endif
static void dpc_chacha20_streams8(const uint32_t key[8], uint64_t counter, uint64_t stream, uint32_t *out)
{
    DPC_CHACHA_LANES(dpc_v8u, 8, 0, 1)
}

/* Which keystream code path the CPU runs (for show_config). */
static int dpc_simd_level(void)
{
#ifdef DPC_X86_CLONES
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 2;
    if (__builtin_cpu_supports("avx2")) return 1;
#endif
    return 0;
}

static inline void dpc_stream_init(dpc_stream *s, const uint32_t key[8], uint64_t stream)
{
    memcpy(s->key, key, sizeof(s->key));
    s->stream = stream;
    s->counter = 0;
    s->pos = DPC_BUF_WORDS;
    s->end = DPC_BUF_WORDS;
    s->nbits = 0;
    s->bits = 0;
}

static inline void dpc_refill(dpc_stream *s)
{
    dpc_chacha20_blocks16(s->key, s->counter, s->stream, s->buf);
    s->counter += DPC_NBLK;
    s->pos = 0;
    s->end = DPC_BUF_WORDS;
}

/* The blocks dpc_stream_prefill(s, words) computes first: 1 or 2 for a short draw (its
 * own scalar blocks), more (an 8-lane pass, or the first full refill) otherwise. */
static inline int dpc_prefill_blocks(int words)
{
    return (words + 4) / 16 + 1;
}

/* A fresh stream's first refill, for a draw expected to need about `words` words: only
 * the blocks that hold them with at least 4 words to spare, one at a time (a scalar block
 * costs about a third of an 8-lane pass), or one 8-lane pass.  Later refills continue at
 * the next block counter, so the words drawn are exactly those of the full refill; a short
 * draw (a 10-entry row of a small symmetric matrix) no longer computes 16 blocks for 2. */
static inline void dpc_stream_prefill(dpc_stream *s, int words)
{
    uint32_t in[16];
    int i, nb = dpc_prefill_blocks(words);
    if (nb > 8 || s->counter != 0 || s->pos < s->end) return;
    if (nb > 2) {
        dpc_chacha20_blocks8(s->key, 0, s->stream, s->buf);
        s->counter = 8;
        s->pos = 0;
        s->end = 128;
        return;
    }
    memcpy(in, DPC_SIGMA, sizeof(DPC_SIGMA));
    memcpy(in + 4, s->key, sizeof(s->key));
    in[14] = (uint32_t)s->stream;
    in[15] = (uint32_t)(s->stream >> 32);
    for (i = 0; i < nb; i++) {
        in[12] = (uint32_t)i;
        in[13] = 0;
        dpc_chacha20_block(in, s->buf + 16 * i);
    }
    s->counter = (uint64_t)nb;
    s->pos = 0;
    s->end = 16 * nb;
}

/* dpc_stream_prefill(s, words) for a fresh stream whose dpc_prefill_blocks(words) <= 2
 * first blocks were computed elsewhere: `lanes` holds one dpc_chacha20_streams8 pass per
 * block counter (128 words each), this stream in lane `lane`.  The same state as the
 * prefill's, so the same draws. */
static inline void dpc_stream_from_lanes(dpc_stream *s, const uint32_t *lanes, int lane, int words)
{
    int c, nb = dpc_prefill_blocks(words);
    for (c = 0; c < nb; c++)
        memcpy(s->buf + 16 * c, lanes + 128 * c + 16 * lane, 16 * sizeof(uint32_t));
    s->counter = (uint64_t)nb;
    s->pos = 0;
    s->end = 16 * nb;
}

static inline uint32_t dpc_next_u32(dpc_stream *s)
{
    if (__builtin_expect(s->pos >= s->end, 0)) dpc_refill(s);
    return s->buf[s->pos++];
}

static inline uint64_t dpc_next_u64(dpc_stream *s)
{
    uint64_t lo, hi;
    if (__builtin_expect(s->pos <= s->end - 2, 1)) {          /* both words in the buffer */
        lo = s->buf[s->pos];
        hi = s->buf[s->pos + 1];
        s->pos += 2;
        return lo | (hi << 32);
    }
    lo = dpc_next_u32(s);
    hi = dpc_next_u32(s);
    return lo | (hi << 32);
}

/* One uniformly random bit. */
static inline int dpc_bit(dpc_stream *s)
{
    int b;
    if (__builtin_expect(s->nbits == 0, 0)) {
        s->bits = dpc_next_u64(s);
        s->nbits = 64;
    }
    b = (int)(s->bits & 1u);
    s->bits >>= 1;
    s->nbits--;
    return b;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double dpc_uniform(dpc_stream *s)
{
    return (double)(dpc_next_u64(s) >> 11) * 0x1.0p-53;
}

/* Uniform integer in {0, ..., m-1}, 1 <= m <= 2^32: Lemire's method. */
static inline uint32_t dpc_below_u32(dpc_stream *s, uint32_t m)
{
    uint64_t prod = (uint64_t)dpc_next_u32(s) * (uint64_t)m;
    uint32_t low = (uint32_t)prod;
    if (__builtin_expect(low < m, 0)) {
        uint32_t thresh = (uint32_t)(-m) % m;   /* 2^32 mod m */
        while (low < thresh) {
            prod = (uint64_t)dpc_next_u32(s) * (uint64_t)m;
            low = (uint32_t)prod;
        }
    }
    return (uint32_t)(prod >> 32);
}

/* Uniform integer in {0, ..., m-1}, 1 <= m <= 2^64 - 1: Lemire's method. */
static inline uint64_t dpc_below_u64(dpc_stream *s, uint64_t m)
{
    unsigned __int128 prod;
    uint64_t low;
    if (m <= 0xFFFFFFFFull) return dpc_below_u32(s, (uint32_t)m);
    prod = (unsigned __int128)dpc_next_u64(s) * m;
    low = (uint64_t)prod;
    if (__builtin_expect(low < m, 0)) {
        uint64_t thresh = (-m) % m;            /* 2^64 mod m */
        while (low < thresh) {
            prod = (unsigned __int128)dpc_next_u64(s) * m;
            low = (uint64_t)prod;
        }
    }
    return (uint64_t)(prod >> 64);
}

#endif /* DPC_RNG_H */
