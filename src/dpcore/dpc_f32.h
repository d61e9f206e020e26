/*
 * dpc_f32.h -- the single-precision pieces shared by the E-step kernels' float32 path
 * (float32 rows, single-precision arithmetic, float64 accumulation; issue 26).
 *
 *   dpf_v8            8 floats (32 bytes), unaligned, may alias float; two make the 16 lanes.
 *                     32-byte vectors are native on AVX2 and AVX-512 (where the clone also
 *                     has 32 vector registers), so no clone lowers them through memory.
 *   dpf_exp_neg       exp(x) in float, x <= 0, at most 1.5 ulp; 0 below -87 (no denormals).
 *   dpf_log_pos       dpe_log_pos (float64) in operations that vectorise on SSE2 and AVX2.
 *   dpf_narrow        Xs = (float) Xt: a chunk loaded (and clipped) in float64, rounded.
 *   dpf_load          Xs[i, r] = X[r, i] for float32 rows (no domain: no arithmetic).
 *   dpf_load_domain   float32 rows mapped into the unit ball of a declared domain in float64
 *                     (dpc_rows.h's map, 8 rows at a time), then rounded into Xs.
 *   dpf_lse           the log-sum-exp of a chunk's (K, ld) float log-densities into float
 *                     responsibilities, normalised in float64 (see below), and the per-row
 *                     log-likelihood in float64.
 *   dpf_lanes_flush   a float lane array added into its float64 twin and zeroed.
 *   dpf_exp_log_rows  test hook: dpf_exp_neg and dpf_log_pos over arrays, as the clones run them.
 *
 *   dpf_domain32 / dpf_load_domain32
 *                     the same map in float (issue 41): the domain rounded to floats once
 *                     per call (the box inward), rows transposed 8 at a time in registers,
 *                     the ball tested on the float values in float64 (see below).
 *
 * The rounding contract (what the sensitivity of dpem_fast._engine._specs.FLOAT32_WIDENING
 * is derived from): every row the kernel reads has norm at most 1 + 2^-24 (clipped into the
 * unit ball in float64 and rounded, or clipped in float with its ball test on the floats it
 * keeps: dpf_load_domain32);
 * a float lane accumulates at most DPC_F32_LANE_ROWS rows (dpc_contract.h) before it is
 * added (exactly: every float is a double) into a float64 lane and zeroed; the
 * responsibilities of a row are e_k * (1 / s) with s = sum_k e_k summed in float64, so
 * sum_k gamma_k <= (1 + 2^-24)(1 + 2^-53)^2 (1 + (K - 1) 2^-53).
 *
 * Everything is static (inline), compiled by each including module with its own flags
 * (-ffp-contract=fast: the AVX2 / AVX-512 clones contract a + b c into FMAs).
 */
#ifndef DPC_F32_H
#define DPC_F32_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dpc_rows.h"
#include "dpc_simd.h"

typedef float dpf_v8 __attribute__((vector_size(32), aligned(4), __may_alias__));
#define DPF_LD(p) (*(const dpf_v8 *)(p))
#define DPF_ST(p, v) (*(dpf_v8 *)(p) = (v))
#define DPF_W 8                    /* floats per dpf_v8 */
#define DPF_SPLAT(x) ((dpf_v8){(x), (x), (x), (x), (x), (x), (x), (x)})

/* exp(x) for x <= 0 in float; 0 below -87 (the float32 normal range ends at e^-87.3).
   Reduction x = n ln2 + r, |r| <= ln2/2 (ln2 split so that n * hi is exact for |n| < 2^15),
   Taylor to degree 7 (relative truncation error < 6e-9), scaled by 2^n through the exponent
   bits; at most 1.5 ulp from exp of the float x (measured: 0.89 ulp where the clone contracts
   FMAs, 1.20 on the baseline clone; tests/kernels/test_lse_f32.py).  Branch-free
   and every operation unconditional: below -87 the scale's bits are selected to 0 (p * +0 =
   +0), so that GCC if-converts the loop that calls it and vectorises it in every clone (4
   lanes on SSE2, 8 on AVX2, 16 on AVX-512); a final "x < -87 ? 0 : p * scale" made it sink
   the arithmetic into a branch that it then could not if-convert (the FP operations "could
   trap"), and the float32 log-sum-exp ran scalar.  Same value as that form for every x
   but NaN (which the kernels never pass). */
static inline float dpf_exp_neg(float x)
{
    const float SHIFT = 12582912.0f;                      /* 1.5 * 2^23 */
    const float LO = -87.0f;
    uint32_t xb, lob, under, tb, bits;
    float v = x - LO, xc, t, n, r, p, scale;
    memcpy(&tb, &v, 4);
    under = (uint32_t)((int32_t)tb >> 31);  /* all ones where x < -87 (the sign of x + 87) */
    memcpy(&xb, &x, 4);
    memcpy(&lob, &LO, 4);
    xb = (xb & ~under) | (lob & under);     /* xc = x < -87 ? -87 : x, as bits */
    memcpy(&xc, &xb, 4);
    t = xc * 1.44269504f + SHIFT;
    n = t - SHIFT;
    r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    memcpy(&tb, &t, 4);
    /* 2^n through the exponent field (shifted as unsigned, as in dpe_exp_neg); 0 where x < -87 */
    bits = ((tb - 0x4B400000u + 127u) << 23) & ~under;
    memcpy(&scale, &bits, 4);
    return p * scale;
}

/* log(s) for a positive normal double, dpe_log_pos's operations (the same value) written so
   that they vectorise in every clone, on 64-bit integer adds, shifts and masks only (SSE2 has
   no 64-bit compare, and neither SSE2 nor AVX2 converts 64-bit integers to doubles): "m >
   sqrt(2)" is the carry of mantissa + (2^52 - 1 - mantissa of sqrt(2)) into bit 52; that bit
   halves m (exponent field - 1) and adds 1 to e, and e is the exact double
   (2^52 + biased e) - 2^52 - 1023.  Per row, not per component: 1 / K of the exps. */
static inline double dpf_log_pos(double s)
{
    const uint64_t MANT = 0x000FFFFFFFFFFFFFULL, SQRT2_MANT = 0x0006A09E667F3BCDULL;
    uint64_t b, mant, big, mb, eb;
    double m, ebd;
    memcpy(&b, &s, 8);
    mant = b & MANT;
    big = (mant + (MANT - SQRT2_MANT)) >> 52;       /* 1 where 1.mant > sqrt(2) */
    mb = (mant | 0x3FF0000000000000ULL) - (big << 52);
    memcpy(&m, &mb, 8);                             /* in [sqrt(1/2), sqrt(2)] */
    eb = ((b >> 52) + big) | 0x4330000000000000ULL;
    memcpy(&ebd, &eb, 8);
    double ed = (ebd - 4503599627370496.0) - 1023.0;
    return dpe_log_reduced(m, ed);
}

/* Xs[i, r] = (float) Xt[i, r] for i < d, r < npad: a chunk loaded in float64 (the domain
   loader's clip happens there, before any rounding), rounded to nearest float. */
DPE_CLONES static void dpf_narrow(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, float *Xs)
{
    ptrdiff_t i, r;
    for (i = 0; i < d; i++) {
        const double *x = Xt + i * ld;
        float *y = Xs + i * ld;
        for (r = 0; r < npad; r++) y[r] = (float)x[r];
    }
}

/* Xs[i, r] = X[r, i] for r < nr (float32 rows, no domain: a copy), 0 on the padding. */
static void dpf_load(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad, ptrdiff_t ld, float *Xs)
{
    ptrdiff_t r, i;
    for (r = 0; r < nr; r++) {
        const float *row = X + r * d;
        for (i = 0; i < d; i++) Xs[i * ld + r] = row[i];
    }
    for (i = 0; i < d; i++)
        for (r = nr; r < npad; r++) Xs[i * ld + r] = 0.0f;
}

typedef double dpf_v4d __attribute__((vector_size(32), aligned(8), __may_alias__));
typedef int64_t dpf_v4l __attribute__((vector_size(32), aligned(8), __may_alias__));
#define DPF_STD(p, v) (*(dpf_v4d *)(p) = (v))

/* float32 rows mapped into the unit ball of the domain dom = (lower, upper, center,
   inv_scale: (4, d)) as dpe_load_domain_f32 maps them -- every value upcast to float64,
   clipped to the box, centred and scaled, the row rescaled to norm `target` when its
   squared norm exceeds 1 -- and the result rounded to float: Xs[i, r] for r < nr, 0 up to
   npad (nr <= DPC_CHUNK_SIZE).  Xt: (d, ld) float64 scratch.  Rows are taken 8 at a time
   (two 4-double vectors per feature; each squared norm summed in feature order), so the
   transposition costs no strided scalar stores, and the factor onto the rim is applied as
   the rows are rounded (one product, as in the float64 loader); a row whose squared norm is
   not finite (a huge value) is redone by dpe_load_domain_f32 alone, as is a last group of
   fewer than 8 rows.  Returns the rows changed by the box or the ball.  (FMA contraction in
   the squared norms changes their last bit, not the guarantee: a rescaled row's norm is at
   most 1 for the clip target's margin, dpem_fast._preprocess.clip_target.) */
DPE_CLONES static ptrdiff_t dpf_load_domain(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                                            ptrdiff_t ld, const double *dom, double target, double *Xt,
                                            float *Xs)
{
    const double *lo = dom, *hi = dom + d, *ctr = dom + 2 * d, *inv = dom + 3 * d;
    ptrdiff_t r, i, q, n_clipped = 0;
    double fac[DPC_CHUNK_SIZE];          /* per-row factor onto the rim (1: inside the ball) */
    for (r = 0; r + 8 <= nr; r += 8) {
        const float *x0 = X + r * d;
        dpf_v4d s0 = {0}, s1 = {0};
        dpf_v4l m0 = {0}, m1 = {0};
        double sq[8];
        int64_t box[8];
        for (i = 0; i < d; i++) {
            const float *xi = x0 + i;
            dpf_v4d l = {lo[i], lo[i], lo[i], lo[i]}, h = {hi[i], hi[i], hi[i], hi[i]};
            double c = ctr[i], v = inv[i];
            dpf_v4d a0 = {xi[0], xi[d], xi[2 * d], xi[3 * d]};
            dpf_v4d a1 = {xi[4 * d], xi[5 * d], xi[6 * d], xi[7 * d]};
            dpf_v4l lo0 = a0 < l, hi0 = a0 > h, lo1 = a1 < l, hi1 = a1 > h;
            m0 |= lo0 | hi0;
            m1 |= lo1 | hi1;
            a0 = (dpf_v4d)(((dpf_v4l)l & lo0) | ((dpf_v4l)h & hi0) | ((dpf_v4l)a0 & ~(lo0 | hi0)));
            a1 = (dpf_v4d)(((dpf_v4l)l & lo1) | ((dpf_v4l)h & hi1) | ((dpf_v4l)a1 & ~(lo1 | hi1)));
            a0 = (a0 - c) * v;
            a1 = (a1 - c) * v;
            DPF_STD(Xt + i * ld + r, a0);
            DPF_STD(Xt + i * ld + r + 4, a1);
            s0 += a0 * a0;
            s1 += a1 * a1;
        }
        DPF_STD(sq, s0); DPF_STD(sq + 4, s1);
        *(dpf_v4l *)box = m0; *(dpf_v4l *)(box + 4) = m1;
        for (q = 0; q < 8; q++) {
            fac[r + q] = 1.0;
            if (sq[q] > 1.0) {
                if (sq[q] <= DBL_MAX)
                    fac[r + q] = target / __builtin_sqrt(sq[q]);
                else
                    dpe_load_domain_f32(x0 + q * d, d, 1, 1, ld, dom, target, Xt + r + q);
                box[q] = 1;
            }
            n_clipped += box[q] != 0;
        }
    }
    for (q = r; q < nr; q++) fac[q] = 1.0;
    if (r < nr)
        n_clipped += dpe_load_domain_f32(X + r * d, d, nr - r, nr - r, ld, dom, target, Xt + r);
    for (i = 0; i < d; i++) {
        const double *xt = Xt + i * ld;
        float *y = Xs + i * ld;
        for (q = 0; q < nr; q++) y[q] = (float)(xt[q] * fac[q]);
        for (q = nr; q < npad; q++) y[q] = 0.0f;
    }
    return n_clipped;
}

/* ------------------------------------------------------------ the clip in float (issue 41)
   dpf_domain32 rounds a domain (lower, upper, center, inv_scale: (4, d) doubles) to floats
   once per call: the box inward (lower up, upper down to the nearest float, so that the
   float box is inside the declared one, and for a float x, x < lower exactly when
   x < lower32: the same rows count as boxed), the centre and inverse scale to nearest.
   Returns 0 (the caller keeps dpf_load_domain, the clip in float64) when a centre or
   inverse scale is not a finite normal float, or the float box is empty (a box thinner
   than a float's spacing). */
static int dpf_domain32(const double *dom, ptrdiff_t d, float *dom32)
{
    ptrdiff_t i;
    for (i = 0; i < d; i++) {
        double lo = dom[i], hi = dom[d + i], c = dom[2 * d + i], v = dom[3 * d + i];
        float lo32 = (float)lo, hi32 = (float)hi, c32 = (float)c, v32 = (float)v;
        if ((double)lo32 < lo) lo32 = __builtin_nextafterf(lo32, __builtin_inff());
        if ((double)hi32 > hi) hi32 = __builtin_nextafterf(hi32, -__builtin_inff());
        if (!(lo32 <= hi32) || !(c32 - c32 == 0.0f) || !(v32 >= FLT_MIN && v32 <= FLT_MAX))
            return 0;
        dom32[i] = lo32; dom32[d + i] = hi32; dom32[2 * d + i] = c32; dom32[3 * d + i] = v32;
    }
    return 1;
}

typedef int32_t dpf_v8i __attribute__((vector_size(32), aligned(4), __may_alias__));

/* r[j] = (r0[j], r1[j], ..., r7[j]): an 8 x 8 float transposition in registers (the
   unpack / shuffle / 128-bit-permute ladder; GCC lowers each __builtin_shuffle to one
   instruction on AVX2 and AVX-512). */
static inline __attribute__((always_inline)) void dpf_transpose8(dpf_v8 *r)
{
    const dpf_v8i lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
    const dpf_v8i s44 = {0, 1, 8, 9, 4, 5, 12, 13}, sEE = {2, 3, 10, 11, 6, 7, 14, 15};
    const dpf_v8i p20 = {0, 1, 2, 3, 8, 9, 10, 11}, p31 = {4, 5, 6, 7, 12, 13, 14, 15};
    dpf_v8 t[8], u[8];
    int q;
    for (q = 0; q < 8; q += 2) {
        t[q] = __builtin_shuffle(r[q], r[q + 1], lo);
        t[q + 1] = __builtin_shuffle(r[q], r[q + 1], hi);
    }
    for (q = 0; q < 8; q += 4) {
        u[q] = __builtin_shuffle(t[q], t[q + 2], s44);
        u[q + 1] = __builtin_shuffle(t[q], t[q + 2], sEE);
        u[q + 2] = __builtin_shuffle(t[q + 1], t[q + 3], s44);
        u[q + 3] = __builtin_shuffle(t[q + 1], t[q + 3], sEE);
    }
    for (q = 0; q < 4; q++) {
        r[q] = __builtin_shuffle(u[q], u[q + 4], p20);
        r[q + 4] = __builtin_shuffle(u[q], u[q + 4], p31);
    }
}

/* One row's end of the float clip: the row's values v_i sit in y[0], y[ld], ...; its
   squared norm is summed in float64 in feature order (every v_i^2 is exact in float64,
   so FMA contraction cannot change it); beyond 1 the row is rescaled as dpf_load_domain
   rescales (v_i * (target / sqrt(s)) in float64, rounded to float), and a row with an
   infinite value (a float overflow of the map) is redone in float64 from its raw values
   (dpe_load_domain_f32_row, into tmp: d doubles) and rounded.  Returns 1 if clipped. */
static inline int dpf_ball32(const float *row, float *y, ptrdiff_t d, ptrdiff_t ld, const double *dom,
                             double target, double *tmp)
{
    ptrdiff_t i;
    double s = 0.0;
    for (i = 0; i < d; i++) {
        double w = (double)y[i * ld];
        s += w * w;
    }
    if (!(s > 1.0)) return 0;
    if (s <= DBL_MAX) {
        double f = target / __builtin_sqrt(s);
        for (i = 0; i < d; i++) y[i * ld] = (float)((double)y[i * ld] * f);
    } else {
        dpe_load_domain_f32_row(row, d, dom, target, tmp, 1);
        for (i = 0; i < d; i++) y[i * ld] = (float)tmp[i];
    }
    return 1;
}

/* float32 rows mapped into the unit ball in float (issue 41): for each row
       a_i = min(max(x_i, lower32_i), upper32_i),  v_i = (a_i - center32_i) * inv32_i  (float),
   and where sum_i v_i^2 > 1 (summed in float64, dpf_ball32) the row is rescaled to norm
   `target` as dpf_load_domain does; Xs[i, r] for r < nr, 0 up to npad.  dom32: dpf_domain32's
   floats; dom: the float64 domain (for rows whose map overflows a float); tmp: d doubles.
   Returns the rows changed by the box or the ball.

   Privacy (dpem_fast._engine._specs, "Float32 rows", (a)): the sensitivities need each row
   the kernel reads in the unit ball up to float rounding, ||x~|| <= 1 + u (u = 2^-24), and
   nothing else of the map (a deterministic function of the row alone).  A row left as it is
   is exactly the floats v that its float64 squared norm s <= 1 was summed from, so
   ||x~||^2 <= (1 + gamma_d) (gamma_d = d 2^-53 / (1 - d 2^-53): s's rounding) and
   ||x~|| <= 1 + u for d < 2^29; a rescaled row is float64 values of norm <= 1 (clip_target's
   margin 8 (d + 2) 2^-52 covers the norm's and products' rounding, as in the float64 loader)
   rounded to float, ||x~|| <= 1 + u.  So (a) holds as before and FLOAT32_WIDENING covers the
   float clip unchanged; the box is applied inside the declared box (dpf_domain32).  A float
   squared norm only screens the rows: one at most 1 - 8 (d + 2) u cannot have s > 1 (its
   relative error is at most gamma_d in float whatever the order or contraction), so only
   the others are summed in float64; the result is the same in every clone.

   Rows are transposed 8 at a time in registers (dpf_transpose8; the features in blocks of
   8, the last block taken at d - 8 with its already-done features skipped), the map applied
   on the transposed vectors; d < 8 and the last nr % 8 rows run the same operations one
   row at a time. */
DPE_CLONES static ptrdiff_t dpf_load_domain32(const float *X, ptrdiff_t d, ptrdiff_t nr, ptrdiff_t npad,
                                              ptrdiff_t ld, const float *dom32, const double *dom,
                                              double target, double *tmp, float *Xs)
{
    const float *lo = dom32, *hi = dom32 + d, *ctr = dom32 + 2 * d, *inv = dom32 + 3 * d;
    const float screen = 1.0f - 8.0f * (float)(d + 2) * 5.9604645e-8f;   /* 1 - 8 (d + 2) 2^-24 */
    ptrdiff_t r = 0, i, i0, ib, q, n_clipped = 0;
    dpf_v8i count = {0};
    if (d >= 8) {
        for (; r + 8 <= nr; r += 8) {
            const float *x = X + r * d;
            dpf_v8 s2 = {0};
            dpf_v8i box = {0}, check;
            for (i0 = 0; i0 < d; i0 += 8) {
                dpf_v8 v[8];
                ib = i0 + 8 <= d ? i0 : d - 8;     /* the last block overlaps the one before */
                _Pragma("GCC unroll 8")
                for (q = 0; q < 8; q++) v[q] = DPF_LD(x + q * d + ib);
                dpf_transpose8(v);
                _Pragma("GCC unroll 8")
                for (q = 0; q < 8; q++) {
                    const ptrdiff_t j = ib + q;
                    const dpf_v8 l = DPF_SPLAT(lo[j]), h = DPF_SPLAT(hi[j]);
                    const dpf_v8i below = v[q] < l, above = v[q] > h, keep = (dpf_v8i){0} - (int32_t)(j >= i0);
                    dpf_v8 u = (dpf_v8)(((dpf_v8i)l & below) | ((dpf_v8i)h & above)
                                        | ((dpf_v8i)v[q] & ~(below | above)));
                    u = (u - ctr[j]) * inv[j];
                    box |= (below | above) & keep;
                    s2 += (dpf_v8)((dpf_v8i)(u * u) & keep);
                    if (j >= i0) DPF_ST(Xs + j * ld + r, u);
                }
            }
            count -= box;
            check = ~(s2 <= screen) & ~box;     /* (box rows are counted already; NaN: checked) */
            if (check[0] | check[1] | check[2] | check[3] | check[4] | check[5] | check[6] | check[7]) {
                int32_t bx[8];
                *(dpf_v8i *)bx = box;
                for (q = 0; q < 8; q++)
                    if (!(s2[q] <= screen)) {
                        int c = dpf_ball32(x + q * d, Xs + r + q, d, ld, dom, target, tmp);
                        n_clipped += c && !bx[q];
                    }
            }
        }
    }
    for (q = 0; q < 8; q++) n_clipped += count[q];
    for (; r < nr; r++) {
        const float *x = X + r * d;
        float s2 = 0.0f;
        int c = 0;
        for (i = 0; i < d; i++) {
            float u = x[i] < lo[i] ? lo[i] : (x[i] > hi[i] ? hi[i] : x[i]);
            c |= (x[i] < lo[i]) | (x[i] > hi[i]);
            u = (u - ctr[i]) * inv[i];
            Xs[i * ld + r] = u;
            s2 += u * u;
        }
        if (!(s2 <= screen)) c |= dpf_ball32(x, Xs + r, d, ld, dom, target, tmp);
        n_clipped += c;
    }
    for (i = 0; i < d; i++)
        for (q = nr; q < npad; q++) Xs[i * ld + q] = 0.0f;
    return n_clipped;
}

/* Touches the n bytes at p into the L2 cache (prefetcht1, one per 64-byte line; no
   architectural effect): the next chunk's rows, asked for while this chunk computes, so
   that its load does not wait on memory (issue 41). */
static inline void dpf_prefetch(const void *p, ptrdiff_t n)
{
    const char *c = (const char *)p;
    ptrdiff_t o;
    for (o = 0; o < n; o += 64) __builtin_prefetch(c + o, 0, 2);
}

/* Flush-to-zero for the float32 path's blocks (issue 41; the full and the diagonal E-step
   kernels): a result below the smallest normal is stored as 0 (of its sign) instead of a
   subnormal.  Far responsibilities (e_k down to e^-87, times 1 / s) make subnormal products
   g x_i and g x_i x_j, and every operation on a subnormal takes a slow path (measured on
   AMD Zen 4: the full kernel's moments 1.5x slower, the diagonal kernel's pass ~4 %).
   dpf_ftz_begin returns the caller's control word, dpf_ftz_end puts it back; both run on
   the thread that computes the block, so nothing else sees the mode.
   Only x86-64 (MXCSR, SSE and AVX alike); elsewhere nothing changes.  Rounding: a flushed
   value errs by less than 2^-126 absolutely, |fl(v)| <= |v| keeps every bound of
   dpem_fast._engine._specs ("Float32 rows"). */
static inline unsigned int dpf_ftz_begin(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned int m = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(m | 0x8000u);
    return m;
#else
    return 0;
#endif
}

static inline void dpf_ftz_end(unsigned int m)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_ia32_ldmxcsr(m);
#else
    (void)m;
#endif
}

/* mx[r] = max_k L[k, r] (float) and s[r] = 0, the start of both float log-sum-exps. */
static inline void dpf_colmax(const float *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                              float *restrict mx, double *restrict s)
{
    ptrdiff_t k, r;
    for (r = 0; r < npad; r++) mx[r] = L[r];
    for (r = 0; r < npad; r++) s[r] = 0.0;
    for (k = 1; k < K; k++) {
        const float *Lk = L + k * ld;
        for (r = 0; r < npad; r++) mx[r] = Lk[r] > mx[r] ? Lk[r] : mx[r];
    }
}

/* Log-sum-exp over the K rows of L (K, ld) floats: L becomes the responsibilities
   gamma_k = (float)(e_k * (1 / s)), e_k = exp(L_k - max_k L_k) in float, s = sum_k e_k in
   float64 (in k order); ll[r] = max + log(s) in float64.  Columns nr..npad-1 of L are
   set to 0.  tmp: 2 * ld doubles (the float row maxima live in its first half).  Every
   loop runs along the rows of a chunk (contiguous, npad % 16 == 0) and vectorises in
   every clone (restrict: mx, s and L do not overlap). */
DPE_CLONES static void dpf_lse(float *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                               double *ll, double *tmp)
{
    ptrdiff_t k, r;
    float *restrict mx = (float *)tmp;
    double *restrict s = tmp + ld;
    dpf_colmax(L, K, ld, npad, mx, s);
    for (k = 0; k < K; k++) {
        float *restrict Lk = L + k * ld;
        for (r = 0; r < npad; r++) {
            float e = dpf_exp_neg(Lk[r] - mx[r]);
            Lk[r] = e;
            s[r] += (double)e;
        }
    }
    for (r = 0; r < npad; r++) {
        ll[r] = (double)mx[r] + dpf_log_pos(s[r]);
        s[r] = 1.0 / s[r];
    }
    for (k = 0; k < K; k++) {
        float *restrict Lk = L + k * ld;
        for (r = 0; r < npad; r++) Lk[r] = (float)((double)Lk[r] * s[r]);
        for (r = nr; r < npad; r++) Lk[r] = 0.0f;
    }
}

/* Per-row log-likelihood only (L untouched): max + log(sum_k e_k) as in dpf_lse. */
DPE_CLONES static void dpf_lse_ll(const float *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                                  double *ll, double *tmp)
{
    ptrdiff_t k, r;
    float *restrict mx = (float *)tmp;
    double *restrict s = tmp + ld;
    dpf_colmax(L, K, ld, npad, mx, s);
    for (k = 0; k < K; k++) {
        const float *restrict Lk = L + k * ld;
        for (r = 0; r < npad; r++) s[r] += (double)dpf_exp_neg(Lk[r] - mx[r]);
    }
    for (r = 0; r < npad; r++) ll[r] = (double)mx[r] + dpf_log_pos(s[r]);
}

/* Test hooks: the clone's (vectorised) dpf_exp_neg and dpf_log_pos over arrays,
   y[i] = exp(x[i]) (x <= 0) and lg[i] = log(s[i]) (s positive normal). */
DPE_CLONES static void dpf_exp_log_rows(const float *restrict x, float *restrict y, ptrdiff_t nx,
                                        const double *restrict s, double *restrict lg, ptrdiff_t ns)
{
    ptrdiff_t i;
    for (i = 0; i < nx; i++) y[i] = dpf_exp_neg(x[i]);
    for (i = 0; i < ns; i++) lg[i] = dpf_log_pos(s[i]);
}

/* la64[e] += (double) la32[e]; la32[e] = 0 for e < m: a float lane array flushed (exactly
   converted) into its float64 lanes. */
DPE_CLONES static void dpf_lanes_flush(float *la32, ptrdiff_t m, double *la64)
{
    ptrdiff_t e;
    for (e = 0; e < m; e++) {
        la64[e] += (double)la32[e];
        la32[e] = 0.0f;
    }
}

#endif /* DPC_F32_H */
