/*
 * dpc_rowprod.h -- the released operator's product with the exact rows, fused (issue 41):
 *
 *     out = Yᵀ (Y V)   (d x 8)        sq[r] = ‖Vᵀ y_r‖²   (n)
 *
 * for one block Y (n x d, rows contiguous, row stride d) and V (d x 8, row-major), the Krylov
 * block of dpem_fast._engine._operator.RowProducts.  Summation order (part of the operator's
 * rounding bound, _operator.py "Rounding"; the same on every path and for every n):
 *
 *     w_rj = fma chain over i = 0 .. d-1 of y_ri V_ij, from 0        (d rounded operations)
 *     out_ij = fma chain over r = 0 .. n-1, in row order, of y_ri w_rj, from 0
 *                                                                    (n rounded operations)
 *     sq_r = w_r0², then fma chain of w_rj² over j = 1 .. 7          (8 rounded operations)
 *
 * so a row's term y_ri w_rj is its exact value up to d + 1 rounded operations and the block's
 * sum adds n more: within the d + 2 per term and b per block the widening assumes.  An fma is
 * rounded once on every machine: the AVX2 + FMA path (rows in groups of DPR_G: w of the group
 * in registers, V and out read once per group, each out entry still folded row by row in
 * order), the AVX-512 path (rows in groups of DPR_G512, a row's 8 columns one register, each
 * row's entry of Y broadcast into its fma) and the portable path (C's fma(), one row at a
 * time) give the same bits.  No threads: the caller's one call per block.
 */
#ifndef DPC_ROWPROD_H
#define DPC_ROWPROD_H

#include <math.h>
#include <stddef.h>
#include "dpc_avx2fma.h"

#define DPR_P 8           /* columns of V (the Krylov block) */
#define DPR_G 6           /* rows per register group of the AVX2 path: 12 accumulators */
#define DPR_G512 8        /* rows per register group of the AVX-512 path: 8 accumulators (a
                             Zen 4 core: 0.99 ms a (400, 4096) block against 1.03 with 6 and
                             1.34 with 12; the AVX2 path 1.10-1.29) */

/* Portable: one row at a time, the order above. */
static void dpr_products8_c(const double *Y, ptrdiff_t n, ptrdiff_t d, const double *V,
                            double *out, double *sq)
{
    ptrdiff_t r, i, j;
    double w[DPR_P];
    for (i = 0; i < d * DPR_P; i++) out[i] = 0.0;
    for (r = 0; r < n; r++) {
        const double *y = Y + r * d;
        for (j = 0; j < DPR_P; j++) w[j] = 0.0;
        for (i = 0; i < d; i++)
            for (j = 0; j < DPR_P; j++) w[j] = fma(y[i], V[i * DPR_P + j], w[j]);
        for (i = 0; i < d; i++)
            for (j = 0; j < DPR_P; j++) out[i * DPR_P + j] = fma(y[i], w[j], out[i * DPR_P + j]);
        double s = w[0] * w[0];
        for (j = 1; j < DPR_P; j++) s = fma(w[j], w[j], s);
        sq[r] = s;
    }
}

#if DPC_HAVE_AVX2FMA

/* sq = w_0², then the fma chain of the w_j² (the portable path's order). */
static inline DPC_AVX2FMA __attribute__((always_inline)) double dpr_sq_avx2(__m256d a, __m256d b)
{
    double w[DPR_P], s;
    int j;
    _mm256_storeu_pd(w, a);
    _mm256_storeu_pd(w + 4, b);
    s = w[0] * w[0];
    for (j = 1; j < DPR_P; j++) s = fma(w[j], w[j], s);        /* inlined: target fma */
    return s;
}

/* Named registers (an array of __m256d would live on the stack). */
#define DPR_W(g) __m256d a##g = _mm256_setzero_pd(), b##g = _mm256_setzero_pd()
#define DPR_DOT(g) do { __m256d y = _mm256_broadcast_sd(Y + (g) * d + i);   \
                        a##g = _mm256_fmadd_pd(y, v0, a##g);                 \
                        b##g = _mm256_fmadd_pd(y, v1, b##g); } while (0)
#define DPR_UPD(g) do { __m256d y = _mm256_broadcast_sd(Y + (g) * d + i);   \
                        o0 = _mm256_fmadd_pd(y, a##g, o0);                   \
                        o1 = _mm256_fmadd_pd(y, b##g, o1); } while (0)

/* DPR_G = 6 rows: w in 12 registers, V and out read once for the group; each out entry
   folds the group's rows in order. */
static DPC_AVX2FMA void dpr_group6_avx2(const double *Y, ptrdiff_t d, const double *V, double *out, double *sq)
{
    ptrdiff_t i;
    DPR_W(0); DPR_W(1); DPR_W(2); DPR_W(3); DPR_W(4); DPR_W(5);
    for (i = 0; i < d; i++) {
        __m256d v0 = _mm256_loadu_pd(V + i * DPR_P), v1 = _mm256_loadu_pd(V + i * DPR_P + 4);
        DPR_DOT(0); DPR_DOT(1); DPR_DOT(2); DPR_DOT(3); DPR_DOT(4); DPR_DOT(5);
    }
    for (i = 0; i < d; i++) {
        __m256d o0 = _mm256_loadu_pd(out + i * DPR_P), o1 = _mm256_loadu_pd(out + i * DPR_P + 4);
        DPR_UPD(0); DPR_UPD(1); DPR_UPD(2); DPR_UPD(3); DPR_UPD(4); DPR_UPD(5);
        _mm256_storeu_pd(out + i * DPR_P, o0);
        _mm256_storeu_pd(out + i * DPR_P + 4, o1);
    }
    sq[0] = dpr_sq_avx2(a0, b0); sq[1] = dpr_sq_avx2(a1, b1); sq[2] = dpr_sq_avx2(a2, b2);
    sq[3] = dpr_sq_avx2(a3, b3); sq[4] = dpr_sq_avx2(a4, b4); sq[5] = dpr_sq_avx2(a5, b5);
}

/* One row (the last n mod DPR_G): the same operations. */
static DPC_AVX2FMA void dpr_row_avx2(const double *Y, ptrdiff_t d, const double *V, double *out, double *sq)
{
    ptrdiff_t i;
    DPR_W(0);
    for (i = 0; i < d; i++) {
        __m256d v0 = _mm256_loadu_pd(V + i * DPR_P), v1 = _mm256_loadu_pd(V + i * DPR_P + 4);
        DPR_DOT(0);
    }
    for (i = 0; i < d; i++) {
        __m256d o0 = _mm256_loadu_pd(out + i * DPR_P), o1 = _mm256_loadu_pd(out + i * DPR_P + 4);
        DPR_UPD(0);
        _mm256_storeu_pd(out + i * DPR_P, o0);
        _mm256_storeu_pd(out + i * DPR_P + 4, o1);
    }
    sq[0] = dpr_sq_avx2(a0, b0);
}

/* Rows r .. n-1 folded into out (holding the rows before r), in groups of DPR_G, then one by
   one: the AVX2 path, and the AVX-512 path's last n mod DPR_G512 rows (the same bits). */
static DPC_AVX2FMA void dpr_rows_avx2(const double *Y, ptrdiff_t r, ptrdiff_t n, ptrdiff_t d, const double *V,
                                      double *out, double *sq)
{
    for (; r + DPR_G <= n; r += DPR_G) dpr_group6_avx2(Y + r * d, d, V, out, sq + r);
    for (; r < n; r++) dpr_row_avx2(Y + r * d, d, V, out, sq + r);
}

/* sq as dpr_sq_avx2 (the portable path's order). */
static inline DPC_AVX512 __attribute__((always_inline)) double dpr_sq_avx512(__m512d a)
{
    double w[DPR_P], s;
    int j;
    _mm512_storeu_pd(w, a);
    s = w[0] * w[0];
    for (j = 1; j < DPR_P; j++) s = fma(w[j], w[j], s);
    return s;
}

#define DPR_W5(g) __m512d a##g = _mm512_setzero_pd()
#define DPR_DOT5(g) a##g = _mm512_fmadd_pd(_mm512_set1_pd(Y[(g) * d + i]), v, a##g)
#define DPR_UPD5(g) o = _mm512_fmadd_pd(_mm512_set1_pd(Y[(g) * d + i]), a##g, o)

/* DPR_G512 = 8 rows: w in 8 registers, V and out read once for the group; each out entry
   folds the group's rows in order. */
static DPC_AVX512 void dpr_group8_avx512(const double *Y, ptrdiff_t d, const double *V, double *out, double *sq)
{
    ptrdiff_t i;
    DPR_W5(0); DPR_W5(1); DPR_W5(2); DPR_W5(3); DPR_W5(4); DPR_W5(5); DPR_W5(6); DPR_W5(7);
    for (i = 0; i < d; i++) {
        __m512d v = _mm512_loadu_pd(V + i * DPR_P);
        DPR_DOT5(0); DPR_DOT5(1); DPR_DOT5(2); DPR_DOT5(3);
        DPR_DOT5(4); DPR_DOT5(5); DPR_DOT5(6); DPR_DOT5(7);
    }
    for (i = 0; i < d; i++) {
        __m512d o = _mm512_loadu_pd(out + i * DPR_P);
        DPR_UPD5(0); DPR_UPD5(1); DPR_UPD5(2); DPR_UPD5(3);
        DPR_UPD5(4); DPR_UPD5(5); DPR_UPD5(6); DPR_UPD5(7);
        _mm512_storeu_pd(out + i * DPR_P, o);
    }
    sq[0] = dpr_sq_avx512(a0); sq[1] = dpr_sq_avx512(a1); sq[2] = dpr_sq_avx512(a2); sq[3] = dpr_sq_avx512(a3);
    sq[4] = dpr_sq_avx512(a4); sq[5] = dpr_sq_avx512(a5); sq[6] = dpr_sq_avx512(a6); sq[7] = dpr_sq_avx512(a7);
}

static DPC_AVX512 void dpr_products8_avx512(const double *Y, ptrdiff_t n, ptrdiff_t d, const double *V,
                                            double *out, double *sq)
{
    ptrdiff_t r = 0;
    for (; r + DPR_G512 <= n; r += DPR_G512) dpr_group8_avx512(Y + r * d, d, V, out, sq + r);
    dpr_rows_avx2(Y, r, n, d, V, out, sq);
}
#endif

/* out (d x 8), sq (n); fast: 0 the portable path, 1 at most AVX2 (tests), 2 the widest path this
   CPU runs. */
static inline void dpr_products8(const double *Y, ptrdiff_t n, ptrdiff_t d, const double *V,
                                 double *out, double *sq, int fast)
{
#if DPC_HAVE_AVX2FMA
    ptrdiff_t i;
    if (fast && dpc_avx2fma()) {
        for (i = 0; i < d * DPR_P; i++) out[i] = 0.0;
        if (fast >= 2 && dpc_avx512()) dpr_products8_avx512(Y, n, d, V, out, sq);
        else dpr_rows_avx2(Y, 0, n, d, V, out, sq);
        return;
    }
#endif
    dpr_products8_c(Y, n, d, V, out, sq);
}

#endif
