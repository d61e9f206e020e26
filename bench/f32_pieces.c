/*
 * f32_pieces.c -- the pieces of one E-step pass of the full GMM kernel on its hand-loop path
 * (d < 16), float64 against the float32 path, timed on one thread (CPU time) from the kernels'
 * own headers.  It separates what single precision buys from how each build compiles:
 *
 *   cc -O3 -std=c11 -ffp-contract=fast -fno-math-errno -Isrc/dpcore bench/f32_pieces.c -o /tmp/pieces
 *       the shipped build: target_clones, the clone for this CPU runs
 *   cc ... -march=x86-64-v3 -DDPC_NO_CLONES ... -o /tmp/pieces_v3
 *       the same code compiled for AVX2 as a whole (no clones), for comparison
 *   /tmp/pieces 10 5          (d, K; 200,000 rows = 781 chunks of random rows in the ball)
 *
 * (-march here builds a measurement only; the library never ships it.)  Pieces, per pass:
 * logp (Mahalanobis terms), lse (log-sum-exp and responsibilities), moments (counts, first and
 * second moments into lanes), and for float32 the narrowing of the float64-clipped chunk and
 * the float -> float64 lane flushes.  The numbers are not the library's results (no check).
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dpc_gmm.h"
#include "dpc_lse.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv)
{
    int d = argc > 1 ? atoi(argv[1]) : 10, K = argc > 2 ? atoi(argv[2]) : 5, ld = DPC_CHUNK_SIZE;
    long n = 200000, nch = n / ld, ch;
    int i, j, k, rep;
    if (d < 1 || d > 15 || K < 1 || K > 64) {
        fprintf(stderr, "d in 1..15 (the hand-loop path), K in 1..64\n");
        return 2;
    }
    long lpc = dpe_lanes_n_s1_size(d) + dpe_lanes_s2_size(d);
    double *Xt = malloc(sizeof(double) * d * ld), *D = malloc(sizeof(double) * d * ld);
    double *W = malloc(sizeof(double) * d * ld), *L = malloc(sizeof(double) * K * ld);
    double *mu = malloc(sizeof(double) * K * d), *P = calloc((size_t)K * d * d, sizeof(double));
    double *lanes = calloc((size_t)K * lpc, sizeof(double)), c[64], ll[DPC_CHUNK_SIZE], tmp[2 * DPC_CHUNK_SIZE];
    float *Xs = malloc(4 * d * ld), *Ds = malloc(4 * d * ld), *Ws = malloc(4 * d * ld), *Ls = malloc(4 * K * ld);
    float *mus = malloc(4 * K * d), *Ps = calloc((size_t)K * d * d, 4), cs[64];
    float *lanes32 = calloc((size_t)K * lpc, 4);
    srand(1);
    for (i = 0; i < d * ld; i++) Xt[i] = (rand() / (double)RAND_MAX - 0.5) / d;
    for (i = 0; i < K * d; i++) mus[i] = (float)(mu[i] = 0.1 * (rand() / (double)RAND_MAX - 0.5));
    for (k = 0; k < K; k++) {
        cs[k] = (float)(c[k] = -1.0);
        for (i = 0; i < d; i++)
            for (j = i; j < d; j++) Ps[k * d * d + i * d + j] = (float)(P[k * d * d + i * d + j] = i == j ? 2.0 : 0.1);
    }
    for (rep = 0; rep < 3; rep++) {
        double t0, tl = 0, te = 0, tm = 0, tf = 0;
        for (ch = 0; ch < nch; ch++) {
            t0 = cpu_now();
            for (k = 0; k < K; k++) dpe_logp_small(Xt, d, ld, ld, mu + k * d, P + k * d * d, 1, c[k], D, L + k * ld);
            tl += cpu_now() - t0;
            t0 = cpu_now();
            dpe_lse(L, K, ld, ld, ld, ll, tmp);
            te += cpu_now() - t0;
            t0 = cpu_now();
            for (k = 0; k < K; k++) {
                dpe_lanes_n_s1(Xt, d, ld, ld, L + k * ld, W, lanes + k * lpc);
                dpe_lanes_s2(Xt, W, d, ld, ld, lanes + k * lpc + dpe_lanes_n_s1_size(d));
            }
            tm += cpu_now() - t0;
        }
        printf("float64  d=%d K=%d  logp %6.1f  lse %6.1f  moments %6.1f                 total %6.1f ms\n",
               d, K, 1e3 * tl, 1e3 * te, 1e3 * tm, 1e3 * (tl + te + tm));
        tl = te = tm = tf = 0;
        for (ch = 0; ch < nch; ch++) {
            t0 = cpu_now();
            dpf_narrow(Xt, d, ld, ld, Xs);
            tf += cpu_now() - t0;
            t0 = cpu_now();
            for (k = 0; k < K; k++) dpf_logp_small(Xs, d, ld, ld, mus + k * d, Ps + k * d * d, 1, cs[k], Ds, Ls + k * ld);
            tl += cpu_now() - t0;
            t0 = cpu_now();
            dpf_lse(Ls, K, ld, ld, ld, ll, tmp);
            te += cpu_now() - t0;
            t0 = cpu_now();
            for (k = 0; k < K; k++) {
                dpf_lanes_n_s1(Xs, d, ld, ld, Ls + k * ld, Ws, lanes32 + k * lpc);
                dpf_lanes_s2(Xs, Ws, d, ld, ld, lanes32 + k * lpc + dpe_lanes_n_s1_size(d));
            }
            tm += cpu_now() - t0;
            t0 = cpu_now();
            if (ch % DPC_F32_FLUSH_CHUNKS == DPC_F32_FLUSH_CHUNKS - 1) dpf_lanes_flush(lanes32, K * lpc, lanes);
            tf += cpu_now() - t0;
        }
        printf("float32  d=%d K=%d  logp %6.1f  lse %6.1f  moments %6.1f  narrow+flush %5.1f  total %6.1f ms\n",
               d, K, 1e3 * tl, 1e3 * te, 1e3 * tm, 1e3 * tf, 1e3 * (tl + te + tm + tf));
    }
    return lanes[0] == 12345.0;     /* keep the sums alive */
}
