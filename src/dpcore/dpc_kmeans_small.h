/*
 * dpc_kmeans_small.h -- one chunk of the k-means statistics pass (assignment, then counts,
 * sums and inertia: dpc_kmeans.h) with a faster AVX2 assignment for d <= DPK_SMALL_D.
 *
 * Where the time went (issue 41, airports 1.26M x 2, K = 50, one thread, Zen 4): the
 * assignment's per-centre argmin step (cmp, min, blendv of the label) shared the two FMA
 * pipes with the scores' two FMAs (blendv runs there), ~1.7 cycles per 4 rows x centre
 * against the floor's 1.0; loading and clipping ~1.2 ms, the row-by-row accumulation
 * ~2.3 ms of ~11 ms.
 *
 * Group argmin.  The centres come in panels of DPK_KC = 4 (the table's layout).  For 8 rows
 * at a time the 4 scores of a panel are reduced by min_pd alone, and only the panel's
 * minimum is compared with the running best (strict <, so an earlier panel keeps a tie);
 * the winning panel's index rides along (blendv once per panel instead of once per
 * centre).  The slot inside the panel is found afterwards, row by row, by computing the
 * panel's 4 scores again in one vector -- the same fma sequence, so the same numbers -- and
 * taking the first slot whose score equals the best.  The label is therefore the lowest
 * index with the smallest score, exactly dpk_assign's label (and the padding's +inf never
 * wins).  The resolution is fused with the accumulation (counts, sums, and the distance
 * to the centre with dpk_dist_row's arithmetic), rows in order: the same partials, bit for
 * bit, as dpk_assign + dpk_accumulate.
 *
 * A row whose scores are NaN (a NaN feature of raw rows) gets label 0, as in dpk_assign.
 *
 *   dpk_stats_chunk   labels of the chunk's npad rows and the accumulation of its nr rows
 *                     into one block's partials: the small-d AVX2 path where it applies,
 *                     else dpk_assign + dpk_accumulate.
 */
#ifndef DPC_KMEANS_SMALL_H
#define DPC_KMEANS_SMALL_H

#include <stdint.h>

#include "dpc_kmeans.h"

#ifdef DPK_X86
/* Labels of 8 rows by panels: best[r] the smallest score, grp[r] (int64 bits) the first
   index of the panel holding it (npad % 8 == 0). */
static inline DPK_AVX2 __attribute__((always_inline)) void
dpk_panel_argmin_body(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                      const double *tab, ptrdiff_t K, double *best, double *grp)
{
    const ptrdiff_t Kp = dpk_kpad(K);
    const __m256d zero = _mm256_setzero_pd();
    const __m256i step = _mm256_set1_epi64x(DPK_KC);
    ptrdiff_t r0, p, j;
    for (r0 = 0; r0 < npad; r0 += 8) {
        const double *x = Xt + r0;
#define DPK_LDX(i, t) (d > (i) ? _mm256_loadu_pd(x + (i) * ld + 4 * (t)) : zero)
        const __m256d x00 = DPK_LDX(0, 0), x01 = DPK_LDX(0, 1), x10 = DPK_LDX(1, 0);
        const __m256d x11 = DPK_LDX(1, 1), x20 = DPK_LDX(2, 0), x21 = DPK_LDX(2, 1);
        const __m256d x30 = DPK_LDX(3, 0), x31 = DPK_LDX(3, 1);
#undef DPK_LDX
        __m256d b0 = _mm256_set1_pd(HUGE_VAL), b1 = b0, g0 = zero, g1 = zero;
        __m256i gid = _mm256_setzero_si256();
        for (p = 0; p < Kp; p += DPK_KC) {
            const double *c = tab + Kp + p * d;
            __m256d m0 = zero, m1 = zero;
            for (j = 0; j < DPK_KC; j++) {
                const __m256d h = _mm256_broadcast_sd(tab + p + j);
                const __m256d c0 = _mm256_broadcast_sd(c + j);
                const __m256d c1 = d > 1 ? _mm256_broadcast_sd(c + j + DPK_KC) : zero;
                const __m256d c2 = d > 2 ? _mm256_broadcast_sd(c + j + 2 * DPK_KC) : zero;
                const __m256d c3 = d > 3 ? _mm256_broadcast_sd(c + j + 3 * DPK_KC) : zero;
                __m256d s0 = _mm256_fnmadd_pd(x00, c0, h), s1 = _mm256_fnmadd_pd(x01, c0, h);
                if (d > 1) {
                    s0 = _mm256_fnmadd_pd(x10, c1, s0);
                    s1 = _mm256_fnmadd_pd(x11, c1, s1);
                }
                if (d > 2) {
                    s0 = _mm256_fnmadd_pd(x20, c2, s0);
                    s1 = _mm256_fnmadd_pd(x21, c2, s1);
                }
                if (d > 3) {
                    s0 = _mm256_fnmadd_pd(x30, c3, s0);
                    s1 = _mm256_fnmadd_pd(x31, c3, s1);
                }
                m0 = j == 0 ? s0 : _mm256_min_pd(s0, m0);
                m1 = j == 0 ? s1 : _mm256_min_pd(s1, m1);
            }
            {
                const __m256d lt0 = _mm256_cmp_pd(m0, b0, _CMP_LT_OQ);
                const __m256d lt1 = _mm256_cmp_pd(m1, b1, _CMP_LT_OQ);
                b0 = _mm256_min_pd(m0, b0);
                b1 = _mm256_min_pd(m1, b1);
                g0 = _mm256_blendv_pd(g0, _mm256_castsi256_pd(gid), lt0);
                g1 = _mm256_blendv_pd(g1, _mm256_castsi256_pd(gid), lt1);
            }
            gid = _mm256_add_epi64(gid, step);
        }
        _mm256_storeu_pd(best + r0, b0);
        _mm256_storeu_pd(best + r0 + 4, b1);
        _mm256_storeu_pd(grp + r0, g0);
        _mm256_storeu_pd(grp + r0 + 4, g1);
    }
}

/* The label of a row with features xb[0 .. d-1] (broadcast): the first slot of its panel
   (first index pk) whose score, computed again by the same fma sequence, equals best (slot
   0 if none does: NaN scores). */
static inline DPK_AVX2 __attribute__((always_inline)) ptrdiff_t
dpk_panel_slot(const __m256d *xb, const ptrdiff_t d, const double *tab, ptrdiff_t Kp,
               ptrdiff_t pk, const double *best)
{
    const double *cp = tab + Kp + pk * d;
    ptrdiff_t i;
    __m256d s = _mm256_fnmadd_pd(xb[0], _mm256_loadu_pd(cp), _mm256_loadu_pd(tab + pk));
    for (i = 1; i < d; i++) s = _mm256_fnmadd_pd(xb[i], _mm256_loadu_pd(cp + i * DPK_KC), s);
    const int eq = _mm256_movemask_pd(_mm256_cmp_pd(s, _mm256_broadcast_sd(best), _CMP_EQ_OQ));
    return pk + (__builtin_ctz(eq | 16) & 3);
}

/* The nr rows in order: label, then counts[k] += 1, sums[k, :] += x_r, acc += the distance
   (dpk_dist_row's sum: ((0 + t_0^2) + t_1^2) + ..., products apart).  Returns acc. */
static inline DPK_AVX2 __attribute__((always_inline)) double
dpk_panel_accumulate_body(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                          const double *tab, ptrdiff_t K, const double *C, const double *best,
                          const double *grp, double *counts, double *sums)
{
    const ptrdiff_t Kp = dpk_kpad(K);
    const int64_t *g = (const int64_t *)grp;
    ptrdiff_t r, i;
    double acc = 0.0;
    for (r = 0; r < nr; r++) {
        __m256d xb[DPK_SMALL_D];
        ptrdiff_t k;
        for (i = 0; i < d; i++) xb[i] = _mm256_broadcast_sd(Xt + i * ld + r);
        k = dpk_panel_slot(xb, d, tab, Kp, (ptrdiff_t)g[r], best + r);
        counts[k] += 1.0;
        if (d == 2) {
            /* the row as one pair: sums and differences lane by lane, then t_0^2 + t_1^2
               (= (0 + t_0^2) + t_1^2: 0 + t_0^2 is t_0^2 exactly) */
            const __m128d xp = _mm_unpacklo_pd(_mm256_castpd256_pd128(xb[0]),
                                               _mm256_castpd256_pd128(xb[1]));
            __m128d t = _mm_sub_pd(xp, _mm_loadu_pd(C + 2 * k));
            _mm_storeu_pd(sums + 2 * k, _mm_add_pd(_mm_loadu_pd(sums + 2 * k), xp));
            t = _mm_mul_pd(t, t);
            __asm__("" : "+x"(t));
            acc += _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
        } else {
            acc += dpk_add_row(Xt, d, ld, r, C + k * d, sums + k * d);
        }
    }
    return acc;
}

static DPK_AVX2 double dpk_panel_stats_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                            ptrdiff_t nr, ptrdiff_t npad, const double *tab,
                                            ptrdiff_t K, const double *C, double *best,
                                            double *grp, double *counts, double *sums)
{
#define DPK_CASE(D)                                                                        \
    case D:                                                                                \
        dpk_panel_argmin_body(Xt, D, ld, npad, tab, K, best, grp);                         \
        return dpk_panel_accumulate_body(Xt, D, ld, nr, tab, K, C, best, grp, counts, sums);
    switch (d) {
    DPK_CASE(1)
    DPK_CASE(2)
    DPK_CASE(3)
    default:
    DPK_CASE(4)
    }
#undef DPK_CASE
}
#endif /* DPK_X86 */

/* One chunk: labels of its npad rows (lab, best: scratch of npad doubles; npad % 16 == 0)
   and the accumulation of its nr rows into one block's partials counts (K), sums (K, d),
   inertia[0] (dpk_assign + dpk_accumulate, the same numbers).  xmax: dpk_assign's. */
static void dpk_stats_chunk(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                            ptrdiff_t npad, const double *tab, ptrdiff_t K, const double *C,
                            double xmax, double cmax, double hmax, double *best, double *lab,
                            double *counts, double *sums, double *inertia, int path)
{
#ifdef DPK_X86
    if (path == DPK_PATH_AVX2 && d <= DPK_SMALL_D) {
        if (xmax < 0.0) xmax = dpk_max_abs_avx2(Xt, d, ld, npad);
        if (dpk_scores_safe(d, xmax, cmax, hmax)) {
            inertia[0] += dpk_panel_stats_avx2(Xt, d, ld, nr, npad, tab, K, C, best, lab,
                                               counts, sums);
            return;
        }
    }
#endif
    dpk_assign(Xt, d, ld, npad, tab, K, xmax, cmax, hmax, best, lab, path);
    dpk_accumulate(Xt, d, ld, nr, C, lab, counts, sums, inertia, path == DPK_PATH_AVX2);
}

#endif /* DPC_KMEANS_SMALL_H */
