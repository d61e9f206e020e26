/*
 * dpc_bernoulli.h -- Bernoulli-mixture pieces of the _bernoulli.pyx E-step.
 *
 * For binary rows x in {0,1}^d and component means mu_kj in (0, 1):
 *     log pi_k + log p(x | k) = c_k + sum_j x_j theta_kj,
 *     theta_kj = log mu_kj - log(1 - mu_kj),   c_k = log pi_k + sum_j log(1 - mu_kj).
 *
 *   dpb_logits_small   L[k, r] = c_k + sum_j theta_kj Xt[j, r] by hand loops (register
 *                      tiles of 4 components x 16 rows), compiled per ISA (DPE_CLONES).
 *                      Each sum starts at c_k and adds j = 0, 1, ... in order, so a
 *                      component's value does not depend on the tiling.
 *   dpb_scratch_init   the model's chunk scratch: Xt, L, ll, tmp and lanes for the counts
 *                      (and, on the hand-loop path, first moments) of every component.
 */
#ifndef DPC_BERNOULLI_H
#define DPC_BERNOULLI_H

#include "dpc_lanes.h"
#include "dpc_scratch.h"
#include "dpc_simd.h"

/* L (K, ld): logits of the rows r < npad (npad % 16 == 0) of the transposed chunk Xt (d, ld);
   theta (K, d) row-major, c (K,). */
DPE_CLONES static void dpb_logits_small_clones(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                               ptrdiff_t npad, const double *theta,
                                               const double *c, ptrdiff_t K, double *L)
{
    ptrdiff_t r, j, k;
    for (r = 0; r < npad; r += DPE_L) {
        for (k = 0; k + 3 < K; k += 4) {
            const double *t0 = theta + k * d, *t1 = t0 + d, *t2 = t1 + d, *t3 = t2 + d;
            dpe_v8 a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0}, e0 = {0}, e1 = {0}, f0 = {0}, f1 = {0};
            a0 += c[k]; a1 += c[k]; b0 += c[k + 1]; b1 += c[k + 1];
            e0 += c[k + 2]; e1 += c[k + 2]; f0 += c[k + 3]; f1 += c[k + 3];
            for (j = 0; j < d; j++) {
                dpe_v8 x0 = DPE_LD(Xt + j * ld + r), x1 = DPE_LD(Xt + j * ld + r + 8);
                a0 += x0 * t0[j]; a1 += x1 * t0[j];
                b0 += x0 * t1[j]; b1 += x1 * t1[j];
                e0 += x0 * t2[j]; e1 += x1 * t2[j];
                f0 += x0 * t3[j]; f1 += x1 * t3[j];
            }
            DPE_ST(L + k * ld + r, a0); DPE_ST(L + k * ld + r + 8, a1);
            DPE_ST(L + (k + 1) * ld + r, b0); DPE_ST(L + (k + 1) * ld + r + 8, b1);
            DPE_ST(L + (k + 2) * ld + r, e0); DPE_ST(L + (k + 2) * ld + r + 8, e1);
            DPE_ST(L + (k + 3) * ld + r, f0); DPE_ST(L + (k + 3) * ld + r + 8, f1);
        }
        for (; k < K; k++) {
            const double *t0 = theta + k * d;
            dpe_v8 a0 = {0}, a1 = {0};
            a0 += c[k]; a1 += c[k];
            for (j = 0; j < d; j++) {
                a0 += DPE_LD(Xt + j * ld + r) * t0[j];
                a1 += DPE_LD(Xt + j * ld + r + 8) * t0[j];
            }
            DPE_ST(L + k * ld + r, a0); DPE_ST(L + k * ld + r + 8, a1);
        }
    }
}

#if DPE_HAVE_AVX2
/* The AVX2 + FMA path (dpc_simd.h): tiles of 4 components x 8 rows (8 accumulators), each
   lane with the clone's operations in the clone's order: a = +0 + c_k, then
   a = fma(x_j, theta_kj, a) for j = 0, 1, ... */
static DPE_AVX2 void dpb_logits_small_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                           const double *theta, const double *c, ptrdiff_t K,
                                           double *L)
{
    const __m256d zero = _mm256_setzero_pd();
    ptrdiff_t r, j, k;
    for (r = 0; r < npad; r += 8) {
        for (k = 0; k + 3 < K; k += 4) {
            const double *t0 = theta + k * d, *t1 = t0 + d, *t2 = t1 + d, *t3 = t2 + d;
            __m256d a0 = _mm256_add_pd(zero, _mm256_broadcast_sd(c + k)), a1 = a0;
            __m256d b0 = _mm256_add_pd(zero, _mm256_broadcast_sd(c + k + 1)), b1 = b0;
            __m256d e0 = _mm256_add_pd(zero, _mm256_broadcast_sd(c + k + 2)), e1 = e0;
            __m256d f0 = _mm256_add_pd(zero, _mm256_broadcast_sd(c + k + 3)), f1 = f0;
            for (j = 0; j < d; j++) {
                const __m256d x0 = _mm256_loadu_pd(Xt + j * ld + r), x1 = _mm256_loadu_pd(Xt + j * ld + r + 4);
                __m256d t = _mm256_broadcast_sd(t0 + j);
                a0 = _mm256_fmadd_pd(x0, t, a0); a1 = _mm256_fmadd_pd(x1, t, a1);
                t = _mm256_broadcast_sd(t1 + j);
                b0 = _mm256_fmadd_pd(x0, t, b0); b1 = _mm256_fmadd_pd(x1, t, b1);
                t = _mm256_broadcast_sd(t2 + j);
                e0 = _mm256_fmadd_pd(x0, t, e0); e1 = _mm256_fmadd_pd(x1, t, e1);
                t = _mm256_broadcast_sd(t3 + j);
                f0 = _mm256_fmadd_pd(x0, t, f0); f1 = _mm256_fmadd_pd(x1, t, f1);
            }
            _mm256_storeu_pd(L + k * ld + r, a0); _mm256_storeu_pd(L + k * ld + r + 4, a1);
            _mm256_storeu_pd(L + (k + 1) * ld + r, b0); _mm256_storeu_pd(L + (k + 1) * ld + r + 4, b1);
            _mm256_storeu_pd(L + (k + 2) * ld + r, e0); _mm256_storeu_pd(L + (k + 2) * ld + r + 4, e1);
            _mm256_storeu_pd(L + (k + 3) * ld + r, f0); _mm256_storeu_pd(L + (k + 3) * ld + r + 4, f1);
        }
        for (; k < K; k++) {
            const double *t0 = theta + k * d;
            __m256d a0 = _mm256_add_pd(zero, _mm256_broadcast_sd(c + k)), a1 = a0;
            for (j = 0; j < d; j++) {
                const __m256d t = _mm256_broadcast_sd(t0 + j);
                a0 = _mm256_fmadd_pd(_mm256_loadu_pd(Xt + j * ld + r), t, a0);
                a1 = _mm256_fmadd_pd(_mm256_loadu_pd(Xt + j * ld + r + 4), t, a1);
            }
            _mm256_storeu_pd(L + k * ld + r, a0); _mm256_storeu_pd(L + k * ld + r + 4, a1);
        }
    }
}
#endif

/* L (K, ld): logits of the rows r < npad (see dpb_logits_small_clones); the x86-64-v3
   clone's work goes to the AVX2 path (same bits). */
static void dpb_logits_small(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                             const double *theta, const double *c, ptrdiff_t K, double *L)
{
    DPE_DISPATCH(dpb_logits_small, (Xt, d, ld, npad, theta, c, K, L));
}

/* L[k, r] = c_k for r < npad (the start of the BLAS path: dgemm adds X theta^T onto it). */
static void dpb_logits_init(const double *c, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad, double *L)
{
    ptrdiff_t k, r;
    for (k = 0; k < K; k++)
        for (r = 0; r < npad; r++) L[k * ld + r] = c[k];
}

/* The Bernoulli mixture's chunk scratch (dpc_scratch.h): no work arrays; lanes for the
   counts of every component, and for their first moments too on the hand-loop path
   (the BLAS path adds S1 with dgemm).  Returns the size in doubles. */
static inline ptrdiff_t dpb_scratch_init(dpc_scratch *s, ptrdiff_t d, ptrdiff_t K, int blas, double *buf)
{
    return dpc_scratch_init(s, d, K, 0, dpe_lanes_n_s1_size(blas ? 0 : d), buf);
}

#endif /* DPC_BERNOULLI_H */
