/*
 * dpc_avx2fma.h -- the switch of the hand-written AVX2 + FMA paths that have an explicit-fma
 * portable twin giving the same bits (dpc_rowprod.h, dpc_cliprows.h, dpc_basis.h): whether the
 * paths are compiled here, their functions' target attribute, and whether this CPU runs them
 * (checked at run time: no -march, the build stays portable).
 *
 *   DPC_HAVE_AVX2FMA   1 where the paths are compiled (x86-64, GCC, clones not disabled)
 *   DPC_AVX2FMA        the target attribute of a path's functions
 *   dpc_avx2fma()      1 where this CPU runs them (always 0 where they are not compiled)
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
#else
#define DPC_HAVE_AVX2FMA 0

static inline int dpc_avx2fma(void)
{
    return 0;
}
#endif

#endif
