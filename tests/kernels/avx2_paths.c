/*
 * avx2_paths.c -- the AVX2 + FMA paths of the float64 E-step kernels against the
 * x86-64-v3 target_clones functions they replace, bit for bit, on random chunks (run by
 * test_avx2_paths.py).  Exit 0: every output equal; 1: a difference (printed); 77: this
 * compiler or build has no AVX2 path, or this CPU does not run the x86-64-v3 clone (an
 * AVX-512 CPU runs the x86-64-v4 clone and never the AVX2 path): skip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "dpc_bernoulli.h"
#include "dpc_gmm.h"
#include "dpc_gmm_diag.h"
#include "dpc_lse.h"

#if DPE_HAVE_AVX2
static unsigned long long state = 88172645463325252ULL;
static double urand(void)
{
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return (double)(state >> 11) * 0x1.0p-53;
}

static long bad;

static void same(const char *what, int d, const double *a, const double *b, long n)
{
    long i, k = 0;
    for (i = 0; i < n; i++) k += memcmp(a + i, b + i, sizeof(double)) != 0;
    if (k) {
        bad++;
        printf("%s d=%d: %ld of %ld values differ\n", what, d, k, n);
    }
}

static double *vec(long n)
{
    return calloc((size_t)n, sizeof(double));
}

int main(void)
{
    const long ld = DPC_CHUNK_SIZE;
    int rep, d, tri, k;
    __builtin_cpu_init();
    if (!dpe_avx2_path()) return 77;
    for (rep = 0; rep < 6; rep++) {
        for (d = 1; d <= 40; d += d < 16 ? 1 : 12) {
            const long npad = DPE_L * (1 + (long)(urand() * (ld / DPE_L)));
            const double scale = rep % 3 == 0 ? 1e-3 : rep % 3 == 1 ? 1.0 : 1e3;
            const int K = 1 + (int)(urand() * 9);
            const long nl = dpe_lanes_n_s1_size(d) + dpe_lanes_s2_size(d), lpc = dpe_lanes_diag_size(d);
            double *Xt = vec(d * ld), *D1 = vec((d + 2) * ld), *D2 = vec((d + 2) * ld), *W1 = vec(d * ld), *W2 = vec(d * ld);
            double *o1 = vec(K * ld), *o2 = vec(K * ld), *g = vec((K + 1) * ld), *sg1 = vec(ld), *sg2 = vec(ld);
            double *mu = vec(K * d), *P = vec(d * d), *p = vec(K * d), *c = vec(K);
            double *l1 = vec(2 * nl + K * lpc), *l2 = vec(2 * nl + K * lpc);
            double *s1a = vec(d + 1), *s1b = vec(d + 1);
            long i, j;
            for (i = 0; i < d * ld; i++) Xt[i] = rep == 5 && i % 5 == 0 ? 0.0 : scale * (urand() - 0.5);
            for (i = 0; i < K * d; i++) {
                mu[i] = scale * 0.3 * (urand() - 0.5);
                p[i] = 0.1 + urand() / scale;
            }
            for (k = 0; k < K; k++) c[k] = rep == 5 && k == 0 ? -0.0 : -d * urand();
            for (i = 0; i < (K + 1) * ld; i++) g[i] = i % ld < npad ? urand() : 0.0;
            for (tri = 0; tri < 2; tri++) {
                for (i = 0; i < d; i++)
                    for (j = 0; j < d; j++) P[i * d + j] = tri && j < i ? 0.0 : urand() - 0.3;
                dpe_logp_small_clones(Xt, d, ld, npad, mu, P, tri, c[0], D1, o1);
                dpe_logp_small_avx2(Xt, d, ld, npad, mu, P, tri, c[0], D2, o2);
                same(tri ? "dpe_logp_small (triangular)" : "dpe_logp_small", d, o1, o2, npad);
            }
            for (i = 0; i < 2 * nl; i++) l1[i] = l2[i] = urand();
            for (k = 0; k < 2; k++) {
                dpe_lanes_n_s1_clones(Xt, d, ld, npad, g, W1, l1);
                dpe_lanes_n_s1_avx2(Xt, d, ld, npad, g, W2, l2);
                dpe_lanes_s2_clones(Xt, W1, d, ld, npad, l1 + dpe_lanes_n_s1_size(d));
                dpe_lanes_s2_avx2(Xt, W2, d, ld, npad, l2 + dpe_lanes_n_s1_size(d));
                dpe_lanes_n_s1_clones(Xt, d, ld, npad, g + ld, NULL, l1 + nl);
                dpe_lanes_n_s1_avx2(Xt, d, ld, npad, g + ld, NULL, l2 + nl);
            }
            same("dpe_lanes_n_s1 / dpe_lanes_s2", d, l1, l2, 2 * nl);
            same("dpe_lanes_n_s1 (W)", d, W1, W2, d * ld);
            dpe_moments_prep_clones(Xt, d, ld, npad, g, sg1, W1, s1a + d, s1a);
            dpe_moments_prep_avx2(Xt, d, ld, npad, g, sg2, W2, s1b + d, s1b);
            same("dpe_moments_prep", d, s1a, s1b, d + 1);
            same("dpe_moments_prep (W)", d, W1, W2, d * ld);
            same("dpe_moments_prep (sqrt g)", d, sg1, sg2, npad);
            dpe_logp_diag_clones(Xt, d, ld, npad, K, mu, p, c, o1);
            dpe_logp_diag_avx2(Xt, d, ld, npad, K, mu, p, c, o2);
            same("dpe_logp_diag", d, o1, o2, K * ld);
            for (i = 0; i < K * lpc; i++) l1[i] = l2[i] = urand();
            dpe_lanes_diag_clones(Xt, d, ld, npad, K, g, l1, lpc);
            dpe_lanes_diag_avx2(Xt, d, ld, npad, K, g, l2, lpc);
            same("dpe_lanes_diag", d, l1, l2, K * lpc);
            /* log-sum-exp: spreads up to 1e3 (exp underflow below -708), a -inf component */
            for (i = 0; i < K * ld; i++) {
                o1[i] = (urand() - 0.7) * (rep < 2 ? 5.0 : rep < 4 ? 200.0 : 2000.0);
                if (rep == 5 && i < ld) o1[i] = -HUGE_VAL;
                o2[i] = o1[i];
            }
            if (rep == 5 && K == 1) o1[0] = o2[0] = 0.0;
            dpe_lse_ll_clones(o1, K, ld, npad, sg1, D1);
            dpe_lse_ll_avx2(o2, K, ld, npad, sg2, D2);
            same("dpe_lse_ll", d, sg1, sg2, npad);
            dpe_lse_clones(o1, K, ld, npad - 5, npad, sg1, D1);
            dpe_lse_avx2(o2, K, ld, npad - 5, npad, sg2, D2);
            same("dpe_lse (log-likelihood)", d, sg1, sg2, npad);
            same("dpe_lse (responsibilities)", d, o1, o2, K * ld);
            for (i = 0; i < K * d; i++) p[i] = 4.0 * urand() - 2.0;
            dpb_logits_small_clones(Xt, d, ld, npad, p, c, K, o1);
            dpb_logits_small_avx2(Xt, d, ld, npad, p, c, K, o2);
            same("dpb_logits_small", d, o1, o2, K * ld);
            free(Xt); free(D1); free(D2); free(W1); free(W2); free(o1); free(o2); free(g);
            free(sg1); free(sg2); free(mu); free(P); free(p); free(c); free(l1); free(l2);
            free(s1a); free(s1b);
        }
    }
    printf("%s\n", bad ? "differences" : "all equal");
    return bad != 0;
}
#else
int main(void)
{
    return 77;
}
#endif
