/*
 * f32_clip_clones.c -- prints a checksum of dpf_load_domain32's rows and clip counts over
 * random chunks (box clips, ball clips, rows whose float map overflows, short chunks, d from
 * 1 to 40), as the build's clone for this CPU computes them.  test_estep_f32.py builds it
 * three ways (target_clones as shipped; -DDPC_NO_CLONES for baseline x86-64; the same with
 * -march=x86-64-v3) and asserts the three print the same: the float clip is the same in
 * every clone (no FMA can form in its map; its float squared norm only screens rows).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpc_f32.h"

static unsigned long long mix(unsigned long long h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

int main(void)
{
    const ptrdiff_t ld = DPC_CHUNK_SIZE;
    unsigned long long h = 1469598103934665603ULL;
    long clipped = 0;
    int d, trial;
    srand(7);
    for (d = 1; d <= 40; d++) {
        float *X = malloc(sizeof(float) * ld * d), *Xs = malloc(sizeof(float) * ld * d), *dom32 = malloc(sizeof(float) * 4 * d);
        double *dom = malloc(sizeof(double) * 4 * d), *tmp = malloc(sizeof(double) * d);
        for (trial = 0; trial < 6; trial++) {
            ptrdiff_t i, nr = trial % 2 ? ld : ld - 3 - 2 * trial, npad = (nr + 15) / 16 * 16;
            int box = trial % 3 != 0;
            double target = 1.0 - 8.0 * (d + 2) * 2.220446049250313e-16;
            for (i = 0; i < d; i++) {
                dom[i] = box ? -1.3 - 0.1 * i : -INFINITY;
                dom[d + i] = box ? 2.1 + 0.01 * i : INFINITY;
                dom[2 * d + i] = box ? 0.4 : 0.1 * i;
                dom[3 * d + i] = 1.0 / (box ? 1.7 * sqrt((double)d) * (1.0 + 0.05 * i) : 0.9 * sqrt((double)d));
            }
            if (!dpf_domain32(dom, d, dom32)) return 2;
            for (i = 0; i < ld * d; i++) X[i] = (float)(3.0 * (rand() / (double)RAND_MAX - 0.5));
            if (trial == 5) X[7 * d] = 3e38f;      /* the float map overflows: the float64 redo */
            clipped += dpf_load_domain32(X, d, nr, npad, ld, dom32, dom, target, tmp, Xs);
            for (i = 0; i < d; i++) h = mix(h, Xs + i * ld, sizeof(float) * (size_t)npad);
        }
        free(X); free(Xs); free(dom32); free(dom); free(tmp);
    }
    printf("%016llx %ld\n", h, clipped);
    return 0;
}
