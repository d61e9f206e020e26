/*
 * dpc_f32.h -- the single-precision pieces shared by the E-step kernels' float32 path
 * (float32 rows, single-precision arithmetic, float64 accumulation; issue 26).
 *
 *   dpf_v8            8 floats (32 bytes), unaligned, may alias float; two make the 16 lanes.
 *                     32-byte vectors are native on AVX2 and AVX-512 (where the clone also
 *                     has 32 vector registers), so no clone lowers them through memory.
 *   dpf_exp_neg       exp(x) in float, x <= 0, about 1 ulp; 0 below -87 (no denormals).
 *   dpf_narrow        Xs = (float) Xt: a chunk loaded (and clipped) in float64, rounded.
 *   dpf_load          Xs[i, r] = X[r, i] for float32 rows (no domain: no arithmetic).
 *   dpf_load_domain   float32 rows mapped into the unit ball of a declared domain in float64
 *                     (dpc_rows.h's map, 8 rows at a time), then rounded into Xs.
 *   dpf_lse           the log-sum-exp of a chunk's (K, ld) float log-densities into float
 *                     responsibilities, normalised in float64 (see below), and the per-row
 *                     log-likelihood in float64.
 *   dpf_lanes_flush   a float lane array added into its float64 twin and zeroed.
 *
 * The rounding contract (what the sensitivity of dpem_fast._engine._specs.FLOAT32_WIDENING
 * is derived from): rows are clipped into the unit ball in float64 before they are rounded;
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

/* exp(x) for x <= 0 in float; 0 below -87 (the float32 normal range ends at e^-87.3).
   Reduction x = n ln2 + r, |r| <= ln2/2 (ln2 split so that n * hi is exact for |n| < 2^15),
   Taylor to degree 7 (relative truncation error < 6e-9), scaled by 2^n through the exponent
   bits.  Branch-free, vectorisable. */
static inline float dpf_exp_neg(float x)
{
    const float SHIFT = 12582912.0f;                      /* 1.5 * 2^23 */
    float xc = x < -87.0f ? -87.0f : x;
    float t = xc * 1.44269504f + SHIFT;
    float n = t - SHIFT;
    float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ti;
    uint32_t bits;      /* shifted as unsigned, as in dpe_exp_neg */
    memcpy(&ti, &t, 4);
    bits = (uint32_t)(ti - 0x4B400000 + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    float res = p * scale;
    return x < -87.0f ? 0.0f : res;
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

/* Log-sum-exp over the K rows of L (K, ld) floats: L becomes the responsibilities
   gamma_k = (float)(e_k * (1 / s)), e_k = exp(L_k - max_k L_k) in float, s = sum_k e_k in
   float64 (in k order); ll[r] = max + log(s) in float64.  Columns nr..npad-1 of L are
   set to 0.  tmp: 2 * ld doubles (the float row maxima live in its first half). */
DPE_CLONES static void dpf_lse(float *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                               double *ll, double *tmp)
{
    ptrdiff_t k, r;
    float *mx = (float *)tmp;
    double *s = tmp + ld;
    for (r = 0; r < npad; r++) { mx[r] = L[r]; s[r] = 0.0; }
    for (k = 1; k < K; k++) {
        const float *Lk = L + k * ld;
        for (r = 0; r < npad; r++) mx[r] = Lk[r] > mx[r] ? Lk[r] : mx[r];
    }
    for (k = 0; k < K; k++) {
        float *Lk = L + k * ld;
        for (r = 0; r < npad; r++) {
            float e = dpf_exp_neg(Lk[r] - mx[r]);
            Lk[r] = e;
            s[r] += (double)e;
        }
    }
    for (r = 0; r < npad; r++) {
        ll[r] = (double)mx[r] + dpe_log_pos(s[r]);
        s[r] = 1.0 / s[r];
    }
    for (k = 0; k < K; k++) {
        float *Lk = L + k * ld;
        for (r = 0; r < npad; r++) Lk[r] = (float)((double)Lk[r] * s[r]);
        for (r = nr; r < npad; r++) Lk[r] = 0.0f;
    }
}

/* Per-row log-likelihood only (L untouched): max + log(sum_k e_k) as in dpf_lse. */
DPE_CLONES static void dpf_lse_ll(const float *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                                  double *ll, double *tmp)
{
    ptrdiff_t k, r;
    float *mx = (float *)tmp;
    double *s = tmp + ld;
    for (r = 0; r < npad; r++) { mx[r] = L[r]; s[r] = 0.0; }
    for (k = 1; k < K; k++) {
        const float *Lk = L + k * ld;
        for (r = 0; r < npad; r++) mx[r] = Lk[r] > mx[r] ? Lk[r] : mx[r];
    }
    for (k = 0; k < K; k++) {
        const float *Lk = L + k * ld;
        for (r = 0; r < npad; r++) s[r] += (double)dpf_exp_neg(Lk[r] - mx[r]);
    }
    for (r = 0; r < npad; r++) ll[r] = (double)mx[r] + dpe_log_pos(s[r]);
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
