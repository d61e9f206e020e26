/*
 * dpc_exactsum.h -- exact, order-independent sums of doubles (a superaccumulator).
 *
 * Why: the sensitivity proofs (python/dpem_fast/_engine/_specs.py, "Rounding") bound the
 * float rounding inside a block of rows, and need the reduction of the per-block partials
 * (and of superblocks, and of Dask chunks) to add no rounding that grows with the number of
 * blocks.  Here the partials are added exactly, in integers, and the exact sum is rounded
 * once, to nearest (ties to even): the result is the correctly rounded sum of the inputs,
 * the same as Python's math.fsum, whatever their order and however the work is split over
 * threads.
 *
 * Representation.  A finite double is x = (-1)^s * M * 2^(E - 1075) with M < 2^53 an integer
 * and E >= 1 (E = 1 with no hidden bit for subnormals), so every double is an integer
 * multiple of 2^-1074: bit p of the fixed-point number X = x * 2^1074 sits at p = E - 1 +
 * (bit of M).  X is kept as DPC_XS_LIMBS signed 64-bit limbs of 32 bits each: limb i holds
 * the digits of bits [32 i, 32 i + 32), value X = sum_i limb[i] 2^(32 i).  Adding a double
 * adds three pieces below 2^32 (in magnitude) to three consecutive limbs, with the sign of x;
 * a limb therefore stays below 2^63 for DPC_XS_NORMALISE_EVERY (2^30) additions, after which
 * the carries are propagated (dpc_xs_normalise: every limb but the top back into [0, 2^32)).
 * The value never changes: normalising is exact, so when it happens cannot change the
 * result.  The top bit of a double is at p <= 2097 (limb 65); limbs 66..68 take the carries
 * of up to 2^(32*3 - 1) such values.
 *
 * Non-finite inputs follow IEEE addition, which does not depend on order: any NaN, or +inf
 * with -inf, gives NaN; else an infinity gives that infinity.  An exact sum of zero is +0.0
 * (as math.fsum gives, even when every input is -0.0).  A finite exact sum beyond the
 * largest double rounds to +-inf (where math.fsum raises OverflowError).
 */
#ifndef DPC_EXACTSUM_H
#define DPC_EXACTSUM_H

#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stddef.h>

#define DPC_XS_LIMBS 69
#ifndef DPC_XS_NORMALISE_EVERY           /* a test may lower it */
#define DPC_XS_NORMALISE_EVERY (1 << 30)
#endif

/* Only the limbs [lo, hi] have been touched (and hold the value); the rest are garbage, never
   read.  So an accumulator costs O(hi - lo), a few limbs for the partials of one statistic
   entry, not O(DPC_XS_LIMBS), to start, normalise and round. */
typedef struct {
    int64_t limb[DPC_XS_LIMBS];
    int lo, hi;             /* touched limbs; hi < lo while nothing finite and nonzero was added */
    int64_t pending;        /* additions since the last normalisation */
    int nan, pinf, ninf;    /* non-finite inputs seen */
} dpc_xsum;

static inline void dpc_xs_init(dpc_xsum *a)
{
    a->lo = DPC_XS_LIMBS;
    a->hi = -1;
    a->pending = 0;
    a->nan = a->pinf = a->ninf = 0;
}

/* Carry propagation: limbs lo .. hi - 1 into [0, 2^32), the top limb hi keeps the sign (the
   touched range grows upward when the top limb would exceed 2^40 in magnitude). */
static inline void dpc_xs_normalise(dpc_xsum *a)
{
    a->pending = 0;
    if (a->hi < a->lo)
        return;
    int64_t carry = 0;
    for (int i = a->lo; i < a->hi; i++) {
        int64_t v = a->limb[i] + carry;
        carry = v >> 32;                     /* arithmetic shift: floor(v / 2^32) */
        a->limb[i] = v - carry * ((int64_t)1 << 32);
    }
    a->limb[a->hi] += carry;
    while (a->hi + 1 < DPC_XS_LIMBS
           && (a->limb[a->hi] >= ((int64_t)1 << 40) || a->limb[a->hi] <= -((int64_t)1 << 40))) {
        int64_t v = a->limb[a->hi];
        carry = v >> 32;
        a->limb[a->hi] = v - carry * ((int64_t)1 << 32);
        a->hi++;
        a->limb[a->hi] = carry;
    }
}

static inline void dpc_xs_add(dpc_xsum *a, double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    uint64_t e = (bits >> 52) & 0x7FF;
    uint64_t m = bits & 0x000FFFFFFFFFFFFFULL;
    if (e == 0x7FF) {
        if (m != 0)
            a->nan = 1;
        else if (bits >> 63)
            a->ninf = 1;
        else
            a->pinf = 1;
        return;
    }
    if (e == 0) {
        if (m == 0)
            return;                          /* +-0 */
        e = 1;                               /* subnormal: no hidden bit */
    } else {
        m |= 0x0010000000000000ULL;
    }
    unsigned p = (unsigned)(e - 1);          /* bit position of M's lowest bit */
    int i = (int)(p >> 5);
    unsigned s = p & 31;
    if (a->hi < a->lo) {
        a->limb[i] = a->limb[i + 1] = a->limb[i + 2] = 0;
        a->lo = i;
        a->hi = i + 2;
    } else {
        while (a->lo > i)
            a->limb[--a->lo] = 0;
        while (a->hi < i + 2)
            a->limb[++a->hi] = 0;
    }
    /* M << s, cut into 32-bit digits: low (< 2^32), mid (< 2^32), high (< 2^20) */
    int64_t lo = (int64_t)((m << s) & 0xFFFFFFFFULL);
    uint64_t rest = (m >> 1) >> (31 - s);    /* m >> (32 - s), defined for s = 0 too */
    int64_t mid = (int64_t)(rest & 0xFFFFFFFFULL);
    int64_t hi = (int64_t)(rest >> 32);
    int64_t sg = 1 - 2 * (int64_t)(bits >> 63);
    a->limb[i] += sg * lo;
    a->limb[i + 1] += sg * mid;
    a->limb[i + 2] += sg * hi;
    if (++a->pending >= DPC_XS_NORMALISE_EVERY)
        dpc_xs_normalise(a);
}

/* Digit k of a normalised magnitude held in dig[lo .. hi] (0 outside). */
static inline uint64_t dpc_xs_digit(const uint64_t *dig, int lo, int hi, int k)
{
    return k >= lo && k <= hi ? dig[k] : 0;
}

/* Bits [p, p + 32) of that magnitude (bits below 0 are zeros). */
static inline uint64_t dpc_xs_bits32(const uint64_t *dig, int lo, int hi, int p)
{
    int s = ((p % 32) + 32) % 32;
    int k = (p - s) / 32;
    return ((dpc_xs_digit(dig, lo, hi, k) >> s) | (dpc_xs_digit(dig, lo, hi, k + 1) << (32 - s)))
           & 0xFFFFFFFFULL;
}

static inline uint64_t dpc_xs_bits64(const uint64_t *dig, int lo, int hi, int p)
{
    return dpc_xs_bits32(dig, lo, hi, p) | (dpc_xs_bits32(dig, lo, hi, p + 32) << 32);
}

/* Any bit below bit p (p >= 0)? */
static inline int dpc_xs_sticky(const uint64_t *dig, int lo, int hi, int p)
{
    int di = p >> 5;
    for (int k = lo; k < di && k <= hi; k++)
        if (dig[k])
            return 1;
    int s = p & 31;
    return s && (dpc_xs_digit(dig, lo, hi, di) & ((1ULL << s) - 1)) != 0;
}

/* The correctly rounded (to nearest, ties to even) value of the sum so far.  Leaves the
   accumulator normalised (same value). */
static inline double dpc_xs_round(dpc_xsum *a)
{
    if (a->nan || (a->pinf && a->ninf))
        return NAN;
    if (a->pinf)
        return INFINITY;
    if (a->ninf)
        return -INFINITY;
    dpc_xs_normalise(a);
    if (a->hi < a->lo)
        return 0.0;
    int lo = a->lo, hi = a->hi;
#ifdef __SIZEOF_INT128__
    /* Fast path: at most four limbs whose value fits a signed 128-bit integer; converting it
       to double rounds correctly (to nearest, ties to even), and the power-of-two scaling is
       exact unless the result is subnormal (then the general path below). */
    if (hi - lo <= 3 && a->limb[hi] < ((int64_t)1 << 30) && a->limb[hi] >= -((int64_t)1 << 30)) {
        __int128 X = 0;
        for (int i = hi; i >= lo; i--)
            X = X * ((__int128)1 << 32) + a->limb[i];
        double v = (double)X;
        double r = ldexp(v, 32 * lo - 1074);
        if (v == 0.0 || fabs(r) >= 0x1p-1022)
            return r;
    }
#endif
    uint64_t dig[DPC_XS_LIMBS];
    int neg = a->limb[hi] < 0;
    if (neg) {
        /* magnitude of a negative number: -X, normalised again (fits: |X| < 2^(32 hi + 40)) */
        int64_t carry = 0;
        for (int i = lo; i <= hi; i++) {
            int64_t v = -a->limb[i] + carry;
            carry = v >> 32;
            dig[i] = (uint64_t)(v - carry * ((int64_t)1 << 32));
        }
        /* the top limb was >= -2^40, so -X >= 0 ends with carry 0 past digit hi + 1 */
        if (carry != 0 && hi + 1 < DPC_XS_LIMBS)
            dig[++hi] = (uint64_t)carry;
    } else {
        for (int i = lo; i <= hi; i++)
            dig[i] = (uint64_t)a->limb[i];
    }
    /* the top digit may be up to 2^40 (not normalised): split it */
    if (dig[hi] >> 32) {
        if (hi + 1 < DPC_XS_LIMBS) {
            dig[hi + 1] = dig[hi] >> 32;
            dig[hi] &= 0xFFFFFFFFULL;
            hi++;
        }
    }
    int top = hi;
    while (top >= lo && dig[top] == 0)
        top--;
    if (top < lo)
        return 0.0;
    int t = top * 32 + 31;                                  /* highest set bit */
    while (!((dig[top] >> (t - top * 32)) & 1))
        t--;
    double r;
    if (t <= 52) {
        /* exact: an integer below 2^53 times 2^-1074 */
        r = ldexp((double)dpc_xs_bits64(dig, lo, hi, 0), -1074);
    } else {
        int lb = t - 52;                                    /* the 53 kept bits: [lb, t] */
        uint64_t w = dpc_xs_bits64(dig, lo, hi, lb - 1);    /* the kept bits and the half bit */
        uint64_t M = (w >> 1) & ((1ULL << 53) - 1);
        int half = (int)(w & 1);
        if (half && ((M & 1) || dpc_xs_sticky(dig, lo, hi, lb - 1)))
            M++;                                            /* may reach 2^53: still exact */
        r = ldexp((double)M, lb - 1074);                    /* overflows to inf when it must */
    }
    return neg ? -r : r;
}

/* The superaccumulator's sum of column j (p[b * ld + j], b < nb), correctly rounded. */
static inline double dpc_xs_sum_column(const double *p, ptrdiff_t nb, ptrdiff_t ld, ptrdiff_t j)
{
    dpc_xsum a;
    dpc_xs_init(&a);
    for (ptrdiff_t b = 0; b < nb; b++)
        dpc_xs_add(&a, p[b * ld + j]);
    return dpc_xs_round(&a);
}

/* out[j] = the correctly rounded sum over b < nb of p[b * ld + j], for j in [j0, j1),
   j1 - j0 <= DPC_XS_SPAN.

   Fast path, then proof of its result.  One pass over the rows (contiguous entries of a block,
   vectorisable) computes, per entry, Ogita-Rump-Oishi's Sum2 (2005): the float sum s of the
   partials with TwoSum's error-free transformation (p_1 + ... + p_i = s_i + q_2 + ... + q_i
   exactly), the float sum c of the errors q_i, and the float sum A of |p_i|.  Then
   |S - (s + c)| <= gamma_{n-1}^2 sum |p_i| (their Prop. 4.5 before its last rounding; S the
   exact sum, n = nb, gamma_k = k u / (1 - k u), u = 2^-53), which E below bounds from above
   (the float A is at least (1 - gamma_{n-1}) sum |p_i|).  TwoSum(s, c) = (r, t) with
   s + c = r + t exactly, so S = r + t + e, |e| <= E.  A double r is the correctly rounded S
   when |S - r| = |t + e| is below half the gap to r's neighbours: ulp(r) / 2, or ulp(r) / 4
   when |r| is a power of two (the gap below it is half as wide); the test
   |t| + E < half (1 - 2^-50) in float (the float sum is at least (1 - u) times the exact one)
   proves that.  Where it cannot (non-finite or huge or tiny values, r zero or
   subnormal, or the float sums too inexact: heavy cancellation) the entry is summed again by
   the superaccumulator.  Either way the result is the one correctly rounded value.  This
   needs float operations exactly as written: no FMA contraction (_contract, its one caller, is
   compiled with -ffp-contract=off, which c11 also implies), no x87.

   Compiled for AVX-512 / AVX2 / baseline (target_clones, runtime dispatch; GCC on x86-64):
   every operation is elementwise (TwoSum per entry, no sum across vector lanes) and
   uncontracted, so each clone computes the same bits, and so does the superaccumulator's
   fallback; the wider vectors halve the reduction's time (issue 41). */
#define DPC_XS_SPAN 32
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DPC_NO_CLONES)
#define DPC_XS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DPC_XS_CLONES
#endif
#ifndef DPC_XS_FALLBACK_HOOK        /* a test counts the entries the superaccumulator sums */
#define DPC_XS_FALLBACK_HOOK ((void)0)
#endif
DPC_XS_CLONES
static void dpc_xs_sum_span(const double *p, ptrdiff_t nb, ptrdiff_t ld, ptrdiff_t j0,
                                   ptrdiff_t j1, double *out)
{
    double s[DPC_XS_SPAN], c[DPC_XS_SPAN], A[DPC_XS_SPAN];
    ptrdiff_t w = j1 - j0;
    for (ptrdiff_t j = 0; j < w; j++)
        s[j] = c[j] = A[j] = 0.0;
    for (ptrdiff_t b = 0; b < nb; b++) {
        const double *row = p + b * ld + j0;
        for (ptrdiff_t j = 0; j < w; j++) {
            double x = row[j];
            double t = s[j] + x;                              /* TwoSum(s, x) = (t, q) */
            double bp = t - s[j];
            double q = (s[j] - (t - bp)) + (x - bp);
            s[j] = t;
            c[j] += q;
            A[j] += fabs(x);
        }
    }
    /* gamma_{n-1}^2 / (1 - gamma_{n-1}) <= 2 (n u)^2 for n u <= 2^-20, rounding included */
    double nu = (double)nb * 0x1p-53;
    double g2 = 2.0 * nu * nu;
    for (ptrdiff_t j = 0; j < w; j++) {
        double a = A[j];
        if (a == 0.0) {                                       /* all partials +-0 */
            out[j0 + j] = 0.0;
            continue;
        }
        int ok = nb <= ((ptrdiff_t)1 << 30) && a >= 0x1p-900 && a <= 0x1p1000;  /* NaN fails too */
        if (ok) {
            double r = s[j] + c[j];                           /* TwoSum(s, c) = (r, t) */
            double bp = r - s[j];
            double t = (s[j] - (r - bp)) + (c[j] - bp);
            uint64_t rb;
            memcpy(&rb, &r, sizeof rb);
            uint64_t er = (rb >> 52) & 0x7FF;                 /* r normal, far from both ends */
            if (er >= 100 && er <= 2000) {
                /* half the gap to r's neighbours: ulp(r) / 2 = 2^(er - 1076); a quarter of
                   ulp(r) when |r| is a power of two (the gap below is half as wide) */
                uint64_t hb = (er - 53 - ((rb & 0x000FFFFFFFFFFFFFULL) == 0)) << 52;
                double half;
                memcpy(&half, &hb, sizeof half);
                if (fabs(t) + g2 * a < half * (1.0 - 0x1p-50)) {
                    out[j0 + j] = r;
                    continue;
                }
            }
        }
        DPC_XS_FALLBACK_HOOK;
        out[j0 + j] = dpc_xs_sum_column(p, nb, ld, j0 + j);
    }
}

#endif /* DPC_EXACTSUM_H */
