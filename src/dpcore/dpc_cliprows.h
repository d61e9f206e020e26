/*
 * dpc_cliprows.h -- the released operator's rows (issue 41): float64 rows mapped into the unit
 * ball of a declared domain, row-major, in one read of X:
 *
 *     Z[r] = the loader's map of X[r] (dpc_rows.h, dpe_load_domain_f64_row: clip to the box,
 *            centre, scale, rescale to norm `target` a row of norm > 1)
 *     sq[r] = ‖Z[r]‖²                  sums[b] = Σ_{r in block b} Z[r]  (blocks of `tile` rows,
 *                                                 rows added in order)
 *
 * The map's operations per entry are the loader's ((clip(x) − c) · inv, then · f with
 * f = target / √s2), so Z differs from it only where the squared norm s2 is summed in another
 * order: here in 8 lanes (entry i into lane i mod 8, an fma chain each; the lanes added
 * ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7))), which decides whether a row is rescaled and by how
 * much; the clip target's margin ((d + 2) eps, dpem_fast._preprocess.clip_target) covers the
 * norm's rounding in any order, so every row still lands in the ball.  A row whose s2 is not
 * finite (a huge or non-finite entry) is redone by the loader's own row code (and counted as it
 * counts).  sq[r] is s2
 * for a row left as it was, else Z[r]'s summed again the same way.  AVX2 + FMA and the
 * portable path (C's fma()) give the same bits.  No threads.
 *
 * A domain without a box whose centre is +0 everywhere and whose scale is one number (a
 * declared data_norm: dcr_uniform_scale) is mapped as x * inv0 on the AVX2 path, without
 * reading the centre and scale rows: the same value, since x - (+0) is x exactly for every
 * x (signed zeros, infinities and NaN included), and 40-45 % less time at (400, 4096) on a
 * Zen 4 core (1.4-1.7 -> 0.84 ms): the two d-long rows read for every row were the cost.
 */
#ifndef DPC_CLIPROWS_H
#define DPC_CLIPROWS_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include "dpc_avx2fma.h"
#include "dpc_rows.h"

/* lanes l0..l7 in the order of the docstring */
static inline double dcr_fold(const double *l)
{
    return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

/* Σ z_i² in 8 lanes, portable */
static double dcr_sq_c(const double *z, ptrdiff_t d)
{
    double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    ptrdiff_t i;
    for (i = 0; i < d; i++) l[i & 7] = fma(z[i], z[i], l[i & 7]);
    return dcr_fold(l);
}

/* entries i0..d-1 of one row: the loader's map (clip to the box, centre, scale) into z, their
   squares fma'd into lane i mod 8 of l; returns 1 if the box clip changed an entry */
static inline int dcr_map_from(const double *x, ptrdiff_t i0, ptrdiff_t d, const double *dom, double *z,
                               double *l)
{
    const double *lo = dom, *hi = dom + d, *ctr = dom + 2 * d, *inv = dom + 3 * d;
    int boxed = 0;
    ptrdiff_t i;
    for (i = i0; i < d; i++) {
        double v = x[i];
        boxed |= (v < lo[i]) | (v > hi[i]);
        v = v < lo[i] ? lo[i] : (v > hi[i] ? hi[i] : v);
        v = (v - ctr[i]) * inv[i];
        z[i] = v;
        l[i & 7] = fma(v, v, l[i & 7]);
    }
    return boxed;
}

/* one row: returns 1 if a clip changed it (the loader's count) */
static int dcr_row_c(const double *x, ptrdiff_t d, const double *dom, double target, double *z, double *sq)
{
    double l[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s2;
    int boxed = dcr_map_from(x, 0, d, dom, z, l);
    ptrdiff_t i;
    s2 = dcr_fold(l);
    if (s2 <= 1.0) { *sq = s2; return boxed; }
    if (s2 <= DBL_MAX) {
        double f = target / sqrt(s2);
        for (i = 0; i < d; i++) z[i] *= f;
        boxed = 1;
    } else {                                    /* the loader's row (and its count: NaN rows) */
        boxed = dpe_load_domain_f64_row(x, d, dom, target, z, 1);
    }
    *sq = dcr_sq_c(z, d);
    return boxed;
}

#if DPC_HAVE_AVX2FMA

static DPC_AVX2FMA double dcr_sq_avx2(const double *z, ptrdiff_t d)
{
    __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
    double l[8];
    ptrdiff_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256d u = _mm256_loadu_pd(z + i), v = _mm256_loadu_pd(z + i + 4);
        a = _mm256_fmadd_pd(u, u, a);
        b = _mm256_fmadd_pd(v, v, b);
    }
    _mm256_storeu_pd(l, a);
    _mm256_storeu_pd(l + 4, b);
    for (; i < d; i++) l[i & 7] = fma(z[i], z[i], l[i & 7]);
    return dcr_fold(l);
}

/* 1 where a domain without a box (the caller's dpe_domain_has_box) has its centre +0 (bit for
   bit) everywhere and its scale one number (*inv0): the map is then x * inv0 exactly (the
   header's docstring). */
static int dcr_uniform_scale(const double *dom, ptrdiff_t d, double *inv0)
{
    const double *ctr = dom + 2 * d, *inv = dom + 3 * d;
    ptrdiff_t i;
    if (d == 0) return 0;
    for (i = 0; i < d; i++)
        if (ctr[i] != 0.0 || signbit(ctr[i]) || !(inv[i] == inv[0])) return 0;
    *inv0 = inv[0];
    return 1;
}

/* box: 1 the box clip, 0 none, -1 none and the uniform scale inv0 (dcr_uniform_scale) */
static DPC_AVX2FMA int dcr_row_avx2(const double *x, ptrdiff_t d, const double *dom, double target, double *z, double *sq,
                                  int box, double inv0)
{
    const double *lo = dom, *hi = dom + d, *ctr = dom + 2 * d, *inv = dom + 3 * d;
    __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd(), out = _mm256_setzero_pd();
    double l[8], s2;
    int boxed;
    ptrdiff_t i = 0;
#define DCR_MAP(off, acc) do {                                                            \
        __m256d v = _mm256_loadu_pd(x + i + (off)), L = _mm256_loadu_pd(lo + i + (off)),  \
                H = _mm256_loadu_pd(hi + i + (off));                                      \
        out = _mm256_or_pd(out, _mm256_or_pd(_mm256_cmp_pd(v, L, _CMP_LT_OQ),             \
                                             _mm256_cmp_pd(v, H, _CMP_GT_OQ)));            \
        v = _mm256_blendv_pd(v, L, _mm256_cmp_pd(v, L, _CMP_LT_OQ));                      \
        v = _mm256_blendv_pd(v, H, _mm256_cmp_pd(v, H, _CMP_GT_OQ));                      \
        v = _mm256_mul_pd(_mm256_sub_pd(v, _mm256_loadu_pd(ctr + i + (off))),             \
                          _mm256_loadu_pd(inv + i + (off)));                              \
        _mm256_storeu_pd(z + i + (off), v);                                               \
        acc = _mm256_fmadd_pd(v, v, acc); } while (0)
#define DCR_MAP_FREE(off, acc) do {                                                       \
        __m256d v = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i + (off)),           \
                                                _mm256_loadu_pd(ctr + i + (off))),         \
                                  _mm256_loadu_pd(inv + i + (off)));                       \
        _mm256_storeu_pd(z + i + (off), v);                                               \
        acc = _mm256_fmadd_pd(v, v, acc); } while (0)
#define DCR_MAP_UNIFORM(off, acc) do {                                                    \
        __m256d v = _mm256_mul_pd(_mm256_loadu_pd(x + i + (off)), scale);                 \
        _mm256_storeu_pd(z + i + (off), v);                                               \
        acc = _mm256_fmadd_pd(v, v, acc); } while (0)
    if (box < 0) {                             /* x - (+0) is x: the centre's read skipped */
        const __m256d scale = _mm256_set1_pd(inv0);
        for (; i + 8 <= d; i += 8) { DCR_MAP_UNIFORM(0, a); DCR_MAP_UNIFORM(4, b); }
    } else if (box) {
        for (; i + 8 <= d; i += 8) { DCR_MAP(0, a); DCR_MAP(4, b); }
    } else {                                   /* no box: the clip to (−inf, inf) is the identity */
        for (; i + 8 <= d; i += 8) { DCR_MAP_FREE(0, a); DCR_MAP_FREE(4, b); }
    }
#undef DCR_MAP
#undef DCR_MAP_FREE
#undef DCR_MAP_UNIFORM
    boxed = _mm256_movemask_pd(out) != 0;
    _mm256_storeu_pd(l, a);
    _mm256_storeu_pd(l + 4, b);
    boxed |= dcr_map_from(x, i, d, dom, z, l);  /* the tail: the portable row's operations */
    s2 = dcr_fold(l);
    if (s2 <= 1.0) { *sq = s2; return boxed; }
    if (s2 <= DBL_MAX) {
        __m256d f = _mm256_set1_pd(target / sqrt(s2));
        for (i = 0; i + 4 <= d; i += 4) _mm256_storeu_pd(z + i, _mm256_mul_pd(_mm256_loadu_pd(z + i), f));
        for (; i < d; i++) z[i] *= target / sqrt(s2);
        boxed = 1;
    } else {
        boxed = dpe_load_domain_f64_row(x, d, dom, target, z, 1);
    }
    *sq = dcr_sq_avx2(z, d);
    return boxed;
}

static DPC_AVX2FMA void dcr_add_avx2(const double *z, ptrdiff_t d, double *sum)
{
    ptrdiff_t i = 0;
    for (; i + 4 <= d; i += 4)
        _mm256_storeu_pd(sum + i, _mm256_add_pd(_mm256_loadu_pd(sum + i), _mm256_loadu_pd(z + i)));
    for (; i < d; i++) sum[i] += z[i];
}
#endif

/* rows X (n x d) -> Z (n x d), sq (n), sums (ceil(n / tile) x d, zeroed here); returns the
   rows changed by a clip.  fast = 0: the portable path (tests). */
static ptrdiff_t dcr_clip_rows(const double *X, ptrdiff_t n, ptrdiff_t d, const double *dom, double target,
                               double *Z, double *sq, double *sums, ptrdiff_t tile, int fast)
{
    ptrdiff_t r, i, n_clipped = 0;
    int simd = 0, box = 1;
    double inv0 = 1.0;
#if DPC_HAVE_AVX2FMA
    simd = fast && dpc_avx2fma();
    if (simd) {
        box = dpe_domain_has_box(dom, d);
        if (!box && dcr_uniform_scale(dom, d, &inv0)) box = -1;
    }
#endif
    (void)fast;
    (void)box;
    (void)inv0;
    for (i = 0; i < ((n + tile - 1) / tile) * d; i++) sums[i] = 0.0;
    for (r = 0; r < n; r++) {
        const double *x = X + r * d;
        double *z = Z + r * d, *sum = sums + (r / tile) * d;
#if DPC_HAVE_AVX2FMA
        if (simd) {
            n_clipped += dcr_row_avx2(x, d, dom, target, z, sq + r, box, inv0);
            dcr_add_avx2(z, d, sum);
            continue;
        }
#endif
        n_clipped += dcr_row_c(x, d, dom, target, z, sq + r);
        for (i = 0; i < d; i++) sum[i] += z[i];
    }
    return n_clipped;
}

#endif
