"""Fused Gaussian-mixture E-step and moment accumulation (DP-EM, Park et al. 2017, Eq. 10-11).

One pass over ``X`` computes, per row, ``log N(x | mu_k, Sigma_k) + log pi_k`` for every
component, the log-sum-exp (per-row log-likelihood) and the responsibilities ``gamma_ik``
(Eq. 10), and accumulates the additive statistics of Eq. 11 into float64 partials::

    N_k  = sum_i gamma_ik          S1_k = sum_i gamma_ik x_i
    S2_k = sum_i gamma_ik x_i x_i^T (upper triangle only)          LL = sum_i log p(x_i)

The n x K responsibility matrix is never materialised.

Work layout (part of the reproducibility contract; change only with a changelog note)
--------------------------------------------------------------------------------
Rows are cut into chunks of ``CHUNK_SIZE`` consecutive rows.  Consecutive chunks are grouped
into ``n_blocks = block_count(n, d, K)`` blocks (at most ``MAX_BLOCKS``; fewer when the
K*d*d partials would exceed ``PARTIAL_BUDGET`` doubles, never fewer than ``MIN_BLOCKS``).
Block ``b`` owns row ``b`` of every partial array and walks its chunks in order; blocks are
handed to OpenMP threads with a dynamic schedule (a thread delayed by a busy core does not
hold the others back; which thread runs a block never affects its numbers).  The caller
sums the rows in block order, so the result is bit-identical for any thread count.
``block_count`` depends on ``(n, d, K)`` only.

Inside a chunk the rows are transposed into a float64 scratch ``Xt`` of shape
``(d, CHUNK_SIZE)`` (float32 input is upcast here), so every inner loop runs along rows and
vectorises.  Two code paths, chosen by ``d`` only (never by the thread count):

* ``d < BLAS_MIN_D``: hand-written loops (triangular multiply fused with the squared norm,
  register tiles of 16 rows), compiled for AVX-512 / AVX2 / baseline with ``target_clones``.
  For a triangular factor the centred 16-row tile is held in registers (code specialised for
  each constant d = 1..15); S2 is accumulated in 2 x 4 register blocks; the chunk load is
  unrolled per constant d.  These change the instruction stream, not the arithmetic: every
  sum keeps its order and its FMA contractions, so the results are bit-identical to the
  plain loops (which remain the path for a non-triangular factor);
* ``d >= BLAS_MIN_D``: ``dtrmm`` (or ``dgemm`` for a non-triangular factor) for the
  Mahalanobis products and ``dsyrk`` on sqrt(gamma)-scaled rows for S2, through
  ``scipy.linalg.cython_blas``.  The caller must hold BLAS to one thread.

Sums over rows inside a chunk use 16 fixed lanes combined in a fixed tree, so their
rounding does not depend on the SIMD width.  ``CHUNK_SIZE``, the 16 lanes, their tree and
``block_count`` are unchanged by the small-problem tuning (issue 4).  ``exp``/``log`` are vectorisable polynomial
versions (about 1 ulp); ``exp(x)`` for ``x < -708`` returns 0 (no denormals).
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.math cimport sqrt
from libc.stdlib cimport malloc, free
from scipy.linalg.cython_blas cimport dgemm, dsyrk, dtrmm

from .dpc_contract cimport DPC_BLAS_MIN_D, DPC_CHUNK_SIZE, DPC_LANES, dpc_block_count

# The contract constants are defined once, in dpc_contract.h (Python: _contract).
cdef Py_ssize_t _CHUNK = DPC_CHUNK_SIZE
cdef Py_ssize_t _LANES = DPC_LANES
cdef Py_ssize_t _BLAS_MIN_D = DPC_BLAS_MIN_D


cdef extern from *:
    """
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
    #define DPE_MAXD 15     /* largest d with a register-tile specialisation (< BLAS_MIN_D) */
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
        int64_t ti, bits;
        memcpy(&ti, &t, 8);
        bits = (ti - 0x4338000000000000LL + 1023) << 52;
        double scale;
        memcpy(&scale, &bits, 8);
        double res = p * scale;
        return x < -708.0 ? 0.0 : res;
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

    /* One 16-row tile of the triangular Mahalanobis product with the centred rows held in
       registers (no D scratch).  Same operations, in the same order, as the generic loop
       below (x - mu, then y_j = sum_{i <= j} d_i P_ij from i = 0, then m += y_j^2), so the
       result is bit-identical; inlined with a constant d so that the loops unroll fully. */
    static inline __attribute__((always_inline)) void
    dpe_logp_tri_tiles(const double *Xt, const ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                       const double *mu, const double *P, double c, double *out)
    {
        ptrdiff_t r, i, j;
        for (r = 0; r < npad; r += DPE_L) {
            dpe_v8 c0[DPE_MAXD], c1[DPE_MAXD];
            dpe_v8 m0 = {0}, m1 = {0};
            #pragma GCC unroll 16
            for (i = 0; i < d; i++) {
                c0[i] = DPE_LD(Xt + i * ld + r) - mu[i];
                c1[i] = DPE_LD(Xt + i * ld + r + 8) - mu[i];
            }
            #pragma GCC unroll 16
            for (j = 0; j < d; j++) {
                /* y starts at +0 and every term is added as y += c_i p: unrolled, a bare
                   first product would let the FMA contraction pick the other multiply of
                   the first sum (0 + t rounds as t; only the sign of a zero y can differ,
                   and y enters as y * y) */
                dpe_v8 y0 = {0}, y1 = {0};
                #pragma GCC unroll 16
                for (i = 0; i <= j; i++) {
                    double p = P[i * d + j];
                    y0 += c0[i] * p;
                    y1 += c1[i] * p;
                }
                m0 += y0 * y0;
                m1 += y1 * y1;
            }
            DPE_ST(out + r, c - 0.5 * m0);
            DPE_ST(out + r + 8, c - 0.5 * m1);
        }
    }

    /* out[r] = c - 0.5 * || (x_r - mu) P ||^2 for r < npad (npad % 16 == 0).
       Xt: (d, ld) rows-along-lanes; P: (d, d) row-major; tri: P upper triangular.
       D: (d, ld) scratch, used only for a non-triangular P or d > DPE_MAXD. */
    DPE_CLONES static void dpe_logp_small(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                          const double *mu, const double *P, int tri, double c,
                                          double *D, double *out)
    {
        ptrdiff_t i, j, r;
        if (tri) {
            switch (d) {
    #define DPE_LOGP_CASE(n) case n: dpe_logp_tri_tiles(Xt, n, ld, npad, mu, P, c, out); return;
            DPE_LOGP_CASE(1) DPE_LOGP_CASE(2) DPE_LOGP_CASE(3) DPE_LOGP_CASE(4) DPE_LOGP_CASE(5)
            DPE_LOGP_CASE(6) DPE_LOGP_CASE(7) DPE_LOGP_CASE(8) DPE_LOGP_CASE(9) DPE_LOGP_CASE(10)
            DPE_LOGP_CASE(11) DPE_LOGP_CASE(12) DPE_LOGP_CASE(13) DPE_LOGP_CASE(14) DPE_LOGP_CASE(15)
    #undef DPE_LOGP_CASE
            default: break;
            }
        }
        for (i = 0; i < d; i++) {
            const double *x = Xt + i * ld;
            double *dd = D + i * ld;
            double m = mu[i];
            for (r = 0; r < npad; r++) dd[r] = x[r] - m;
        }
        for (r = 0; r < npad; r += DPE_L) {
            dpe_v8 m0 = {0}, m1 = {0};
            for (j = 0; j < d; j++) {
                ptrdiff_t iend = tri ? j + 1 : d;
                double p = P[j];
                dpe_v8 y0 = DPE_LD(D + r) * p, y1 = DPE_LD(D + r + 8) * p;
                for (i = 1; i < iend; i++) {
                    const double *di = D + i * ld + r;
                    p = P[i * d + j];
                    y0 += DPE_LD(di) * p;
                    y1 += DPE_LD(di + 8) * p;
                }
                m0 += y0 * y0;
                m1 += y1 * y1;
            }
            DPE_ST(out + r, c - 0.5 * m0);
            DPE_ST(out + r + 8, c - 0.5 * m1);
        }
    }

    /* Xt[i, r] = (double) X[r, i] for r < nr, 0 on the padding r in [nr, npad).  Inlined
       with a constant d (d <= DPE_MAXD) so that the per-row loop unrolls; plain copies. */
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

    /* D = Xt - mu (row-wise), for the BLAS path. */
    DPE_CLONES static void dpe_center(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                      const double *mu, double *D)
    {
        ptrdiff_t i, r;
        for (i = 0; i < d; i++) {
            const double *x = Xt + i * ld;
            double *dd = D + i * ld;
            double m = mu[i];
            for (r = 0; r < npad; r++) dd[r] = x[r] - m;
        }
    }

    /* out[r] = c - 0.5 * sum_j Y[j, r]^2 (Y = (X - mu) P from BLAS, stored (d, ld)). */
    DPE_CLONES static void dpe_logp_from_y(const double *Y, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                           double c, double *out)
    {
        ptrdiff_t j, r;
        for (r = 0; r < npad; r++) out[r] = 0.0;
        for (j = 0; j < d; j++) {
            const double *y = Y + j * ld;
            for (r = 0; r < npad; r++) out[r] += y[r] * y[r];
        }
        for (r = 0; r < npad; r++) out[r] = c - 0.5 * out[r];
    }

    /* mx[r] = max_k L[k, r] and s[r] = 0, the shared start of both log-sum-exps. */
    static inline void dpe_colmax(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                                  double *mx, double *s)
    {
        ptrdiff_t k, r;
        for (r = 0; r < npad; r++) { mx[r] = L[r]; s[r] = 0.0; }
        for (k = 1; k < K; k++) {
            const double *Lk = L + k * ld;
            for (r = 0; r < npad; r++) mx[r] = Lk[r] > mx[r] ? Lk[r] : mx[r];
        }
    }

    /* Log-sum-exp over K rows of L (K, ld): L becomes the responsibilities, ll the per-row
       log-likelihood; columns nr..npad-1 of L are set to 0. tmp: 2 * ld doubles. */
    DPE_CLONES static void dpe_lse(double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t nr, ptrdiff_t npad,
                                   double *ll, double *tmp)
    {
        ptrdiff_t k, r;
        double *mx = tmp, *s = tmp + ld;
        dpe_colmax(L, K, ld, npad, mx, s);
        for (k = 0; k < K; k++) {
            double *Lk = L + k * ld;
            for (r = 0; r < npad; r++) {
                double e = dpe_exp_neg(Lk[r] - mx[r]);
                Lk[r] = e;
                s[r] += e;
            }
        }
        for (r = 0; r < npad; r++) {
            ll[r] = mx[r] + dpe_log_pos(s[r]);
            s[r] = 1.0 / s[r];
        }
        for (k = 0; k < K; k++) {
            double *Lk = L + k * ld;
            for (r = 0; r < npad; r++) Lk[r] *= s[r];
            for (r = nr; r < npad; r++) Lk[r] = 0.0;
        }
    }

    /* Per-row log-likelihood only (L untouched), for predict_log_resp. */
    DPE_CLONES static void dpe_lse_ll(const double *L, ptrdiff_t K, ptrdiff_t ld, ptrdiff_t npad,
                                      double *ll, double *tmp)
    {
        ptrdiff_t k, r;
        double *mx = tmp, *s = tmp + ld;
        dpe_colmax(L, K, ld, npad, mx, s);
        for (k = 0; k < K; k++) {
            const double *Lk = L + k * ld;
            for (r = 0; r < npad; r++) s[r] += dpe_exp_neg(Lk[r] - mx[r]);
        }
        for (r = 0; r < npad; r++) ll[r] = mx[r] + dpe_log_pos(s[r]);
    }

    /* Moments of one component over one chunk, added into 16-lane accumulators that live
       for a whole block (one horizontal sum per block, not per chunk).  la layout:
       [nk: 16][s1: d x 16][s2 upper pairs (i <= j, row by row): d(d+1)/2 x 16].
       npad % 16 == 0 and g is zero on the padding. */
    DPE_CLONES static void dpe_moments_small(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                             const double *g, double *W, double *la)
    {
        ptrdiff_t i, j, r;
        double *lp = la;
        dpe_v8 a0 = DPE_LD(lp), a1 = DPE_LD(lp + 8);
        for (r = 0; r < npad; r += DPE_L) {
            a0 += DPE_LD(g + r);
            a1 += DPE_LD(g + r + 8);
        }
        DPE_ST(lp, a0); DPE_ST(lp + 8, a1);
        lp += DPE_L;
        for (i = 0; i < d; i++, lp += DPE_L) {
            const double *x = Xt + i * ld;
            double *w = W + i * ld;
            a0 = DPE_LD(lp); a1 = DPE_LD(lp + 8);
            for (r = 0; r < npad; r += DPE_L) {
                dpe_v8 v0 = DPE_LD(g + r) * DPE_LD(x + r), v1 = DPE_LD(g + r + 8) * DPE_LD(x + r + 8);
                DPE_ST(w + r, v0); DPE_ST(w + r + 8, v1);
                a0 += v0; a1 += v1;
            }
            DPE_ST(lp, a0); DPE_ST(lp + 8, a1);
        }
        /* S2 upper pairs, accumulator of (i, j) at lp + DPE_L * (off(i) + j - i) with
           off(i) = i d - i (i - 1) / 2.  Rows are taken two at a time and columns two at a
           time (2 x 2 register block: 8 loads per 8 FMAs per tile).  Every accumulator
           still adds its tiles in row order, so the grouping does not change the result. */
        for (i = 0; i < d; i += 2) {
            const double *w = W + i * ld, *xi = Xt + i * ld;
            double *ai = lp + DPE_L * (i * d - i * (i - 1) / 2);
            a0 = DPE_LD(ai); a1 = DPE_LD(ai + 8);
            for (r = 0; r < npad; r += DPE_L) {
                a0 += DPE_LD(w + r) * DPE_LD(xi + r);
                a1 += DPE_LD(w + r + 8) * DPE_LD(xi + r + 8);
            }
            DPE_ST(ai, a0); DPE_ST(ai + 8, a1);
            if (i + 1 == d) break;
            {
                const double *v = w + ld;                   /* row i + 1 */
                double *bi = ai + DPE_L * (d - i);          /* accumulator of (i + 1, i + 1) */
                for (j = i + 1; j + 3 < d; j += 4) {
                    /* 2 x 4 block: 12 loads per 16 FMAs per tile */
                    const double *xj = Xt + j * ld;
                    double *pa = ai + DPE_L * (j - i), *pb = bi + DPE_L * (j - i - 1);
                    dpe_v8 e0 = DPE_LD(pa), e1 = DPE_LD(pa + 8), e2 = DPE_LD(pa + 16), e3 = DPE_LD(pa + 24);
                    dpe_v8 e4 = DPE_LD(pa + 32), e5 = DPE_LD(pa + 40), e6 = DPE_LD(pa + 48), e7 = DPE_LD(pa + 56);
                    dpe_v8 f0 = DPE_LD(pb), f1 = DPE_LD(pb + 8), f2 = DPE_LD(pb + 16), f3 = DPE_LD(pb + 24);
                    dpe_v8 f4 = DPE_LD(pb + 32), f5 = DPE_LD(pb + 40), f6 = DPE_LD(pb + 48), f7 = DPE_LD(pb + 56);
                    for (r = 0; r < npad; r += DPE_L) {
                        dpe_v8 w0 = DPE_LD(w + r), w1 = DPE_LD(w + r + 8);
                        dpe_v8 v0 = DPE_LD(v + r), v1 = DPE_LD(v + r + 8);
                        dpe_v8 y0 = DPE_LD(xj + r), y1 = DPE_LD(xj + r + 8);
                        dpe_v8 y2 = DPE_LD(xj + ld + r), y3 = DPE_LD(xj + ld + r + 8);
                        dpe_v8 y4 = DPE_LD(xj + 2 * ld + r), y5 = DPE_LD(xj + 2 * ld + r + 8);
                        dpe_v8 y6 = DPE_LD(xj + 3 * ld + r), y7 = DPE_LD(xj + 3 * ld + r + 8);
                        DPE_KEEP_LOADS();
                        e0 += w0 * y0; e1 += w1 * y1; f0 += v0 * y0; f1 += v1 * y1;
                        e2 += w0 * y2; e3 += w1 * y3; f2 += v0 * y2; f3 += v1 * y3;
                        e4 += w0 * y4; e5 += w1 * y5; f4 += v0 * y4; f5 += v1 * y5;
                        e6 += w0 * y6; e7 += w1 * y7; f6 += v0 * y6; f7 += v1 * y7;
                    }
                    DPE_ST(pa, e0); DPE_ST(pa + 8, e1); DPE_ST(pa + 16, e2); DPE_ST(pa + 24, e3);
                    DPE_ST(pa + 32, e4); DPE_ST(pa + 40, e5); DPE_ST(pa + 48, e6); DPE_ST(pa + 56, e7);
                    DPE_ST(pb, f0); DPE_ST(pb + 8, f1); DPE_ST(pb + 16, f2); DPE_ST(pb + 24, f3);
                    DPE_ST(pb + 32, f4); DPE_ST(pb + 40, f5); DPE_ST(pb + 48, f6); DPE_ST(pb + 56, f7);
                }
                for (; j + 1 < d; j += 2) {
                    const double *x0 = Xt + j * ld, *x1 = x0 + ld;
                    double *p00 = ai + DPE_L * (j - i), *p01 = p00 + DPE_L;
                    double *p10 = bi + DPE_L * (j - i - 1), *p11 = p10 + DPE_L;
                    dpe_v8 e00 = DPE_LD(p00), f00 = DPE_LD(p00 + 8);
                    dpe_v8 e01 = DPE_LD(p01), f01 = DPE_LD(p01 + 8);
                    dpe_v8 e10 = DPE_LD(p10), f10 = DPE_LD(p10 + 8);
                    dpe_v8 e11 = DPE_LD(p11), f11 = DPE_LD(p11 + 8);
                    for (r = 0; r < npad; r += DPE_L) {
                        dpe_v8 w0 = DPE_LD(w + r), w1 = DPE_LD(w + r + 8);
                        dpe_v8 v0 = DPE_LD(v + r), v1 = DPE_LD(v + r + 8);
                        dpe_v8 y0 = DPE_LD(x0 + r), y1 = DPE_LD(x0 + r + 8);
                        dpe_v8 z0 = DPE_LD(x1 + r), z1 = DPE_LD(x1 + r + 8);
                        DPE_KEEP_LOADS();
                        e00 += w0 * y0; f00 += w1 * y1;
                        e01 += w0 * z0; f01 += w1 * z1;
                        e10 += v0 * y0; f10 += v1 * y1;
                        e11 += v0 * z0; f11 += v1 * z1;
                    }
                    DPE_ST(p00, e00); DPE_ST(p00 + 8, f00);
                    DPE_ST(p01, e01); DPE_ST(p01 + 8, f01);
                    DPE_ST(p10, e10); DPE_ST(p10 + 8, f10);
                    DPE_ST(p11, e11); DPE_ST(p11 + 8, f11);
                }
                if (j < d) {
                    const double *x0 = Xt + j * ld;
                    double *p00 = ai + DPE_L * (j - i), *p10 = bi + DPE_L * (j - i - 1);
                    dpe_v8 e00 = DPE_LD(p00), f00 = DPE_LD(p00 + 8);
                    dpe_v8 e10 = DPE_LD(p10), f10 = DPE_LD(p10 + 8);
                    for (r = 0; r < npad; r += DPE_L) {
                        dpe_v8 y0 = DPE_LD(x0 + r), y1 = DPE_LD(x0 + r + 8);
                        e00 += DPE_LD(w + r) * y0; f00 += DPE_LD(w + r + 8) * y1;
                        e10 += DPE_LD(v + r) * y0; f10 += DPE_LD(v + r + 8) * y1;
                    }
                    DPE_ST(p00, e00); DPE_ST(p00 + 8, f00);
                    DPE_ST(p10, e10); DPE_ST(p10 + 8, f10);
                }
            }
        }
    }

    /* Block end: reduce the lane accumulators of one component into its partial row. */
    static void dpe_lanes_flush(const double *la, ptrdiff_t d, double *nk, double *s1, double *s2)
    {
        ptrdiff_t i;
        dpe_hsum_add(la, 1, nk);
        la += DPE_L;
        dpe_hsum_add(la, d, s1);
        la += d * DPE_L;
        for (i = 0; i < d; la += (d - i) * DPE_L, i++)
            dpe_hsum_add(la, d - i, s2 + i * d + i);
    }

    /* BLAS path: nk, s1 summed over the chunk in 16 lanes; W[i, r] = sqrt(g_r) x_ir for dsyrk. */
    DPE_CLONES static void dpe_moments_prep(const double *Xt, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad,
                                            const double *g, double *sg, double *W,
                                            double *nk, double *s1)
    {
        ptrdiff_t i, r;
        double tmp[DPE_L];
        dpe_v8 a0 = {0}, a1 = {0};
        for (r = 0; r < npad; r++) sg[r] = __builtin_sqrt(g[r]);
        for (r = 0; r < npad; r += DPE_L) {
            a0 += DPE_LD(g + r);
            a1 += DPE_LD(g + r + 8);
        }
        DPE_ST(tmp, a0); DPE_ST(tmp + 8, a1);
        *nk += dpe_hsum(tmp);
        for (i = 0; i < d; i++) {
            const double *x = Xt + i * ld;
            double *w = W + i * ld;
            a0 = (dpe_v8){0}; a1 = (dpe_v8){0};
            for (r = 0; r < npad; r += DPE_L) {
                dpe_v8 x0 = DPE_LD(x + r), x1 = DPE_LD(x + r + 8);
                a0 += DPE_LD(g + r) * x0;
                a1 += DPE_LD(g + r + 8) * x1;
                DPE_ST(w + r, DPE_LD(sg + r) * x0);
                DPE_ST(w + r + 8, DPE_LD(sg + r + 8) * x1);
            }
            DPE_ST(tmp, a0); DPE_ST(tmp + 8, a1);
            s1[i] += dpe_hsum(tmp);
        }
    }
    """
    void dpe_logp_small(const double *Xt, Py_ssize_t d, Py_ssize_t ld, Py_ssize_t npad,
                        const double *mu, const double *P, int tri, double c,
                        double *D, double *out) noexcept nogil
    void dpe_load_f64(const double *X, Py_ssize_t d, Py_ssize_t nr, Py_ssize_t npad, Py_ssize_t ld,
                      double *Xt) noexcept nogil
    void dpe_load_f32(const float *X, Py_ssize_t d, Py_ssize_t nr, Py_ssize_t npad, Py_ssize_t ld,
                      double *Xt) noexcept nogil
    void dpe_center(const double *Xt, Py_ssize_t d, Py_ssize_t ld, Py_ssize_t npad,
                    const double *mu, double *D) noexcept nogil
    void dpe_logp_from_y(const double *Y, Py_ssize_t d, Py_ssize_t ld, Py_ssize_t npad,
                         double c, double *out) noexcept nogil
    void dpe_lse(double *L, Py_ssize_t K, Py_ssize_t ld, Py_ssize_t nr, Py_ssize_t npad,
                 double *ll, double *tmp) noexcept nogil
    void dpe_lse_ll(const double *L, Py_ssize_t K, Py_ssize_t ld, Py_ssize_t npad,
                    double *ll, double *tmp) noexcept nogil
    double dpe_exp_neg(double x) noexcept nogil
    double dpe_log_pos(double s) noexcept nogil
    void dpe_moments_small(const double *Xt, Py_ssize_t d, Py_ssize_t ld, Py_ssize_t npad,
                           const double *g, double *W, double *la) noexcept nogil
    void dpe_lanes_flush(const double *la, Py_ssize_t d, double *nk, double *s1,
                         double *s2) noexcept nogil
    void dpe_moments_prep(const double *Xt, Py_ssize_t d, Py_ssize_t ld, Py_ssize_t npad,
                          const double *g, double *sg, double *W, double *nk,
                          double *s1) noexcept nogil


def block_count(Py_ssize_t n, Py_ssize_t d, Py_ssize_t K):
    """Number of partial-statistic rows (blocks) for ``n`` rows; independent of threads.

    Equivalent to: ``min(ceil(n / CHUNK_SIZE), max(MIN_BLOCKS, min(MAX_BLOCKS,
    PARTIAL_BUDGET // (K * (d * d + d + 1)))))`` (0 when n == 0), i.e.
    ``_contract.block_count(n, K * (d * d + d + 1))``.
    """
    return dpc_block_count(n, K * (d * d + d + 1))


cdef inline Py_ssize_t _lanes_size(Py_ssize_t d) noexcept nogil:
    # per component: nk, s1 (d), s2 upper pairs (d (d + 1) / 2), 16 lanes each
    return (1 + d + d * (d + 1) // 2) * _LANES


cdef inline Py_ssize_t _scratch_size(Py_ssize_t d, Py_ssize_t K) noexcept nogil:
    # Xt, D, W: (d, CHUNK) each; L: (K, CHUNK); ll, tmp (2), sg: CHUNK each;
    # small-d path: K lane-accumulator sets (block lifetime)
    cdef Py_ssize_t n = (3 * d + K + 4) * _CHUNK
    if d < _BLAS_MIN_D:
        n += K * _lanes_size(d)
    return n


cdef inline void _load_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr, Py_ssize_t npad,
                             Py_ssize_t d, double *Xt) noexcept nogil:
    """Xt[i, r] = X[r0 + r, i] as float64, zero on the padding r in [nr, npad)."""
    if floating is double:
        dpe_load_f64(X + r0 * d, d, nr, npad, _CHUNK, Xt)
    else:
        dpe_load_f32(X + r0 * d, d, nr, npad, _CHUNK, Xt)


cdef inline Py_ssize_t _load_chunk_domain(const floating *X, Py_ssize_t r0, Py_ssize_t nr,
                                          Py_ssize_t npad, Py_ssize_t d, const double *dom,
                                          double inv_scale, double target,
                                          double *Xt) noexcept nogil:
    """Load rows mapped into the declared domain's unit ball; return how many were clipped.

    ``dom`` holds (lower, upper, center) rows of length d.  Each row is clipped to
    [lower, upper], centred, multiplied by ``inv_scale`` and, if its norm exceeds 1,
    rescaled to norm ``target`` (< 1).  Equivalent to ``_preprocess.scale_and_clip`` in
    float64 (the declared-bound clipping of DP-EM Sec. 3), without a copy of X.
    """
    cdef Py_ssize_t r, i, n_clipped = 0
    cdef const floating *row
    cdef const double *lo = dom
    cdef const double *hi = dom + d
    cdef const double *ctr = dom + 2 * d
    cdef double v, s2, f
    for r in range(nr):
        row = X + (r0 + r) * d
        s2 = 0.0
        for i in range(d):
            v = <double> row[i]
            v = lo[i] if v < lo[i] else (hi[i] if v > hi[i] else v)
            v = (v - ctr[i]) * inv_scale
            Xt[i * _CHUNK + r] = v
            s2 += v * v
        if s2 > 1.0:
            f = target / sqrt(s2)
            for i in range(d):
                Xt[i * _CHUNK + r] *= f
            n_clipped += 1
    for i in range(d):
        for r in range(nr, npad):
            Xt[i * _CHUNK + r] = 0.0
    return n_clipped


cdef void _logp_chunk(const double *Xt, Py_ssize_t npad, Py_ssize_t d, Py_ssize_t K,
                      const double *means, const double *prec_chol, const double *log_const,
                      int tri, double *D, double *W, double *L) noexcept nogil:
    """L[k, r] = log pi_k + log N(x_r | mu_k, Sigma_k) for the rows of one chunk."""
    cdef Py_ssize_t k
    cdef int m = <int> npad, dd = <int> d, ld = <int> _CHUNK
    cdef double one = 1.0, zero = 0.0
    cdef const double *P
    for k in range(K):
        P = prec_chol + k * d * d
        if d < _BLAS_MIN_D:
            dpe_logp_small(Xt, d, _CHUNK, npad, means + k * d, P, tri, log_const[k],
                           D, L + k * _CHUNK)
        else:
            dpe_center(Xt, d, _CHUNK, npad, means + k * d, D)
            if tri:
                # D(npad x d, col-major) := D @ P_k; P_k row-major is the lower factor P_k^T
                dtrmm(b'R', b'L', b'T', b'N', &m, &dd, &one, <double *> P, &dd, D, &ld)
                dpe_logp_from_y(D, d, _CHUNK, npad, log_const[k], L + k * _CHUNK)
            else:
                dgemm(b'N', b'T', &m, &dd, &dd, &one, D, &ld, <double *> P, &dd, &zero, W, &ld)
                dpe_logp_from_y(W, d, _CHUNK, npad, log_const[k], L + k * _CHUNK)


cdef Py_ssize_t _estep_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr,
                             Py_ssize_t d, Py_ssize_t K,
                             const double *means, const double *prec_chol, const double *log_const,
                             int tri, const double *dom, double inv_scale, double target,
                             double *nk, double *s1, double *s2, double *ll_acc,
                             double *buf) noexcept nogil:
    """E-step and moments of rows [r0, r0 + nr) added into one block's partials."""
    cdef Py_ssize_t npad = (nr + _LANES - 1) // _LANES * _LANES
    cdef Py_ssize_t k, r
    cdef double *Xt = buf
    cdef double *D = Xt + d * _CHUNK
    cdef double *W = D + d * _CHUNK
    cdef double *L = W + d * _CHUNK
    cdef double *ll = L + K * _CHUNK
    cdef double *tmp = ll + _CHUNK
    cdef double *sg = tmp + 2 * _CHUNK
    cdef double *lanes = sg + _CHUNK
    cdef int dd = <int> d, m = <int> npad, ld = <int> _CHUNK
    cdef double one = 1.0, acc = 0.0
    cdef Py_ssize_t n_clipped = 0

    if dom == NULL:
        _load_chunk(X, r0, nr, npad, d, Xt)
    else:
        n_clipped = _load_chunk_domain(X, r0, nr, npad, d, dom, inv_scale, target, Xt)
    _logp_chunk(Xt, npad, d, K, means, prec_chol, log_const, tri, D, W, L)
    dpe_lse(L, K, _CHUNK, nr, npad, ll, tmp)
    for r in range(nr):
        acc += ll[r]
    ll_acc[0] += acc
    for k in range(K):
        if d < _BLAS_MIN_D:
            dpe_moments_small(Xt, d, _CHUNK, npad, L + k * _CHUNK, W, lanes + k * _lanes_size(d))
        else:
            dpe_moments_prep(Xt, d, _CHUNK, npad, L + k * _CHUNK, sg, W, nk + k, s1 + k * d)
            # s2_k (row-major upper == col-major lower) += W^T W, W: npad x d col-major
            dsyrk(b'L', b'T', &dd, &m, &one, W, &ld, &one, s2 + k * d * d, &dd)
    return n_clipped


cdef void _estep_block(const floating *X, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K,
                       Py_ssize_t b, Py_ssize_t chunks_per_block,
                       const double *means, const double *prec_chol, const double *log_const,
                       int tri, const double *dom, double inv_scale, double target,
                       double *nk, double *s1, double *s2, double *ll_acc, long long *clipped,
                       double *buf) noexcept nogil:
    """Walk the chunks of block ``b`` in order, accumulating into its partial row."""
    cdef Py_ssize_t c, r0, k, i, nc
    cdef Py_ssize_t n_chunks = (n + _CHUNK - 1) // _CHUNK
    cdef Py_ssize_t c1 = min(n_chunks, (b + 1) * chunks_per_block)
    cdef Py_ssize_t nl = K * _lanes_size(d)
    cdef double *lanes = buf + (3 * d + K + 4) * _CHUNK
    if d < _BLAS_MIN_D:
        for i in range(nl):
            lanes[i] = 0.0
    for c in range(b * chunks_per_block, c1):
        r0 = c * _CHUNK
        nc = _estep_chunk(X, r0, min(_CHUNK, n - r0), d, K, means, prec_chol,
                          log_const, tri, dom, inv_scale, target, nk, s1, s2, ll_acc, buf)
        if clipped != NULL:
            clipped[0] += nc
    if d < _BLAS_MIN_D:
        for k in range(K):
            dpe_lanes_flush(lanes + k * _lanes_size(d), d, nk + k, s1 + k * d, s2 + k * d * d)


def estep_stats(const floating[:, ::1] X,           # IN  (n, d) data rows
                const double[:, ::1] means,         # IN  (K, d)
                const double[:, :, ::1] prec_chol,  # IN  (K, d, d) precision = P_k @ P_k.T
                const double[::1] log_const,        # IN  (K,) log pi_k + log|det P_k| - d/2 log(2 pi)
                double[:, ::1] part_nk,             # OUT (n_blocks, K)
                double[:, :, ::1] part_s1,          # OUT (n_blocks, K, d)
                double[:, :, :, ::1] part_s2,       # OUT (n_blocks, K, d, d) upper triangle; lower = 0
                double[::1] part_ll,                # OUT (n_blocks,)
                bint upper_triangular,              # all P_k upper triangular (sklearn convention)
                int n_threads,
                const double[:, ::1] domain=None,   # IN  (3, d) lower, upper, center; None = raw X
                double inv_scale=1.0,               # 1 / radius of the declared domain
                double clip_target=1.0,             # norm given to rows beyond the unit ball
                long long[::1] part_clipped=None):  # OUT (n_blocks,) rows clipped per block
    """Fused E-step (DP-EM Eq. 10) and Eq. 11 moments, as per-block float64 partials.

    ``n_blocks`` must equal ``block_count(n, d, K)``; the caller sums the partials over
    axis 0 in block order and mirrors ``S2``.  BLAS must be limited to one thread.

    With ``domain``, each row is first mapped into the unit ball of the declared domain
    (clip to the box, centre, scale, clip the norm) while it is loaded, so a private fit
    needs no transformed copy of ``X``; ``means``/``prec_chol`` are then in those units.

    Equivalent to: ``lp = log_gaussian_prob(X) + log_w; ll = logsumexp(lp, 1);
    g = exp(lp - ll[:, None]); (g.sum(0), g.T @ X, einsum('nk,ni,nj->kij', g, X, X), ll.sum())``
    split over blocks of rows.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t nb = block_count(n, d, K)
    cdef Py_ssize_t n_chunks = (n + _CHUNK - 1) // _CHUNK
    cdef Py_ssize_t cpb, b
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    cdef int tri = 1 if upper_triangular else 0
    cdef const double *dom = NULL
    cdef long long *clip_base = NULL
    if (means.shape[1] != d or prec_chol.shape[0] != K or prec_chol.shape[1] != d
            or prec_chol.shape[2] != d or log_const.shape[0] != K):
        raise ValueError("parameter shapes do not match X")
    if domain is not None:
        if domain.shape[0] != 3 or domain.shape[1] != d:
            raise ValueError("domain must have shape (3, n_features)")
        if part_clipped is None or part_clipped.shape[0] != nb:
            raise ValueError("part_clipped must have n_blocks entries when domain is given")
        if not (inv_scale > 0.0 and 0.0 < clip_target <= 1.0):
            raise ValueError("inv_scale must be > 0 and clip_target in (0, 1]")
    if (part_nk.shape[0] != nb or part_nk.shape[1] != K or part_s1.shape[0] != nb or part_s2.shape[0] != nb
            or part_ll.shape[0] != nb or part_s1.shape[1] != K or part_s1.shape[2] != d
            or part_s2.shape[1] != K or part_s2.shape[2] != d or part_s2.shape[3] != d):
        raise ValueError("partial arrays must have n_blocks = block_count(n, d, K) rows")
    if n == 0:
        return
    part_nk[:, :] = 0.0
    part_s1[:, :, :] = 0.0
    part_s2[:, :, :, :] = 0.0
    part_ll[:] = 0.0
    if domain is not None and d > 0:
        part_clipped[:] = 0
        dom = &domain[0, 0]
        clip_base = &part_clipped[0]
    cpb = (n_chunks + nb - 1) // nb
    nb = (n_chunks + cpb - 1) // cpb          # blocks actually used; the rest stay 0
    n_threads = max(1, min(n_threads, nb))
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(_scratch_size(d, K) * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for b in prange(nb, schedule='dynamic'):
            if buf != NULL:
                _estep_block(&X[0, 0], n, d, K, b, cpb, &means[0, 0], &prec_chol[0, 0, 0],
                             &log_const[0], tri, dom, inv_scale, clip_target,
                             &part_nk[b, 0], &part_s1[b, 0, 0], &part_s2[b, 0, 0, 0],
                             &part_ll[b], clip_base + b if clip_base != NULL else NULL, buf)
        free(buf)
    if failed:
        raise MemoryError("could not allocate E-step scratch")


cdef void _logresp_chunk(const floating *X, Py_ssize_t r0, Py_ssize_t nr,
                         Py_ssize_t d, Py_ssize_t K,
                         const double *means, const double *prec_chol, const double *log_const,
                         int tri, floating *out_resp, floating *out_ll, double *buf) noexcept nogil:
    cdef Py_ssize_t npad = (nr + _LANES - 1) // _LANES * _LANES
    cdef Py_ssize_t k, r
    cdef double *Xt = buf
    cdef double *D = Xt + d * _CHUNK
    cdef double *W = D + d * _CHUNK
    cdef double *L = W + d * _CHUNK
    cdef double *ll = L + K * _CHUNK
    cdef double *tmp = ll + _CHUNK
    _load_chunk(X, r0, nr, npad, d, Xt)
    _logp_chunk(Xt, npad, d, K, means, prec_chol, log_const, tri, D, W, L)
    dpe_lse_ll(L, K, _CHUNK, npad, ll, tmp)
    for r in range(nr):
        out_ll[r0 + r] = <floating> ll[r]
        for k in range(K):
            out_resp[(r0 + r) * K + k] = <floating> (L[k * _CHUNK + r] - ll[r])


def log_resp(const floating[:, ::1] X,              # IN  (n, d)
             const double[:, ::1] means,            # IN  (K, d)
             const double[:, :, ::1] prec_chol,     # IN  (K, d, d)
             const double[::1] log_const,           # IN  (K,) as in estep_stats
             floating[:, ::1] out_log_resp,         # OUT (n, K) log gamma_ik
             floating[::1] out_ll,                  # OUT (n,) log p(x_i)
             bint upper_triangular,
             int n_threads):
    """Per-row log responsibilities and log-likelihoods (predict / score_samples).

    Equivalent to: ``lp = log_gaussian_prob(X) + log_w; ll = logsumexp(lp, 1);
    (lp - ll[:, None], ll)`` (DP-EM Eq. 10, in log space).
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t n_chunks = (n + _CHUNK - 1) // _CHUNK, c
    cdef int failed = 0
    cdef int *failed_p = &failed
    cdef double *buf
    cdef int tri = 1 if upper_triangular else 0
    if (means.shape[1] != d or prec_chol.shape[0] != K or prec_chol.shape[1] != d
            or prec_chol.shape[2] != d or log_const.shape[0] != K
            or out_log_resp.shape[0] != n or out_log_resp.shape[1] != K or out_ll.shape[0] != n):
        raise ValueError("shapes do not match")
    if n == 0:
        return
    n_threads = max(1, min(n_threads, n_chunks))
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(_scratch_size(d, K) * sizeof(double))
        if buf == NULL:
            failed_p[0] = 1
        for c in prange(n_chunks, schedule='dynamic'):
            if buf != NULL:
                _logresp_chunk(&X[0, 0], c * _CHUNK, min(_CHUNK, n - c * _CHUNK), d, K,
                               &means[0, 0], &prec_chol[0, 0, 0], &log_const[0], tri,
                               &out_log_resp[0, 0], &out_ll[0], buf)
        free(buf)
    if failed:
        raise MemoryError("could not allocate E-step scratch")


def _exp_log_wrapper(const double[::1] x, double[::1] out_exp, double[::1] out_log):
    """Test hook: ``out_exp = exp(x)`` (x <= 0) and ``out_log = log(-x)`` (x < 0) elementwise.

    Equivalent to: ``np.where(x < -708, 0, np.exp(x)), np.log(-x)``.
    """
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        out_exp[i] = dpe_exp_neg(x[i])
        out_log[i] = dpe_log_pos(-x[i])
