/*
 * dpc_dgauss.h -- exact discrete Laplace and discrete Gaussian samplers.
 *
 * Canonne, Kamath, Steinke (2020), "The Discrete Gaussian for Differential
 * Privacy" (NeurIPS 2020, arXiv:2004.00010):
 *   Algorithm 1 -- Bernoulli(exp(-gamma)) for a rational gamma >= 0,
 *   Algorithm 2 -- discrete Laplace with rational scale t/s,
 *   Algorithm 3 -- discrete Gaussian N_Z(0, sigma^2) with rational sigma^2.
 *
 * Every accept/reject decision is made with integer arithmetic on exact
 * rationals; there is no floating point anywhere in this file.  All
 * randomness comes from dpc_rng.h keystream words (dpc_next_u64, Lemire's
 * dpc_below_u64) and the 64-bit bit reservoir of dpc_stream (dpc_bit for a
 * fair coin, dpc_bits below for k bits at once).
 *   Bernoulli(p/q)   lazy comparison of a uniform R with the binary digits of
 *                    p/q, 8 digits at a time in the 64-bit path (one
 *                    division per 8 digits, decides with probability
 *                    1 - 2^-8 per step), bit by bit in the 128-bit path;
 *   Bernoulli(1/K)   bit by bit (expected 2 bits);
 *   Bernoulli(e^-1)  Algorithm 1 with gamma = 1, its first steps read off
 *                    one lazily revealed uniform (see dpc_bern_exp_minus1).
 *
 * Ranges (checked by the Python callers, dpem_fast.random):
 *   Bernoulli(p/q):          0 <= p < q <= 2^56 (64-bit) or q < 2^126 (128-bit);
 *   discrete Laplace t/s:    1 <= t <= 2^56, 1 <= s < 2^64;
 *   discrete Gaussian a/b:   D = 2 a b t^2 < 2^126 and Ymax / t >= 2^20.
 * Samplers return 0 on success and 1 when a draw would leave the exact
 * integer range (probability at most exp(-64) per Laplace draw, and
 * exp(-2^20) per Gaussian attempt): the caller must then raise, never
 * use a wrapped value.
 */
#ifndef DPC_DGAUSS_H
#define DPC_DGAUSS_H

#include <stdint.h>
#include "dpc_rng.h"

typedef unsigned __int128 dpc_u128;

#define DPC_U64_MAX 0xFFFFFFFFFFFFFFFFull

/* ------------------------------------------------------------------------
 * Bernoulli(p/q) by lazy comparison of random bits with the binary digits
 * of p/q.  Digit i of p/q: p <<= 1; digit = (p >= q); if digit, p -= q.
 * The uniform R = 0.r1 r2 ... is < p/q iff at the first position where the
 * random bit and the digit differ the digit is 1, i.e. the answer is that
 * digit.  When the remainder p reaches 0 all later digits are 0 and R can
 * no longer be smaller (R = p/q exactly has probability 0): answer 0.
 * ------------------------------------------------------------------------ */

/* k fair bits (1 <= k <= 32) from the reservoir, as an integer in [0, 2^k).
 * When fewer than k bits are left they are discarded and the reservoir is
 * refilled (discarding unused fair bits keeps everything uniform). */
static inline uint64_t dpc_bits(dpc_stream *s, int k)
{
    uint64_t r;
    if (__builtin_expect(s->nbits < k, 0)) {
        s->bits = dpc_next_u64(s);
        s->nbits = 64;
    }
    r = s->bits & ((1ull << k) - 1u);
    s->bits >>= k;
    s->nbits -= k;
    return r;
}

/* The next eight digits of a lazily revealed uniform R. */
static inline uint64_t dpc_bits8(dpc_stream *s) { return dpc_bits(s, 8); }

/* Uniform integer below t, 1 <= t <= 2^56.  For t <= 2^16 by rejection on
 * k = bitlength(t - 1) reservoir bits (expected < 2k bits); above, Lemire's
 * method on keystream words (dpc_below_u64). */
static inline uint64_t dpc_below_small(dpc_stream *s, uint64_t t)
{
    if (t <= 65536u) {
        int k;
        uint64_t r;
        if (t == 1) return 0;
        k = 64 - __builtin_clzll(t - 1);
        do r = dpc_bits(s, k); while (r >= t);
        return r;
    }
    return dpc_below_u64(s, t);
}

/* 0 <= p < q <= 2^56: the same lazy comparison, eight digits at a time.
 * The next 8 digits of p/q are floor(256 p / q) (remainder 256 p mod q);
 * compared with 8 random digits they decide unless all 8 are equal. */
static inline int dpc_bern_frac64(dpc_stream *s, uint64_t p, uint64_t q)
{
    while (p) {
        uint64_t x = p << 8, d = x / q, r = dpc_bits8(s);
        p = x - d * q;
        if (r != d) return r < d;
    }
    return 0;
}

/* 0 <= p < q < 2^126 */
static inline int dpc_bern_frac128(dpc_stream *s, dpc_u128 p, dpc_u128 q)
{
    while (p) {
        int digit;
        p <<= 1;
        digit = (p >= q);
        if (digit) p -= q;
        if (dpc_bit(s) != digit) return digit;
    }
    return 0;
}

/* Bernoulli(1/K), K >= 1, by bit-by-bit lazy comparison with the digits of 1/K. */
static inline int dpc_bern_inv(dpc_stream *s, uint64_t K)
{
    uint64_t p = 1;
    if (K == 1) return 1;
    if ((K & (K - 1)) == 0) {            /* 1/2^k: k zero bits */
        uint64_t k = (uint64_t)__builtin_ctzll(K);
        while (k--) if (dpc_bit(s)) return 0;
        return 1;
    }
    while (p) {                          /* p < K < 2^63 */
        int digit;
        p <<= 1;
        digit = (p >= K);
        if (digit) p -= K;
        if (dpc_bit(s) != digit) return digit;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * CKS Algorithm 1: Bernoulli(exp(-gamma)), gamma = p/q in [0, 1].
 * K = 1; loop { A = Bernoulli(gamma / K); if !A break; K++ }; return K odd.
 * Bernoulli(gamma/K) = Bernoulli(1/K) AND Bernoulli(p/q), two independent
 * coins, so the product of the probabilities is exact.
 * ------------------------------------------------------------------------ */

/* Bernoulli(exp(-1)).  With gamma = 1 the loop draws Bernoulli(1/K) only,
 * and its first failing K satisfies P(K >= k) = 1/(k-1)!, nested events.
 * So K in {2, 3, 4, 5} is read off one uniform R: K >= k iff R < 1/(k-1)!,
 * i.e. thresholds 1/2, 1/6, 1/24, 1/120.  The first 8 digits of R (r) decide
 * unless r straddles a threshold (r = 42: 1/6 = (42 + 2/3)/256; r = 10:
 * 1/24 = (10 + 2/3)/256; r = 2: 1/120 = (2 + 2/15)/256), where the rest of
 * R is compared lazily with the fractional part.  Once K >= 6 is known the
 * loop continues from K = 6 with fresh Bernoulli(1/K) coins, which is exact
 * because P(K >= k + 1 | K >= k) = 1/k however K >= k was established. */
static inline int dpc_bern_exp_minus1(dpc_stream *s)
{
    uint64_t r = dpc_bits8(s), K;
    if (r >= 43) return r < 128;         /* K = 2 (r >= 128) or K = 3 */
    if (r >= 11) {
        if (r != 42) return 0;           /* K = 4 */
        return !dpc_bern_frac64(s, 2, 3);   /* R < 1/6 iff rest < 2/3: K = 4 */
    }
    if (r >= 3) {
        if (r != 10) return 1;           /* K = 5 */
        return dpc_bern_frac64(s, 2, 3); /* R < 1/24 iff rest < 2/3: K = 5 */
    }
    if (r == 2 && !dpc_bern_frac64(s, 2, 15)) return 1;   /* R >= 1/120: K = 5 */
    K = 6;                               /* R < 1/120 */
    while (dpc_bern_inv(s, K)) K++;
    return (int)(K & 1u);
}

/* 0 <= p <= q <= 2^56 */
static inline int dpc_bern_exp_frac64(dpc_stream *s, uint64_t p, uint64_t q)
{
    uint64_t K;
    if (p == 0) return 1;
    if (p == q) return dpc_bern_exp_minus1(s);
    if (!dpc_bern_frac64(s, p, q)) return 1;          /* K = 1 fails */
    K = 2;
    while (dpc_bern_inv(s, K) && dpc_bern_frac64(s, p, q)) K++;
    return (int)(K & 1u);
}

/* 0 <= p <= q < 2^126 */
static inline int dpc_bern_exp_frac128(dpc_stream *s, dpc_u128 p, dpc_u128 q)
{
    uint64_t K;
    if (p == 0) return 1;
    if (p == q) return dpc_bern_exp_minus1(s);
    if (!dpc_bern_frac128(s, p, q)) return 1;
    K = 2;
    while (dpc_bern_inv(s, K) && dpc_bern_frac128(s, p, q)) K++;
    return (int)(K & 1u);
}

/* Bernoulli(exp(-p/q)) for any p >= 0: exp(-p/q) = exp(-1)^floor(p/q) *
 * exp(-(p mod q)/q), as independent coins; stop at the first failure. */
static inline int dpc_bern_exp64(dpc_stream *s, uint64_t p, uint64_t q)
{
    while (p >= q) {
        if (!dpc_bern_exp_minus1(s)) return 0;
        p -= q;
    }
    return dpc_bern_exp_frac64(s, p, q);
}

static inline int dpc_bern_exp128(dpc_stream *s, dpc_u128 p, dpc_u128 q)
{
    while (p >= q) {
        if (!dpc_bern_exp_minus1(s)) return 0;
        p -= q;
    }
    return dpc_bern_exp_frac128(s, p, q);
}

/* ------------------------------------------------------------------------
 * 256-bit unsigned numbers as (hi, lo) pairs of dpc_u128, just enough for
 * N = c^2 with c < 2^126 and N -= D with D < 2^126.
 * ------------------------------------------------------------------------ */
typedef struct { dpc_u128 hi, lo; } dpc_u256;

static inline dpc_u256 dpc_sq128(dpc_u128 c)
{
    dpc_u256 r;
    uint64_t c0 = (uint64_t)c, c1 = (uint64_t)(c >> 64);
    dpc_u128 lo = (dpc_u128)c0 * c0;             /* < 2^128 */
    dpc_u128 mid = (dpc_u128)c0 * c1;            /* < 2^128, counted twice */
    dpc_u128 hi = (dpc_u128)c1 * c1;
    dpc_u128 t;
    /* add 2 * mid * 2^64 */
    t = lo + (mid << 65);
    hi += (mid >> 63) + (t < lo);
    r.lo = t;
    r.hi = hi;
    return r;
}

/* Bernoulli(exp(-N/D)) for a 256-bit N and 0 < D < 2^126. */
static inline int dpc_bern_exp256(dpc_stream *s, dpc_u256 N, dpc_u128 D)
{
    while (N.hi != 0 || N.lo >= D) {
        if (!dpc_bern_exp_minus1(s)) return 0;
        N.hi -= (N.lo < D);
        N.lo -= D;
    }
    return dpc_bern_exp_frac128(s, N.lo, D);
}

/* ------------------------------------------------------------------------
 * CKS Algorithm 2: discrete Laplace with scale t/s, P(Y = y) proportional
 * to exp(-|y| s / t).
 *   U = uniform below t; reject unless Bernoulli(exp(-U/t));
 *   V = 0; while Bernoulli(exp(-1)) V++;
 *   X = U + t V; Y = floor(X / s); B = fair bit;
 *   reject if B and Y == 0; return (1 - 2B) Y.
 * vcap bounds V so that X = U + t V < 2^62 (vcap = floor((2^62 - t) / t)).
 * Returns 0, or 1 when V passes vcap (probability exp(-vcap)).
 * ------------------------------------------------------------------------ */
static inline int dpc_dlaplace(dpc_stream *st, uint64_t t, uint64_t s, uint64_t vcap,
                               int64_t *out)
{
    for (;;) {
        uint64_t U = dpc_below_small(st, t), V = 0, X, Y;
        int B;
        if (!dpc_bern_exp_frac64(st, U, t)) continue;
        while (dpc_bern_exp_minus1(st)) {
            if (__builtin_expect(++V > vcap, 0)) return 1;
        }
        X = U + t * V;
        Y = (s == 1) ? X : X / s;
        B = dpc_bit(st);
        if (B && Y == 0) continue;
        *out = B ? -(int64_t)Y : (int64_t)Y;
        return 0;
    }
}

/* ------------------------------------------------------------------------
 * CKS Algorithm 3: discrete Gaussian N_Z(0, sigma^2), sigma^2 = a/b.
 *   t = floor(sigma) + 1;  loop { Y = discrete Laplace scale t;
 *   accept Y with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) }.
 * With sigma^2 = a/b the exponent is N/D, c = |Y| b t - a,
 * N = c^2, D = 2 a b t^2 (both integers).
 * ------------------------------------------------------------------------ */
typedef struct {
    uint64_t t;          /* Laplace scale, t = isqrt(a // b) + 1 */
    uint64_t vcap;       /* floor((2^62 - t) / t) */
    uint64_t ymax;       /* |Y| <= ymax  =>  |Y| * bt < 2^126 */
    dpc_u128 a;          /* sigma^2 = a / b, reduced */
    dpc_u128 bt;         /* b * t */
    dpc_u128 D;          /* 2 a b t^2 < 2^126 */
    int small;           /* D <= 2^56 and a, bt < 2^63: 64-bit fast path possible */
} dpc_dgauss_params;

static inline void dpc_dgauss_setup(dpc_dgauss_params *g, uint64_t t, uint64_t vcap,
                                    uint64_t ymax,
                                    uint64_t a_hi, uint64_t a_lo,
                                    uint64_t bt_hi, uint64_t bt_lo,
                                    uint64_t D_hi, uint64_t D_lo)
{
    g->t = t;
    g->vcap = vcap;
    g->ymax = ymax;
    g->a = ((dpc_u128)a_hi << 64) | a_lo;
    g->bt = ((dpc_u128)bt_hi << 64) | bt_lo;
    g->D = ((dpc_u128)D_hi << 64) | D_lo;
    g->small = (D_hi == 0 && D_lo <= (1ull << 56) && a_hi == 0 && a_lo < (1ull << 63)
                && bt_hi == 0 && bt_lo < (1ull << 63));
}

/* Accept |Y| = y with probability exp(-(y b t - a)^2 / D). */
static inline int dpc_dgauss_accept(dpc_stream *st, const dpc_dgauss_params *g, uint64_t y)
{
    dpc_u128 yb, c;
    if (g->small && y < (1ull << 31)) {
        /* y * bt < 2^94; c fits 64 bits when y * bt < 2^64 */
        dpc_u128 ybt = (dpc_u128)y * (uint64_t)g->bt;
        if ((ybt >> 63) == 0) {
            uint64_t ybt64 = (uint64_t)ybt, a64 = (uint64_t)g->a;
            uint64_t c64 = ybt64 >= a64 ? ybt64 - a64 : a64 - ybt64;
            if (c64 < 0xB504F333ull)        /* c^2 < 2^63 */
                return dpc_bern_exp64(st, c64 * c64, (uint64_t)g->D);
        }
    }
    yb = (dpc_u128)y * g->bt;                   /* < 2^126 since y <= ymax */
    c = yb >= g->a ? yb - g->a : g->a - yb;     /* |c| < 2^126 */
    if ((c >> 64) == 0) {
        dpc_u128 N = c * c;                     /* c < 2^64 */
        return dpc_bern_exp128(st, N, g->D);
    }
    return dpc_bern_exp256(st, dpc_sq128(c), g->D);
}

/* Returns 0, or 1 on leaving the exact range (then *out is not written). */
static inline int dpc_dgauss(dpc_stream *st, const dpc_dgauss_params *g, int64_t *out)
{
    for (;;) {
        int64_t y;
        uint64_t ay;
        if (__builtin_expect(dpc_dlaplace(st, g->t, 1, g->vcap, &y), 0)) return 1;
        ay = y < 0 ? (uint64_t)(-y) : (uint64_t)y;
        if (__builtin_expect(ay > g->ymax, 0)) return 1;
        if (dpc_dgauss_accept(st, g, ay)) {
            *out = y;
            return 0;
        }
    }
}

#endif /* DPC_DGAUSS_H */
