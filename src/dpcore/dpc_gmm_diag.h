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

#include "dpc_simd.h"

/* Doubles of lane accumulators of one component: counts, first moments, squared sums. */
static inline ptrdiff_t dpe_lanes_diag_size(ptrdiff_t d)
{
    return (1 + 2 * d) * DPE_L;
}

/* out[r] = c - 0.5 * sum_j ((x_r - mu)_j p_j)^2 for r < npad (npad % 16 == 0), j in order. */
DPE_CLONES static void dpe_logp_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                     const double *mu, const double *p, double c, double *out)
{
    ptrdiff_t j, r;
    for (r = 0; r < npad; r += DPE_L) {
        dpe_v8 m0 = {0}, m1 = {0};
        for (j = 0; j < d; j++) {
            const double *x = Xt + j * ld + r;
            double mj = mu[j], pj = p[j];
            dpe_v8 y0 = (DPE_LD(x) - mj) * pj, y1 = (DPE_LD(x + 8) - mj) * pj;
            m0 += y0 * y0;
            m1 += y1 * y1;
        }
        DPE_ST(out + r, c - 0.5 * m0);
        DPE_ST(out + r + 8, c - 0.5 * m1);
    }
}

/* n += g, s1_j += w, sq_j += w x_j with w = g x_j (rounded before both uses), over the
   rows of one chunk, into the lanes la of one component ([n][s1: d][sq: d], 16 each).
   g: the component's responsibilities (zero on the padding). */
DPE_CLONES static void dpe_lanes_diag(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                      const double *g, double *la)
{
    ptrdiff_t j, r;
    double *ls = la + DPE_L, *lq = la + (1 + d) * DPE_L;
    dpe_v8 a0 = DPE_LD(la), a1 = DPE_LD(la + 8);
    for (r = 0; r < npad; r += DPE_L) {
        a0 += DPE_LD(g + r);
        a1 += DPE_LD(g + r + 8);
    }
    DPE_ST(la, a0); DPE_ST(la + 8, a1);
    for (j = 0; j < d; j++, ls += DPE_L, lq += DPE_L) {
        const double *x = Xt + j * ld;
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

/* Block end: the lanes of one component added into its partial counts, first moments and
   squared sums (the fixed tree of dpe_hsum). */
static void dpe_lanes_diag_flush(const double *la, ptrdiff_t d, double *nk, double *s1, double *sq)
{
    dpe_hsum_add(la, 1, nk);
    dpe_hsum_add(la + DPE_L, d, s1);
    dpe_hsum_add(la + (1 + d) * DPE_L, d, sq);
}

#endif /* DPC_GMM_DIAG_H */
