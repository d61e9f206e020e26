/*
 * dpc_lse.h -- column max and log-sum-exp over the K per-component rows of a chunk.
 *
 * L is (K, ld) row-major: L[k, r] = log pi_k + log p(x_r | component k) for the rows r of
 * one chunk (r < npad, npad % DPC_LANES == 0).  dpe_lse turns L into the responsibilities
 * in place (Eq. 10 of DP-EM, Park et al. 2017, for any mixture) and writes the per-row
 * log-likelihood; dpe_lse_ll writes the log-likelihood only.  A component with
 * log pi_k = -inf gets responsibility exactly 0 (dpe_exp_neg returns 0 below -708).
 */
#ifndef DPC_LSE_H
#define DPC_LSE_H

#include "dpc_simd.h"

/* mx[r] = max_k L[k, r] and s[r] = 0, the shared start of both log-sum-exps. */
static inline void dpe_colmax(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                              double *mx, double *s)
{
    ptrdiff_t k, r;
    for (r = 0; r < npad; r++) { mx[r] = L[r]; s[r] = 0.0; }
    for (k = 1; k < K; k++) {
        const double *Lk = L + k * ld;
        for (r = 0; r < npad; r++) mx[r] = Lk[r] > mx[r] ? Lk[r] : mx[r];
    }
}

/* Log-sum-exp over K rows of L (K, ld): L becomes the responsibilities, ll the per-row
   log-likelihood; columns nr..npad-1 of L are set to 0. tmp: 2 * ld doubles. */
DPE_CLONES static void dpe_lse(double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                               double *ll, double *tmp)
{
    ptrdiff_t k, r;
    double *mx = tmp, *s = tmp + ld;
    dpe_colmax(L, K, ld, npad, mx, s);
    for (k = 0; k < K; k++) {
        double *Lk = L + k * ld;
        for (r = 0; r < npad; r++) {
            double e = dpe_exp_neg(Lk[r] - mx[r]);
            Lk[r] = e;
            s[r] += e;
        }
    }
    for (r = 0; r < npad; r++) {
        ll[r] = mx[r] + dpe_log_pos(s[r]);
        s[r] = 1.0 / s[r];
    }
    for (k = 0; k < K; k++) {
        double *Lk = L + k * ld;
        for (r = 0; r < npad; r++) Lk[r] *= s[r];
        for (r = nr; r < npad; r++) Lk[r] = 0.0;
    }
}

/* Per-row log-likelihood only (L untouched), for predict_log_resp. */
DPE_CLONES static void dpe_lse_ll(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                                  double *ll, double *tmp)
{
    ptrdiff_t k, r;
    double *mx = tmp, *s = tmp + ld;
    dpe_colmax(L, K, ld, npad, mx, s);
    for (k = 0; k < K; k++) {
        const double *Lk = L + k * ld;
        for (r = 0; r < npad; r++) s[r] += dpe_exp_neg(Lk[r] - mx[r]);
    }
    for (r = 0; r < npad; r++) ll[r] = mx[r] + dpe_log_pos(s[r]);
}

#endif /* DPC_LSE_H */
