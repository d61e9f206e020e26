/*
 * dpc_rows.h -- the row loader of the E-step kernels: one chunk of rows of X (float32 or
 * float64, C-contiguous (n, d)) into a transposed float64 scratch Xt of shape (d, ld),
 * so that every inner loop of a kernel runs along rows and vectorises.
 *
 *   dpe_load_f64 / dpe_load_f32
 *       Xt[i, r] = (double) X[r, i] for r < nr; 0 on the padding nr <= r < npad.
 *   dpe_load_domain_f64 / dpe_load_domain_f32
 *       the same rows mapped into the unit ball of a declared data domain on the way
 *       (clip to the box, centre, scale, rescale a row whose norm exceeds 1 to norm
 *       `target`); returns the number of rows rescaled.  The numpy twin is
 *       dpem_fast._preprocess.scale_and_clip (DP-EM Sec. 3: declared, never data-derived,
 *       bounds).
 *
 * The loaders carry no DPE_CLONES: they compile for baseline x86-64, so no sum in them
 * is FMA-contracted on any machine.
 */
#ifndef DPC_ROWS_H
#define DPC_ROWS_H

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

/* Domain loader.  dom holds the rows (lower, upper, center), each of length d (lower /
   upper may be -inf / +inf when no box was declared).  For each row:
       v_i = (min(max(x_i, lower_i), upper_i) - center_i) * inv_scale,
       s2 = v_0^2 + v_1^2 + ... (in order);  if s2 > 1: v *= target / sqrt(s2).
   Equivalent to dpem_fast._preprocess.scale_and_clip in float64, without a copy of X. */
#define DPE_LOAD_DOMAIN_DEF(NAME, T)                                                      \
static ptrdiff_t NAME(const T *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld, \
                      const double *dom, double inv_scale, double target, double *Xt)      \
{                                                                                          \
    const double *lo = dom, *hi = dom + d, *ctr = dom + 2 * d;                             \
    ptrdiff_t r, i, n_clipped = 0;                                                         \
    for (r = 0; r < nr; r++) {                                                             \
        const T *row = X + r * d;                                                          \
        double s2 = 0.0;                                                                   \
        for (i = 0; i < d; i++) {                                                          \
            double v = (double)row[i];                                                     \
            v = v < lo[i] ? lo[i] : (v > hi[i] ? hi[i] : v);                               \
            v = (v - ctr[i]) * inv_scale;                                                  \
            Xt[i * ld + r] = v;                                                            \
            s2 += v * v;                                                                   \
        }                                                                                  \
        if (s2 > 1.0) {                                                                    \
            double f = target / __builtin_sqrt(s2);                                        \
            for (i = 0; i < d; i++) Xt[i * ld + r] *= f;                                   \
            n_clipped++;                                                                   \
        }                                                                                  \
    }                                                                                      \
    for (i = 0; i < d; i++)                                                                \
        for (r = nr; r < npad; r++) Xt[i * ld + r] = 0.0;                                  \
    return n_clipped;                                                                      \
}
DPE_LOAD_DOMAIN_DEF(dpe_load_domain_f64, double)
DPE_LOAD_DOMAIN_DEF(dpe_load_domain_f32, float)

#endif /* DPC_ROWS_H */
