/*
 * dpc_basis.h -- a Krylov basis' passes against a block of 8 columns (issue 41):
 *
 *     dpb_tdot8:  out = Qᵀ V           (m x 8)     Q given as its m columns (rows of Qt, m x d)
 *     dpb_sub8:   X  -= Q C            (d x 8)     C (m x 8)
 *
 * V, X and C row-major (the block's 8 columns interleaved), Qt row-major (each column of Q
 * contiguous: the column-major stores of dpem_fast._engine._operator and the Krylov solver).
 * Post-processing of released values only (the released operator's basis and coordinates):
 * no statistic of the data is read here.  Summation order, fixed (the same on the AVX2 path
 * and the portable one, for any m, d and caller thread count; deterministic bits):
 *
 *     out_jc = per chunk of DPB_CHUNK consecutive i (from i = 0), an fma chain of Qt_ji V_ic
 *              from 0; the chunks' partials added in chunk order (a chain over d would err
 *              ~√d u: the orthonormality checks read these Gram entries to 10⁻¹⁴)
 *     X_ic   = fnma chain over j = 0 .. m-1 of Qt_ji C_jc, from X_ic
 *     dpb_colsq8: out_c = Σ_i X_ic², chunked as dpb_tdot8
 *
 * and dpb_qr8, a thin QR ``W = V R`` of a d x 8 block (Cholesky QR twice: the Gram matrix
 * summed as dpb_tdot8 sums, its Cholesky factor and that factor's inverse in plain C (no fma,
 * one compiled copy for both paths), each row of V then the fma chain over a = 0 .. 7 of
 * w_a Rinv_a·); it declines (returns 1, V unspecified) where a column keeps less than
 * DPB_QR_KEEP of the block's largest norm off the columns before it (the first pass' pivots),
 * for the caller's Householder QR: twice is enough only for a well-conditioned block.
 *
 * AVX2 + FMA: 6 columns of Q (dpb_tdot8) or 6 rows of X (dpb_sub8) at a time, 12 accumulators
 * in registers; each accumulator is still one chain in the order above.  No threads.
 */
#ifndef DPC_BASIS_H
#define DPC_BASIS_H

#include <math.h>
#include <stddef.h>

#define DPB_P 8           /* columns of the block */
#define DPB_CHUNK 256     /* rows per chunk of a dot product's fma chain */
#define DPB_QR_KEEP 1e-4  /* smallest pivot of dpb_qr8's first pass, relative to the largest norm */

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

/* G = Wᵀ W (8 x 8, both triangles), chunked as dpb_tdot8. */
static void dpb_gram8_c(const double *W, ptrdiff_t d, double *G)
{
    ptrdiff_t i, i0, a, c;
    for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
        double g[DPB_P * DPB_P] = {0};
        ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
        for (i = i0; i < end; i++)
            for (a = 0; a < DPB_P; a++)
                for (c = a; c < DPB_P; c++) g[a * DPB_P + c] = fma(W[i * DPB_P + a], W[i * DPB_P + c], g[a * DPB_P + c]);
        for (a = 0; a < DPB_P; a++)
            for (c = a; c < DPB_P; c++) G[a * DPB_P + c] = i0 ? G[a * DPB_P + c] + g[a * DPB_P + c] : g[a * DPB_P + c];
    }
    for (a = 0; a < DPB_P; a++)
        for (c = 0; c < a; c++) G[a * DPB_P + c] = G[c * DPB_P + a];
}

/* V = W Rinv, row by row (Rinv upper triangular, its zeros in the chain too). */
static void dpb_apply8_c(const double *W, ptrdiff_t d, const double *Ri, double *V)
{
    ptrdiff_t i, a, c;
    for (i = 0; i < d; i++) {
        double v[DPB_P] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (a = 0; a < DPB_P; a++)
            for (c = 0; c < DPB_P; c++) v[c] = fma(W[i * DPB_P + a], Ri[a * DPB_P + c], v[c]);
        for (c = 0; c < DPB_P; c++) V[i * DPB_P + c] = v[c];
    }
}

static void dpb_sub8_c(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X)
{
    ptrdiff_t j, i, c;
    for (i = 0; i < d; i++)
        for (j = 0; j < m; j++)
            for (c = 0; c < DPB_P; c++) X[i * DPB_P + c] = fma(-Qt[j * d + i], C[j * DPB_P + c], X[i * DPB_P + c]);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DPC_NO_CLONES)
#define DPB_HAVE_AVX2 1
#include <immintrin.h>
#define DPB_AVX2 __attribute__((target("avx2,fma")))

static int dpb_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#define DPB_ACC(g) __m256d a##g = _mm256_setzero_pd(), b##g = _mm256_setzero_pd()
#define DPB_DOT(g) do { __m256d q = _mm256_broadcast_sd(Qt + (g) * d + i);  \
                        a##g = _mm256_fmadd_pd(q, v0, a##g);                 \
                        b##g = _mm256_fmadd_pd(q, v1, b##g); } while (0)
#define DPB_PUT(g) do { double *o = out + (g) * DPB_P;                       \
                        if (i0) { a##g = _mm256_add_pd(_mm256_loadu_pd(o), a##g);   \
                                  b##g = _mm256_add_pd(_mm256_loadu_pd(o + 4), b##g); } \
                        _mm256_storeu_pd(o, a##g); _mm256_storeu_pd(o + 4, b##g); } while (0)

/* 6 columns of Q against V: out's 6 rows, each entry chunked fma chains over i in order. */
static DPB_AVX2 void dpb_tdot8_g6(const double *Qt, ptrdiff_t d, const double *V, double *out)
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

static DPB_AVX2 void dpb_tdot8_g1(const double *Qt, ptrdiff_t d, const double *V, double *out)
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

static DPB_AVX2 void dpb_tdot8_avx2(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *V, double *out)
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

/* 6 rows of X at a time, in registers; each entry one fnma chain over j in order. */
static DPB_AVX2 void dpb_sub8_avx2(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X)
{
    ptrdiff_t i = 0, j;
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
static DPB_AVX2 void dpb_colsq8_avx2(const double *X, ptrdiff_t d, double *out)
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

/* Gram: rows 0-3 of G whole (8 accumulators), rows 4-7 on columns 4-7 (4); the rest mirrored. */
static DPB_AVX2 void dpb_gram8_avx2(const double *W, ptrdiff_t d, double *G)
{
    ptrdiff_t i, i0, a;
    for (i0 = 0; i0 < d; i0 += DPB_CHUNK) {
        ptrdiff_t end = i0 + DPB_CHUNK < d ? i0 + DPB_CHUNK : d;
        __m256d g0a = _mm256_setzero_pd(), g0b = _mm256_setzero_pd(), g1a = _mm256_setzero_pd(),
                g1b = _mm256_setzero_pd(), g2a = _mm256_setzero_pd(), g2b = _mm256_setzero_pd(),
                g3a = _mm256_setzero_pd(), g3b = _mm256_setzero_pd(), g4 = _mm256_setzero_pd(),
                g5 = _mm256_setzero_pd(), g6 = _mm256_setzero_pd(), g7 = _mm256_setzero_pd();
        for (i = i0; i < end; i++) {
            const double *w = W + i * DPB_P;
            __m256d x0 = _mm256_loadu_pd(w), x1 = _mm256_loadu_pd(w + 4), b;
            b = _mm256_broadcast_sd(w);     g0a = _mm256_fmadd_pd(b, x0, g0a); g0b = _mm256_fmadd_pd(b, x1, g0b);
            b = _mm256_broadcast_sd(w + 1); g1a = _mm256_fmadd_pd(b, x0, g1a); g1b = _mm256_fmadd_pd(b, x1, g1b);
            b = _mm256_broadcast_sd(w + 2); g2a = _mm256_fmadd_pd(b, x0, g2a); g2b = _mm256_fmadd_pd(b, x1, g2b);
            b = _mm256_broadcast_sd(w + 3); g3a = _mm256_fmadd_pd(b, x0, g3a); g3b = _mm256_fmadd_pd(b, x1, g3b);
            g4 = _mm256_fmadd_pd(_mm256_broadcast_sd(w + 4), x1, g4);
            g5 = _mm256_fmadd_pd(_mm256_broadcast_sd(w + 5), x1, g5);
            g6 = _mm256_fmadd_pd(_mm256_broadcast_sd(w + 6), x1, g6);
            g7 = _mm256_fmadd_pd(_mm256_broadcast_sd(w + 7), x1, g7);
        }
#define DPB_GPUT(ptr, v) do { __m256d t_ = (v); if (i0) t_ = _mm256_add_pd(_mm256_loadu_pd(ptr), t_); \
                              _mm256_storeu_pd((ptr), t_); } while (0)
        DPB_GPUT(G, g0a); DPB_GPUT(G + 4, g0b); DPB_GPUT(G + 8, g1a); DPB_GPUT(G + 12, g1b);
        DPB_GPUT(G + 16, g2a); DPB_GPUT(G + 20, g2b); DPB_GPUT(G + 24, g3a); DPB_GPUT(G + 28, g3b);
        DPB_GPUT(G + 36, g4); DPB_GPUT(G + 44, g5); DPB_GPUT(G + 52, g6); DPB_GPUT(G + 60, g7);
#undef DPB_GPUT
    }
    for (a = 4; a < DPB_P; a++) {
        ptrdiff_t c;
        for (c = 0; c < 4; c++) G[a * DPB_P + c] = G[c * DPB_P + a];
    }
}

static DPB_AVX2 void dpb_apply8_avx2(const double *W, ptrdiff_t d, const double *Ri, double *V)
{
    ptrdiff_t i, a;
    for (i = 0; i < d; i++) {
        const double *w = W + i * DPB_P;
        __m256d v0 = _mm256_setzero_pd(), v1 = _mm256_setzero_pd();
        for (a = 0; a < DPB_P; a++) {
            __m256d b = _mm256_broadcast_sd(w + a);
            v0 = _mm256_fmadd_pd(b, _mm256_loadu_pd(Ri + a * DPB_P), v0);
            v1 = _mm256_fmadd_pd(b, _mm256_loadu_pd(Ri + a * DPB_P + 4), v1);
        }
        _mm256_storeu_pd(V + i * DPB_P, v0);
        _mm256_storeu_pd(V + i * DPB_P + 4, v1);
    }
}
#else
#define DPB_HAVE_AVX2 0
static int dpb_avx2(void) { return 0; }
#endif

static inline int dpb_fast(void) { return dpb_avx2(); }

/* fast = 0 forces the portable path (tests). */
static inline void dpb_tdot8(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *V, double *out, int fast)
{
#if DPB_HAVE_AVX2
    if (fast && dpb_avx2()) { dpb_tdot8_avx2(Qt, m, d, V, out); return; }
#endif
    dpb_tdot8_c(Qt, m, d, V, out);
}

static inline void dpb_sub8(const double *Qt, ptrdiff_t m, ptrdiff_t d, const double *C, double *X, int fast)
{
#if DPB_HAVE_AVX2
    if (fast && dpb_avx2()) { dpb_sub8_avx2(Qt, m, d, C, X); return; }
#endif
    dpb_sub8_c(Qt, m, d, C, X);
}

static inline void dpb_colsq8(const double *X, ptrdiff_t d, double *out, int fast)
{
#if DPB_HAVE_AVX2
    if (fast && dpb_avx2()) { dpb_colsq8_avx2(X, d, out); return; }
#endif
    dpb_colsq8_c(X, d, out);
}

static inline void dpb_gram8(const double *W, ptrdiff_t d, double *G, int fast)
{
#if DPB_HAVE_AVX2
    if (fast && dpb_avx2()) { dpb_gram8_avx2(W, d, G); return; }
#endif
    dpb_gram8_c(W, d, G);
}

static inline void dpb_apply8(const double *W, ptrdiff_t d, const double *Ri, double *V, int fast)
{
#if DPB_HAVE_AVX2
    if (fast && dpb_avx2()) { dpb_apply8_avx2(W, d, Ri, V); return; }
#endif
    dpb_apply8_c(W, d, Ri, V);
}

/* G = Rᵀ R (R upper, row-major) and Ri = R⁻¹; 1 where a pivot is below keep² (or not a number). */
static int dpb_chol8(const double *G, double keep2, double *R, double *Ri)
{
    int j, k, l;
    for (j = 0; j < DPB_P * DPB_P; j++) R[j] = Ri[j] = 0.0;
    for (j = 0; j < DPB_P; j++) {
        double s = G[j * DPB_P + j];
        for (k = 0; k < j; k++) s -= R[k * DPB_P + j] * R[k * DPB_P + j];
        if (!(s > keep2)) return 1;
        R[j * DPB_P + j] = sqrt(s);
        for (l = j + 1; l < DPB_P; l++) {
            double t = G[j * DPB_P + l];
            for (k = 0; k < j; k++) t -= R[k * DPB_P + j] * R[k * DPB_P + l];
            R[j * DPB_P + l] = t / R[j * DPB_P + j];
        }
    }
    for (j = 0; j < DPB_P; j++) {
        Ri[j * DPB_P + j] = 1.0 / R[j * DPB_P + j];
        for (k = j - 1; k >= 0; k--) {          /* row k of column j: −(Σ_{l>k} R_kl Ri_lj) / R_kk */
            double t = 0.0;
            for (l = k + 1; l <= j; l++) t += R[k * DPB_P + l] * Ri[l * DPB_P + j];
            Ri[k * DPB_P + j] = -t / R[k * DPB_P + k];
        }
    }
    return 0;
}

/* W = V R (module docstring): 0, or 1 (declined) for the caller's Householder QR. */
static inline int dpb_qr8(const double *W, ptrdiff_t d, double *V, double *R, int fast)
{
    double G[DPB_P * DPB_P], R1[DPB_P * DPB_P], Ri[DPB_P * DPB_P], R2[DPB_P * DPB_P], top = 0.0;
    int j, k, l;
    dpb_gram8(W, d, G, fast);
    for (j = 0; j < DPB_P; j++) top = G[j * DPB_P + j] > top ? G[j * DPB_P + j] : top;
    if (!(top > 0.0) || dpb_chol8(G, DPB_QR_KEEP * DPB_QR_KEEP * top, R1, Ri)) return 1;
    dpb_apply8(W, d, Ri, V, fast);
    dpb_gram8(V, d, G, fast);
    if (dpb_chol8(G, 0.25, R2, Ri)) return 1;
    dpb_apply8(V, d, Ri, V, fast);
    for (j = 0; j < DPB_P; j++)                 /* R = R2 R1 (both upper) */
        for (l = 0; l < DPB_P; l++) {
            double t = 0.0;
            for (k = 0; k < DPB_P; k++) t += R2[j * DPB_P + k] * R1[k * DPB_P + l];
            R[j * DPB_P + l] = t;
        }
    return 0;
}

#endif
