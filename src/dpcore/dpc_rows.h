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
   Equivalent to dpem_fast._preprocess.scale_and_clip in float64, without a copy of X. */
#define DPE_LOAD_DOMAIN_DEF(NAME, T)                                                      \
static ptrdiff_t NAME(const T *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld, \
                      const double *dom, double target, double *Xt)                        \
{                                                                                          \
    const double *lo = dom, *hi = dom + d, *ctr = dom + 2 * d, *inv = dom + 3 * d;         \
    ptrdiff_t r, i, n_clipped = 0;                                                         \
    for (r = 0; r < nr; r++) {                                                             \
        const T *row = X + r * d;                                                          \
        double s2 = 0.0;                                                                   \
        int boxed = 0;                                                                     \
        for (i = 0; i < d; i++) {                                                          \
            double v = (double)row[i];                                                     \
            boxed |= (v < lo[i]) | (v > hi[i]);                                            \
            v = v < lo[i] ? lo[i] : (v > hi[i] ? hi[i] : v);                               \
            v = (v - ctr[i]) * inv[i];                                                     \
            Xt[i * ld + r] = v;                                                            \
            s2 += v * v;                                                                   \
        }                                                                                  \
        if (s2 > 1.0) {                                                                    \
            if (s2 <= DBL_MAX) {                                                           \
                double f = target / __builtin_sqrt(s2);                                    \
                for (i = 0; i < d; i++) Xt[i * ld + r] *= f;                               \
            } else {                                                                       \
                double m = 0.0, inv_max = 0.0;                                             \
                for (i = 0; i < d; i++) inv_max = inv[i] > inv_max ? inv[i] : inv_max;     \
                for (i = 0; i < d; i++) {                                                  \
                    double a = (double)row[i], h;                                          \
                    a = a < lo[i] ? lo[i] : (a > hi[i] ? hi[i] : a);                       \
                    h = a * 0.5 - ctr[i] * 0.5;                                            \
                    if (h - h == 0.0) h *= inv[i] / inv_max;                               \
                    Xt[i * ld + r] = h;                                                    \
                    h = h < 0.0 ? -h : h;                                                  \
                    m = h > m ? h : m;                                                     \
                }                                                                          \
                dpe_domain_rescale_huge(Xt + r, ld, d, m, target);                         \
            }                                                                              \
            boxed = 1;                                                                     \
        }                                                                                  \
        n_clipped += boxed;                                                                \
    }                                                                                      \
    for (i = 0; i < d; i++)                                                                \
        for (r = nr; r < npad; r++) Xt[i * ld + r] = 0.0;                                  \
    return n_clipped;                                                                      \
}
DPE_LOAD_DOMAIN_DEF(dpe_load_domain_f64, double)
DPE_LOAD_DOMAIN_DEF(dpe_load_domain_f32, float)

#endif /* DPC_ROWS_H */
