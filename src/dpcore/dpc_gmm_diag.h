/*
 * dpc_gmm_diag.h -- the E-step of a Gaussian mixture with diagonal precisions
 * (covariance_type "diag" and "spherical"), O(d) per row and component instead of the
 * full kernel's O(d^2) (dpc_gmm.h, _estep.pyx).
 *
 *   dpe_logp_diag      L[k, r] = c_k - 0.5 sum_j ((x_rj - mu_kj) p_kj)^2 over one transposed
 *                      chunk Xt (d, ld); p_k: the diagonal of the precision Cholesky factor
 *                      (1 / standard deviations).
 *   dpe_lanes_diag     counts, first moments and squared sums of one component over one
 *                      chunk, into 16 fixed lanes per statistic (dpc_lanes.h's rule).
 *   dpe_lanes_diag_flush  block end: lanes -> the block's partial row.
 *
 * Lane layout of one component (doubles): [n: 16][s1: d x 16][sq: d x 16].
 *
 * The operations (and their FMA contractions) are those of the full kernel's hand-loop
 * path for a diagonal triangular factor: y_j = (x_j - mu_j) p_j rounded, m += y_j^2 in
 * j order; w = g x_j rounded, s1 += w, s2_jj += w x_j.  So on that path (d < DPC_BLAS_MIN_D,
 * 25 since issue 41) the diagonal kernel's numbers equal the full kernel's; on the full
 * kernel's BLAS path (d >= DPC_BLAS_MIN_D: dtrmm, dsyrk) they differ in the last bits.
 */
#ifndef DPC_GMM_DIAG_H
#define DPC_GMM_DIAG_H

#include "dpc_f32.h"
#include "dpc_simd.h"

/* Doubles of lane accumulators of one component: counts, first moments, squared sums. */
static inline ptrdiff_t dpe_lanes_diag_size(ptrdiff_t d)
{
    return (1 + 2 * d) * DPE_L;
}

/* L[k, r] = c_k - 0.5 * sum_j ((x_r - mu_k)_j p_kj)^2 for every component k and r < npad
   (npad % 16 == 0), each sum from +0 in j order.  Features outer, components inner, rows
   innermost: row j of Xt and the K rows of L stay in L1 and every access is sequential (a
   16-row tile walked along j would step by ld doubles, a power of two, and thrash the
   cache sets for large d). */
DPE_CLONES static void dpe_logp_diag_clones(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                            ptrdiff_t npad, ptrdiff_t K, const double *mu,
                                            const double *p, const double *c, double *L)
{
    ptrdiff_t j, k, r;
    for (k = 0; k < K; k++)
        for (r = 0; r < npad; r++) L[k * ld + r] = 0.0;
    for (j = 0; j < d; j++) {
        const double *x = Xt + j * ld;
        for (k = 0; k < K; k++) {
            double mj = mu[k * d + j], pj = p[k * d + j];
            double *m = L + k * ld;
            for (r = 0; r < npad; r += DPE_L) {
                dpe_v8 y0 = (DPE_LD(x + r) - mj) * pj, y1 = (DPE_LD(x + r + 8) - mj) * pj;
                DPE_ST(m + r, DPE_LD(m + r) + y0 * y0);
                DPE_ST(m + r + 8, DPE_LD(m + r + 8) + y1 * y1);
            }
        }
    }
    for (k = 0; k < K; k++) {
        double *m = L + k * ld;
        for (r = 0; r < npad; r += DPE_L) {
            DPE_ST(m + r, c[k] - 0.5 * DPE_LD(m + r));
            DPE_ST(m + r + 8, c[k] - 0.5 * DPE_LD(m + r + 8));
        }
    }
}

/* For every component k: n += g, s1_j += w, sq_j += w x_j with w = g x_j (rounded before
   both uses), over the rows of one chunk, into the lanes la + k * lpc of component k
   ([n][s1: d][sq: d], 16 each).  G: (K, ld) responsibilities (zero on the padding).
   Features outer, components inner: row j of Xt stays in L1 while the K components use it. */
DPE_CLONES static void dpe_lanes_diag_clones(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                             ptrdiff_t npad, ptrdiff_t K, const double *G,
                                             double *la, ptrdiff_t lpc)
{
    ptrdiff_t j, k, r;
    for (k = 0; k < K; k++) {
        const double *g = G + k * ld;
        double *lk = la + k * lpc;
        dpe_v8 a0 = DPE_LD(lk), a1 = DPE_LD(lk + 8);
        for (r = 0; r < npad; r += DPE_L) {
            a0 += DPE_LD(g + r);
            a1 += DPE_LD(g + r + 8);
        }
        DPE_ST(lk, a0); DPE_ST(lk + 8, a1);
    }
    for (j = 0; j < d; j++) {
        const double *x = Xt + j * ld;
        for (k = 0; k < K; k++) {
            const double *g = G + k * ld;
            double *ls = la + k * lpc + (1 + j) * DPE_L, *lq = la + k * lpc + (1 + d + j) * DPE_L;
            dpe_v8 s0 = DPE_LD(ls), s1 = DPE_LD(ls + 8);
            dpe_v8 q0 = DPE_LD(lq), q1 = DPE_LD(lq + 8);
            for (r = 0; r < npad; r += DPE_L) {
                dpe_v8 x0 = DPE_LD(x + r), x1 = DPE_LD(x + r + 8);
                dpe_v8 w0 = DPE_LD(g + r) * x0, w1 = DPE_LD(g + r + 8) * x1;
                s0 += w0; s1 += w1;
                q0 += w0 * x0; q1 += w1 * x1;
            }
            DPE_ST(ls, s0); DPE_ST(ls + 8, s1);
            DPE_ST(lq, q0); DPE_ST(lq + 8, q1);
        }
    }
}

#if DPE_HAVE_AVX2
/* The AVX2 + FMA paths (dpc_simd.h), 4 rows (lanes) per __m256d, each lane with the
   clone's operations in the clone's order: y = (x - mu) p rounded, m = fma(y, y, m) from
   +0, L = c - 0.5 m (fnmadd: 0.5 m is exact); w = g x rounded, s1 += w, sq = fma(w, x, sq). */
static DPE_AVX2 void dpe_logp_diag_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                        ptrdiff_t K, const double *mu, const double *p,
                                        const double *c, double *L)
{
    const __m256d half = _mm256_set1_pd(0.5);
    ptrdiff_t j, k, r;
    for (k = 0; k < K; k++)
        for (r = 0; r < npad; r += 4) _mm256_storeu_pd(L + k * ld + r, _mm256_setzero_pd());
    for (j = 0; j < d; j++) {
        const double *x = Xt + j * ld;
        for (k = 0; k < K; k++) {
            const __m256d mj = _mm256_broadcast_sd(mu + k * d + j), pj = _mm256_broadcast_sd(p + k * d + j);
            double *m = L + k * ld;
            for (r = 0; r < npad; r += 8) {
                __m256d y0 = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(x + r), mj), pj);
                __m256d y1 = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(x + r + 4), mj), pj);
                _mm256_storeu_pd(m + r, _mm256_fmadd_pd(y0, y0, _mm256_loadu_pd(m + r)));
                _mm256_storeu_pd(m + r + 4, _mm256_fmadd_pd(y1, y1, _mm256_loadu_pd(m + r + 4)));
            }
        }
    }
    for (k = 0; k < K; k++) {
        const __m256d ck = _mm256_broadcast_sd(c + k);
        double *m = L + k * ld;
        for (r = 0; r < npad; r += 4)
            _mm256_storeu_pd(m + r, _mm256_fnmadd_pd(half, _mm256_loadu_pd(m + r), ck));
    }
}

static DPE_AVX2 void dpe_lanes_diag_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                         ptrdiff_t K, const double *G, double *la, ptrdiff_t lpc)
{
    ptrdiff_t j, k, r, q;
    for (k = 0; k < K; k++) {
        const double *g = G + k * ld;
        double *lk = la + k * lpc;
        for (q = 0; q < DPE_L; q += 4) {
            __m256d a0 = _mm256_loadu_pd(lk + q);
            for (r = q; r < npad; r += DPE_L) a0 = _mm256_add_pd(a0, _mm256_loadu_pd(g + r));
            _mm256_storeu_pd(lk + q, a0);
        }
    }
    for (j = 0; j < d; j++) {
        const double *x = Xt + j * ld;
        for (k = 0; k < K; k++) {
            const double *g = G + k * ld;
            double *ls = la + k * lpc + (1 + j) * DPE_L, *lq = la + k * lpc + (1 + d + j) * DPE_L;
            __m256d s0 = _mm256_loadu_pd(ls), s1 = _mm256_loadu_pd(ls + 4);
            __m256d s2 = _mm256_loadu_pd(ls + 8), s3 = _mm256_loadu_pd(ls + 12);
            __m256d q0 = _mm256_loadu_pd(lq), q1 = _mm256_loadu_pd(lq + 4);
            __m256d q2 = _mm256_loadu_pd(lq + 8), q3 = _mm256_loadu_pd(lq + 12);
            for (r = 0; r < npad; r += DPE_L) {
                const __m256d x0 = _mm256_loadu_pd(x + r), x1 = _mm256_loadu_pd(x + r + 4);
                const __m256d x2 = _mm256_loadu_pd(x + r + 8), x3 = _mm256_loadu_pd(x + r + 12);
                const __m256d w0 = _mm256_mul_pd(_mm256_loadu_pd(g + r), x0);
                const __m256d w1 = _mm256_mul_pd(_mm256_loadu_pd(g + r + 4), x1);
                const __m256d w2 = _mm256_mul_pd(_mm256_loadu_pd(g + r + 8), x2);
                const __m256d w3 = _mm256_mul_pd(_mm256_loadu_pd(g + r + 12), x3);
                s0 = _mm256_add_pd(s0, w0); s1 = _mm256_add_pd(s1, w1);
                s2 = _mm256_add_pd(s2, w2); s3 = _mm256_add_pd(s3, w3);
                q0 = _mm256_fmadd_pd(w0, x0, q0); q1 = _mm256_fmadd_pd(w1, x1, q1);
                q2 = _mm256_fmadd_pd(w2, x2, q2); q3 = _mm256_fmadd_pd(w3, x3, q3);
            }
            _mm256_storeu_pd(ls, s0); _mm256_storeu_pd(ls + 4, s1);
            _mm256_storeu_pd(ls + 8, s2); _mm256_storeu_pd(ls + 12, s3);
            _mm256_storeu_pd(lq, q0); _mm256_storeu_pd(lq + 4, q1);
            _mm256_storeu_pd(lq + 8, q2); _mm256_storeu_pd(lq + 12, q3);
        }
    }
}
#endif

/* L[k, r] = c_k - 0.5 sum_j ((x_r - mu_k)_j p_kj)^2 (see dpe_logp_diag_clones); the
   x86-64-v3 clone's work goes to the AVX2 path (same bits). */
static void dpe_logp_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, ptrdiff_t K,
                          const double *mu, const double *p, const double *c, double *L)
{
    DPE_DISPATCH(dpe_logp_diag, (Xt, d, ld, npad, K, mu, p, c, L));
}

/* Counts, first moments and squared sums into lanes (see dpe_lanes_diag_clones); AVX2
   path as above. */
static void dpe_lanes_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, ptrdiff_t K,
                           const double *G, double *la, ptrdiff_t lpc)
{
    DPE_DISPATCH(dpe_lanes_diag, (Xt, d, ld, npad, K, G, la, lpc));
}

/* Block end: the lanes of one component added into its partial counts, first moments and
   squared sums (the fixed tree of dpe_hsum). */
static void dpe_lanes_diag_flush(const double *la, ptrdiff_t d, double *nk, double *s1, double *sq)
{
    dpe_hsum_add(la, 1, nk);
    dpe_hsum_add(la + DPE_L, d, s1);
    dpe_hsum_add(la + (1 + d) * DPE_L, d, sq);
}

/* ---------------------------------------------------------------- single precision
   The float32 path: dpe_logp_diag and dpe_lanes_diag in float (same loops, same order),
   into float lanes flushed every DPC_F32_FLUSH_CHUNKS chunks (dpf_lanes_flush). */
DPE_CLONES static void dpf_logp_diag(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                     ptrdiff_t K, const float *mu, const float *p, const float *c,
                                     float *L)
{
    ptrdiff_t j, k, r;
    for (k = 0; k < K; k++)
        for (r = 0; r < npad; r++) L[k * ld + r] = 0.0f;
    for (j = 0; j < d; j++) {
        const float *x = Xs + j * ld;
        for (k = 0; k < K; k++) {
            float mj = mu[k * d + j], pj = p[k * d + j];
            float *m = L + k * ld;
            for (r = 0; r < npad; r += DPE_L) {
                dpf_v8 y0 = (DPF_LD(x + r) - mj) * pj, y1 = (DPF_LD(x + r + 8) - mj) * pj;
                DPF_ST(m + r, DPF_LD(m + r) + y0 * y0);
                DPF_ST(m + r + 8, DPF_LD(m + r + 8) + y1 * y1);
            }
        }
    }
    for (k = 0; k < K; k++) {
        float *m = L + k * ld;
        for (r = 0; r < npad; r += DPE_L) {
            DPF_ST(m + r, c[k] - 0.5f * DPF_LD(m + r));
            DPF_ST(m + r + 8, c[k] - 0.5f * DPF_LD(m + r + 8));
        }
    }
}

DPE_CLONES static void dpf_lanes_diag(const float *Xs, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                      ptrdiff_t K, const float *G, float *la, ptrdiff_t lpc)
{
    ptrdiff_t j, k, r;
    for (k = 0; k < K; k++) {
        const float *g = G + k * ld;
        float *lk = la + k * lpc;
        dpf_v8 a0 = DPF_LD(lk), a1 = DPF_LD(lk + 8);
        for (r = 0; r < npad; r += DPE_L) {
            a0 += DPF_LD(g + r);
            a1 += DPF_LD(g + r + 8);
        }
        DPF_ST(lk, a0); DPF_ST(lk + 8, a1);
    }
    for (j = 0; j < d; j++) {
        const float *x = Xs + j * ld;
        for (k = 0; k < K; k++) {
            const float *g = G + k * ld;
            float *ls = la + k * lpc + (1 + j) * DPE_L, *lq = la + k * lpc + (1 + d + j) * DPE_L;
            dpf_v8 s0 = DPF_LD(ls), s1 = DPF_LD(ls + 8);
            dpf_v8 q0 = DPF_LD(lq), q1 = DPF_LD(lq + 8);
            for (r = 0; r < npad; r += DPE_L) {
                dpf_v8 x0 = DPF_LD(x + r), x1 = DPF_LD(x + r + 8);
                dpf_v8 w0 = DPF_LD(g + r) * x0, w1 = DPF_LD(g + r + 8) * x1;
                s0 += w0; s1 += w1;
                q0 += w0 * x0; q1 += w1 * x1;
            }
            DPF_ST(ls, s0); DPF_ST(ls + 8, s1);
            DPF_ST(lq, q0); DPF_ST(lq + 8, q1);
        }
    }
}

#endif /* DPC_GMM_DIAG_H */
