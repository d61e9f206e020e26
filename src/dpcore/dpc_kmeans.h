/*
 * dpc_kmeans.h -- the k-means assignment step (hard assignment to the nearest centre) and
 * the per-cluster accumulation of counts and coordinate sums, on a transposed chunk.
 *
 *   dpk_assign
 *       for the npad rows of Xt (d, ld) (dpc_rows.h's layout), the squared Euclidean
 *       distance to each of the K centres C (K, d), summed over features in order
 *       i = 0 .. d-1 as dist = ((0 + t_0 t_0) + t_1 t_1) + ... with t_i = x_i - c_i,
 *       and the nearest centre (ties: the lowest index): best[r], lab[r] (as a double).
 *       Rows are processed in register tiles of DPE_L (16) rows (GCC vector types);
 *       every row's arithmetic is the same scalar sequence whatever the vector width.  The module that includes
 *       this header is built WITHOUT -ffp-contract=fast, so no clone contracts a multiply
 *       and an add into an FMA: the distances are bit-identical to the numpy twin
 *       dpem_fast._reference.kmeans (which sums the squared differences feature by
 *       feature), and so are the labels.
 *   dpk_accumulate
 *       counts[lab[r]] += 1, sums[lab[r], :] += x_r, inertia += best[r], for r < nr, in
 *       row order (a fixed order: the result does not depend on the thread count).
 */
#ifndef DPC_KMEANS_H
#define DPC_KMEANS_H

#include <stddef.h>

#include "dpc_contract.h"
#include "dpc_simd.h"

typedef long long dpk_m8 __attribute__((vector_size(64), aligned(8), __may_alias__));

/* b = lt ? v : b, lanewise, as bit operations (C has no vector ?:). */
#define DPK_SELECT(lt, v, b) ((dpe_v8)(((dpk_m8)(v) & (lt)) | ((dpk_m8)(b) & ~(lt))))

/* One tile of 16 rows: the tile's d x 16 values stay in registers across the K centres
   (constant d), and so do the running minimum and label (two dpe_v8 each). */
static inline __attribute__((always_inline)) void
dpk_assign_body(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                const double *C, ptrdiff_t K, double *best, double *lab)
{
    ptrdiff_t r0, k, i;
    const dpe_v8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
    for (r0 = 0; r0 < npad; r0 += DPE_L) {
        dpe_v8 b0 = zero + __builtin_inf(), b1 = b0, l0 = zero, l1 = zero;
        for (k = 0; k < K; k++) {
            const double *c = C + k * d;
            dpe_v8 s0 = zero, s1 = zero;
            _Pragma("GCC unroll 16")
            for (i = 0; i < d; i++) {
                const double *x = Xt + i * ld + r0;
                dpe_v8 t0 = DPE_LD(x) - c[i], t1 = DPE_LD(x + 8) - c[i];
                s0 = s0 + t0 * t0;
                s1 = s1 + t1 * t1;
            }
            const dpe_v8 kd = zero + (double)k;
            dpk_m8 m0 = (dpk_m8)(s0 < b0), m1 = (dpk_m8)(s1 < b1);
            b0 = DPK_SELECT(m0, s0, b0);
            b1 = DPK_SELECT(m1, s1, b1);
            l0 = DPK_SELECT(m0, kd, l0);
            l1 = DPK_SELECT(m1, kd, l1);
        }
        DPE_ST(best + r0, b0);
        DPE_ST(best + r0 + 8, b1);
        DPE_ST(lab + r0, l0);
        DPE_ST(lab + r0 + 8, l1);
    }
}

/* npad must be a multiple of DPE_L (dpc_lane_pad).  Specialised for constant d = 1..8 so
   that the feature loop unrolls; the arithmetic is the same for every case. */
DPE_CLONES static void dpk_assign(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                  const double *C, ptrdiff_t K, double *best, double *lab)
{
    switch (d) {
    case 1: dpk_assign_body(Xt, 1, ld, npad, C, K, best, lab); return;
    case 2: dpk_assign_body(Xt, 2, ld, npad, C, K, best, lab); return;
    case 3: dpk_assign_body(Xt, 3, ld, npad, C, K, best, lab); return;
    case 4: dpk_assign_body(Xt, 4, ld, npad, C, K, best, lab); return;
    case 5: dpk_assign_body(Xt, 5, ld, npad, C, K, best, lab); return;
    case 6: dpk_assign_body(Xt, 6, ld, npad, C, K, best, lab); return;
    case 7: dpk_assign_body(Xt, 7, ld, npad, C, K, best, lab); return;
    case 8: dpk_assign_body(Xt, 8, ld, npad, C, K, best, lab); return;
    default: dpk_assign_body(Xt, d, ld, npad, C, K, best, lab); return;
    }
}

/* Add the nr assigned rows of the chunk into one block's partials, in row order. */
static void dpk_accumulate(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t nr,
                           const double *best, const double *lab,
                           double *counts, double *sums, double *inertia)
{
    ptrdiff_t r, i;
    double acc = 0.0;
    for (r = 0; r < nr; r++) {
        ptrdiff_t k = (ptrdiff_t)lab[r];
        double *s = sums + k * d;
        counts[k] += 1.0;
        for (i = 0; i < d; i++) s[i] += Xt[i * ld + r];
        acc += best[r];
    }
    inertia[0] += acc;
}

#endif /* DPC_KMEANS_H */
