/*
 * dpc_gmm.h -- Gaussian-specific pieces of the GMM E-step (_estep.pyx): the Mahalanobis
 * term L[k, r] = c_k - 0.5 || (x_r - mu_k) P_k ||^2 over one transposed chunk Xt (d, ld).
 *
 *   dpe_logp_small     d < DPC_BLAS_MIN_D: hand loops; for a triangular P the centred
 *                      16-row tile is held in registers (dpe_logp_tri_tiles, specialised
 *                      for each constant d = 1..DPE_MAXD).
 *   dpe_center         D = Xt - mu, the input of the BLAS path (dtrmm / dgemm).
 *   dpe_logp_from_y    out = c - 0.5 sum_j Y_j^2 from the BLAS product Y.
 *   dpe_gmm_scratch_init  the GMM's layout of the chunk scratch (dpc_scratch.h).
 *
 * The register-tile code and the generic loops perform the same operations in the same
 * order (including their FMA contractions), so they give the same bits.
 */
#ifndef DPC_GMM_H
#define DPC_GMM_H

#include "dpc_f32.h"
#include "dpc_lanes.h"
#include "dpc_scratch.h"
#include "dpc_simd.h"

/* largest d with a register-tile specialisation; d = DPE_MAXD + 1 .. DPC_BLAS_MIN_D - 1 run
   the generic loops (below) */
#define DPE_MAXD 15
#if DPE_MAXD != 15 || DPC_BLAS_MIN_D <= DPE_MAXD || DPC_F32_TILE_MIN_D != DPE_MAXD + 1
#error "dpe_logp_small and dpe_load_* specialise d = 1..15: update their cases"
#endif

/* One 16-row tile of the triangular Mahalanobis product with the centred rows held in
   registers (no D scratch).  Same operations, in the same order, as the generic loop
   below (x - mu, then y_j = sum_{i <= j} d_i P_ij from i = 0, then m += y_j^2), so the
   result is bit-identical; inlined with a constant d so that the loops unroll fully. */
static inline __attribute__((always_inline)) void
dpe_logp_tri_tiles(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                   const double *mu, const double *P, double c, double *out)
{
    ptrdiff_t r, i, j;
    for (r = 0; r < npad; r += DPE_L) {
        dpe_v8 c0[DPE_MAXD], c1[DPE_MAXD];
        dpe_v8 m0 = {0}, m1 = {0};
        #pragma GCC unroll 16
        for (i = 0; i < d; i++) {
            c0[i] = DPE_LD(Xt + i * ld + r) - mu[i];
            c1[i] = DPE_LD(Xt + i * ld + r + 8) - mu[i];
        }
        #pragma GCC unroll 16
        for (j = 0; j < d; j++) {
            /* y starts at +0 and every term is added as y += c_i p: unrolled, a bare
               first product would let the FMA contraction pick the other multiply of
               the first sum (0 + t rounds as t; only the sign of a zero y can differ,
               and y enters as y * y) */
            dpe_v8 y0 = {0}, y1 = {0};
            #pragma GCC unroll 16
            for (i = 0; i <= j; i++) {
                double p = P[i * d + j];
                y0 += c0[i] * p;
                y1 += c1[i] * p;
            }
            m0 += y0 * y0;
            m1 += y1 * y1;
        }
        DPE_ST(out + r, c - 0.5 * m0);
        DPE_ST(out + r + 8, c - 0.5 * m1);
    }
}

/* out[r] = c - 0.5 * || (x_r - mu) P ||^2 for r < npad (npad % 16 == 0).
   Xt: (d, ld) rows-along-lanes; P: (d, d) row-major; tri: P upper triangular.
   D: (d, ld) scratch, used only for a non-triangular P or d > DPE_MAXD. */
DPE_CLONES static void dpe_logp_small_clones(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                             ptrdiff_t npad, const double *mu, const double *P,
                                             int tri, double c, double *D, double *out)
{
    ptrdiff_t i, j, r;
    if (tri) {
        switch (d) {
#define DPE_LOGP_CASE(n) case n: dpe_logp_tri_tiles(Xt, n, ld, npad, mu, P, c, out); return;
        DPE_LOGP_CASE(1) DPE_LOGP_CASE(2) DPE_LOGP_CASE(3) DPE_LOGP_CASE(4) DPE_LOGP_CASE(5)
        DPE_LOGP_CASE(6) DPE_LOGP_CASE(7) DPE_LOGP_CASE(8) DPE_LOGP_CASE(9) DPE_LOGP_CASE(10)
        DPE_LOGP_CASE(11) DPE_LOGP_CASE(12) DPE_LOGP_CASE(13) DPE_LOGP_CASE(14) DPE_LOGP_CASE(15)
#undef DPE_LOGP_CASE
        default: break;
        }
    }
    for (i = 0; i < d; i++) {
        const double *x = Xt + i * ld;
        double *dd = D + i * ld;
        double m = mu[i];
        for (r = 0; r < npad; r++) dd[r] = x[r] - m;
    }
    for (r = 0; r < npad; r += DPE_L) {
        dpe_v8 m0 = {0}, m1 = {0};
        for (j = 0; j < d; j++) {
            ptrdiff_t iend = tri ? j + 1 : d;
            double p = P[j];
            dpe_v8 y0 = DPE_LD(D + r) * p, y1 = DPE_LD(D + r + 8) * p;
            for (i = 1; i < iend; i++) {
                const double *di = D + i * ld + r;
                p = P[i * d + j];
                y0 += DPE_LD(di) * p;
                y1 += DPE_LD(di + 8) * p;
            }
            m0 += y0 * y0;
            m1 += y1 * y1;
        }
        DPE_ST(out + r, c - 0.5 * m0);
        DPE_ST(out + r + 8, c - 0.5 * m1);
    }
}

#if DPE_HAVE_AVX2
/* The AVX2 + FMA path of dpe_logp_small (dpc_simd.h): a tile is 4 rows (one __m256d),
   its d centred values in registers.  Per row: c_i = x_i - mu_i; y_j = c_0 p_0j, then
   y_j = fma(c_i, p_ij, y_j) for i = 1..j; m = y_0^2, then m = fma(y_j, y_j, m); out =
   c - 0.5 m (fnmadd; 0.5 m is exact).  These are the values of the clone's y = +0 + c p
   contractions (+0 + t rounds as t; a zero's sign enters only as y * y). */
static inline DPE_AVX2 __attribute__((always_inline)) void
dpe_logp_tri_avx2(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                  const double *mu, const double *P, double c, double *out)
{
    const __m256d half = _mm256_set1_pd(0.5), cv = _mm256_set1_pd(c);
    ptrdiff_t r, i, j;
    for (r = 0; r < npad; r += 4) {
        __m256d c0[DPE_MAXD], m, y;
        #pragma GCC unroll 16
        for (i = 0; i < d; i++)
            c0[i] = _mm256_sub_pd(_mm256_loadu_pd(Xt + i * ld + r), _mm256_broadcast_sd(mu + i));
        m = _mm256_setzero_pd();
        #pragma GCC unroll 16
        for (j = 0; j < d; j++) {
            y = _mm256_mul_pd(c0[0], _mm256_broadcast_sd(P + j));
            #pragma GCC unroll 16
            for (i = 1; i <= j; i++) y = _mm256_fmadd_pd(c0[i], _mm256_broadcast_sd(P + i * d + j), y);
            m = j ? _mm256_fmadd_pd(y, y, m) : _mm256_mul_pd(y, y);
        }
        _mm256_storeu_pd(out + r, _mm256_fnmadd_pd(half, m, cv));
    }
}

static DPE_AVX2 void dpe_logp_small_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                         const double *mu, const double *P, int tri, double c,
                                         double *D, double *out)
{
    const __m256d half = _mm256_set1_pd(0.5), cv = _mm256_set1_pd(c);
    ptrdiff_t i, j, r;
    if (tri) {
        switch (d) {
#define DPE_LOGP_CASE(n) case n: dpe_logp_tri_avx2(Xt, n, ld, npad, mu, P, c, out); return;
        DPE_LOGP_CASE(1) DPE_LOGP_CASE(2) DPE_LOGP_CASE(3) DPE_LOGP_CASE(4) DPE_LOGP_CASE(5)
        DPE_LOGP_CASE(6) DPE_LOGP_CASE(7) DPE_LOGP_CASE(8) DPE_LOGP_CASE(9) DPE_LOGP_CASE(10)
        DPE_LOGP_CASE(11) DPE_LOGP_CASE(12) DPE_LOGP_CASE(13) DPE_LOGP_CASE(14) DPE_LOGP_CASE(15)
#undef DPE_LOGP_CASE
        default: break;
        }
    }
    for (i = 0; i < d; i++) {
        const double *x = Xt + i * ld;
        double *dd = D + i * ld;
        const __m256d m = _mm256_broadcast_sd(mu + i);
        for (r = 0; r < npad; r += 4) _mm256_storeu_pd(dd + r, _mm256_sub_pd(_mm256_loadu_pd(x + r), m));
    }
    for (r = 0; r < npad; r += 4) {
        __m256d m = _mm256_setzero_pd();
        for (j = 0; j < d; j++) {
            ptrdiff_t iend = tri ? j + 1 : d;
            __m256d y = _mm256_mul_pd(_mm256_loadu_pd(D + r), _mm256_broadcast_sd(P + j));
            for (i = 1; i < iend; i++)
                y = _mm256_fmadd_pd(_mm256_loadu_pd(D + i * ld + r), _mm256_broadcast_sd(P + i * d + j), y);
            m = _mm256_fmadd_pd(y, y, m);
        }
        _mm256_storeu_pd(out + r, _mm256_fnmadd_pd(half, m, cv));
    }
}
#endif

/* out[r] = c - 0.5 * || (x_r - mu) P ||^2 for r < npad (npad % 16 == 0); the x86-64-v3
   clone's work goes to the AVX2 path (same bits), every other CPU runs the clones. */
static void dpe_logp_small(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                           const double *mu, const double *P, int tri, double c,
                           double *D, double *out)
{
    DPE_DISPATCH(dpe_logp_small, (Xt, d, ld, npad, mu, P, tri, c, D, out));
}

/* D = Xt - mu (row-wise), for the BLAS path. */
DPE_CLONES static void dpe_center(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                  const double *mu, double *D)
{
    ptrdiff_t i, r;
    for (i = 0; i < d; i++) {
        const double *x = Xt + i * ld;
        double *dd = D + i * ld;
        double m = mu[i];
        for (r = 0; r < npad; r++) dd[r] = x[r] - m;
    }
}

/* out[r] = c - 0.5 * sum_j Y[j, r]^2 (Y = (X - mu) P from BLAS, stored (d, ld)). */
DPE_CLONES static void dpe_logp_from_y(const double *Y, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                       double c, double *out)
{
    ptrdiff_t j, r;
    for (r = 0; r < npad; r++) out[r] = 0.0;
    for (j = 0; j < d; j++) {
        const double *y = Y + j * ld;
        for (r = 0; r < npad; r++) out[r] += y[r] * y[r];
    }
    for (r = 0; r < npad; r++) out[r] = c - 0.5 * out[r];
}

/* ---------------------------------------------------------------- single precision
   The float32 path (float32 rows): the same Mahalanobis term in float, over a float chunk
   Xs (d, ld) and float parameters.  A tile is 8 rows (one dpf_v8): the d centred values
   of a tile stay in registers on AVX2 (16 registers) as on AVX-512; every row's
   operations are those of the generic loop below, in the same order. */
static inline __attribute__((always_inline)) void
dpf_logp_tri_tiles(const float *Xs, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                   const float *mu, const float *P, float c, float *out)
{
    ptrdiff_t r, i, j;
    for (r = 0; r < npad; r += DPF_W) {
        dpf_v8 c0[DPE_MAXD];
        dpf_v8 m0 = {0};
        #pragma GCC unroll 16
        for (i = 0; i < d; i++) c0[i] = DPF_LD(Xs + i * ld + r) - mu[i];
        #pragma GCC unroll 16
        for (j = 0; j < d; j++) {
            dpf_v8 y0 = {0};
            #pragma GCC unroll 16
            for (i = 0; i <= j; i++) y0 += c0[i] * P[i * d + j];
            m0 += y0 * y0;
        }
        DPF_ST(out + r, c - 0.5f * m0);
    }
}

/* dpe_logp_small in float: out[r] = c - 0.5 || (x_r - mu) P ||^2, r < npad. */
DPE_CLONES static void dpf_logp_small(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                      const float *mu, const float *P, int tri, float c,
                                      float *D, float *out)
{
    ptrdiff_t i, j, r;
    if (tri) {
        switch (d) {
#define DPF_LOGP_CASE(n) case n: dpf_logp_tri_tiles(Xs, n, ld, npad, mu, P, c, out); return;
        DPF_LOGP_CASE(1) DPF_LOGP_CASE(2) DPF_LOGP_CASE(3) DPF_LOGP_CASE(4) DPF_LOGP_CASE(5)
        DPF_LOGP_CASE(6) DPF_LOGP_CASE(7) DPF_LOGP_CASE(8) DPF_LOGP_CASE(9) DPF_LOGP_CASE(10)
        DPF_LOGP_CASE(11) DPF_LOGP_CASE(12) DPF_LOGP_CASE(13) DPF_LOGP_CASE(14) DPF_LOGP_CASE(15)
#undef DPF_LOGP_CASE
        default: break;
        }
    }
    for (i = 0; i < d; i++) {
        const float *x = Xs + i * ld;
        float *dd = D + i * ld;
        float m = mu[i];
        for (r = 0; r < npad; r++) dd[r] = x[r] - m;
    }
    for (r = 0; r < npad; r += DPF_W) {
        dpf_v8 m0 = {0};
        for (j = 0; j < d; j++) {
            ptrdiff_t iend = tri ? j + 1 : d;
            dpf_v8 y0 = {0};
            for (i = 0; i < iend; i++) y0 += DPF_LD(D + i * ld + r) * P[i * d + j];
            m0 += y0 * y0;
        }
        DPF_ST(out + r, c - 0.5f * m0);
    }
}

/* D = Xs - mu (row-wise) in float, for the BLAS path (strmm / sgemm). */
DPE_CLONES static void dpf_center(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                  const float *mu, float *D)
{
    ptrdiff_t i, r;
    for (i = 0; i < d; i++) {
        const float *x = Xs + i * ld;
        float *dd = D + i * ld;
        float m = mu[i];
        for (r = 0; r < npad; r++) dd[r] = x[r] - m;
    }
}

/* out[r] = c - 0.5 * sum_j Y[j, r]^2 in float (Y = (X - mu) P from BLAS, stored (d, ld)). */
DPE_CLONES static void dpf_logp_from_y(const float *Y, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                       float c, float *out)
{
    ptrdiff_t j, r;
    for (r = 0; r < npad; r++) out[r] = 0.0f;
    for (j = 0; j < d; j++) {
        const float *y = Y + j * ld;
        for (r = 0; r < npad; r++) out[r] += y[r] * y[r];
    }
    for (r = 0; r < npad; r++) out[r] = c - 0.5f * out[r];
}

/* The GMM's chunk scratch (dpc_scratch.h): D (centred rows) and W (products), and on the
   hand-loop path (d < DPC_BLAS_MIN_D) lanes for n, s1 and the upper-triangle s2 of every
   component.  Returns the size in doubles; binds the arrays into buf when buf != NULL. */
static inline ptrdiff_t dpe_gmm_scratch_init(dpc_scratch *s, ptrdiff_t d, ptrdiff_t K, double *buf)
{
    ptrdiff_t lanes = d < DPC_BLAS_MIN_D ? dpe_lanes_n_s1_size(d) + dpe_lanes_s2_size(d) : 0;
    return dpc_scratch_init(s, d, K, 2, lanes, buf);
}

#endif /* DPC_GMM_H */
