/*
 * f32_lanes_order.c -- dpf_lanes_s2 (dpc_lanes.h, the float32 second-moment lanes) against
 * the plain loop it must equal bit for bit (a clone too): every entry (i, j), j >= i, lane l adds
 * W_i[r] x_j[r] for r = l, l + 16, ... in row order (compiled with the same flags, so the
 * same FMA contraction as the build under test).  Random chunks, d = 1..15, full and short
 * chunks, nonzero starting lanes, normal and subnormal products; prints "all equal".
 * test_estep_f32.py builds it as shipped (the clone for this CPU), for baseline x86-64 and
 * for x86-64-v3: the tiling (issue 41: which entries share a loop) never changes a bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpc_lanes.h"

static float uniform(void) { return (float)(rand() / (double)RAND_MAX - 0.5); }

DPE_CLONES static void plain_s2(const float *Xs, const float *W, ptrdiff_t d, ptrdiff_t ld, ptrdiff_t npad, float *lp)
{
    ptrdiff_t i, j, r, l;
    for (i = 0; i < d; i++)
        for (j = i; j < d; j++) {
            float *a = lp + DPE_L * (i * d - i * (i - 1) / 2 + j - i);
            for (l = 0; l < DPE_L; l++) {
                float s = a[l];
                for (r = l; r < npad; r += DPE_L) s += W[i * ld + r] * Xs[j * ld + r];
                a[l] = s;
            }
        }
}

int main(void)
{
    const ptrdiff_t ld = DPC_CHUNK_SIZE, npads[3] = {16, 48, DPC_CHUNK_SIZE};
    int d, q, bad = 0;
    srand(3);
    for (d = 1; d < DPC_F32_TILE_MIN_D; d++) {
        ptrdiff_t m = dpe_lanes_s2_size(d), e;
        float *Xs = malloc(sizeof(float) * d * ld), *W = malloc(sizeof(float) * d * ld);
        float *a = malloc(sizeof(float) * m), *b = malloc(sizeof(float) * m);
        for (q = 0; q < 6; q++) {
            float scale = q % 2 ? 1e-37f : 1.0f;          /* subnormal products W x */
            for (e = 0; e < d * ld; e++) {
                Xs[e] = uniform();
                W[e] = uniform() * scale;
            }
            for (e = 0; e < m; e++) a[e] = b[e] = q < 2 ? 0.0f : uniform();
            dpf_lanes_s2(Xs, W, d, ld, npads[q % 3], a);
            plain_s2(Xs, W, d, ld, npads[q % 3], b);
            if (memcmp(a, b, sizeof(float) * m) != 0) {
                printf("d=%d case %d: lanes differ\n", d, q);
                bad = 1;
            }
        }
        free(Xs); free(W); free(a); free(b);
    }
    if (!bad) printf("all equal\n");
    return bad;
}
