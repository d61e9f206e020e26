/*
 * dpc_lda.h -- the per-document variational E-step of LDA (Hoffman, Blei & Bach 2010,
 * Algorithm 2's inner loop) with per-document clipping of the expected sufficient
 * statistic.  Static inline C, compiled into _lda.pyx.
 *
 * Notation (one document d with n distinct terms v_j and counts c_j):
 *   Eb[v, k]   = exp(E[log beta_kv])    stored transposed, (V, K), one row per term
 *   t_k        = exp(E[log theta_dk]) = exp(psi(gamma_k) - psi(sum_k gamma_k))
 *   phinorm_j  = sum_k t_k Eb[v_j, k] + DBL_EPSILON
 *   gamma_k   <- alpha + t_k sum_j (c_j / phinorm_j) Eb[v_j, k]      (fixed point)
 * and the document's statistic s[k, v_j] = c_j t_k Eb[v_j, k] / phinorm_j = c_j phi_{j k}.
 *
 * Reductions over K use DPL_ACC fixed accumulators combined in a fixed order, so the
 * result does not depend on the SIMD width the compiler picks.
 */
#ifndef DPC_LDA_H
#define DPC_LDA_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "dpc_simd.h"

#define DPL_ACC 8

/* Digamma for x > 0: psi(x) = psi(x + 6) - sum_{i<6} 1/(x + i) below 6 (the six
   reciprocals summed in pairs, (a + b) / (a b): three divisions), then the asymptotic series
   psi(x) = log x - 1/(2x) - sum_{n<=7} B_2n / (2n x^2n) (Abramowitz & Stegun 6.3.18): the
   first omitted term is below 2e-13 at x = 6. */
static inline double dpl_digamma(double x)
{
    double r = 0.0;
    if (x < 6.0) {
        double a = x, b = x + 1, c = x + 2, d = x + 3, e = x + 4, f = x + 5;
        r = -((a + b) / (a * b) + (c + d) / (c * d) + (e + f) / (e * f));
        x += 6.0;
    }
    double f = 1.0 / (x * x);
    double t = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132
               - f * (691.0 / 32760 - f * (1.0 / 12)))))));
    return r + log(x) - 0.5 / x - t;
}

/* sum_k a[k] b[k] over DPL_ACC = 8 fixed lanes (lane l takes k = l mod 8; one 8-wide
   vector), combined pairwise in a fixed order: the same sums for any SIMD width. */
static inline double dpl_dot(const double *a, const double *b, ptrdiff_t K)
{
    dpe_v8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
    ptrdiff_t k = 0;
    for (; k + DPL_ACC <= K; k += DPL_ACC)
        acc += DPE_LD(a + k) * DPE_LD(b + k);
    double r[DPL_ACC];
    memcpy(r, &acc, sizeof r);
    for (int l = 0; k < K; k++, l++)
        r[l] += a[k] * b[k];
    return ((r[0] + r[4]) + (r[1] + r[5])) + ((r[2] + r[6]) + (r[3] + r[7]));
}

/* t_k = exp(psi(gamma_k) - psi(sum gamma)) (sum in index order). */
static inline void dpl_exp_elog(const double *gamma, ptrdiff_t K, double *t)
{
    double s = 0.0;
    for (ptrdiff_t k = 0; k < K; k++)
        s += gamma[k];
    double ps = dpl_digamma(s);
    for (ptrdiff_t k = 0; k < K; k++)
        t[k] = exp(dpl_digamma(gamma[k]) - ps);
}

/* phinorm_j for the document's n terms. */
static inline void dpl_phinorm(const int *idx, ptrdiff_t n, const double *Eb, ptrdiff_t K,
                               const double *t, double *phinorm)
{
    for (ptrdiff_t j = 0; j < n; j++)
        phinorm[j] = dpl_dot(t, Eb + (ptrdiff_t)idx[j] * K, K) + DBL_EPSILON;
}

/*
 * Fixed-point iteration of one document.  gamma (K) holds the initial value on entry and
 * the result on exit; t (K) ends as exp(E[log theta]) of the result and phinorm (n) as the
 * matching normalisers; acc (K) is scratch.  Stops after max_iter updates or when the
 * mean absolute change of gamma falls below tol.  Returns the number of updates.
 */
DPE_CLONES static int dpl_doc_fixed_point(const int *idx, const double *cnt, ptrdiff_t n,
                                      const double *Eb, ptrdiff_t K, double alpha,
                                      int max_iter, double tol, double *gamma, double *t,
                                      double *phinorm, double *acc)
{
    int it = 0;
    dpl_exp_elog(gamma, K, t);
    for (it = 0; it < max_iter; it++) {
        for (ptrdiff_t k = 0; k < K; k++)
            acc[k] = 0.0;
        for (ptrdiff_t j = 0; j < n; j++) {
            const double *e = Eb + (ptrdiff_t)idx[j] * K;
            double w = cnt[j] / (dpl_dot(t, e, K) + DBL_EPSILON);
            for (ptrdiff_t k = 0; k < K; k++)
                acc[k] += w * e[k];
        }
        double change = 0.0;
        for (ptrdiff_t k = 0; k < K; k++) {
            double g = alpha + t[k] * acc[k];
            change += fabs(g - gamma[k]);
            gamma[k] = g;
        }
        dpl_exp_elog(gamma, K, t);
        if (change / (double)K < tol) {
            it++;
            break;
        }
    }
    dpl_phinorm(idx, n, Eb, K, t, phinorm);
    return it;
}

/* Frobenius norm of the document's statistic s[k, v_j] = c_j t_k Eb[v_j, k] / phinorm_j. */
DPE_CLONES static double dpl_stat_norm(const int *idx, const double *cnt, ptrdiff_t n,
                                   const double *Eb, ptrdiff_t K, const double *t,
                                   const double *phinorm, double *tmp)
{
    double total = 0.0;
    for (ptrdiff_t j = 0; j < n; j++) {
        const double *e = Eb + (ptrdiff_t)idx[j] * K;
        for (ptrdiff_t k = 0; k < K; k++)
            tmp[k] = t[k] * e[k];
        double w = cnt[j] / phinorm[j];
        total += w * w * dpl_dot(tmp, tmp, K);
    }
    return sqrt(total);
}

/* out[v_j, k] += scale c_j t_k Eb[v_j, k] / phinorm_j; touched[v_j] = 1. */
DPE_CLONES static void dpl_add_stat(const int *idx, const double *cnt, ptrdiff_t n,
                                const double *Eb, ptrdiff_t K, const double *t,
                                const double *phinorm, double scale, double *out,
                                unsigned char *touched)
{
    for (ptrdiff_t j = 0; j < n; j++) {
        ptrdiff_t v = idx[j];
        const double *e = Eb + v * K;
        double *o = out + v * K;
        double w = scale * (cnt[j] / phinorm[j]);
        for (ptrdiff_t k = 0; k < K; k++)
            o[k] += w * (t[k] * e[k]);
        touched[v] = 1;
    }
}

#endif
