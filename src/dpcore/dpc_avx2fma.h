/*
 * dpc_avx2fma.h -- the switch of the hand-written AVX2 + FMA paths that have an explicit-fma
 * portable twin giving the same bits (dpc_rowprod.h, dpc_cliprows.h, dpc_basis.h): whether the
 * paths are compiled here, their functions' target attribute, and whether this CPU runs them
 * (checked at run time: no -march, the build stays portable).
 *
 *   DPC_HAVE_AVX2FMA   1 where the paths are compiled (x86-64, GCC, clones not disabled)
 *   DPC_AVX2FMA        the target attribute of a path's functions
 *   dpc_avx2fma()      1 where this CPU runs them (always 0 where they are not compiled)
 *   DPC_AVX512         the target attribute of the AVX-512 paths (compiled with the AVX2 ones)
 *   dpc_avx512()       1 where this CPU (and its OS: the zmm state) runs them
 *
 * The AVX-512 paths (dpc_rowprod.h, dpc_basis.h) run the same fma chains in the same order as
 * the AVX2 and portable ones, 8 lanes a register (one row of a block of 8 columns) with the
 * broadcast folded into the fma: the same bits, fewer instructions (10-25 % faster on a Zen 4
 * core, whose 512-bit fma is two 256-bit halves; up to 2x on cores with two 512-bit units).
 */
#ifndef DPC_AVX2FMA_H
#define DPC_AVX2FMA_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DPC_NO_CLONES)
#define DPC_HAVE_AVX2FMA 1
#include <immintrin.h>
#define DPC_AVX2FMA __attribute__((target("avx2,fma")))

static inline int dpc_avx2fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#define DPC_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* libgcc's check includes the OS's support of the zmm state (XCR0), not only CPUID. */
static inline int dpc_avx512(void)
{
    __builtin_cpu_init();
    return dpc_avx2fma() && __builtin_cpu_supports("avx512f");
}
#else
#define DPC_HAVE_AVX2FMA 0

static inline int dpc_avx2fma(void)
{
    return 0;
}

static inline int dpc_avx512(void)
{
    return 0;
}
#endif

#endif
