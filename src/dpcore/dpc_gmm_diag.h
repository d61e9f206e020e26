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
 * j order; w = g x_j rounded, s1 += w, s2_jj += w x_j.  So on that path (d < 16) the
 * diagonal kernel's numbers equal the full kernel's; on the full kernel's BLAS path
 * (d >= 16: dtrmm, dsyrk) they differ in the last bits.
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
DPE_CLONES static void dpe_logp_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                     ptrdiff_t K, const double *mu, const double *p, const double *c,
                                     double *L)
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
DPE_CLONES static void dpe_lanes_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                      ptrdiff_t K, const double *G, double *la, ptrdiff_t lpc)
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
