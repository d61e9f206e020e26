/*
 * dpc_f32_prod.h -- the float32 path's products at d >= DPC_BLAS_MIN_D in register tiles
 * (issue 41), in place of strmm and ssyrk.
 *
 *   dpf_logp_tiles   out[r] = c - 0.5 sum_j y_j(r)^2, y_j = sum_{i <= j} D_i P_ij (or over every
 *                    i when P is not triangular): 16 rows x 6 columns of y in registers, each
 *                    y_j an fma chain in i order, its square added in j order; y is never stored.
 *   dpf_s2_piece     s2[i, j] += (double) sum_r W_ir X_jr (j >= i) over rows [r0, r0 + m), m <= 128
 *                    (DPC_F32_LANE_ROWS): 2 x 4 entries in registers, 8 rows a vector, the 8
 *                    lanes of each entry summed by a fixed shuffle tree, then added into the
 *                    float64 partial.
 *
 * Why not BLAS: at d = 50 a chunk's strmm (256 x 50) and its two 128-row ssyrk calls spend
 * most of their time packing (sgemm_itcopy / incopy, sscal for beta = 0): float32 ran at
 * 1.4x (strmm) and 1.55x (ssyrk) the float64 calls' speed, against 2x in arithmetic
 * (bench/f32_pieces.c's BLAS pattern; issue 41's CHANGELOG entry).  Here nothing is packed:
 * the chunk's columns are contiguous rows already.
 *
 * Rounding (dpem_fast._engine._specs, "Float32 rows" (c), (d)): an entry of s2 is summed in
 * float over at most m = DPC_F32_LANE_ROWS rows of its piece (any order or tree: the lanes'
 * fma chains, then the shuffle tree), added once into float64; a row's term is
 * fl(g x_i) * x_j: two rounded products.  Deterministic: the order depends on d only, not
 * on the thread count.
 */
#ifndef DPC_F32_PROD_H
#define DPC_F32_PROD_H

#include "dpc_f32.h"
#include "dpc_simd.h"

#define DPF_TILE_ROWS 16        /* rows of a logp tile (two dpf_v8) */
#define DPF_TILE_COLS 6         /* columns of y in a logp tile: 12 accumulators */

/* One 16-row x jn-column tile of y = D P for rows r, columns j0..j0+jn-1 (jn <= 6, a
   constant where inlined), its squares added into m0, m1 in column order. */
static inline __attribute__((always_inline)) void dpf_logp_tile(
    const float *D, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t r, const float *P, ptrdiff_t j0,
    int jn, ptrdiff_t iend, dpf_v8 *m0, dpf_v8 *m1)
{
    dpf_v8 y0[DPF_TILE_COLS], y1[DPF_TILE_COLS];
    ptrdiff_t i;
    int t;
    for (t = 0; t < jn; t++) {
        y0[t] = (dpf_v8){0};
        y1[t] = (dpf_v8){0};
    }
    for (i = 0; i < iend; i++) {
        dpf_v8 a0 = DPF_LD(D + i * ld + r), a1 = DPF_LD(D + i * ld + r + 8);
        const float *p = P + i * d + j0;
        for (t = 0; t < jn; t++) {
            dpf_v8 b = DPF_SPLAT(p[t]);
            y0[t] += a0 * b;
            y1[t] += a1 * b;
        }
    }
    for (t = 0; t < jn; t++) {
        *m0 += y0[t] * y0[t];
        *m1 += y1[t] * y1[t];
    }
}

/* out[r] = c - 0.5 ||(D P)_r||^2 for r < npad (npad % 16 == 0), D the centred chunk (d, ld),
   P row-major (d, d); tri: P upper triangular (entries below the diagonal are zero and not
   read).  Each y_j adds D_i P_ij for i = 0, 1, ... in order; the squares in j order. */
DPE_CLONES static void dpf_logp_tiles(const float *D, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                      const float *P, int tri, float c, float *out)
{
    ptrdiff_t r, j0, iend;
    for (r = 0; r < npad; r += DPF_TILE_ROWS) {
        dpf_v8 m0 = {0}, m1 = {0};
        for (j0 = 0; j0 + DPF_TILE_COLS <= d; j0 += DPF_TILE_COLS) {
            iend = tri ? j0 + DPF_TILE_COLS : d;
            dpf_logp_tile(D, d, ld, r, P, j0, DPF_TILE_COLS, iend, &m0, &m1);
        }
        switch (d - j0) {            /* the last columns, fewer than a tile */
        case 5: dpf_logp_tile(D, d, ld, r, P, j0, 5, d, &m0, &m1); break;
        case 4: dpf_logp_tile(D, d, ld, r, P, j0, 4, d, &m0, &m1); break;
        case 3: dpf_logp_tile(D, d, ld, r, P, j0, 3, d, &m0, &m1); break;
        case 2: dpf_logp_tile(D, d, ld, r, P, j0, 2, d, &m0, &m1); break;
        case 1: dpf_logp_tile(D, d, ld, r, P, j0, 1, d, &m0, &m1); break;
        default: break;
        }
        DPF_ST(out + r, DPF_SPLAT(c) - 0.5f * m0);
        DPF_ST(out + r + 8, DPF_SPLAT(c) - 0.5f * m1);
    }
}

/* The 8 lane sums of a[0..7] in one vector: (sum a[0], ..., sum a[7]), a fixed tree. */
static inline __attribute__((always_inline)) dpf_v8 dpf_hsum8(const dpf_v8 *a)
{
    const dpf_v8i lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
    const dpf_v8i s44 = {0, 1, 8, 9, 4, 5, 12, 13}, sEE = {2, 3, 10, 11, 6, 7, 14, 15};
    const dpf_v8i p20 = {0, 1, 2, 3, 8, 9, 10, 11}, p31 = {4, 5, 6, 7, 12, 13, 14, 15};
    dpf_v8 b0 = __builtin_shuffle(a[0], a[1], lo) + __builtin_shuffle(a[0], a[1], hi);
    dpf_v8 b1 = __builtin_shuffle(a[2], a[3], lo) + __builtin_shuffle(a[2], a[3], hi);
    dpf_v8 b2 = __builtin_shuffle(a[4], a[5], lo) + __builtin_shuffle(a[4], a[5], hi);
    dpf_v8 b3 = __builtin_shuffle(a[6], a[7], lo) + __builtin_shuffle(a[6], a[7], hi);
    dpf_v8 c0 = __builtin_shuffle(b0, b1, s44) + __builtin_shuffle(b0, b1, sEE);
    dpf_v8 c1 = __builtin_shuffle(b2, b3, s44) + __builtin_shuffle(b2, b3, sEE);
    return __builtin_shuffle(c0, c1, p20) + __builtin_shuffle(c0, c1, p31);
}

/* s2[i * d + j] += (double) sum_{r0 <= r < r0 + m} W[i, r] X[j, r] for i <= j < d (row-major
   upper triangle), W and X (d, ld); m % 8 == 0, m <= DPC_F32_LANE_ROWS.  Tiles of 4 x 4 entries
   (16 accumulators; columns past d read column d - 1 and are not stored). */
DPE_CLONES static void dpf_s2_piece(const float *W, const float *X, ptrdiff_t d, ptrdiff_t ld,
                                    ptrdiff_t r0, ptrdiff_t m, double *s2)
{
    ptrdiff_t i, j, r, t, q, last = (d - 1) * ld + r0;
    for (i = 0; i < d; i += 4) {
        const float *w[4];
        for (q = 0; q < 4; q++)
            w[q] = W + (i + q < d ? (i + q) * ld + r0 : last);
        for (j = i; j < d; j += 4) {
            const float *x0 = X + j * ld + r0;
            const float *x1 = X + (j + 1 < d ? (j + 1) * ld + r0 : last);
            const float *x2 = X + (j + 2 < d ? (j + 2) * ld + r0 : last);
            const float *x3 = X + (j + 3 < d ? (j + 3) * ld + r0 : last);
            dpf_v8 a[16] = {{0}}, e0, e1;
            float s[16];
            for (r = 0; r < m; r += DPF_W) {
                dpf_v8 y0 = DPF_LD(x0 + r), y1 = DPF_LD(x1 + r), y2 = DPF_LD(x2 + r), y3 = DPF_LD(x3 + r);
                for (q = 0; q < 4; q++) {
                    dpf_v8 u = DPF_LD(w[q] + r);
                    a[4 * q] += u * y0; a[4 * q + 1] += u * y1; a[4 * q + 2] += u * y2; a[4 * q + 3] += u * y3;
                }
            }
            e0 = dpf_hsum8(a);
            e1 = dpf_hsum8(a + 8);
            memcpy(s, &e0, sizeof e0);
            memcpy(s + 8, &e1, sizeof e1);
            for (q = 0; q < 4 && i + q < d; q++)
                for (t = 0; t < 4 && j + t < d; t++)
                    if (j + t >= i + q)
                        s2[(i + q) * d + j + t] += (double)s[4 * q + t];
        }
    }
}

#endif /* DPC_F32_PROD_H */
