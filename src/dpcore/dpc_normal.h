/*
 * dpc_normal.h -- continuous samplers on top of dpc_rng.h.
 *
 * Standard normal: the Marsaglia-Tsang (2000) ziggurat with 256 strips.  The
 * strip edges are computed once at module import (dpc_normal_init) by
 * solving for the base-strip edge r so that the recursion closes exactly in
 * double precision, instead of trusting truncated published constants.  Each
 * attempt spends one 64-bit word: bits 0-7 choose the strip, bit 8 the sign,
 * bits 11-63 give a 53-bit uniform.  The tail beyond r uses Marsaglia's
 * exact exponential-rejection method.  The method is exact in distribution
 * up to double rounding of the tables and of exp/log.
 *
 * These are floating-point samplers: they are fine for research and for
 * tests, but floating-point Laplace/Gaussian noise is open to the Mironov
 * (2012) least-significant-bit attack.  Use the exact discrete samplers
 * (dpc_dgauss.h) when noise must have no floating-point attack surface.
 */
#ifndef DPC_NORMAL_H
#define DPC_NORMAL_H

#include <math.h>
#include <string.h>
#include "dpc_rng.h"

#define DPC_ZIG_N 256

static double dpc_zig_x[DPC_ZIG_N + 1];
static double dpc_zig_f[DPC_ZIG_N + 1];
static double dpc_zig_r;

/* Unnormalised density exp(-x^2/2) and its tail area beyond r. */
static double dpc_zig_close(double r, double *xs)
{
    const double fr = exp(-0.5 * r * r);
    const double v = r * fr + sqrt(M_PI / 2.0) * erfc(r / M_SQRT2);
    int i;
    xs[0] = v / fr;
    xs[1] = r;
    for (i = 2; i < DPC_ZIG_N; i++) {
        double t = v / xs[i - 1] + exp(-0.5 * xs[i - 1] * xs[i - 1]);
        if (t >= 1.0) return 1.0;        /* r too small: strips overshoot */
        xs[i] = sqrt(-2.0 * log(t));
    }
    xs[DPC_ZIG_N] = 0.0;
    /* residual of the top strip (> 0: r too small, < 0: r too large) */
    return v - xs[DPC_ZIG_N - 1] * (1.0 - exp(-0.5 * xs[DPC_ZIG_N - 1] * xs[DPC_ZIG_N - 1]));
}

static void dpc_normal_init(void)
{
    double lo = 3.0, hi = 4.0, mid;
    int it, i;
    for (it = 0; it < 200; it++) {
        mid = 0.5 * (lo + hi);
        if (mid == lo || mid == hi) break;
        if (dpc_zig_close(mid, dpc_zig_x) > 0.0) lo = mid; else hi = mid;
    }
    dpc_zig_r = hi;
    dpc_zig_close(hi, dpc_zig_x);
    for (i = 0; i <= DPC_ZIG_N; i++) dpc_zig_f[i] = exp(-0.5 * dpc_zig_x[i] * dpc_zig_x[i]);
}

static inline double dpc_normal(dpc_stream *s)
{
    for (;;) {
        const uint64_t u = dpc_next_u64(s);
        const int i = (int)(u & 0xFF);
        const int neg = (int)((u >> 8) & 1);
        double z = (double)(u >> 11) * 0x1.0p-53 * dpc_zig_x[i];
        if (__builtin_expect(z < dpc_zig_x[i + 1], 1)) {
            /* -z when bit 8 is set, written into the sign bit: the same value as the
             * branch on a random bit, which mispredicted half the time */
            uint64_t bits;
            memcpy(&bits, &z, sizeof bits);
            bits |= (u & 0x100u) << 55;
            memcpy(&z, &bits, sizeof z);
            return z;
        }
        if (i == 0) {
            double a, b;
            do {
                a = -log1p(-dpc_uniform(s)) / dpc_zig_r;
                b = -log1p(-dpc_uniform(s));
            } while (b + b < a * a);
            z = dpc_zig_r + a;
            return neg ? -z : z;
        }
        if (dpc_zig_f[i] + dpc_uniform(s) * (dpc_zig_f[i + 1] - dpc_zig_f[i]) < exp(-0.5 * z * z))
            return neg ? -z : z;
    }
}

/* Laplace(0, scale): a random sign times scale * Exp(1), Exp(1) = -log(1-U). */
static inline double dpc_laplace(dpc_stream *s, double scale)
{
    const uint64_t u = dpc_next_u64(s);
    const double e = -log1p(-(double)(u >> 11) * 0x1.0p-53);
    return (u & 1u) ? -scale * e : scale * e;
}

#endif /* DPC_NORMAL_H */
