/*
 * dpc_simd.h -- vector types, function multiversioning and the fixed-order lane sums
 * shared by the E-step kernels (GMM, Bernoulli mixture, ...).
 *
 * Everything is static (inline): each Cython module that includes this header compiles
 * its own copy with its own flags.  Modules using it are built with -ffp-contract=fast
 * (meson.build) so that the AVX2 / AVX-512 clones of DPE_CLONES functions use FMA;
 * functions without DPE_CLONES compile for baseline x86-64 (no FMA).  Whether a sum is
 * contracted is part of its rounding: moving code into or out of a DPE_CLONES function
 * changes results.
 *
 *   DPE_CLONES        target_clones(x86-64-v4, x86-64-v3, default) on GCC / x86-64.
 *   DPE_AVX2, dpe_avx2_path   hand-written AVX2 + FMA paths that replace the x86-64-v3
 *                     clone of the float64 E-step functions (same bits; see below).
 *   dpe_v8            8 doubles, unaligned, may alias double; two make the 16 lanes.
 *   DPE_L             == DPC_LANES (16), the lanes of every in-chunk row sum.
 *   dpe_exp_neg       exp(x), x <= 0, about 1 ulp; 0 below -708 (no denormals).
 *   dpe_log_pos       log(s) for a positive normal double, about 1 ulp.
 *   dpe_log_reduced   its polynomial on the reduced argument (shared with dpf_log_pos).
 *   dpe_hsum          fixed-tree sum of 16 lanes; dpe_hsum_add the same tree, vectorised.
 */
#ifndef DPC_SIMD_H
#define DPC_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dpc_contract.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DPC_NO_CLONES)
#define DPE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DPE_CLONES
#endif
#define DPE_L DPC_LANES

/* The AVX2 + FMA paths (x86-64, GCC, clones on): hand-written __m256d code for the
   functions whose x86-64-v3 clone GCC compiles badly (64-byte generic vectors in a
   32-byte target are split and spilled: 10-30x slower than the arithmetic).  They run
   exactly where that clone would run (dpe_avx2_path), and each lane performs the clone's
   operations in the clone's order, with the same FMA contractions, so the results are the
   clone's bits; the x86-64-v4 and default clones run as before.  Runtime dispatch, no
   -march: the build stays portable (as dpc_kmeans.h). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DPC_NO_CLONES)
#define DPE_HAVE_AVX2 1
#include <immintrin.h>
#define DPE_AVX2 __attribute__((target("avx2,fma")))
/* 1 where the target_clones resolver picks the x86-64-v3 clone (v3, not v4). */
static inline int dpe_avx2_path(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v3") && !__builtin_cpu_supports("x86-64-v4");
}
#else
#define DPE_HAVE_AVX2 0
#endif
/* The body of a dispatching function: NAME##_avx2 ARGS where the x86-64-v3 clone would run,
   else the clones NAME##_clones ARGS (void functions). */
#if DPE_HAVE_AVX2
#define DPE_DISPATCH(name, args)                    \
    do {                                            \
        if (dpe_avx2_path()) name##_avx2 args;      \
        else name##_clones args;                    \
    } while (0)
#else
#define DPE_DISPATCH(name, args) name##_clones args
#endif
/* 8 doubles; unaligned, may alias double.  Two of them make the 16 fixed lanes.  GCC
   lowers the arithmetic to zmm / 2 ymm / 4 xmm per clone; the lane order is the same. */
typedef double dpe_v8 __attribute__((vector_size(64), aligned(8), __may_alias__));
#define DPE_LD(p) (*(const dpe_v8 *)(p))
#define DPE_ST(p, v) (*(dpe_v8 *)(p) = (v))
/* Compiler-only barrier between the loads of a register block and its FMAs: a value
   used by several FMAs is then kept in a register instead of being re-read from L1 as
   a memory operand of each FMA (loads, not FMAs, bound these loops).  No instruction. */
#define DPE_KEEP_LOADS() __asm__ __volatile__("" ::: "memory")

/* exp(x) for x <= 0 (log-sum-exp arguments); 0 below -708; branch-free, vectorisable.
   Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, Taylor to degree 13 (< 1e-17). */
static inline double dpe_exp_neg(double x)
{
    const double SHIFT = 6755399441055744.0;              /* 1.5 * 2^52 */
    double xc = x < -708.0 ? -708.0 : x;
    double t = xc * 1.4426950408889634 + SHIFT;
    double n = t - SHIFT;
    double r = (xc - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t ti;
    uint64_t bits;      /* the exponent field, shifted as unsigned (no signed-shift UB) */
    memcpy(&ti, &t, 8);
    bits = (uint64_t)(ti - 0x4338000000000000LL + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, 8);
    double res = p * scale;
    return x < -708.0 ? 0.0 : res;
}

/* log(2^ed m) for m in [sqrt(1/2), sqrt(2)] and an integer-valued ed: the polynomial shared by
   dpe_log_pos and the float32 path's dpf_log_pos (log m = 2 atanh(z), z = (m-1)/(m+1)). */
static inline double dpe_log_reduced(double m, double ed)
{
    double z = (m - 1.0) / (m + 1.0);
    double z2 = z * z;
    double q = 2.0 / 23.0;
    q = q * z2 + 2.0 / 21.0;
    q = q * z2 + 2.0 / 19.0;
    q = q * z2 + 2.0 / 17.0;
    q = q * z2 + 2.0 / 15.0;
    q = q * z2 + 2.0 / 13.0;
    q = q * z2 + 2.0 / 11.0;
    q = q * z2 + 2.0 / 9.0;
    q = q * z2 + 2.0 / 7.0;
    q = q * z2 + 2.0 / 5.0;
    q = q * z2 + 2.0 / 3.0;
    return ed * 6.93147180369123816490e-01 + (2.0 * z + (z * z2 * q + ed * 1.90821492927058770002e-10));
}

/* log(s) for a positive normal double (here s in [1, K]); vectorisable.
   s = 2^e m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(z), z = (m-1)/(m+1), |z| < 0.1716. */
static inline double dpe_log_pos(double s)
{
    uint64_t b;
    memcpy(&b, &s, 8);
    int e = (int)(b >> 52) - 1023;
    uint64_t mb = (b & 0x000FFFFFFFFFFFFFULL) | 0x3FF0000000000000ULL;
    double m;
    memcpy(&m, &mb, 8);
    int big = m > 1.4142135623730951;
    m = big ? m * 0.5 : m;
    double ed = (double)(e + big);
    return dpe_log_reduced(m, ed);
}

/* Fixed-order sum of 16 lanes. */
static inline double dpe_hsum(const double *a)
{
    return (((a[0] + a[8]) + (a[4] + a[12])) + ((a[2] + a[10]) + (a[6] + a[14])))
         + (((a[1] + a[9]) + (a[5] + a[13])) + ((a[3] + a[11]) + (a[7] + a[15])));
}

/* The same tree as dpe_hsum, as a halving reduction: h = a[0:8] + a[8:16],
   q = h[0:4] + h[4:8], s = q[0:2] + q[2:4], s[0] + s[1].  Bit-identical to dpe_hsum. */
typedef double dpe_v4 __attribute__((vector_size(32), aligned(8), __may_alias__));
typedef double dpe_v2 __attribute__((vector_size(16), aligned(8), __may_alias__));
DPE_CLONES static void dpe_hsum_add(const double *la, ptrdiff_t m, double *out)
{
    ptrdiff_t e;
    for (e = 0; e < m; e++, la += DPE_L) {
        double h[8], q[4];
        DPE_ST(h, DPE_LD(la) + DPE_LD(la + 8));
        *(dpe_v4 *)q = *(const dpe_v4 *)h + *(const dpe_v4 *)(h + 4);
        dpe_v2 s = *(const dpe_v2 *)q + *(const dpe_v2 *)(q + 2);
        out[e] += s[0] + s[1];
    }
}

#endif /* DPC_SIMD_H */
