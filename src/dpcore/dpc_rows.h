/*
 * dpc_rows.h -- the row loader of the E-step kernels: one chunk of rows of X (float32 or
 * float64, C-contiguous (n, d)) into a transposed float64 scratch Xt of shape (d, ld),
 * so that every inner loop of a kernel runs along rows and vectorises.
 *
 *   dpe_load_f64 / dpe_load_f32
 *       Xt[i, r] = (double) X[r, i] for r < nr; 0 on the padding nr <= r < npad.
 *   dpe_upcast_f32
 *       a row-major float64 copy of float32 rows, for BLAS paths that read the rows of
 *       X as they are (no transposition; float64 rows need no copy).
 *   dpe_load_domain_f64 / dpe_load_domain_f32
 *       the same rows mapped into the unit ball of a declared data domain on the way
 *       (clip to the box, centre, scale each feature by its own inverse scale, rescale a
 *       row whose norm exceeds 1 to norm
 *       `target`); returns the number of rows rescaled.  Every finite row lands in
 *       the ball: a row whose squared norm overflows is redone with a scaled norm.
 *       The numpy twin is dpem_fast._preprocess.scale_and_clip (DP-EM Sec. 3:
 *       declared, never data-derived, bounds).
 *
 * The loaders carry no DPE_CLONES: they compile for baseline x86-64, so no sum in them
 * is FMA-contracted on any machine.
 */
#ifndef DPC_ROWS_H
#define DPC_ROWS_H

#include <float.h>
#include <stddef.h>

/* Xt[i, r] = (double) X[r, i] for r < nr, 0 on the padding r in [nr, npad).  Inlined
   with a constant d (d = 1..15) so that the per-row loop unrolls; plain copies. */
#define DPE_LOAD_DEF(NAME, T)                                                             \
static inline __attribute__((always_inline)) void                                        \
NAME##_body(const T *X, const ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld,   \
            double *Xt)                                                                  \
{                                                                                        \
    ptrdiff_t r, i;                                                                      \
    for (r = 0; r < nr; r++) {                                                           \
        const T *row = X + r * d;                                                        \
        _Pragma("GCC unroll 16")                                                         \
        for (i = 0; i < d; i++) Xt[i * ld + r] = (double)row[i];                         \
    }                                                                                    \
    for (i = 0; i < d; i++)                                                              \
        for (r = nr; r < npad; r++) Xt[i * ld + r] = 0.0;                                \
}                                                                                        \
static void NAME(const T *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld,   \
                 double *Xt)                                                             \
{                                                                                        \
    switch (d) {                                                                         \
    case 1: NAME##_body(X, 1, nr, npad, ld, Xt); return;                                 \
    case 2: NAME##_body(X, 2, nr, npad, ld, Xt); return;                                 \
    case 3: NAME##_body(X, 3, nr, npad, ld, Xt); return;                                 \
    case 4: NAME##_body(X, 4, nr, npad, ld, Xt); return;                                 \
    case 5: NAME##_body(X, 5, nr, npad, ld, Xt); return;                                 \
    case 6: NAME##_body(X, 6, nr, npad, ld, Xt); return;                                 \
    case 7: NAME##_body(X, 7, nr, npad, ld, Xt); return;                                 \
    case 8: NAME##_body(X, 8, nr, npad, ld, Xt); return;                                 \
    case 9: NAME##_body(X, 9, nr, npad, ld, Xt); return;                                 \
    case 10: NAME##_body(X, 10, nr, npad, ld, Xt); return;                               \
    case 11: NAME##_body(X, 11, nr, npad, ld, Xt); return;                               \
    case 12: NAME##_body(X, 12, nr, npad, ld, Xt); return;                               \
    case 13: NAME##_body(X, 13, nr, npad, ld, Xt); return;                               \
    case 14: NAME##_body(X, 14, nr, npad, ld, Xt); return;                               \
    case 15: NAME##_body(X, 15, nr, npad, ld, Xt); return;                               \
    default: NAME##_body(X, d, nr, npad, ld, Xt); return;                                \
    }                                                                                    \
}
DPE_LOAD_DEF(dpe_load_f64, double)
DPE_LOAD_DEF(dpe_load_f32, float)

/* Row-major float64 copy of m float32 values (a chunk for BLAS, which reads rows as they
   are: no transposition). */
static void dpe_upcast_f32(const float *X, ptrdiff_t m, double *out)
{
    ptrdiff_t i;
    for (i = 0; i < m; i++) out[i] = (double)X[i];
}

/* The rare path of the domain loaders: the squared norm of row r overflowed.  That needs
   a centred, scaled norm beyond about 1e154, or a centred value beyond DBL_MAX: the row is
   outside the unit ball and is clipped onto its rim.  Column r of Xt holds
   h_i = (a_i / 2 - c_i / 2) * (inv_i / max_j inv_j) (a: the box-clipped row, c: the centre,
   inv: the per-feature inverse scales; no factor exceeds 1, so this cannot overflow; an
   infinite a_i / 2 - c_i / 2 is kept as it is) and m = max_i |h_i| > 0.  The row becomes
   t * target / |t| with t = h / m, which has |t|^2 in [1, d]: the direction of
   (a - c) * inv and norm target.  An infinite coordinate (input +-inf with no box) gives
   the limiting direction, +-1 there and 0 elsewhere. */
static void dpe_domain_rescale_huge(double *xt, ptrdiff_t ld, ptrdiff_t d, double m, double target)
{
    ptrdiff_t i;
    double s = 0.0, f;
    for (i = 0; i < d; i++) {
        double h = xt[i * ld];
        double t = m <= DBL_MAX ? h / m : (h == m ? 1.0 : (h == -m ? -1.0 : 0.0));
        xt[i * ld] = t;
        s += t * t;
    }
    f = target / __builtin_sqrt(s);
    for (i = 0; i < d; i++) xt[i * ld] *= f;
}

/* Domain loader.  dom holds the rows (lower, upper, center, inv_scale), each of length d
   (lower / upper may be -inf / +inf when no box was declared; inv_scale_i = 1 / s_i > 0,
   finite: each feature's own scale).  For each row:
       a_i = min(max(x_i, lower_i), upper_i),   v_i = (a_i - center_i) * inv_scale_i,
       s2 = v_0^2 + v_1^2 + ... (in order);  if s2 > 1: v *= target / sqrt(s2).
   Returns the number of rows changed by either clip (the box or the ball).
   When s2 overflows to +inf (a huge finite row), the row is recomputed without overflow
   by dpe_domain_rescale_huge: every finite row ends in the unit ball, in the direction
   of (a - center) * inv_scale.  A NaN in the row gives NaN (callers reject non-finite data).
   Equivalent to dpem_fast._preprocess.scale_and_clip in float64, without a copy of X.
   NAME##_row maps one row into out[0], out[st], ..., out[(d-1) st] and returns 1 if a clip
   changed it; NAME loads nr rows into Xt (d, ld), zero up to npad. */
#define DPE_LOAD_DOMAIN_DEF(NAME, T)                                                      \
static inline int NAME##_row(const T *row, ptrdiff_t d, const double *dom, double target,  \
                             double *out, ptrdiff_t st)                                    \
{                                                                                          \
    const double *lo = dom, *hi = dom + d, *ctr = dom + 2 * d, *inv = dom + 3 * d;         \
    ptrdiff_t i;                                                                           \
    double s2 = 0.0;                                                                       \
    int boxed = 0;                                                                         \
    for (i = 0; i < d; i++) {                                                              \
        double v = (double)row[i];                                                         \
        boxed |= (v < lo[i]) | (v > hi[i]);                                                \
        v = v < lo[i] ? lo[i] : (v > hi[i] ? hi[i] : v);                                   \
        v = (v - ctr[i]) * inv[i];                                                         \
        out[i * st] = v;                                                                   \
        s2 += v * v;                                                                       \
    }                                                                                      \
    if (s2 > 1.0) {                                                                        \
        if (s2 <= DBL_MAX) {                                                               \
            double f = target / __builtin_sqrt(s2);                                        \
            for (i = 0; i < d; i++) out[i * st] *= f;                                      \
        } else {                                                                           \
            double m = 0.0, inv_max = 0.0;                                                 \
            for (i = 0; i < d; i++) inv_max = inv[i] > inv_max ? inv[i] : inv_max;         \
            for (i = 0; i < d; i++) {                                                      \
                double a = (double)row[i], h;                                              \
                a = a < lo[i] ? lo[i] : (a > hi[i] ? hi[i] : a);                           \
                h = a * 0.5 - ctr[i] * 0.5;                                                \
                if (h - h == 0.0) h *= inv[i] / inv_max;                                   \
                out[i * st] = h;                                                           \
                h = h < 0.0 ? -h : h;                                                      \
                m = h > m ? h : m;                                                         \
            }                                                                              \
            dpe_domain_rescale_huge(out, st, d, m, target);                                \
        }                                                                                  \
        boxed = 1;                                                                         \
    }                                                                                      \
    return boxed;                                                                          \
}                                                                                          \
static ptrdiff_t NAME(const T *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld, \
                      const double *dom, double target, double *Xt)                        \
{                                                                                          \
    ptrdiff_t r, i, n_clipped = 0;                                                         \
    for (r = 0; r < nr; r++)                                                               \
        n_clipped += NAME##_row(X + r * d, d, dom, target, Xt + r, ld);                    \
    for (i = 0; i < d; i++)                                                                \
        for (r = nr; r < npad; r++) Xt[i * ld + r] = 0.0;                                  \
    return n_clipped;                                                                      \
}
DPE_LOAD_DOMAIN_DEF(dpe_load_domain_f64, double)
DPE_LOAD_DOMAIN_DEF(dpe_load_domain_f32, float)

/* The same loaders vectorised across rows (AVX2, runtime dispatch by the caller): four rows
   at a time are transposed in registers and mapped into the ball lane by lane, each lane
   doing exactly the scalar row's operations in the same order (products are kept apart
   from the sums, so no FMA is formed whatever the including module's flags), so Xt and
   the clip count are bit for bit those of dpe_load_* / dpe_load_domain_*.  Rows left over
   (nr % 4) and rows whose squared norm overflows go through the scalar row code.

   dpe_lanes_load_f64 / _f32 (X, d, nr, npad, ld, dom, target, Xt): dom == NULL is the
   plain transposition (returns 0), else the domain loader. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(DPC_NO_CLONES)
#define DPE_ROWS_AVX2 1
#include <immintrin.h>
#define DPE_AVX2_FN __attribute__((target("avx2")))

/* a * b as its own rounded value: the empty asm stops GCC contracting it into an FMA. */
static inline DPE_AVX2_FN __m256d dpe_mul_apart(__m256d a, __m256d b)
{
    __m256d p = _mm256_mul_pd(a, b);
    __asm__("" : "+x"(p));
    return p;
}

/* Features i .. i+3 of the 4 rows at X (row stride d) as 4 vectors of the 4 rows. */
#define DPE_TRANSPOSE4(r0, r1, r2, r3, v)                                         \
    do {                                                                          \
        __m256d t0_ = _mm256_unpacklo_pd(r0, r1), t1_ = _mm256_unpackhi_pd(r0, r1); \
        __m256d t2_ = _mm256_unpacklo_pd(r2, r3), t3_ = _mm256_unpackhi_pd(r2, r3); \
        (v)[0] = _mm256_permute2f128_pd(t0_, t2_, 0x20);                          \
        (v)[1] = _mm256_permute2f128_pd(t1_, t3_, 0x20);                          \
        (v)[2] = _mm256_permute2f128_pd(t0_, t2_, 0x31);                          \
        (v)[3] = _mm256_permute2f128_pd(t1_, t3_, 0x31);                          \
    } while (0)
#define DPE_LD4_double(p) _mm256_loadu_pd(p)
#define DPE_LD4_float(p) _mm256_cvtps_pd(_mm_loadu_ps(p))

/* Whether the domain dom (d features) has a box at all (some finite lower or upper bound):
   without one the clip to it changes nothing and is skipped. */
static inline int dpe_domain_has_box(const double *dom, ptrdiff_t d)
{
    ptrdiff_t i;
    for (i = 0; i < d; i++)
        if (!(dom[i] < -DBL_MAX) || !(dom[d + i] > DBL_MAX)) return 1;
    return 0;
}

/* One feature (column) of 4 rows: v = the domain map of feature i, s2 += v^2, boxed |= the
   lanes the box changed.  The clip min(hi, max(lo, v)) is the scalar
   v < lo ? lo : (v > hi ? hi : v) for every non-NaN v, signed zeros included (max / min
   return their second operand, v, on equal zeros). */
static inline DPE_AVX2_FN __attribute__((always_inline)) __m256d
dpe_domain_lane(__m256d v, const double *dom, ptrdiff_t d, ptrdiff_t i, __m256d *s2, __m256d *boxed,
                int box)
{
    if (box) {
        const __m256d a = _mm256_min_pd(_mm256_broadcast_sd(dom + d + i),
                                        _mm256_max_pd(_mm256_broadcast_sd(dom + i), v));
        *boxed = _mm256_or_pd(*boxed, _mm256_cmp_pd(a, v, _CMP_NEQ_OQ));
        v = a;
    }
    v = _mm256_mul_pd(_mm256_sub_pd(v, _mm256_broadcast_sd(dom + 2 * d + i)),
                      _mm256_broadcast_sd(dom + 3 * d + i));
    *s2 = _mm256_add_pd(*s2, dpe_mul_apart(v, v));
    return v;
}

/* The domain loader at d = 2, four rows an iteration: the generic lane loader's very
   operations (the same numbers, clipped rows and count), with the domain's eight constants
   held in registers and no per-feature loop (the generic loop at d = 2 keeps them in memory
   and branches per feature: ~1.3x slower at airports' 1.26M x 2).  Stores the 4 mapped
   rows, returns how many the box or the ball clips, and sets *over to the lanes beyond the
   ball: the caller redoes such a group with the generic loop (its rescale). */
static inline DPE_AVX2_FN __attribute__((always_inline)) ptrdiff_t
dpe_lanes_domain2(__m256d p, __m256d u, const double *dom, const int box, double *xt,
                  ptrdiff_t ld, int *over)
{
    /* rows (a0 a1 b0 b1) (c0 c1 d0 d1) -> (a0 b0 c0 d0) (a1 b1 c1 d1) */
    __m256d v0 = _mm256_permute4x64_pd(_mm256_unpacklo_pd(p, u), 0xD8);
    __m256d v1 = _mm256_permute4x64_pd(_mm256_unpackhi_pd(p, u), 0xD8);
    __m256d boxed = _mm256_setzero_pd(), s2;
    if (box) {
        const __m256d a0 = _mm256_min_pd(_mm256_broadcast_sd(dom + 2),
                                         _mm256_max_pd(_mm256_broadcast_sd(dom), v0));
        const __m256d a1 = _mm256_min_pd(_mm256_broadcast_sd(dom + 3),
                                         _mm256_max_pd(_mm256_broadcast_sd(dom + 1), v1));
        boxed = _mm256_or_pd(_mm256_cmp_pd(a0, v0, _CMP_NEQ_OQ), _mm256_cmp_pd(a1, v1, _CMP_NEQ_OQ));
        v0 = a0;
        v1 = a1;
    }
    v0 = _mm256_mul_pd(_mm256_sub_pd(v0, _mm256_broadcast_sd(dom + 4)), _mm256_broadcast_sd(dom + 6));
    v1 = _mm256_mul_pd(_mm256_sub_pd(v1, _mm256_broadcast_sd(dom + 5)), _mm256_broadcast_sd(dom + 7));
    _mm256_storeu_pd(xt, v0);
    _mm256_storeu_pd(xt + ld, v1);
    /* (0 + v0^2) + v1^2, as the generic loop sums it */
    s2 = _mm256_add_pd(_mm256_add_pd(_mm256_setzero_pd(), dpe_mul_apart(v0, v0)), dpe_mul_apart(v1, v1));
    {
        const __m256d o = _mm256_cmp_pd(s2, _mm256_set1_pd(1.0), _CMP_GT_OQ);
        *over = _mm256_movemask_pd(o);
        return __builtin_popcount(_mm256_movemask_pd(_mm256_or_pd(boxed, o)));
    }
}

#define DPE_LANES_LOAD_DEF(NAME, T, ROW)                                                      \
static DPE_AVX2_FN ptrdiff_t NAME(const T *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,   \
                                  ptrdiff_t ld, const double *dom, double target,          \
                                  double *Xt)                                              \
{                                                                                          \
    ptrdiff_t r = 0, i, q, n_clipped = 0;                                                  \
    const int box = dom != NULL && dpe_domain_has_box(dom, d);                             \
    if (d == 2 && dom != NULL) {                                                           \
        /* rows clear of the ball's rescale here; a group with one goes below */           \
        int over = 0;                                                                      \
        for (; r + 4 <= nr; r += 4) {                                                      \
            const T *x = X + 2 * r;                                                        \
            const __m256d p = DPE_LD4_##T(x), u = DPE_LD4_##T(x + 4);                      \
            const ptrdiff_t c = box ? dpe_lanes_domain2(p, u, dom, 1, Xt + r, ld, &over)  \
                                    : dpe_lanes_domain2(p, u, dom, 0, Xt + r, ld, &over); \
            if (over) break;                                                               \
            n_clipped += c;                                                                \
        }                                                                                  \
    }                                                                                      \
    for (; r + 4 <= nr; r += 4) {                                                          \
        const T *x = X + r * d;                                                            \
        double *xt = Xt + r;                                                               \
        __m256d s2 = _mm256_setzero_pd(), boxed = s2, v[4];                                \
        i = 0;                                                                             \
        if (d == 2) {                                                                      \
            /* rows (a0 a1 b0 b1) (c0 c1 d0 d1) -> (a0 b0 c0 d0) (a1 b1 c1 d1) */         \
            __m256d p = DPE_LD4_##T(x), u = DPE_LD4_##T(x + 4);                            \
            v[0] = _mm256_permute4x64_pd(_mm256_unpacklo_pd(p, u), 0xD8);                  \
            v[1] = _mm256_permute4x64_pd(_mm256_unpackhi_pd(p, u), 0xD8);                  \
            for (q = 0; q < 2; q++) {                                                      \
                if (dom != NULL) v[q] = dpe_domain_lane(v[q], dom, d, q, &s2, &boxed, box); \
                _mm256_storeu_pd(xt + q * ld, v[q]);                                       \
            }                                                                              \
            i = 2;                                                                         \
        }                                                                                  \
        for (; i + 4 <= d; i += 4) {                                                       \
            __m256d r0 = DPE_LD4_##T(x + i), r1 = DPE_LD4_##T(x + d + i);                  \
            __m256d r2 = DPE_LD4_##T(x + 2 * d + i), r3 = DPE_LD4_##T(x + 3 * d + i);      \
            DPE_TRANSPOSE4(r0, r1, r2, r3, v);                                             \
            for (q = 0; q < 4; q++) {                                                      \
                if (dom != NULL) v[q] = dpe_domain_lane(v[q], dom, d, i + q, &s2, &boxed, box); \
                _mm256_storeu_pd(xt + (i + q) * ld, v[q]);                                 \
            }                                                                              \
        }                                                                                  \
        for (; i < d; i++) {                                                               \
            v[0] = _mm256_set_pd((double)x[3 * d + i], (double)x[2 * d + i],               \
                                 (double)x[d + i], (double)x[i]);                          \
            if (dom != NULL) v[0] = dpe_domain_lane(v[0], dom, d, i, &s2, &boxed, box);    \
            _mm256_storeu_pd(xt + i * ld, v[0]);                                           \
        }                                                                                  \
        if (dom != NULL) {                                                                 \
            const __m256d over = _mm256_cmp_pd(s2, _mm256_set1_pd(1.0), _CMP_GT_OQ);       \
            const int m_over = _mm256_movemask_pd(over);                                   \
            n_clipped += __builtin_popcount(_mm256_movemask_pd(_mm256_or_pd(boxed, over))); \
            if (m_over) {                                                                  \
                const __m256d huge = _mm256_cmp_pd(s2, _mm256_set1_pd(DBL_MAX), _CMP_GT_OQ); \
                const __m256d fit = _mm256_andnot_pd(huge, over);                          \
                const __m256d f = _mm256_div_pd(_mm256_set1_pd(target), _mm256_sqrt_pd(s2)); \
                const int m_huge = _mm256_movemask_pd(huge);                               \
                for (i = 0; i < d; i++) {                                                  \
                    __m256d c = _mm256_loadu_pd(xt + i * ld);                              \
                    _mm256_storeu_pd(xt + i * ld, _mm256_blendv_pd(c, _mm256_mul_pd(c, f), fit)); \
                }                                                                          \
                for (q = 0; q < 4; q++)                                                    \
                    if (m_huge >> q & 1)                                                   \
                        ROW(x + q * d, d, dom, target, xt + q, ld);                        \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    for (; r < nr; r++) {                                                                  \
        if (dom != NULL) {                                                                 \
            n_clipped += ROW(X + r * d, d, dom, target, Xt + r, ld);                       \
        } else {                                                                           \
            for (i = 0; i < d; i++) Xt[i * ld + r] = (double)X[r * d + i];                 \
        }                                                                                  \
    }                                                                                      \
    for (i = 0; i < d; i++)                                                                \
        for (r = nr; r < npad; r++) Xt[i * ld + r] = 0.0;                                  \
    return n_clipped;                                                                      \
}
DPE_LANES_LOAD_DEF(dpe_lanes_load_f64, double, dpe_load_domain_f64_row)
DPE_LANES_LOAD_DEF(dpe_lanes_load_f32, float, dpe_load_domain_f32_row)
#endif /* x86-64 */

/* Which loader: the lane-wise one when simd (and built for x86-64), else the scalar one;
   the same numbers either way.  dom == NULL: plain transposition.
   dpe_load_any_f64 / dpe_load_any_f32 (X, d, nr, npad, ld, dom, target, Xt, simd). */
#ifdef DPE_ROWS_AVX2
#define DPE_LANES_OR_NOT(LANES, X, d, nr, npad, ld, dom, target, Xt) \
    if (simd) return LANES(X, d, nr, npad, ld, dom, target, Xt);
#else
#define DPE_LANES_OR_NOT(LANES, X, d, nr, npad, ld, dom, target, Xt)
#endif
#define DPE_LOAD_ANY_DEF(NAME, T, LANES, PLAIN, DOMAIN)                                    \
static ptrdiff_t NAME(const T *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld, \
                      const double *dom, double target, double *Xt, int simd)             \
{                                                                                          \
    DPE_LANES_OR_NOT(LANES, X, d, nr, npad, ld, dom, target, Xt)                           \
    (void)simd;                                                                            \
    if (dom == NULL) {                                                                     \
        PLAIN(X, d, nr, npad, ld, Xt);                                                     \
        return 0;                                                                          \
    }                                                                                      \
    return DOMAIN(X, d, nr, npad, ld, dom, target, Xt);                                    \
}
DPE_LOAD_ANY_DEF(dpe_load_any_f64, double, dpe_lanes_load_f64, dpe_load_f64, dpe_load_domain_f64)
DPE_LOAD_ANY_DEF(dpe_load_any_f32, float, dpe_lanes_load_f32, dpe_load_f32, dpe_load_domain_f32)

#endif /* DPC_ROWS_H */
