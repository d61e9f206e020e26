/*
 * dpc_basis.h -- a Krylov basis' passes against a block of 8 columns (issue 41):
 *
 *     dpb_tdot8:  out = Qᵀ V           (m x 8)     Q given as its m columns (rows of Qt, m x d)
 *     dpb_sub8:   X  -= Q C            (d x 8)     C (m x 8)
 *
 * V, X and C row-major (the block's 8 columns interleaved), Qt row-major (each column of Q
 * contiguous: the column-major stores of dpem_fast._engine._operator and the Krylov solver).
 * Post-processing of released values only (the released operator's basis and coordinates):
 * no statistic of the data is read here.  Summation order, fixed (the same on the AVX-512 path,
 * the AVX2 one and the portable one, for any m, d and caller thread count; deterministic bits):
 *
 *     out_jc = per chunk of DPB_CHUNK consecutive i (from i = 0), an fma chain of Qt_ji V_ic
 *              from 0; the chunks' partials added in chunk order (a chain over d would err
 *              ~√d u: the orthonormality checks read these Gram entries to 10⁻¹⁴)
 *     X_ic   = fnma chain over j = 0 .. m-1 of Qt_ji C_jc, from X_ic
 *     dpb_colsq8: out_c = Σ_i X_ic², chunked as dpb_tdot8
 *
 * dpb_transpose: dst (c x r) = srcᵀ (src r x c, both row-major): a block between the kernels'
 * row-major layout and the stores' columns, in 4 x 4 tiles (numpy's strided copy of a d x 8
 * block is ~3x slower); moves values only.
 */
#ifndef DPC_BASIS_H
#define DPC_BASIS_H

#include <math.h>
#include <stddef.h>
#include "dpc_avx2fma.h"

#define DPB_P 8           /* columns of the block */
#define DPB_CHUNK 256     /* rows per chunk of a dot product's fma chain */

static void dpb_tdot8_c(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *V, double *out)
{
    ptrdiff_t j, i, i0, c;
    for (j = 0; j < m; j++) {
        const double *q = Qt + j * d;
        for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
            double a[DPB_P] = {0, 0, 0, 0, 0, 0, 0, 0};
            ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
            for (i = i0; i < end; i++)
                for (c = 0; c < DPB_P; c++) a[c] = fma(q[i], V[i * DPB_P + c], a[c]);
            for (c = 0; c < DPB_P; c++) out[j * DPB_P + c] = i0 ? out[j * DPB_P + c] + a[c] : a[c];
        }
    }
}

/* out_c = Σ_i X_ic², chunked as dpb_tdot8. */
static void dpb_colsq8_c(const double *X, ptrdiff_t d, double *out)
{
    ptrdiff_t i, i0, c;
    for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
        double a[DPB_P] = {0, 0, 0, 0, 0, 0, 0, 0};
        ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
        for (i = i0; i < end; i++)
            for (c = 0; c < DPB_P; c++) a[c] = fma(X[i * DPB_P + c], X[i * DPB_P + c], a[c]);
        for (c = 0; c < DPB_P; c++) out[c] = i0 ? out[c] + a[c] : a[c];
    }
}

static void dpb_sub8_c(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X)
{
    ptrdiff_t j, i, c;
    for (i = 0; i < d; i++)
        for (j = 0; j < m; j++)
            for (c = 0; c < DPB_P; c++) X[i * DPB_P + c] = fma(-Qt[j * d + i], C[j * DPB_P + c], X[i * DPB_P + c]);
}

static void dpb_transpose_c(const double *src, ptrdiff_t r, ptrdiff_t c, double *dst,
                            ptrdiff_t r4, ptrdiff_t c4)
{
    /* the tiles' edges beyond (r4, c4) (all of it where r4 = c4 = 0) */
    ptrdiff_t i, j;
    for (i = 0; i < r; i++)
        for (j = (i < r4 ? c4 : 0); j < c; j++) dst[j * r + i] = src[i * c + j];
}

#if DPC_HAVE_AVX2FMA
static DPC_AVX2FMA void dpb_transpose_avx2(const double *src, ptrdiff_t r, ptrdiff_t c, double *dst)
{
    ptrdiff_t i, j, r4 = r - r % 4, c4 = c - c % 4;
    for (j = 0; j < c4; j += 4)                 /* column tiles outer: 4 output rows written in order */
        for (i = 0; i < r4; i += 4) {
            const double *s = src + i * c + j;
            double *o = dst + j * r + i;
            __m256d a = _mm256_loadu_pd(s), b = _mm256_loadu_pd(s + c);
            __m256d e = _mm256_loadu_pd(s + 2 * c), f = _mm256_loadu_pd(s + 3 * c);
            __m256d t0 = _mm256_unpacklo_pd(a, b), t1 = _mm256_unpackhi_pd(a, b);
            __m256d t2 = _mm256_unpacklo_pd(e, f), t3 = _mm256_unpackhi_pd(e, f);
            _mm256_storeu_pd(o, _mm256_permute2f128_pd(t0, t2, 0x20));
            _mm256_storeu_pd(o + r, _mm256_permute2f128_pd(t1, t3, 0x20));
            _mm256_storeu_pd(o + 2 * r, _mm256_permute2f128_pd(t0, t2, 0x31));
            _mm256_storeu_pd(o + 3 * r, _mm256_permute2f128_pd(t1, t3, 0x31));
        }
    dpb_transpose_c(src, r, c, dst, r4, c4);
}
#endif

static inline void dpb_transpose(const double *src, ptrdiff_t r, ptrdiff_t c, double *dst)
{
#if DPC_HAVE_AVX2FMA
    if (dpc_avx2fma()) { dpb_transpose_avx2(src, r, c, dst); return; }
#endif
    dpb_transpose_c(src, r, c, dst, 0, 0);
}

#if DPC_HAVE_AVX2FMA

#define DPB_ACC(g) __m256d a##g = _mm256_setzero_pd(), b##g = _mm256_setzero_pd()
#define DPB_DOT(g) do { __m256d q = _mm256_broadcast_sd(Qt + (g) * d + i);  \
                        a##g = _mm256_fmadd_pd(q, v0, a##g);                 \
                        b##g = _mm256_fmadd_pd(q, v1, b##g); } while (0)
#define DPB_PUT(g) do { double *o = out + (g) * DPB_P;                       \
                        if (i0) { a##g = _mm256_add_pd(_mm256_loadu_pd(o), a##g);   \
                                  b##g = _mm256_add_pd(_mm256_loadu_pd(o + 4), b##g); } \
                        _mm256_storeu_pd(o, a##g); _mm256_storeu_pd(o + 4, b##g); } while (0)

/* 6 columns of Q against V: out's 6 rows, each entry chunked fma chains over i in order. */
static DPC_AVX2FMA void dpb_tdot8_g6(const double *Qt, ptrdiff_t d, const double *V, double *out)
{
    ptrdiff_t i, i0;
    for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
        ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
        DPB_ACC(0); DPB_ACC(1); DPB_ACC(2); DPB_ACC(3); DPB_ACC(4); DPB_ACC(5);
        for (i = i0; i < end; i++) {
            __m256d v0 = _mm256_loadu_pd(V + i * DPB_P), v1 = _mm256_loadu_pd(V + i * DPB_P + 4);
            DPB_DOT(0); DPB_DOT(1); DPB_DOT(2); DPB_DOT(3); DPB_DOT(4); DPB_DOT(5);
        }
        DPB_PUT(0); DPB_PUT(1); DPB_PUT(2); DPB_PUT(3); DPB_PUT(4); DPB_PUT(5);
    }
}

static DPC_AVX2FMA void dpb_tdot8_g1(const double *Qt, ptrdiff_t d, const double *V, double *out)
{
    ptrdiff_t i, i0;
    for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
        ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
        DPB_ACC(0);
        for (i = i0; i < end; i++) {
            __m256d v0 = _mm256_loadu_pd(V + i * DPB_P), v1 = _mm256_loadu_pd(V + i * DPB_P + 4);
            DPB_DOT(0);
        }
        DPB_PUT(0);
    }
}

static DPC_AVX2FMA void dpb_tdot8_avx2(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *V, double *out)
{
    ptrdiff_t j = 0;
    for (; j + 6 <= m; j += 6) dpb_tdot8_g6(Qt + j * d, d, V, out + j * DPB_P);
    for (; j < m; j++) dpb_tdot8_g1(Qt + j * d, d, V, out + j * DPB_P);
}

#define DPB_LDX(r) __m256d x##r##a = _mm256_loadu_pd(X + (i + (r)) * DPB_P),   \
                           x##r##b = _mm256_loadu_pd(X + (i + (r)) * DPB_P + 4)
#define DPB_SUB(r) do { __m256d q = _mm256_broadcast_sd(q0 + (r));              \
                        x##r##a = _mm256_fnmadd_pd(q, c0, x##r##a);            \
                        x##r##b = _mm256_fnmadd_pd(q, c1, x##r##b); } while (0)
#define DPB_STX(r) do { _mm256_storeu_pd(X + (i + (r)) * DPB_P, x##r##a);       \
                        _mm256_storeu_pd(X + (i + (r)) * DPB_P + 4, x##r##b); } while (0)

/* Rows i0 .. d-1 of X, 6 at a time in registers; each entry one fnma chain over j in order
   (the AVX2 path from i0 = 0, and the AVX-512 path's last d mod 12 rows: the same bits). */
static DPC_AVX2FMA void dpb_sub8_rows_avx2(const double *Qt, ptrdiff_t m, ptrdiff_t d, ptrdiff_t i0,
                                           const double *C, double *X)
{
    ptrdiff_t i = i0, j;
    for (; i + 6 <= d; i += 6) {
        DPB_LDX(0); DPB_LDX(1); DPB_LDX(2); DPB_LDX(3); DPB_LDX(4); DPB_LDX(5);
        for (j = 0; j < m; j++) {
            const double *q0 = Qt + j * d + i;
            __m256d c0 = _mm256_loadu_pd(C + j * DPB_P), c1 = _mm256_loadu_pd(C + j * DPB_P + 4);
            DPB_SUB(0); DPB_SUB(1); DPB_SUB(2); DPB_SUB(3); DPB_SUB(4); DPB_SUB(5);
        }
        DPB_STX(0); DPB_STX(1); DPB_STX(2); DPB_STX(3); DPB_STX(4); DPB_STX(5);
    }
    for (; i < d; i++) {
        DPB_LDX(0);
        for (j = 0; j < m; j++) {
            const double *q0 = Qt + j * d + i;
            __m256d c0 = _mm256_loadu_pd(C + j * DPB_P), c1 = _mm256_loadu_pd(C + j * DPB_P + 4);
            DPB_SUB(0);
        }
        DPB_STX(0);
    }
}

static DPC_AVX2FMA void dpb_sub8_avx2(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X)
{
    dpb_sub8_rows_avx2(Qt, m, d, 0, C, X);
}

static DPC_AVX2FMA void dpb_colsq8_avx2(const double *X, ptrdiff_t d, double *out)
{
    ptrdiff_t i, i0;
    for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
        ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
        __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
        for (i = i0; i < end; i++) {
            __m256d x0 = _mm256_loadu_pd(X + i * DPB_P), x1 = _mm256_loadu_pd(X + i * DPB_P + 4);
            a = _mm256_fmadd_pd(x0, x0, a);
            b = _mm256_fmadd_pd(x1, x1, b);
        }
        if (i0) { a = _mm256_add_pd(_mm256_loadu_pd(out), a); b = _mm256_add_pd(_mm256_loadu_pd(out + 4), b); }
        _mm256_storeu_pd(out, a);
        _mm256_storeu_pd(out + 4, b);
    }
}

#endif

#if DPC_HAVE_AVX2FMA
/* AVX-512: a row of a block of 8 columns is one register, the broadcast folded into the fma;
   the same chains in the same order (the header's docstring).  tdot8 takes 8 columns of Q at a
   time (8 accumulators), sub8 12 rows of X (12 registers); their remainders run the AVX2 path's
   code.  colsq8 (one d x 8 pass, ~5 us) keeps the AVX2 path. */
#define DPB_ACC5(g) __m512d a##g = _mm512_setzero_pd()
#define DPB_DOT5(g) a##g = _mm512_fmadd_pd(_mm512_set1_pd(Qt[(g) * d + i]), v, a##g)
#define DPB_PUT5(g) do { double *o = out + (g) * DPB_P;                                 \
                         if (i0) a##g = _mm512_add_pd(_mm512_loadu_pd(o), a##g);       \
                         _mm512_storeu_pd(o, a##g); } while (0)

static DPC_AVX512 void dpb_tdot8_g8_avx512(const double *Qt, ptrdiff_t d, const double *V, double *out)
{
    ptrdiff_t i, i0;
    for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
        ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
        DPB_ACC5(0); DPB_ACC5(1); DPB_ACC5(2); DPB_ACC5(3); DPB_ACC5(4); DPB_ACC5(5); DPB_ACC5(6); DPB_ACC5(7);
        for (i = i0; i < end; i++) {
            __m512d v = _mm512_loadu_pd(V + i * DPB_P);
            DPB_DOT5(0); DPB_DOT5(1); DPB_DOT5(2); DPB_DOT5(3); DPB_DOT5(4); DPB_DOT5(5); DPB_DOT5(6); DPB_DOT5(7);
        }
        DPB_PUT5(0); DPB_PUT5(1); DPB_PUT5(2); DPB_PUT5(3); DPB_PUT5(4); DPB_PUT5(5); DPB_PUT5(6); DPB_PUT5(7);
    }
}

/* 8 columns at a time, the last m mod 8 on the AVX2 path (the same bits). */
static DPC_AVX512 void dpb_tdot8_avx512(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *V, double *out)
{
    ptrdiff_t j = 0;
    for (; j + 8 <= m; j += 8) dpb_tdot8_g8_avx512(Qt + j * d, d, V, out + j * DPB_P);
    dpb_tdot8_avx2(Qt + j * d, m - j, d, V, out + j * DPB_P);
}

#define DPB_LDX5(r) __m512d x##r = _mm512_loadu_pd(X + (i + (r)) * DPB_P)
#define DPB_SUB5(r) x##r = _mm512_fnmadd_pd(_mm512_set1_pd(q0[r]), c, x##r)
#define DPB_STX5(r) _mm512_storeu_pd(X + (i + (r)) * DPB_P, x##r)

static DPC_AVX512 void dpb_sub8_avx512(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X)
{
    ptrdiff_t i = 0, j;
    for (; i + 12 <= d; i += 12) {
        DPB_LDX5(0); DPB_LDX5(1); DPB_LDX5(2); DPB_LDX5(3); DPB_LDX5(4); DPB_LDX5(5);
        DPB_LDX5(6); DPB_LDX5(7); DPB_LDX5(8); DPB_LDX5(9); DPB_LDX5(10); DPB_LDX5(11);
        for (j = 0; j < m; j++) {
            const double *q0 = Qt + j * d + i;
            __m512d c = _mm512_loadu_pd(C + j * DPB_P);
            DPB_SUB5(0); DPB_SUB5(1); DPB_SUB5(2); DPB_SUB5(3); DPB_SUB5(4); DPB_SUB5(5);
            DPB_SUB5(6); DPB_SUB5(7); DPB_SUB5(8); DPB_SUB5(9); DPB_SUB5(10); DPB_SUB5(11);
        }
        DPB_STX5(0); DPB_STX5(1); DPB_STX5(2); DPB_STX5(3); DPB_STX5(4); DPB_STX5(5);
        DPB_STX5(6); DPB_STX5(7); DPB_STX5(8); DPB_STX5(9); DPB_STX5(10); DPB_STX5(11);
    }
    dpb_sub8_rows_avx2(Qt, m, d, i, C, X);
}
#endif

/* fast: 0 the portable path, 1 at most AVX2 (tests), 2 the widest path this CPU runs. */
static inline void dpb_tdot8(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *V, double *out, int fast)
{
#if DPC_HAVE_AVX2FMA
    if (fast >= 2 && dpc_avx512()) { dpb_tdot8_avx512(Qt, m, d, V, out); return; }
    if (fast && dpc_avx2fma()) { dpb_tdot8_avx2(Qt, m, d, V, out); return; }
#endif
    dpb_tdot8_c(Qt, m, d, V, out);
}

static inline void dpb_sub8(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X, int fast)
{
#if DPC_HAVE_AVX2FMA
    if (fast >= 2 && dpc_avx512()) { dpb_sub8_avx512(Qt, m, d, C, X); return; }
    if (fast && dpc_avx2fma()) { dpb_sub8_avx2(Qt, m, d, C, X); return; }
#endif
    dpb_sub8_c(Qt, m, d, C, X);
}

static inline void dpb_colsq8(const double *X, ptrdiff_t d, double *out, int fast)
{
#if DPC_HAVE_AVX2FMA
    if (fast && dpc_avx2fma()) { dpb_colsq8_avx2(X, d, out); return; }
#endif
    dpb_colsq8_c(X, d, out);
}

#endif
