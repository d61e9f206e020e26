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
 *   dpf_lse           the log-sum-exp of a chunk's (K, ld) float log-densities into float
 *                     responsibilities, normalised in float64 (see below), and the per-row
 *                     log-likelihood in float64.
 *   dpf_lanes_flush   a float lane array added into its float64 twin and zeroed.
 *
 * The rounding contract (what the sensitivity of dpem_fast._engine._specs.FLOAT32_WIDENING
 * is derived from): a float lane accumulates at most DPC_F32_LANE_ROWS rows (dpc_contract.h)
 * before it is
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
    int32_t ti, bits;
    memcpy(&ti, &t, 4);
    bits = (ti - 0x4B400000 + 127) << 23;
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
