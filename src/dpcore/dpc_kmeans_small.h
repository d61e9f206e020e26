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
 * One store per row, at page offsets apart from the loads (issue 41).  A row's count and
 * sums go into one vector acc[k] = (sums_k, count_k) of the block's accumulator (loaded
 * from its partials before its first chunk and stored back after its last: the same
 * additions in the same order), instead of two read-modify-writes of the partials.  Where it lies matters:
 * on the Zen 4 (KVM) machine of issue 41 a store slowed the loads after it by ~6-9 cycles a
 * row when a load's page offset overlapped the store's and the two physical pages matched
 * in some hash -- one placement in seven or so, at random (the same virtual page remapped
 * to a new physical one turned slow or fast), 12 ms a pass instead of 9.5.  So this
 * path's chunk scratch is laid out by page (dpk_small_layout): the accumulator alone on
 * its page, at offsets below DPK_STREAM_OFF, and everything the row loop loads -- the
 * transposed rows, best, the panels, the centre table and the copy of the centres
 * (dpk_table_place) -- from offset DPK_STREAM_OFF up, so that no load of the loop shares
 * a page offset with an accumulator store (40 remappings: none slow, against 22 of 40
 * with the offsets overlapping).  The layout changes no number.
 *
 *   dpk_small_scratch_size, dpk_small_layout   the chunk scratch of d <= DPK_SMALL_D.
 *   dpk_table_alloc_size, dpk_table_place      where the centre table and the centres' copy go.
 *   dpk_acc_load, dpk_acc_store   a block's partial counts and sums into the accumulator and back.
 *   dpk_stats_chunk   labels of the chunk's npad rows and the accumulation of its nr rows
 *                     into one block's partials: the small-d AVX2 path where it applies,
 *                     else dpk_assign + dpk_accumulate.
 */
#ifndef DPC_KMEANS_SMALL_H
#define DPC_KMEANS_SMALL_H

#include <stdint.h>

#include "dpc_kmeans.h"

#define DPK_PAGE 512            /* doubles in a 4 KiB page */
#define DPK_STREAM_OFF 256      /* page offset (doubles) of the streamed arrays: 2 KiB */
#define DPK_SMALL_LD (DPK_PAGE + 8) /* their pitch: not a power of two (DPK_LD's reason) */
#define DPK_ACC_OFF 32          /* page offset of the accumulator, past the rows' spill */

/* Doubles per centre of the accumulator of dpk_panel_stats_avx2: the centre's sums (lanes
   0 .. d-1) and count (lane d) side by side, one vector for d < 4, two for d = 4. */
static inline ptrdiff_t dpk_acc_width(ptrdiff_t d)
{
    return d < 4 ? 4 : 8;
}

/* Doubles of the work area (the accumulator) of dpk_stats_chunk at d <= DPK_SMALL_D. */
static inline ptrdiff_t dpk_small_work_size(ptrdiff_t d, ptrdiff_t K)
{
    return dpk_acc_width(d) * K;
}

/* The first page boundary at or after p (4 KiB pages). */
static inline double *dpk_page_up(double *p)
{
    return (double *)(((uintptr_t)p + 8 * DPK_PAGE - 1) & ~(uintptr_t)(8 * DPK_PAGE - 1));
}

/* Doubles to allocate for the centre table of K centres in d features followed by a copy
   of the centres (K, d), placed by dpk_table_place. */
static inline ptrdiff_t dpk_table_alloc_size(ptrdiff_t d, ptrdiff_t K)
{
    return DPK_PAGE + DPK_STREAM_OFF + dpk_table_size(d, K) + K * d;
}

/* Where the table goes in raw (dpk_table_alloc_size doubles): from page offset
   DPK_STREAM_OFF, with the streamed arrays and apart from the accumulator's offsets. */
static inline double *dpk_table_place(double *raw)
{
    return dpk_page_up(raw) + DPK_STREAM_OFF;
}

/* Pages of the transposed rows of the small-d layout (d rows of pitch DPK_SMALL_LD from
   offset DPK_STREAM_OFF, DPC_CHUNK_SIZE doubles each). */
static inline ptrdiff_t dpk_small_row_pages(ptrdiff_t d)
{
    return (DPK_STREAM_OFF + (d - 1) * DPK_SMALL_LD + DPC_CHUNK_SIZE + DPK_PAGE - 1) / DPK_PAGE;
}

/* Doubles of the chunk scratch of d <= DPK_SMALL_D (dpk_small_layout). */
static inline ptrdiff_t dpk_small_scratch_size(ptrdiff_t d, ptrdiff_t K)
{
    return (dpk_small_row_pages(d) + 3) * DPK_PAGE + DPK_ACC_OFF + dpk_small_work_size(d, K);
}

/* The chunk scratch of d <= DPK_SMALL_D in buf (dpk_small_scratch_size doubles), by page
   from the first page boundary: the transposed rows from offset DPK_STREAM_OFF (pitch
   *ld = DPK_SMALL_LD: a row spills at most (d - 1) * 64 bytes into the next page), best
   and the labels each on the next page at that offset, and the work area on the page
   after, from offset DPK_ACC_OFF (its accumulator below DPK_STREAM_OFF while
   K * dpk_acc_width(d) <= DPK_STREAM_OFF - DPK_ACC_OFF: K <= 56 for d < 4; beyond, only
   some loads share offsets with it).  Returns the work area. */
static inline double *dpk_small_layout(double *buf, ptrdiff_t d, double **Xt, ptrdiff_t *ld,
                                       double **best, double **lab)
{
    double *page = dpk_page_up(buf), *p = page + dpk_small_row_pages(d) * DPK_PAGE;
    *Xt = page + DPK_STREAM_OFF;
    *ld = DPK_SMALL_LD;
    *best = p + DPK_STREAM_OFF;
    *lab = p + DPK_PAGE + DPK_STREAM_OFF;
    return p + 2 * DPK_PAGE + DPK_ACC_OFF;
}

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

/* The nr rows in order: label k, then acc[k] += (x_r, 1) (sums + x and count + 1, the
   operands in dpk_accumulate's order), dist += the distance to c_k (dpk_dist_row's sum:
   ((0 + t_0^2) + t_1^2) + ..., products apart; 0 + t_0^2 is t_0^2 exactly).  Returns dist. */
static inline DPK_AVX2 __attribute__((always_inline)) double
dpk_panel_accumulate_body(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                          const double *tab, ptrdiff_t K, const double *C, const double *best,
                          const double *grp, double *acc)
{
    const ptrdiff_t Kp = dpk_kpad(K), W = dpk_acc_width(d);
    const int64_t *g = (const int64_t *)grp;
    /* 1 in the count's lane (d < 4) */
    const __m256d one = d == 1 ? _mm256_set_pd(0.0, 0.0, 1.0, 0.0)
                      : d == 2 ? _mm256_set_pd(0.0, 1.0, 0.0, 0.0) : _mm256_set_pd(1.0, 0.0, 0.0, 0.0);
    ptrdiff_t r, i;
    double dist = 0.0;
    for (r = 0; r < nr; r++) {
        __m256d xb[DPK_SMALL_D], xv, t;
        __m128d u;
        ptrdiff_t k;
        double *a;
        for (i = 0; i < d; i++) xb[i] = _mm256_broadcast_sd(Xt + i * ld + r);
        k = dpk_panel_slot(xb, d, tab, Kp, (ptrdiff_t)g[r], best + r);
        a = acc + W * k;
        xv = _mm256_blend_pd(one, xb[0], 1);
        if (d > 1) xv = _mm256_blend_pd(xv, xb[1], 2);
        if (d > 2) xv = _mm256_blend_pd(xv, xb[2], 4);
        if (d > 3) xv = _mm256_blend_pd(xv, xb[3], 8);
        _mm256_storeu_pd(a, _mm256_add_pd(_mm256_loadu_pd(a), xv));
        if (d == 4) a[4] += 1.0;
        if (d <= 2) {
            u = _mm256_castpd256_pd128(xv);
            u = d == 1 ? _mm_sub_sd(u, _mm_load_sd(C + k)) : _mm_sub_pd(u, _mm_loadu_pd(C + 2 * k));
            u = _mm_mul_pd(u, u);
            __asm__("" : "+x"(u));
            if (d == 2) u = _mm_add_sd(u, _mm_unpackhi_pd(u, u));
        } else {
            t = _mm256_sub_pd(xv, d == 4 ? _mm256_loadu_pd(C + 4 * k)
                                         : _mm256_maskload_pd(C + 3 * k, _mm256_set_epi64x(0, -1, -1, -1)));
            t = _mm256_mul_pd(t, t);
            __asm__("" : "+x"(t));
            u = _mm256_castpd256_pd128(t);
            u = _mm_add_sd(u, _mm_unpackhi_pd(u, u));
            u = _mm_add_sd(u, _mm256_extractf128_pd(t, 1));
            if (d == 4) {
                const __m128d h = _mm256_extractf128_pd(t, 1);
                u = _mm_add_sd(u, _mm_unpackhi_pd(h, h));
            }
        }
        dist += _mm_cvtsd_f64(u);
    }
    return dist;
}

/* The chunk: labels of its npad rows by panels (best, grp: scratch of npad doubles), then
   its nr rows into the accumulator acc (dpk_acc_load).  Returns the sum of the distances. */
static DPK_AVX2 double dpk_panel_stats_avx2(const double *Xt, ptrdiff_t d, ptrdiff_t ld,
                                            ptrdiff_t nr, ptrdiff_t npad, const double *tab,
                                            ptrdiff_t K, const double *C, double *best,
                                            double *grp, double *work)
{
#define DPK_CASE(D)                                                                        \
    case D:                                                                                \
        dpk_panel_argmin_body(Xt, D, ld, npad, tab, K, best, grp);                         \
        return dpk_panel_accumulate_body(Xt, D, ld, nr, tab, K, C, best, grp, work);
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

/* The block's partials counts (K) and sums (K, d) into the accumulator acc
   (dpk_small_work_size doubles), and back: the small-d AVX2 path adds a block's rows into
   acc, chunk after chunk (dpk_stats_chunk with work = acc). */
static void dpk_acc_load(double *acc, ptrdiff_t d, ptrdiff_t K, const double *counts,
                         const double *sums)
{
    const ptrdiff_t W = dpk_acc_width(d);
    ptrdiff_t k, i;
    for (k = 0; k < K; k++) {
        for (i = 0; i < W; i++) acc[k * W + i] = i < d ? sums[k * d + i] : i == d ? counts[k] : 0.0;
    }
}

static void dpk_acc_store(const double *acc, ptrdiff_t d, ptrdiff_t K, double *counts,
                          double *sums)
{
    const ptrdiff_t W = dpk_acc_width(d);
    ptrdiff_t k, i;
    for (k = 0; k < K; k++) {
        for (i = 0; i < d; i++) sums[k * d + i] = acc[k * W + i];
        counts[k] = acc[k * W + d];
    }
}

/* One chunk: labels of its npad rows (lab, best: scratch of npad doubles; npad % 16 == 0)
   and the accumulation of its nr rows into one block's partials counts (K), sums (K, d),
   inertia[0] (dpk_assign + dpk_accumulate, the same numbers).  xmax: dpk_assign's.  work:
   NULL, or (path DPK_PATH_AVX2, d <= DPK_SMALL_D) the accumulator holding the block's
   counts and sums (dpk_acc_load; dpk_small_layout), which then stand for counts, sums. */
static void dpk_stats_chunk(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                            ptrdiff_t npad, const double *tab, ptrdiff_t K, const double *C,
                            double xmax, double cmax, double hmax, double *best, double *lab,
                            double *work, double *counts, double *sums, double *inertia,
                            int path)
{
#ifdef DPK_X86
    if (work != NULL) {
        if (xmax < 0.0) xmax = dpk_max_abs_avx2(Xt, d, ld, npad);
        if (dpk_scores_safe(d, xmax, cmax, hmax)) {
            inertia[0] += dpk_panel_stats_avx2(Xt, d, ld, nr, npad, tab, K, C, best, lab, work);
            return;
        }
        /* scores that could overflow: the direct distances, into the partials as they stand */
        dpk_acc_store(work, d, K, counts, sums);
        dpk_assign(Xt, d, ld, npad, tab, K, xmax, cmax, hmax, best, lab, path);
        dpk_accumulate(Xt, d, ld, nr, C, lab, counts, sums, inertia, 1);
        dpk_acc_load(work, d, K, counts, sums);
        return;
    }
#endif
    (void)work;
    dpk_assign(Xt, d, ld, npad, tab, K, xmax, cmax, hmax, best, lab, path);
    dpk_accumulate(Xt, d, ld, nr, C, lab, counts, sums, inertia, path == DPK_PATH_AVX2);
}

#endif /* DPC_KMEANS_SMALL_H */
