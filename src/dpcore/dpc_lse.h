/*
 * dpc_lse.h -- column max and log-sum-exp over the K per-component rows of a chunk.
 *
 * L is (K, ld) row-major: L[k, r] = log pi_k + log p(x_r | component k) for the rows r of
 * one chunk (r < npad, npad % DPC_LANES == 0).  dpe_lse turns L into the responsibilities
 * in place (Eq. 10 of DP-EM, Park et al. 2017, for any mixture) and writes the per-row
 * log-likelihood; dpe_lse_ll writes the log-likelihood only.  A component with
 * log pi_k = -inf gets responsibility exactly 0 (dpe_exp_neg returns 0 below -708).
 * On a CPU that runs the x86-64-v3 clone, both run as AVX2 + FMA code with that clone's
 * bits (dpe_lse_avx2, dpe_lse_ll_avx2; dpc_simd.h).
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
DPE_CLONES static void dpe_lse_clones(double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr,
                                      ptrdiff_t npad, double *ll, double *tmp)
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
DPE_CLONES static void dpe_lse_ll_clones(const double *L, ptrdiff_t K, ptrdiff_t ld,
                                         ptrdiff_t npad, double *ll, double *tmp)
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

#if DPE_HAVE_AVX2
/* The AVX2 + FMA path of the log-sum-exps (dpc_simd.h): GCC leaves the x86-64-v3 clone's
   loops scalar (no 64-bit integer <-> double conversions in AVX2).  dpe_exp_neg and
   dpe_log_pos on 4 rows, the clone's operations with the clone's FMA contractions. */
static inline DPE_AVX2 __attribute__((always_inline)) __m256d dpe_exp_neg4(__m256d x)
{
    const __m256d lo = _mm256_set1_pd(-708.0), shift = _mm256_set1_pd(6755399441055744.0);
    const __m256d xc = _mm256_max_pd(lo, x);    /* x < -708 ? -708 : x (NaN stays x) */
    const __m256d t = _mm256_fmadd_pd(xc, _mm256_set1_pd(1.4426950408889634), shift);
    const __m256d n = _mm256_sub_pd(t, shift);
    const __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10),
                                       _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), xc));
    __m256d p = _mm256_set1_pd(1.0 / 6227020800.0);
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 479001600.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 39916800.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 3628800.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 362880.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    {
        const __m256i bits = _mm256_slli_epi64(
            _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(-0x4338000000000000LL + 1023)), 52);
        const __m256d res = _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
        return _mm256_andnot_pd(_mm256_cmp_pd(x, lo, _CMP_LT_OQ), res);
    }
}

static inline DPE_AVX2 __attribute__((always_inline)) __m256d dpe_log_pos4(__m256d s)
{
    const __m256i b = _mm256_castpd_si256(s);
    const __m256i two52 = _mm256_set1_epi64x(0x4330000000000000LL);
    /* the biased exponent (0 .. 2047) as an exact double: 2^52 + e - 2^52 */
    const __m256d eb = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(_mm256_srli_epi64(b, 52), two52)),
                                     _mm256_castsi256_pd(two52));
    __m256d m = _mm256_castsi256_pd(_mm256_or_si256(
        _mm256_and_si256(b, _mm256_set1_epi64x(0x000FFFFFFFFFFFFFLL)), _mm256_set1_epi64x(0x3FF0000000000000LL)));
    const __m256d big = _mm256_cmp_pd(m, _mm256_set1_pd(1.4142135623730951), _CMP_GT_OQ);
    const __m256d one = _mm256_set1_pd(1.0);
    m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(0.5)), big);
    {
        const __m256d ed = _mm256_add_pd(_mm256_sub_pd(eb, _mm256_set1_pd(1023.0)), _mm256_and_pd(big, one));
        const __m256d z = _mm256_div_pd(_mm256_sub_pd(m, one), _mm256_add_pd(m, one));
        const __m256d z2 = _mm256_mul_pd(z, z);
        __m256d q = _mm256_set1_pd(2.0 / 23.0);
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 21.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 19.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 17.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 15.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 13.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 11.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 9.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 7.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 5.0));
        q = _mm256_fmadd_pd(q, z2, _mm256_set1_pd(2.0 / 3.0));
        {
            const __m256d u = _mm256_fmadd_pd(_mm256_mul_pd(z, z2), q,
                                              _mm256_mul_pd(ed, _mm256_set1_pd(1.90821492927058770002e-10)));
            const __m256d v = _mm256_fmadd_pd(_mm256_set1_pd(2.0), z, u);
            return _mm256_fmadd_pd(ed, _mm256_set1_pd(6.93147180369123816490e-01), v);
        }
    }
}

static inline DPE_AVX2 __attribute__((always_inline)) void
dpe_colmax_avx2(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad, double *mx, double *s)
{
    ptrdiff_t k, r;
    for (r = 0; r < npad; r += 4) {
        __m256d m = _mm256_loadu_pd(L + r);
        for (k = 1; k < K; k++) m = _mm256_max_pd(_mm256_loadu_pd(L + k * ld + r), m);  /* Lk > m ? Lk : m */
        _mm256_storeu_pd(mx + r, m);
        _mm256_storeu_pd(s + r, _mm256_setzero_pd());
    }
}

static DPE_AVX2 void dpe_lse_avx2(double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                                  double *ll, double *tmp)
{
    ptrdiff_t k, r;
    double *mx = tmp, *s = tmp + ld;
    dpe_colmax_avx2(L, K, ld, npad, mx, s);
    for (k = 0; k < K; k++) {
        double *Lk = L + k * ld;
        for (r = 0; r < npad; r += 4) {
            const __m256d e = dpe_exp_neg4(_mm256_sub_pd(_mm256_loadu_pd(Lk + r), _mm256_loadu_pd(mx + r)));
            _mm256_storeu_pd(Lk + r, e);
            _mm256_storeu_pd(s + r, _mm256_add_pd(_mm256_loadu_pd(s + r), e));
        }
    }
    for (r = 0; r < npad; r += 4) {
        const __m256d sr = _mm256_loadu_pd(s + r);
        _mm256_storeu_pd(ll + r, _mm256_add_pd(_mm256_loadu_pd(mx + r), dpe_log_pos4(sr)));
        _mm256_storeu_pd(s + r, _mm256_div_pd(_mm256_set1_pd(1.0), sr));
    }
    for (k = 0; k < K; k++) {
        double *Lk = L + k * ld;
        for (r = 0; r < npad; r += 4)
            _mm256_storeu_pd(Lk + r, _mm256_mul_pd(_mm256_loadu_pd(Lk + r), _mm256_loadu_pd(s + r)));
        for (r = nr; r < npad; r++) Lk[r] = 0.0;
    }
}

static DPE_AVX2 void dpe_lse_ll_avx2(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                                     double *ll, double *tmp)
{
    ptrdiff_t k, r;
    double *mx = tmp, *s = tmp + ld;
    dpe_colmax_avx2(L, K, ld, npad, mx, s);
    for (k = 0; k < K; k++) {
        const double *Lk = L + k * ld;
        for (r = 0; r < npad; r += 4)
            _mm256_storeu_pd(s + r, _mm256_add_pd(_mm256_loadu_pd(s + r), dpe_exp_neg4(
                _mm256_sub_pd(_mm256_loadu_pd(Lk + r), _mm256_loadu_pd(mx + r)))));
    }
    for (r = 0; r < npad; r += 4)
        _mm256_storeu_pd(ll + r, _mm256_add_pd(_mm256_loadu_pd(mx + r), dpe_log_pos4(_mm256_loadu_pd(s + r))));
}
#endif

/* Log-sum-exp over K rows of L (see dpe_lse_clones); the x86-64-v3 clone's work goes to the
   AVX2 path (same bits). */
static void dpe_lse(double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                    double *ll, double *tmp)
{
    DPE_DISPATCH(dpe_lse, (L, K, ld, nr, npad, ll, tmp));
}

/* Per-row log-likelihood only (see dpe_lse_ll_clones); AVX2 path as above. */
static void dpe_lse_ll(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad, double *ll, double *tmp)
{
    DPE_DISPATCH(dpe_lse_ll, (L, K, ld, npad, ll, tmp));
}

#endif /* DPC_LSE_H */
