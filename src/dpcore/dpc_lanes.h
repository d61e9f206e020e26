/*
 * dpc_lanes.h -- per-component moment accumulators of the E-step kernels.
 *
 * In-chunk row sums run in DPC_LANES (16) fixed lanes: lane l of an accumulator adds the
 * rows r with r % 16 == l, chunk after chunk, for a whole block; at the block's end the 16
 * lanes are combined by the fixed tree of dpe_hsum (dpe_lanes_flush_*).  So the rounding
 * of every statistic depends on the block layout only, never on the SIMD width or on
 * which thread runs the block.  Each accumulator adds its terms in row order; splitting
 * or grouping the loops below never changes the result.
 *
 * Lane layout of one component (doubles):
 *   [n: 16][s1: d x 16]                         dpe_lanes_n_s1_size(d)   counts, first moments
 *   [s2 upper pairs, row by row: d(d+1)/2 x 16] dpe_lanes_s2_size(d)     second moments
 * A model with counts and first moments only (Bernoulli mixture, k-means) uses the first
 * part alone; the GMM appends the second.
 *
 *   dpe_lanes_n_s1     n += g, s1_i += g x_i; optionally keeps W[i, r] = g_r x_ir (the
 *                      rounded products) for dpe_lanes_s2.
 *   dpe_lanes_s2       s2_ij += W_i x_j for i <= j (register-blocked).
 *   dpe_lanes_flush_n_s1 / dpe_lanes_flush_s2   block end: lanes -> partial row.
 *   dpe_moments_prep   BLAS path: n, s1 over one chunk, and W = sqrt(g) x for dsyrk.
 */
#ifndef DPC_LANES_H
#define DPC_LANES_H

#include "dpc_f32.h"
#include "dpc_simd.h"

/* Doubles of lane accumulators for the counts and first moments of one component. */
static inline ptrdiff_t dpe_lanes_n_s1_size(ptrdiff_t d)
{
    return (1 + d) * DPE_L;
}

/* Doubles of lane accumulators for the upper-triangle second moments of one component. */
static inline ptrdiff_t dpe_lanes_s2_size(ptrdiff_t d)
{
    return d * (d + 1) / 2 * DPE_L;
}

/* Counts and first moments of one component over one chunk, added into lanes la
   ([n: 16][s1: d x 16]).  g: responsibilities of the chunk's rows (zero on the padding,
   npad % 16 == 0); Xt: (d, ld).  With W != NULL the products g_r x_ir are also stored in
   W (d, ld) for dpe_lanes_s2, and each is rounded before it is added (the GMM's numbers).
   With W == NULL (no second moments) the AVX2 / AVX-512 clones may contract a + g x into
   one FMA.  d = 0 accumulates the counts only. */
DPE_CLONES static void dpe_lanes_n_s1_clones(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                             ptrdiff_t npad, const double *g, double *W, double *la)
{
    ptrdiff_t i, r;
    double *lp = la;
    dpe_v8 a0 = DPE_LD(lp), a1 = DPE_LD(lp + 8);
    for (r = 0; r < npad; r += DPE_L) {
        a0 += DPE_LD(g + r);
        a1 += DPE_LD(g + r + 8);
    }
    DPE_ST(lp, a0); DPE_ST(lp + 8, a1);
    lp += DPE_L;
    if (W == NULL) {
        /* two rows of Xt at a time: each load of g serves two accumulators */
        for (i = 0; i + 1 < d; i += 2, lp += 2 * DPE_L) {
            const double *x = Xt + i * ld, *y = x + ld;
            dpe_v8 b0 = DPE_LD(lp + DPE_L), b1 = DPE_LD(lp + DPE_L + 8);
            a0 = DPE_LD(lp); a1 = DPE_LD(lp + 8);
            for (r = 0; r < npad; r += DPE_L) {
                dpe_v8 g0 = DPE_LD(g + r), g1 = DPE_LD(g + r + 8);
                a0 += g0 * DPE_LD(x + r); a1 += g1 * DPE_LD(x + r + 8);
                b0 += g0 * DPE_LD(y + r); b1 += g1 * DPE_LD(y + r + 8);
            }
            DPE_ST(lp, a0); DPE_ST(lp + 8, a1);
            DPE_ST(lp + DPE_L, b0); DPE_ST(lp + DPE_L + 8, b1);
        }
        if (i < d) {
            const double *x = Xt + i * ld;
            a0 = DPE_LD(lp); a1 = DPE_LD(lp + 8);
            for (r = 0; r < npad; r += DPE_L) {
                a0 += DPE_LD(g + r) * DPE_LD(x + r);
                a1 += DPE_LD(g + r + 8) * DPE_LD(x + r + 8);
            }
            DPE_ST(lp, a0); DPE_ST(lp + 8, a1);
        }
        return;
    }
    for (i = 0; i < d; i++, lp += DPE_L) {
        const double *x = Xt + i * ld;
        double *w = W + i * ld;
        a0 = DPE_LD(lp); a1 = DPE_LD(lp + 8);
        for (r = 0; r < npad; r += DPE_L) {
            dpe_v8 v0 = DPE_LD(g + r) * DPE_LD(x + r), v1 = DPE_LD(g + r + 8) * DPE_LD(x + r + 8);
            DPE_ST(w + r, v0); DPE_ST(w + r + 8, v1);
            a0 += v0; a1 += v1;
        }
        DPE_ST(lp, a0); DPE_ST(lp + 8, a1);
    }
}

/* Upper-triangle second moments of one component over one chunk, added into lanes lp
   ([s2 upper pairs: d(d+1)/2 x 16]); W as left by dpe_lanes_n_s1. */
DPE_CLONES static void dpe_lanes_s2_clones(const double *Xt, const double *W, ptrdiff_t d,
                                           ptrdiff_t ld, ptrdiff_t npad, double *lp)
{
    ptrdiff_t i, j, r;
    dpe_v8 a0, a1;
    /* S2 upper pairs, accumulator of (i, j) at lp + DPE_L * (off(i) + j - i) with
       off(i) = i d - i (i - 1) / 2.  Rows are taken two at a time and columns four, then
       two, then one at a time (2 x 4 and 2 x 2 register blocks).  Every accumulator still
       adds its tiles in row order, so the grouping does not change the result. */
    for (i = 0; i < d; i += 2) {
        const double *w = W + i * ld, *xi = Xt + i * ld;
        double *ai = lp + DPE_L * (i * d - i * (i - 1) / 2);
        a0 = DPE_LD(ai); a1 = DPE_LD(ai + 8);
        for (r = 0; r < npad; r += DPE_L) {
            a0 += DPE_LD(w + r) * DPE_LD(xi + r);
            a1 += DPE_LD(w + r + 8) * DPE_LD(xi + r + 8);
        }
        DPE_ST(ai, a0); DPE_ST(ai + 8, a1);
        if (i + 1 == d) break;
        {
            const double *v = w + ld;                   /* row i + 1 */
            double *bi = ai + DPE_L * (d - i);          /* accumulator of (i + 1, i + 1) */
            for (j = i + 1; j + 3 < d; j += 4) {
                /* 2 x 4 block: 12 loads per 16 FMAs per tile */
                const double *xj = Xt + j * ld;
                double *pa = ai + DPE_L * (j - i), *pb = bi + DPE_L * (j - i - 1);
                dpe_v8 e0 = DPE_LD(pa), e1 = DPE_LD(pa + 8), e2 = DPE_LD(pa + 16), e3 = DPE_LD(pa + 24);
                dpe_v8 e4 = DPE_LD(pa + 32), e5 = DPE_LD(pa + 40), e6 = DPE_LD(pa + 48), e7 = DPE_LD(pa + 56);
                dpe_v8 f0 = DPE_LD(pb), f1 = DPE_LD(pb + 8), f2 = DPE_LD(pb + 16), f3 = DPE_LD(pb + 24);
                dpe_v8 f4 = DPE_LD(pb + 32), f5 = DPE_LD(pb + 40), f6 = DPE_LD(pb + 48), f7 = DPE_LD(pb + 56);
                for (r = 0; r < npad; r += DPE_L) {
                    dpe_v8 w0 = DPE_LD(w + r), w1 = DPE_LD(w + r + 8);
                    dpe_v8 v0 = DPE_LD(v + r), v1 = DPE_LD(v + r + 8);
                    dpe_v8 y0 = DPE_LD(xj + r), y1 = DPE_LD(xj + r + 8);
                    dpe_v8 y2 = DPE_LD(xj + ld + r), y3 = DPE_LD(xj + ld + r + 8);
                    dpe_v8 y4 = DPE_LD(xj + 2 * ld + r), y5 = DPE_LD(xj + 2 * ld + r + 8);
                    dpe_v8 y6 = DPE_LD(xj + 3 * ld + r), y7 = DPE_LD(xj + 3 * ld + r + 8);
                    DPE_KEEP_LOADS();
                    e0 += w0 * y0; e1 += w1 * y1; f0 += v0 * y0; f1 += v1 * y1;
                    e2 += w0 * y2; e3 += w1 * y3; f2 += v0 * y2; f3 += v1 * y3;
                    e4 += w0 * y4; e5 += w1 * y5; f4 += v0 * y4; f5 += v1 * y5;
                    e6 += w0 * y6; e7 += w1 * y7; f6 += v0 * y6; f7 += v1 * y7;
                }
                DPE_ST(pa, e0); DPE_ST(pa + 8, e1); DPE_ST(pa + 16, e2); DPE_ST(pa + 24, e3);
                DPE_ST(pa + 32, e4); DPE_ST(pa + 40, e5); DPE_ST(pa + 48, e6); DPE_ST(pa + 56, e7);
                DPE_ST(pb, f0); DPE_ST(pb + 8, f1); DPE_ST(pb + 16, f2); DPE_ST(pb + 24, f3);
                DPE_ST(pb + 32, f4); DPE_ST(pb + 40, f5); DPE_ST(pb + 48, f6); DPE_ST(pb + 56, f7);
            }
            for (; j + 1 < d; j += 2) {
                const double *x0 = Xt + j * ld, *x1 = x0 + ld;
                double *p00 = ai + DPE_L * (j - i), *p01 = p00 + DPE_L;
                double *p10 = bi + DPE_L * (j - i - 1), *p11 = p10 + DPE_L;
                dpe_v8 e00 = DPE_LD(p00), f00 = DPE_LD(p00 + 8);
                dpe_v8 e01 = DPE_LD(p01), f01 = DPE_LD(p01 + 8);
                dpe_v8 e10 = DPE_LD(p10), f10 = DPE_LD(p10 + 8);
                dpe_v8 e11 = DPE_LD(p11), f11 = DPE_LD(p11 + 8);
                for (r = 0; r < npad; r += DPE_L) {
                    dpe_v8 w0 = DPE_LD(w + r), w1 = DPE_LD(w + r + 8);
                    dpe_v8 v0 = DPE_LD(v + r), v1 = DPE_LD(v + r + 8);
                    dpe_v8 y0 = DPE_LD(x0 + r), y1 = DPE_LD(x0 + r + 8);
                    dpe_v8 z0 = DPE_LD(x1 + r), z1 = DPE_LD(x1 + r + 8);
                    DPE_KEEP_LOADS();
                    e00 += w0 * y0; f00 += w1 * y1;
                    e01 += w0 * z0; f01 += w1 * z1;
                    e10 += v0 * y0; f10 += v1 * y1;
                    e11 += v0 * z0; f11 += v1 * z1;
                }
                DPE_ST(p00, e00); DPE_ST(p00 + 8, f00);
                DPE_ST(p01, e01); DPE_ST(p01 + 8, f01);
                DPE_ST(p10, e10); DPE_ST(p10 + 8, f10);
                DPE_ST(p11, e11); DPE_ST(p11 + 8, f11);
            }
            if (j < d) {
                const double *x0 = Xt + j * ld;
                double *p00 = ai + DPE_L * (j - i), *p10 = bi + DPE_L * (j - i - 1);
                dpe_v8 e00 = DPE_LD(p00), f00 = DPE_LD(p00 + 8);
                dpe_v8 e10 = DPE_LD(p10), f10 = DPE_LD(p10 + 8);
                for (r = 0; r < npad; r += DPE_L) {
                    dpe_v8 y0 = DPE_LD(x0 + r), y1 = DPE_LD(x0 + r + 8);
                    e00 += DPE_LD(w + r) * y0; f00 += DPE_LD(w + r + 8) * y1;
                    e10 += DPE_LD(v + r) * y0; f10 += DPE_LD(v + r + 8) * y1;
                }
                DPE_ST(p00, e00); DPE_ST(p00 + 8, f00);
                DPE_ST(p10, e10); DPE_ST(p10 + 8, f10);
            }
        }
    }
}

#if DPE_HAVE_AVX2
/* The AVX2 + FMA paths of dpe_lanes_n_s1 and dpe_lanes_s2 (dpc_simd.h): the 16 lanes of an
   accumulator are four __m256d (lanes 4q .. 4q + 3).  Each lane performs the clone's
   operations in the clone's order: n += g; W path: w = g x (rounded, stored), s1 += w;
   no-W path: s1 = fma(g, x, s1); s2 = fma(w, x_j, s2). */
#define DPE_LD4(p) _mm256_loadu_pd(p)
#define DPE_ST4(p, v) _mm256_storeu_pd((p), (v))
static DPE_AVX2 void dpe_lanes_n_s1_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                         const double *g, double *W, double *la)
{
    ptrdiff_t i, r;
    double *lp = la;
    __m256d a0 = DPE_LD4(lp), a1 = DPE_LD4(lp + 4), a2 = DPE_LD4(lp + 8), a3 = DPE_LD4(lp + 12);
    for (r = 0; r < npad; r += DPE_L) {
        a0 = _mm256_add_pd(a0, DPE_LD4(g + r));
        a1 = _mm256_add_pd(a1, DPE_LD4(g + r + 4));
        a2 = _mm256_add_pd(a2, DPE_LD4(g + r + 8));
        a3 = _mm256_add_pd(a3, DPE_LD4(g + r + 12));
    }
    DPE_ST4(lp, a0); DPE_ST4(lp + 4, a1); DPE_ST4(lp + 8, a2); DPE_ST4(lp + 12, a3);
    lp += DPE_L;
    if (W == NULL) {
        for (i = 0; i + 1 < d; i += 2, lp += 2 * DPE_L) {
            const double *x = Xt + i * ld, *y = x + ld;
            __m256d b0 = DPE_LD4(lp + 16), b1 = DPE_LD4(lp + 20), b2 = DPE_LD4(lp + 24), b3 = DPE_LD4(lp + 28);
            a0 = DPE_LD4(lp); a1 = DPE_LD4(lp + 4); a2 = DPE_LD4(lp + 8); a3 = DPE_LD4(lp + 12);
            for (r = 0; r < npad; r += DPE_L) {
                __m256d g0 = DPE_LD4(g + r), g1 = DPE_LD4(g + r + 4);
                __m256d g2 = DPE_LD4(g + r + 8), g3 = DPE_LD4(g + r + 12);
                a0 = _mm256_fmadd_pd(g0, DPE_LD4(x + r), a0);
                a1 = _mm256_fmadd_pd(g1, DPE_LD4(x + r + 4), a1);
                a2 = _mm256_fmadd_pd(g2, DPE_LD4(x + r + 8), a2);
                a3 = _mm256_fmadd_pd(g3, DPE_LD4(x + r + 12), a3);
                b0 = _mm256_fmadd_pd(g0, DPE_LD4(y + r), b0);
                b1 = _mm256_fmadd_pd(g1, DPE_LD4(y + r + 4), b1);
                b2 = _mm256_fmadd_pd(g2, DPE_LD4(y + r + 8), b2);
                b3 = _mm256_fmadd_pd(g3, DPE_LD4(y + r + 12), b3);
            }
            DPE_ST4(lp, a0); DPE_ST4(lp + 4, a1); DPE_ST4(lp + 8, a2); DPE_ST4(lp + 12, a3);
            DPE_ST4(lp + 16, b0); DPE_ST4(lp + 20, b1); DPE_ST4(lp + 24, b2); DPE_ST4(lp + 28, b3);
        }
        if (i < d) {
            const double *x = Xt + i * ld;
            a0 = DPE_LD4(lp); a1 = DPE_LD4(lp + 4); a2 = DPE_LD4(lp + 8); a3 = DPE_LD4(lp + 12);
            for (r = 0; r < npad; r += DPE_L) {
                a0 = _mm256_fmadd_pd(DPE_LD4(g + r), DPE_LD4(x + r), a0);
                a1 = _mm256_fmadd_pd(DPE_LD4(g + r + 4), DPE_LD4(x + r + 4), a1);
                a2 = _mm256_fmadd_pd(DPE_LD4(g + r + 8), DPE_LD4(x + r + 8), a2);
                a3 = _mm256_fmadd_pd(DPE_LD4(g + r + 12), DPE_LD4(x + r + 12), a3);
            }
            DPE_ST4(lp, a0); DPE_ST4(lp + 4, a1); DPE_ST4(lp + 8, a2); DPE_ST4(lp + 12, a3);
        }
        return;
    }
    for (i = 0; i < d; i++, lp += DPE_L) {
        const double *x = Xt + i * ld;
        double *w = W + i * ld;
        a0 = DPE_LD4(lp); a1 = DPE_LD4(lp + 4); a2 = DPE_LD4(lp + 8); a3 = DPE_LD4(lp + 12);
        for (r = 0; r < npad; r += DPE_L) {
            __m256d v0 = _mm256_mul_pd(DPE_LD4(g + r), DPE_LD4(x + r));
            __m256d v1 = _mm256_mul_pd(DPE_LD4(g + r + 4), DPE_LD4(x + r + 4));
            __m256d v2 = _mm256_mul_pd(DPE_LD4(g + r + 8), DPE_LD4(x + r + 8));
            __m256d v3 = _mm256_mul_pd(DPE_LD4(g + r + 12), DPE_LD4(x + r + 12));
            DPE_ST4(w + r, v0); DPE_ST4(w + r + 4, v1); DPE_ST4(w + r + 8, v2); DPE_ST4(w + r + 12, v3);
            a0 = _mm256_add_pd(a0, v0); a1 = _mm256_add_pd(a1, v1);
            a2 = _mm256_add_pd(a2, v2); a3 = _mm256_add_pd(a3, v3);
        }
        DPE_ST4(lp, a0); DPE_ST4(lp + 4, a1); DPE_ST4(lp + 8, a2); DPE_ST4(lp + 12, a3);
    }
}

/* dpe_lanes_s2's blocks (rows i, i + 1 against columns j .. j + 3, then j, j + 1, then j),
   each run once per quarter q of the lanes: 8 accumulators of 4 lanes in registers. */
static DPE_AVX2 void dpe_lanes_s2_avx2(const double *Xt, const double *W, ptrdiff_t d, ptrdiff_t ld,
                                       ptrdiff_t npad, double *lp)
{
    ptrdiff_t i, j, r, q;
    for (i = 0; i < d; i += 2) {
        const double *w = W + i * ld, *xi = Xt + i * ld;
        double *ai = lp + DPE_L * (i * d - i * (i - 1) / 2);
        for (q = 0; q < DPE_L; q += 4) {
            __m256d a0 = DPE_LD4(ai + q);
            for (r = q; r < npad; r += DPE_L) a0 = _mm256_fmadd_pd(DPE_LD4(w + r), DPE_LD4(xi + r), a0);
            DPE_ST4(ai + q, a0);
        }
        if (i + 1 == d) break;
        {
            const double *v = w + ld;                   /* row i + 1 */
            double *bi = ai + DPE_L * (d - i);          /* accumulator of (i + 1, i + 1) */
            for (j = i + 1; j + 3 < d; j += 4) {
                const double *xj = Xt + j * ld;
                double *pa = ai + DPE_L * (j - i), *pb = bi + DPE_L * (j - i - 1);
                for (q = 0; q < DPE_L; q += 4) {
                    __m256d e0 = DPE_LD4(pa + q), e1 = DPE_LD4(pa + 16 + q);
                    __m256d e2 = DPE_LD4(pa + 32 + q), e3 = DPE_LD4(pa + 48 + q);
                    __m256d f0 = DPE_LD4(pb + q), f1 = DPE_LD4(pb + 16 + q);
                    __m256d f2 = DPE_LD4(pb + 32 + q), f3 = DPE_LD4(pb + 48 + q);
                    for (r = q; r < npad; r += DPE_L) {
                        const __m256d w0 = DPE_LD4(w + r), v0 = DPE_LD4(v + r);
                        const __m256d y0 = DPE_LD4(xj + r), y1 = DPE_LD4(xj + ld + r);
                        const __m256d y2 = DPE_LD4(xj + 2 * ld + r), y3 = DPE_LD4(xj + 3 * ld + r);
                        e0 = _mm256_fmadd_pd(w0, y0, e0); f0 = _mm256_fmadd_pd(v0, y0, f0);
                        e1 = _mm256_fmadd_pd(w0, y1, e1); f1 = _mm256_fmadd_pd(v0, y1, f1);
                        e2 = _mm256_fmadd_pd(w0, y2, e2); f2 = _mm256_fmadd_pd(v0, y2, f2);
                        e3 = _mm256_fmadd_pd(w0, y3, e3); f3 = _mm256_fmadd_pd(v0, y3, f3);
                    }
                    DPE_ST4(pa + q, e0); DPE_ST4(pa + 16 + q, e1);
                    DPE_ST4(pa + 32 + q, e2); DPE_ST4(pa + 48 + q, e3);
                    DPE_ST4(pb + q, f0); DPE_ST4(pb + 16 + q, f1);
                    DPE_ST4(pb + 32 + q, f2); DPE_ST4(pb + 48 + q, f3);
                }
            }
            for (; j + 1 < d; j += 2) {
                const double *x0 = Xt + j * ld, *x1 = x0 + ld;
                double *p00 = ai + DPE_L * (j - i), *p10 = bi + DPE_L * (j - i - 1);
                for (q = 0; q < DPE_L; q += 4) {
                    __m256d e00 = DPE_LD4(p00 + q), e01 = DPE_LD4(p00 + 16 + q);
                    __m256d e10 = DPE_LD4(p10 + q), e11 = DPE_LD4(p10 + 16 + q);
                    for (r = q; r < npad; r += DPE_L) {
                        const __m256d w0 = DPE_LD4(w + r), v0 = DPE_LD4(v + r);
                        const __m256d y0 = DPE_LD4(x0 + r), z0 = DPE_LD4(x1 + r);
                        e00 = _mm256_fmadd_pd(w0, y0, e00); e01 = _mm256_fmadd_pd(w0, z0, e01);
                        e10 = _mm256_fmadd_pd(v0, y0, e10); e11 = _mm256_fmadd_pd(v0, z0, e11);
                    }
                    DPE_ST4(p00 + q, e00); DPE_ST4(p00 + 16 + q, e01);
                    DPE_ST4(p10 + q, e10); DPE_ST4(p10 + 16 + q, e11);
                }
            }
            if (j < d) {
                const double *x0 = Xt + j * ld;
                double *p00 = ai + DPE_L * (j - i), *p10 = bi + DPE_L * (j - i - 1);
                for (q = 0; q < DPE_L; q += 4) {
                    __m256d e00 = DPE_LD4(p00 + q), e10 = DPE_LD4(p10 + q);
                    for (r = q; r < npad; r += DPE_L) {
                        const __m256d y0 = DPE_LD4(x0 + r);
                        e00 = _mm256_fmadd_pd(DPE_LD4(w + r), y0, e00);
                        e10 = _mm256_fmadd_pd(DPE_LD4(v + r), y0, e10);
                    }
                    DPE_ST4(p00 + q, e00); DPE_ST4(p10 + q, e10);
                }
            }
        }
    }
}
#undef DPE_LD4
#undef DPE_ST4
#endif

/* Counts and first moments of one component over one chunk into lanes la (see
   dpe_lanes_n_s1_clones); the x86-64-v3 clone's work goes to the AVX2 path (same bits). */
static void dpe_lanes_n_s1(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                           const double *g, double *W, double *la)
{
    DPE_DISPATCH(dpe_lanes_n_s1, (Xt, d, ld, npad, g, W, la));
}

/* Upper-triangle second moments of one component over one chunk into lanes lp (see
   dpe_lanes_s2_clones); AVX2 path as above. */
static void dpe_lanes_s2(const double *Xt, const double *W, ptrdiff_t d, ptrdiff_t ld,
                         ptrdiff_t npad, double *lp)
{
    DPE_DISPATCH(dpe_lanes_s2, (Xt, W, d, ld, npad, lp));
}

/* Block end: reduce the count / first-moment lanes of one component into its partial row. */
static void dpe_lanes_flush_n_s1(const double *la, ptrdiff_t d, double *nk, double *s1)
{
    dpe_hsum_add(la, 1, nk);
    dpe_hsum_add(la + DPE_L, d, s1);
}

/* Block end: reduce the second-moment lanes of one component into the upper triangle of
   its (d, d) partial s2 (row-major). */
static void dpe_lanes_flush_s2(const double *la, ptrdiff_t d, double *s2)
{
    ptrdiff_t i;
    for (i = 0; i < d; la += (d - i) * DPE_L, i++)
        dpe_hsum_add(la, d - i, s2 + i * d + i);
}

/* BLAS path: nk, s1 summed over the chunk in 16 lanes; W[i, r] = sqrt(g_r) x_ir for dsyrk. */
DPE_CLONES static void dpe_moments_prep_clones(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                               ptrdiff_t npad, const double *g, double *sg,
                                               double *W, double *nk, double *s1)
{
    ptrdiff_t i, r;
    double tmp[DPE_L];
    dpe_v8 a0 = {0}, a1 = {0};
    for (r = 0; r < npad; r++) sg[r] = __builtin_sqrt(g[r]);
    for (r = 0; r < npad; r += DPE_L) {
        a0 += DPE_LD(g + r);
        a1 += DPE_LD(g + r + 8);
    }
    DPE_ST(tmp, a0); DPE_ST(tmp + 8, a1);
    *nk += dpe_hsum(tmp);
    for (i = 0; i < d; i++) {
        const double *x = Xt + i * ld;
        double *w = W + i * ld;
        a0 = (dpe_v8){0}; a1 = (dpe_v8){0};
        for (r = 0; r < npad; r += DPE_L) {
            dpe_v8 x0 = DPE_LD(x + r), x1 = DPE_LD(x + r + 8);
            a0 += DPE_LD(g + r) * x0;
            a1 += DPE_LD(g + r + 8) * x1;
            DPE_ST(w + r, DPE_LD(sg + r) * x0);
            DPE_ST(w + r + 8, DPE_LD(sg + r + 8) * x1);
        }
        DPE_ST(tmp, a0); DPE_ST(tmp + 8, a1);
        s1[i] += dpe_hsum(tmp);
    }
}

#if DPE_HAVE_AVX2
/* The AVX2 + FMA path of dpe_moments_prep (dpc_simd.h), lanes 4q .. 4q + 3 in one __m256d:
   sg = sqrt(g) (correctly rounded either way); n: +0, += g; s1_i: +0, = fma(g, x, .);
   w = sg x rounded; each chunk's 16 lanes reduced by dpe_hsum, as the clone does. */
static DPE_AVX2 void dpe_moments_prep_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                           const double *g, double *sg, double *W,
                                           double *nk, double *s1)
{
    ptrdiff_t i, r;
    double tmp[DPE_L];
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (r = 0; r < npad; r += 4) _mm256_storeu_pd(sg + r, _mm256_sqrt_pd(_mm256_loadu_pd(g + r)));
    for (r = 0; r < npad; r += DPE_L) {
        a0 = _mm256_add_pd(a0, _mm256_loadu_pd(g + r));
        a1 = _mm256_add_pd(a1, _mm256_loadu_pd(g + r + 4));
        a2 = _mm256_add_pd(a2, _mm256_loadu_pd(g + r + 8));
        a3 = _mm256_add_pd(a3, _mm256_loadu_pd(g + r + 12));
    }
    _mm256_storeu_pd(tmp, a0); _mm256_storeu_pd(tmp + 4, a1);
    _mm256_storeu_pd(tmp + 8, a2); _mm256_storeu_pd(tmp + 12, a3);
    *nk += dpe_hsum(tmp);
    for (i = 0; i < d; i++) {
        const double *x = Xt + i * ld;
        double *w = W + i * ld;
        a0 = _mm256_setzero_pd(); a1 = a0; a2 = a0; a3 = a0;
        for (r = 0; r < npad; r += DPE_L) {
            const __m256d x0 = _mm256_loadu_pd(x + r), x1 = _mm256_loadu_pd(x + r + 4);
            const __m256d x2 = _mm256_loadu_pd(x + r + 8), x3 = _mm256_loadu_pd(x + r + 12);
            a0 = _mm256_fmadd_pd(_mm256_loadu_pd(g + r), x0, a0);
            a1 = _mm256_fmadd_pd(_mm256_loadu_pd(g + r + 4), x1, a1);
            a2 = _mm256_fmadd_pd(_mm256_loadu_pd(g + r + 8), x2, a2);
            a3 = _mm256_fmadd_pd(_mm256_loadu_pd(g + r + 12), x3, a3);
            _mm256_storeu_pd(w + r, _mm256_mul_pd(_mm256_loadu_pd(sg + r), x0));
            _mm256_storeu_pd(w + r + 4, _mm256_mul_pd(_mm256_loadu_pd(sg + r + 4), x1));
            _mm256_storeu_pd(w + r + 8, _mm256_mul_pd(_mm256_loadu_pd(sg + r + 8), x2));
            _mm256_storeu_pd(w + r + 12, _mm256_mul_pd(_mm256_loadu_pd(sg + r + 12), x3));
        }
        _mm256_storeu_pd(tmp, a0); _mm256_storeu_pd(tmp + 4, a1);
        _mm256_storeu_pd(tmp + 8, a2); _mm256_storeu_pd(tmp + 12, a3);
        s1[i] += dpe_hsum(tmp);
    }
}
#endif

/* BLAS path: nk, s1 and W = sqrt(g) x over one chunk (see dpe_moments_prep_clones); the
   x86-64-v3 clone's work goes to the AVX2 path (same bits). */
static void dpe_moments_prep(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                             const double *g, double *sg, double *W, double *nk, double *s1)
{
    DPE_DISPATCH(dpe_moments_prep, (Xt, d, ld, npad, g, sg, W, nk, s1));
}

/* ---------------------------------------------------------------- single precision
   The float32 path's accumulators: the same lane layout (16 lanes, rows r % 16 == l in lane
   l) in floats, flushed into the float64 lanes above (dpf_lanes_flush) every
   DPC_F32_FLUSH_CHUNKS chunks, so a float lane never holds more than DPC_F32_LANE_ROWS
   rows (the bound the float32 sensitivity widening is derived from). */

/* dpe_lanes_n_s1 (W path) in float: n += g, w = g x_i rounded to float and kept in W,
   s1_i += w. */
DPE_CLONES static void dpf_lanes_n_s1(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                      const float *g, float *W, float *la)
{
    ptrdiff_t i, r;
    float *lp = la;
    dpf_v8 a0 = DPF_LD(lp), a1 = DPF_LD(lp + 8);
    for (r = 0; r < npad; r += DPE_L) {
        a0 += DPF_LD(g + r);
        a1 += DPF_LD(g + r + 8);
    }
    DPF_ST(lp, a0); DPF_ST(lp + 8, a1);
    lp += DPE_L;
    for (i = 0; i < d; i++, lp += DPE_L) {
        const float *x = Xs + i * ld;
        float *w = W + i * ld;
        a0 = DPF_LD(lp); a1 = DPF_LD(lp + 8);
        for (r = 0; r < npad; r += DPE_L) {
            dpf_v8 v0 = DPF_LD(g + r) * DPF_LD(x + r), v1 = DPF_LD(g + r + 8) * DPF_LD(x + r + 8);
            DPF_ST(w + r, v0); DPF_ST(w + r + 8, v1);
            a0 += v0; a1 += v1;
        }
        DPF_ST(lp, a0); DPF_ST(lp + 8, a1);
    }
}

/* dpe_lanes_s2 in float: s2_ij += W_i x_j (i <= j), accumulator of (i, j) at
   lp + 16 (off(i) + j - i), off(i) = i d - i (i - 1) / 2.  Rows two at a time and columns
   two at a time (2 x 2 blocks of 16 lanes: 8 accumulators, within AVX2's 16 registers);
   where the pair of rows leaves one column over, that column's two entries share their
   loop with the diagonal entry (i, i) (6 accumulators; issue 41: alone, the diagonal's and
   the last column's loops each ran at a fraction of the FMA rate, about 8 % of the pass at
   d = 10).  Every accumulator adds its tiles in row order, so which entries share a loop
   does not change a bit. */
DPE_CLONES static void dpf_lanes_s2(const float *Xs, const float *W, ptrdiff_t d, ptrdiff_t ld,
                                    ptrdiff_t npad, float *lp)
{
    ptrdiff_t i, j, r;
    for (i = 0; i < d; i += 2) {
        const float *w = W + i * ld, *xi = Xs + i * ld;
        float *ai = lp + DPE_L * (i * d - i * (i - 1) / 2);
        if (i + 1 == d || (d - i - 1) % 2 == 0) {       /* the diagonal entry alone */
            dpf_v8 a0 = DPF_LD(ai), a1 = DPF_LD(ai + 8);
            for (r = 0; r < npad; r += DPE_L) {
                a0 += DPF_LD(w + r) * DPF_LD(xi + r);
                a1 += DPF_LD(w + r + 8) * DPF_LD(xi + r + 8);
            }
            DPF_ST(ai, a0); DPF_ST(ai + 8, a1);
            if (i + 1 == d) break;
        }
        {
            const float *v = w + ld;                    /* row i + 1 */
            float *bi = ai + DPE_L * (d - i);           /* accumulator of (i + 1, i + 1) */
            for (j = i + 1; j + 1 < d; j += 2) {
                const float *x0 = Xs + j * ld, *x1 = x0 + ld;
                float *p00 = ai + DPE_L * (j - i), *p01 = p00 + DPE_L;
                float *p10 = bi + DPE_L * (j - i - 1), *p11 = p10 + DPE_L;
                dpf_v8 e00 = DPF_LD(p00), f00 = DPF_LD(p00 + 8);
                dpf_v8 e01 = DPF_LD(p01), f01 = DPF_LD(p01 + 8);
                dpf_v8 e10 = DPF_LD(p10), f10 = DPF_LD(p10 + 8);
                dpf_v8 e11 = DPF_LD(p11), f11 = DPF_LD(p11 + 8);
                for (r = 0; r < npad; r += DPE_L) {
                    dpf_v8 w0 = DPF_LD(w + r), w1 = DPF_LD(w + r + 8);
                    dpf_v8 v0 = DPF_LD(v + r), v1 = DPF_LD(v + r + 8);
                    dpf_v8 y0 = DPF_LD(x0 + r), y1 = DPF_LD(x0 + r + 8);
                    dpf_v8 z0 = DPF_LD(x1 + r), z1 = DPF_LD(x1 + r + 8);
                    DPE_KEEP_LOADS();
                    e00 += w0 * y0; f00 += w1 * y1;
                    e01 += w0 * z0; f01 += w1 * z1;
                    e10 += v0 * y0; f10 += v1 * y1;
                    e11 += v0 * z0; f11 += v1 * z1;
                }
                DPF_ST(p00, e00); DPF_ST(p00 + 8, f00);
                DPF_ST(p01, e01); DPF_ST(p01 + 8, f01);
                DPF_ST(p10, e10); DPF_ST(p10 + 8, f10);
                DPF_ST(p11, e11); DPF_ST(p11 + 8, f11);
            }
            if (j < d) {        /* the last column, with the diagonal entry (i, i) */
                const float *x0 = Xs + j * ld;
                float *p00 = ai + DPE_L * (j - i), *p10 = bi + DPE_L * (j - i - 1);
                dpf_v8 a0 = DPF_LD(ai), a1 = DPF_LD(ai + 8);
                dpf_v8 e00 = DPF_LD(p00), f00 = DPF_LD(p00 + 8);
                dpf_v8 e10 = DPF_LD(p10), f10 = DPF_LD(p10 + 8);
                for (r = 0; r < npad; r += DPE_L) {
                    dpf_v8 w0 = DPF_LD(w + r), w1 = DPF_LD(w + r + 8);
                    dpf_v8 v0 = DPF_LD(v + r), v1 = DPF_LD(v + r + 8);
                    dpf_v8 y0 = DPF_LD(x0 + r), y1 = DPF_LD(x0 + r + 8);
                    dpf_v8 c0 = DPF_LD(xi + r), c1 = DPF_LD(xi + r + 8);
                    DPE_KEEP_LOADS();
                    a0 += w0 * c0; a1 += w1 * c1;
                    e00 += w0 * y0; f00 += w1 * y1;
                    e10 += v0 * y0; f10 += v1 * y1;
                }
                DPF_ST(ai, a0); DPF_ST(ai + 8, a1);
                DPF_ST(p00, e00); DPF_ST(p00 + 8, f00);
                DPF_ST(p10, e10); DPF_ST(p10 + 8, f10);
            }
        }
    }
}

/* BLAS path in float: n += g and s1_i += g x_i into the float lanes la ([n: 16][s1: d x 16],
   a + g x contracted), and W[i, r] = sqrt(g_r) x_ir (float) for ssyrk. */
DPE_CLONES static void dpf_moments_prep(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                        const float *g, float *sg, float *W, float *la)
{
    ptrdiff_t i, r;
    float *lp = la;
    dpf_v8 a0 = DPF_LD(lp), a1 = DPF_LD(lp + 8);
    for (r = 0; r < npad; r++) sg[r] = __builtin_sqrtf(g[r]);
    for (r = 0; r < npad; r += DPE_L) {
        a0 += DPF_LD(g + r);
        a1 += DPF_LD(g + r + 8);
    }
    DPF_ST(lp, a0); DPF_ST(lp + 8, a1);
    lp += DPE_L;
    for (i = 0; i < d; i++, lp += DPE_L) {
        const float *x = Xs + i * ld;
        float *w = W + i * ld;
        a0 = DPF_LD(lp); a1 = DPF_LD(lp + 8);
        for (r = 0; r < npad; r += DPE_L) {
            dpf_v8 x0 = DPF_LD(x + r), x1 = DPF_LD(x + r + 8);
            a0 += DPF_LD(g + r) * x0;
            a1 += DPF_LD(g + r + 8) * x1;
            DPF_ST(w + r, DPF_LD(sg + r) * x0);
            DPF_ST(w + r + 8, DPF_LD(sg + r + 8) * x1);
        }
        DPF_ST(lp, a0); DPF_ST(lp + 8, a1);
    }
}

/* s2[i, j] += (double) C[i, j] for j >= i (row-major upper triangle of the (d, d) float
   product that ssyrk left in the column-major lower triangle of C). */
static void dpf_add_upper(const float *C, ptrdiff_t d, double *s2)
{
    ptrdiff_t i, j;
    for (i = 0; i < d; i++)
        for (j = i; j < d; j++) s2[i * d + j] += (double)C[i * d + j];
}

#endif /* DPC_LANES_H */
