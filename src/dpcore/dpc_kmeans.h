/*
 * dpc_kmeans.h -- the k-means assignment step (hard assignment to the nearest centre) and
 * the per-cluster accumulation of counts, coordinate sums and squared distances, on a
 * transposed chunk Xt (d, ld) (dpc_rows.h's layout).
 *
 * Which centre is nearest: the score form of the squared distance,
 *     |x - c_k|^2 = |x|^2 + 2 s_k(x),   s_k(x) = h_k - x . c_k,   h_k = |c_k|^2 / 2,
 * so the nearest centre is the one with the smallest score (ties: the lowest index).
 * Every score is computed by one fixed sequence of correctly rounded operations,
 *     s = h_k;  s = fma(-x_i, c_ki, s)  for i = 0 .. d-1,
 * with h_k = 0.5 * (((0 + c_k0 c_k0) + c_k1 c_k1) + ...) computed once per call
 * (dpk_centre_table, no contraction).  An fma is rounded once on every machine (the AVX2
 * path uses the instruction, the portable path C's fma()), and a row's arithmetic never
 * depends on its neighbours in a vector: the labels are a function of the inputs alone,
 * the same for any thread count and on every machine with a fused multiply-add.  They
 * agree with the numpy twin (dpem_fast._reference.kmeans, direct differences) except where
 * two centres are within rounding of each other (|s_j - s_k| <~ 1e-16 d (h + |x| |c|)).
 * An x86-64 CPU without AVX2 + FMA (where fma() would be a slow software routine) labels by
 * the direct distances instead (DPK_PATH_DIRECT): the twin's labels, which can differ from
 * the scores' only at such near-ties.
 *
 * A score can overflow only for inputs beyond about 1e150: a chunk whose largest |x_ri|
 * and the largest |c_ki| and h_k could make any partial score exceed DBL_MAX / 4 is
 * labelled by the direct squared distances instead (dpk_assign_direct, the twin's
 * arithmetic), so every finite input gets a nearest centre, on every path alike.
 *
 *   dpk_centre_table   (d + 1) Kp doubles, Kp = K rounded up to DPK_KC: the h_k (padding
 *                      +inf, so it never wins), then panels of DPK_KC centres, d x DPK_KC.
 *   dpk_centre_bounds  max |c_ki| and max h_k (the overflow guard's inputs).
 *   dpk_assign         labels (as doubles) of npad rows; best[] gets the smallest score.
 *                      AVX2 + FMA (runtime dispatch, dpk_simd_path) or portable C.
 *                      Loaders and distances take simd = (path == DPK_PATH_AVX2).
 *   dpk_distances      dist[r] = |x_r - c_lab(r)|^2 summed over features in order,
 *                      ((0 + t_0 t_0) + t_1 t_1) + ..., t_i = x_i - c_i: the twin's number
 *                      bit for bit (no FMA: the products are kept apart from the sums).
 *   dpk_accumulate     counts[lab[r]] += 1, sums[lab[r], :] += x_r, inertia += dist_r (the
 *                      same distance, computed on the way), for r < nr, in row order (fixed:
 *                      no dependence on the thread count).
 */
#ifndef DPC_KMEANS_H
#define DPC_KMEANS_H

#include <float.h>
#include <math.h>
#include <stddef.h>

#include "dpc_contract.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(DPC_NO_CLONES)
#define DPK_X86 1
#include <immintrin.h>
#endif

/* Pitch (doubles) of the k-means chunk scratch Xt (d, DPK_LD): not a power of two, so
   the d rows of a tile do not all fall into the same few L1 sets (with a pitch of 256
   doubles, 100 features hit 2 of 64 sets and every load missed L1).  Internal layout
   only: it changes no result. */
#define DPK_LD (DPC_CHUNK_SIZE + 8)
#define DPK_KC 4          /* centres per panel of the table (register tile of dpk_panels_avx2) */
#define DPK_SMALL_D 4     /* up to this d the rows stay in registers (dpk_rows_avx2) */

static inline ptrdiff_t dpk_kpad(ptrdiff_t K)
{
    return (K + DPK_KC - 1) / DPK_KC * DPK_KC;
}

/* Doubles of the centre table of K centres in d features. */
static inline ptrdiff_t dpk_table_size(ptrdiff_t d, ptrdiff_t K)
{
    return (d + 1) * dpk_kpad(K);
}

/* Centre c_ki of the table (panel k / KC, feature i, slot k % KC). */
static inline const double *dpk_centre(const double *tab, ptrdiff_t d, ptrdiff_t K, ptrdiff_t k)
{
    return tab + dpk_kpad(K) + (k / DPK_KC) * d * DPK_KC + k % DPK_KC;
}

/* The table of the centres C (K, d): h_k = |c_k|^2 / 2 (in feature order), +inf for the
   padding up to Kp, then the centres in panels of KC (padding 0). */
static void dpk_centre_table(const double *C, ptrdiff_t d, ptrdiff_t K, double *tab)
{
    ptrdiff_t Kp = dpk_kpad(K), k, i;
    for (k = 0; k < Kp; k++) {
        double *pk = (double *)dpk_centre(tab, d, K, k), h = 0.0;
        for (i = 0; i < d; i++) {
            double c = k < K ? C[k * d + i] : 0.0;
            pk[i * DPK_KC] = c;
            h += c * c;
        }
        tab[k] = k < K ? 0.5 * h : HUGE_VAL;
    }
}

/* The overflow guard's inputs: cmax = max |c_ki|, hmax = max h_k over the K centres. */
static void dpk_centre_bounds(const double *C, ptrdiff_t d, ptrdiff_t K, const double *tab,
                              double *cmax, double *hmax)
{
    ptrdiff_t j;
    double c = 0.0, h = 0.0;
    for (j = 0; j < K * d; j++) c = fabs(C[j]) > c ? fabs(C[j]) : c;
    for (j = 0; j < K; j++) h = tab[j] > h ? tab[j] : h;
    *cmax = c;
    *hmax = h;
}

/* Largest |Xt[i, r]| over the npad rows of the chunk (NaN-free data). */
static double dpk_max_abs(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad)
{
    ptrdiff_t i, r;
    double m = 0.0;
    for (i = 0; i < d; i++)
        for (r = 0; r < npad; r++) m = fmax(m, fabs(Xt[i * ld + r]));
    return m;
}

/* Whether no partial score h_k - sum_{i<j} x_i c_ki of rows with |x_i| <= xmax can exceed
   DBL_MAX / 4 in magnitude (then every score is finite and well defined). */
static inline int dpk_scores_safe(ptrdiff_t d, double xmax, double cmax, double hmax)
{
    const double lim = DBL_MAX / 4;
    return hmax <= lim && xmax <= lim && cmax <= lim && (double)d * (xmax * cmax) <= lim;
}

/* One row at a time: the nearest centre of each of the npad rows, ties to the lowest
   index, by the scores (C's fma: the same labels as the AVX2 path) or, with direct, by the
   direct squared distances (the twin's arithmetic: a CPU without FMA, or a chunk whose
   scores could overflow). */
static inline __attribute__((always_inline)) void
dpk_assign_rows_c(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                  const double *tab, ptrdiff_t K, double *best, double *lab, const int direct)
{
    ptrdiff_t r, k, i;
    for (r = 0; r < npad; r++) {
        double b = HUGE_VAL, l = 0.0;
        for (k = 0; k < K; k++) {
            const double *c = dpk_centre(tab, d, K, k);
            double s = direct ? 0.0 : tab[k];
            for (i = 0; i < d; i++) {
                if (direct) {
                    double t = Xt[i * ld + r] - c[i * DPK_KC];
                    s += t * t;
                } else {
                    s = fma(-Xt[i * ld + r], c[i * DPK_KC], s);
                }
            }
            if (s < b) {
                b = s;
                l = (double)k;
            }
        }
        best[r] = b;
        lab[r] = l;
    }
}

static void dpk_assign_direct(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                              const double *tab, ptrdiff_t K, double *best, double *lab)
{
    dpk_assign_rows_c(Xt, d, ld, npad, tab, K, best, lab, 1);
}

static void dpk_assign_generic(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                               const double *tab, ptrdiff_t K, double *best, double *lab)
{
    dpk_assign_rows_c(Xt, d, ld, npad, tab, K, best, lab, 0);
}

#ifdef DPK_X86
#define DPK_AVX2 __attribute__((target("avx2,fma")))

/* The argmin step of 4 rows against one centre's scores s (label kd): strict <, so the
   lowest index keeps a tie (scores are finite: dpk_scores_safe). */
#define DPK_ARGMIN(s, b, l, kd)                                         \
    do {                                                                \
        __m256d m_ = _mm256_cmp_pd((s), (b), _CMP_LT_OQ);               \
        (b) = _mm256_min_pd((s), (b));                                  \
        (l) = _mm256_blendv_pd((l), (kd), m_);                          \
    } while (0)

/* dpk_max_abs, 16 rows at a time (npad % 16 == 0). */
static DPK_AVX2 double dpk_max_abs_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad)
{
    const __m256d sign = _mm256_set1_pd(-0.0);
    __m256d m0 = _mm256_setzero_pd(), m1 = m0, m2 = m0, m3 = m0;
    double out[4];
    ptrdiff_t i, r;
    for (i = 0; i < d; i++) {
        const double *x = Xt + i * ld;
        for (r = 0; r < npad; r += 16) {
            m0 = _mm256_max_pd(m0, _mm256_andnot_pd(sign, _mm256_loadu_pd(x + r)));
            m1 = _mm256_max_pd(m1, _mm256_andnot_pd(sign, _mm256_loadu_pd(x + r + 4)));
            m2 = _mm256_max_pd(m2, _mm256_andnot_pd(sign, _mm256_loadu_pd(x + r + 8)));
            m3 = _mm256_max_pd(m3, _mm256_andnot_pd(sign, _mm256_loadu_pd(x + r + 12)));
        }
    }
    _mm256_storeu_pd(out, _mm256_max_pd(_mm256_max_pd(m0, m1), _mm256_max_pd(m2, m3)));
    return fmax(fmax(out[0], out[1]), fmax(out[2], out[3]));
}

/* Small d: 16 rows (4 vectors) per tile, their d features in registers, one centre at a
   time (named registers: GCC keeps arrays of vectors in memory). */
#define DPK_SCORE4(s, h, x0, x1, x2, x3)                                \
    do {                                                                \
        (s) = _mm256_fnmadd_pd((x0), c0, (h));                          \
        if (d > 1) (s) = _mm256_fnmadd_pd((x1), c1, (s));               \
        if (d > 2) (s) = _mm256_fnmadd_pd((x2), c2, (s));               \
        if (d > 3) (s) = _mm256_fnmadd_pd((x3), c3, (s));               \
    } while (0)

static inline DPK_AVX2 __attribute__((always_inline)) void
dpk_rows_body(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
              const double *tab, ptrdiff_t K, double *best, double *lab)
{
    const ptrdiff_t Kp = dpk_kpad(K);
    const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
    ptrdiff_t r0, p, j;
    for (r0 = 0; r0 < npad; r0 += 16) {
        const double *x = Xt + r0;
#define DPK_LDX(i, t) (d > (i) ? _mm256_loadu_pd(x + (i) * ld + 4 * (t)) : zero)
        const __m256d x00 = DPK_LDX(0, 0), x01 = DPK_LDX(0, 1);
        const __m256d x02 = DPK_LDX(0, 2), x03 = DPK_LDX(0, 3);
        const __m256d x10 = DPK_LDX(1, 0), x11 = DPK_LDX(1, 1);
        const __m256d x12 = DPK_LDX(1, 2), x13 = DPK_LDX(1, 3);
        const __m256d x20 = DPK_LDX(2, 0), x21 = DPK_LDX(2, 1);
        const __m256d x22 = DPK_LDX(2, 2), x23 = DPK_LDX(2, 3);
        const __m256d x30 = DPK_LDX(3, 0), x31 = DPK_LDX(3, 1);
        const __m256d x32 = DPK_LDX(3, 2), x33 = DPK_LDX(3, 3);
#undef DPK_LDX
        __m256d b0 = _mm256_set1_pd(HUGE_VAL), b1 = b0, b2 = b0, b3 = b0;
        __m256d l0 = zero, l1 = zero, l2 = zero, l3 = zero, kd = zero;
        for (p = 0; p < Kp; p += DPK_KC) {
            const double *c = tab + Kp + p * d;
            for (j = 0; j < DPK_KC && p + j < K; j++, c++) {
                const __m256d h = _mm256_broadcast_sd(tab + p + j);
                const __m256d c0 = _mm256_broadcast_sd(c);
                const __m256d c1 = d > 1 ? _mm256_broadcast_sd(c + DPK_KC) : zero;
                const __m256d c2 = d > 2 ? _mm256_broadcast_sd(c + 2 * DPK_KC) : zero;
                const __m256d c3 = d > 3 ? _mm256_broadcast_sd(c + 3 * DPK_KC) : zero;
                __m256d s0, s1, s2, s3;
                DPK_SCORE4(s0, h, x00, x10, x20, x30);
                DPK_SCORE4(s1, h, x01, x11, x21, x31);
                DPK_SCORE4(s2, h, x02, x12, x22, x32);
                DPK_SCORE4(s3, h, x03, x13, x23, x33);
                DPK_ARGMIN(s0, b0, l0, kd);
                DPK_ARGMIN(s1, b1, l1, kd);
                DPK_ARGMIN(s2, b2, l2, kd);
                DPK_ARGMIN(s3, b3, l3, kd);
                kd = _mm256_add_pd(kd, one);
            }
        }
        _mm256_storeu_pd(best + r0, b0);
        _mm256_storeu_pd(best + r0 + 4, b1);
        _mm256_storeu_pd(best + r0 + 8, b2);
        _mm256_storeu_pd(best + r0 + 12, b3);
        _mm256_storeu_pd(lab + r0, l0);
        _mm256_storeu_pd(lab + r0 + 4, l1);
        _mm256_storeu_pd(lab + r0 + 8, l2);
        _mm256_storeu_pd(lab + r0 + 12, l3);
    }
}
#undef DPK_SCORE4

static DPK_AVX2 void dpk_rows_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                   const double *tab, ptrdiff_t K, double *best, double *lab)
{
    switch (d) {
    case 1: dpk_rows_body(Xt, 1, ld, npad, tab, K, best, lab); return;
    case 2: dpk_rows_body(Xt, 2, ld, npad, tab, K, best, lab); return;
    case 3: dpk_rows_body(Xt, 3, ld, npad, tab, K, best, lab); return;
    default: dpk_rows_body(Xt, 4, ld, npad, tab, K, best, lab); return;
    }
}

/* Any d: register tiles of 8 rows x KC (4) centres, as a GEMM micro-kernel (8 scores
   accumulating over the features, two row loads and four centre broadcasts per feature);
   the running minimum and label of the 8 rows stay in registers across the panels. */
static DPK_AVX2 void dpk_panels_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                     const double *tab, ptrdiff_t K, double *best, double *lab)
{
    const ptrdiff_t Kp = dpk_kpad(K);
    ptrdiff_t r0, p, i;
    for (r0 = 0; r0 < npad; r0 += 8) {
        __m256d b0 = _mm256_set1_pd(HUGE_VAL), b1 = b0;
        __m256d l0 = _mm256_setzero_pd(), l1 = l0;
        for (p = 0; p < Kp; p += DPK_KC) {
            const double *c = tab + Kp + p * d;
            const double *x = Xt + r0;
            __m256d a00 = _mm256_broadcast_sd(tab + p), a01 = _mm256_broadcast_sd(tab + p + 1);
            __m256d a02 = _mm256_broadcast_sd(tab + p + 2), a03 = _mm256_broadcast_sd(tab + p + 3);
            __m256d a10 = a00, a11 = a01, a12 = a02, a13 = a03;
            /* one feature: 2 row loads, 4 centre broadcasts, 8 fma; unrolled by two */
#define DPK_PANEL_STEP                                                              \
            do {                                                                    \
                const __m256d x0 = _mm256_loadu_pd(x), x1 = _mm256_loadu_pd(x + 4); \
                __m256d cv = _mm256_broadcast_sd(c);                                \
                a00 = _mm256_fnmadd_pd(x0, cv, a00);                                \
                a10 = _mm256_fnmadd_pd(x1, cv, a10);                                \
                cv = _mm256_broadcast_sd(c + 1);                                    \
                a01 = _mm256_fnmadd_pd(x0, cv, a01);                                \
                a11 = _mm256_fnmadd_pd(x1, cv, a11);                                \
                cv = _mm256_broadcast_sd(c + 2);                                    \
                a02 = _mm256_fnmadd_pd(x0, cv, a02);                                \
                a12 = _mm256_fnmadd_pd(x1, cv, a12);                                \
                cv = _mm256_broadcast_sd(c + 3);                                    \
                a03 = _mm256_fnmadd_pd(x0, cv, a03);                                \
                a13 = _mm256_fnmadd_pd(x1, cv, a13);                                \
                x += ld;                                                            \
                c += DPK_KC;                                                        \
            } while (0)
            for (i = 0; i + 2 <= d; i += 2) {
                DPK_PANEL_STEP;
                DPK_PANEL_STEP;
            }
            if (i < d) DPK_PANEL_STEP;
#undef DPK_PANEL_STEP
            {
                const __m256d k0 = _mm256_set1_pd((double)p), one = _mm256_set1_pd(1.0);
                const __m256d k1 = _mm256_add_pd(k0, one), k2 = _mm256_add_pd(k1, one);
                const __m256d k3 = _mm256_add_pd(k2, one);
                DPK_ARGMIN(a00, b0, l0, k0);
                DPK_ARGMIN(a10, b1, l1, k0);
                DPK_ARGMIN(a01, b0, l0, k1);
                DPK_ARGMIN(a11, b1, l1, k1);
                DPK_ARGMIN(a02, b0, l0, k2);
                DPK_ARGMIN(a12, b1, l1, k2);
                DPK_ARGMIN(a03, b0, l0, k3);
                DPK_ARGMIN(a13, b1, l1, k3);
            }
        }
        _mm256_storeu_pd(best + r0, b0);
        _mm256_storeu_pd(best + r0 + 4, b1);
        _mm256_storeu_pd(lab + r0, l0);
        _mm256_storeu_pd(lab + r0 + 4, l1);
    }
}
#endif /* DPK_X86 */

/* The assignment paths.  DPK_PATH_AVX2 and DPK_PATH_FMA compute the same scores and give
   the same labels; DPK_PATH_DIRECT (a CPU without a fused multiply-add, where C's fma()
   is a slow software routine) labels by the direct squared distances, the twin's
   arithmetic: its labels can differ from the other two only at near-ties. */
#define DPK_PATH_FMA 0      /* portable C, scores by fma() (native on such a build) */
#define DPK_PATH_AVX2 1     /* AVX2 + FMA register tiles (x86-64, runtime dispatch) */
#define DPK_PATH_DIRECT 2   /* portable C, direct distances (no hardware FMA) */

/* Which path this CPU runs. */
static int dpk_simd_path(void)
{
#ifdef DPK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return DPK_PATH_AVX2;
    return DPK_PATH_DIRECT;
#elif defined(__FP_FAST_FMA)
    return DPK_PATH_FMA;
#else
    return DPK_PATH_DIRECT;
#endif
}

/* Labels (as doubles) and smallest scores of the npad rows of Xt (npad % DPC_LANES == 0)
   against the table tab of K centres (bounds cmax, hmax: dpk_centre_bounds); xmax: a bound
   on |Xt[i, r]| (1 for rows mapped into the unit ball), or < 0 to take it from Xt.  path:
   dpk_simd_path(), or DPK_PATH_FMA (the portable score path, e.g. in tests). */
static void dpk_assign(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                       const double *tab, ptrdiff_t K, double xmax, double cmax, double hmax,
                       double *best, double *lab, int path)
{
    if (path == DPK_PATH_DIRECT) {
        dpk_assign_direct(Xt, d, ld, npad, tab, K, best, lab);
        return;
    }
    if (xmax < 0.0) {
#ifdef DPK_X86
        xmax = path == DPK_PATH_AVX2 ? dpk_max_abs_avx2(Xt, d, ld, npad)
                                      : dpk_max_abs(Xt, d, ld, npad);
#else
        xmax = dpk_max_abs(Xt, d, ld, npad);
#endif
    }
    if (!dpk_scores_safe(d, xmax, cmax, hmax)) {
        dpk_assign_direct(Xt, d, ld, npad, tab, K, best, lab);
        return;
    }
#ifdef DPK_X86
    if (path == DPK_PATH_AVX2) {
        if (d <= DPK_SMALL_D) dpk_rows_avx2(Xt, d, ld, npad, tab, K, best, lab);
        else dpk_panels_avx2(Xt, d, ld, npad, tab, K, best, lab);
        return;
    }
#endif
    dpk_assign_generic(Xt, d, ld, npad, tab, K, best, lab);
}

/* dist[r] = |x_r - c_lab[r]|^2, features in order (the twin's sum): one row. */
static inline double dpk_dist_row(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t r,
                                  const double *c)
{
    ptrdiff_t i;
    double s = 0.0;
    for (i = 0; i < d; i++) {
        double t = Xt[i * ld + r] - c[i];
        s += t * t;
    }
    return s;
}

#ifdef DPK_X86
/* The same for rows r .. r+3 (centres c0 .. c3), in four lanes: each lane the scalar
   sequence (the centres' features gathered into one vector), the products kept apart from
   the sums (no FMA). */
static inline DPK_AVX2 __attribute__((always_inline)) __m256d
dpk_dist4_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t r, const double *c0,
               const double *c1, const double *c2, const double *c3)
{
    ptrdiff_t i;
    __m256d s = _mm256_setzero_pd();
    for (i = 0; i < d; i++) {
        __m256d t = _mm256_sub_pd(_mm256_loadu_pd(Xt + i * ld + r),
                                  _mm256_set_pd(c3[i], c2[i], c1[i], c0[i]));
        t = _mm256_mul_pd(t, t);
        __asm__("" : "+x"(t));
        s = _mm256_add_pd(s, t);
    }
    return s;
}

static DPK_AVX2 void dpk_distances_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                        const double *C, const double *lab, double *dist)
{
    ptrdiff_t r;
    for (r = 0; r < npad; r += 4)
        _mm256_storeu_pd(dist + r, dpk_dist4_avx2(Xt, d, ld, r, C + (ptrdiff_t)lab[r] * d,
                                                  C + (ptrdiff_t)lab[r + 1] * d,
                                                  C + (ptrdiff_t)lab[r + 2] * d,
                                                  C + (ptrdiff_t)lab[r + 3] * d));
}
#endif

/* dist[r] for the npad rows of the chunk (npad % 4 == 0); C: the centres (K, d). */
static void dpk_distances(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                          const double *C, const double *lab, double *dist, int simd)
{
    ptrdiff_t r;
#ifdef DPK_X86
    if (simd) {
        dpk_distances_avx2(Xt, d, ld, npad, C, lab, dist);
        return;
    }
#endif
    (void)simd;
    for (r = 0; r < npad; r++) dist[r] = dpk_dist_row(Xt, d, ld, r, C + (ptrdiff_t)lab[r] * d);
}

/* s += x_r (row r of the transposed chunk); returns |x_r - c|^2 summed in feature order,
   ((0 + t_0^2) + t_1^2) + ... (dpk_dist_row's number).  One row of dpk_accumulate_body and of
   the small-d panel accumulation (dpc_kmeans_small.h). */
static inline __attribute__((always_inline)) double
dpk_add_row(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t r, const double *c, double *s)
{
    ptrdiff_t i;
    double dist = 0.0;
    for (i = 0; i < d; i++) {
        double x = Xt[i * ld + r], t = x - c[i];
        dist += t * t;
        s[i] += x;
    }
    return dist;
}

/* Add the nr assigned rows of the chunk into one block's partials, in row order:
   counts[lab[r]] += 1, sums[lab[r], :] += x_r, acc += |x_r - c_lab[r]|^2 (dpk_dist_row's
   number), a fixed order: no dependence on the thread count.  Returns acc; dpk_accumulate
   adds the chunk's acc to the block's inertia once.  C: the centres (K, d). */
static inline __attribute__((always_inline)) double
dpk_accumulate_body(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                    const double *C, const double *lab, double *counts, double *sums,
                    double acc)
{
    ptrdiff_t r;
    for (r = 0; r < nr; r++) {
        ptrdiff_t k = (ptrdiff_t)lab[r];
        counts[k] += 1.0;
        acc += dpk_add_row(Xt, d, ld, r, C + k * d, sums + k * d);
    }
    return acc;
}

#ifdef DPK_X86
/* dpk_accumulate for d > DPK_SMALL_D, four rows at a time: their distances in four lanes
   (each lane the scalar sum, features in order), their sums four features at a time (the
   4 x 4 block turned back into rows, then added row after row: every sums[k, i] still adds
   its rows in row order); the rows left over by the scalar body. */
static DPK_AVX2 double dpk_accumulate_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                           ptrdiff_t nr, const double *C, const double *lab,
                                           double *counts, double *sums)
{
    ptrdiff_t r, i, q;
    double acc = 0.0, dl[4];
    for (r = 0; r + 4 <= nr; r += 4) {
        const ptrdiff_t k0 = (ptrdiff_t)lab[r], k1 = (ptrdiff_t)lab[r + 1];
        const ptrdiff_t k2 = (ptrdiff_t)lab[r + 2], k3 = (ptrdiff_t)lab[r + 3];
        const double *c0 = C + k0 * d, *c1 = C + k1 * d, *c2 = C + k2 * d, *c3 = C + k3 * d;
        double *s0 = sums + k0 * d, *s1 = sums + k1 * d, *s2 = sums + k2 * d, *s3 = sums + k3 * d;
        const __m256d dist = dpk_dist4_avx2(Xt, d, ld, r, c0, c1, c2, c3);
        counts[k0] += 1.0;
        counts[k1] += 1.0;
        counts[k2] += 1.0;
        counts[k3] += 1.0;
        for (i = 0; i + 4 <= d; i += 4) {
            __m256d v[4];
            for (q = 0; q < 4; q++) v[q] = _mm256_loadu_pd(Xt + (i + q) * ld + r);
            {
                /* feature vectors (4 rows each) -> row vectors (4 features each) */
                __m256d t0 = _mm256_unpacklo_pd(v[0], v[1]), t1 = _mm256_unpackhi_pd(v[0], v[1]);
                __m256d t2 = _mm256_unpacklo_pd(v[2], v[3]), t3 = _mm256_unpackhi_pd(v[2], v[3]);
                v[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
                v[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
                v[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
                v[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
            }
            _mm256_storeu_pd(s0 + i, _mm256_add_pd(_mm256_loadu_pd(s0 + i), v[0]));
            _mm256_storeu_pd(s1 + i, _mm256_add_pd(_mm256_loadu_pd(s1 + i), v[1]));
            _mm256_storeu_pd(s2 + i, _mm256_add_pd(_mm256_loadu_pd(s2 + i), v[2]));
            _mm256_storeu_pd(s3 + i, _mm256_add_pd(_mm256_loadu_pd(s3 + i), v[3]));
        }
        for (; i < d; i++) {
            const double *x = Xt + i * ld + r;
            s0[i] += x[0];
            s1[i] += x[1];
            s2[i] += x[2];
            s3[i] += x[3];
        }
        _mm256_storeu_pd(dl, dist);
        acc += dl[0];
        acc += dl[1];
        acc += dl[2];
        acc += dl[3];
    }
    return dpk_accumulate_body(Xt + r, d, ld, nr - r, C, lab + r, counts, sums, acc);
}
#endif

static void dpk_accumulate(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                           const double *C, const double *lab,
                           double *counts, double *sums, double *inertia, int simd)
{
    double acc;
    switch (d) {
    case 1: acc = dpk_accumulate_body(Xt, 1, ld, nr, C, lab, counts, sums, 0.0); break;
    case 2: acc = dpk_accumulate_body(Xt, 2, ld, nr, C, lab, counts, sums, 0.0); break;
    case 3: acc = dpk_accumulate_body(Xt, 3, ld, nr, C, lab, counts, sums, 0.0); break;
    case 4: acc = dpk_accumulate_body(Xt, 4, ld, nr, C, lab, counts, sums, 0.0); break;
    default:
#ifdef DPK_X86
        if (simd) {
            acc = dpk_accumulate_avx2(Xt, d, ld, nr, C, lab, counts, sums);
            break;
        }
#endif
        (void)simd;
        acc = dpk_accumulate_body(Xt, d, ld, nr, C, lab, counts, sums, 0.0);
    }
    inertia[0] += acc;
}

#endif /* DPC_KMEANS_H */
