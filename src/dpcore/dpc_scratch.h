/*
 * dpc_scratch.h -- the per-thread chunk scratch of the E-step kernels, one layout.
 *
 * Each OpenMP thread mallocs one buffer of dpc_scratch_init(..., NULL) doubles inside
 * parallel() and binds it per block with dpc_scratch_init(..., buf).  Arrays, in this
 * order (ld = DPC_CHUNK_SIZE; every offset is a multiple of ld doubles):
 *
 *   Xt     (d, ld)    the chunk's rows, transposed, float64 (dpc_rows.h)
 *   D, W   (d, ld)    n_work of them (0, 1 or 2) for model work (centred rows, products);
 *                     NULL when absent
 *   L      (K, ld)    per-component log-probabilities, then responsibilities (dpc_lse.h)
 *   ll     (ld,)      per-row log-likelihood
 *   tmp    (2, ld)    log-sum-exp scratch
 *   sg     (ld,)      per-row work (sqrt(g) on the GMM's BLAS path)
 *   lanes  (K, lanes_per_component)   lane accumulators that live for a whole block
 *                     (dpc_lanes.h); NULL when lanes_per_component == 0
 *
 * The layout only decides where things live, never an operation or its order.
 */
#ifndef DPC_SCRATCH_H
#define DPC_SCRATCH_H

#include <stddef.h>

#include "dpc_contract.h"

typedef struct {
    double *Xt, *D, *W, *L, *ll, *tmp, *sg, *lanes;
    ptrdiff_t lanes_per_component;  /* lanes of component k start at lanes + k * this */
    ptrdiff_t size;                 /* doubles in all */
} dpc_scratch;

/* Compute the layout for (d, K); with buf != NULL point the arrays into buf (which must
   hold the returned number of doubles), else leave them NULL.  Returns s->size. */
static inline ptrdiff_t dpc_scratch_init(dpc_scratch *s, ptrdiff_t d, ptrdiff_t K, int n_work,
                                         ptrdiff_t lanes_per_component, double *buf)
{
    const ptrdiff_t ld = DPC_CHUNK_SIZE;
    ptrdiff_t o_d = d * ld;
    ptrdiff_t o_w = o_d + (n_work >= 1 ? d * ld : 0);
    ptrdiff_t o_l = o_w + (n_work >= 2 ? d * ld : 0);
    ptrdiff_t o_ll = o_l + K * ld;
    ptrdiff_t o_tmp = o_ll + ld;
    ptrdiff_t o_sg = o_tmp + 2 * ld;
    ptrdiff_t o_lanes = o_sg + ld;
    s->lanes_per_component = lanes_per_component;
    s->size = o_lanes + K * lanes_per_component;
    if (buf == NULL) {
        s->Xt = s->D = s->W = s->L = s->ll = s->tmp = s->sg = s->lanes = NULL;
    } else {
        s->Xt = buf;
        s->D = n_work >= 1 ? buf + o_d : NULL;
        s->W = n_work >= 2 ? buf + o_w : NULL;
        s->L = buf + o_l;
        s->ll = buf + o_ll;
        s->tmp = buf + o_tmp;
        s->sg = buf + o_sg;
        s->lanes = lanes_per_component > 0 ? buf + o_lanes : NULL;
    }
    return s->size;
}

/* The float32 path's scratch (float32 rows; dpc_f32.h), one buffer of doubles per thread
   as above.  Arrays, in this order (ld = DPC_CHUNK_SIZE; every offset is a whole number
   of 32-byte vectors):
 *
 *   Xt       (d, ld) double   a chunk clipped in float64 by the domain loader (dpc_rows.h)
 *   ll       (ld,)   double   per-row log-likelihood
 *   tmp      (2, ld) double   log-sum-exp scratch (float maxima, float64 sums)
 *   lanes    (K, lanes_per_component) double   float64 lanes of a whole block
 *   Xs       (d, ld) float    the chunk's rows in float (rounded from Xt, or float32 rows)
 *   D, W     (d, ld) float    n_work of them (0, 1 or 2); NULL when absent
 *   L        (K, ld) float    per-component log-probabilities, then responsibilities
 *   sg       (ld,)   float    per-row work (sqrt(g) on the BLAS path)
 *   lanes32  (K, lanes_per_component) float    float lanes, flushed into `lanes`
 *   C        (n_c,)  float    model work (the (d, d) ssyrk product on the BLAS path)
 */
typedef struct {
    double *Xt, *ll, *tmp, *lanes;
    float *Xs, *D, *W, *L, *sg, *lanes32, *C;
    ptrdiff_t lanes_per_component;
    ptrdiff_t size;                 /* doubles in all */
} dpf_scratch;

/* Floats rounded up to whole 32-byte vectors (8 floats). */
static inline ptrdiff_t dpf_round8(ptrdiff_t m)
{
    return (m + 7) / 8 * 8;
}

/* The layout for (d, K) as dpc_scratch_init: returns the size in doubles; with buf != NULL
   binds the arrays into buf. */
static inline ptrdiff_t dpf_scratch_init(dpf_scratch *s, ptrdiff_t d, ptrdiff_t K, int n_work,
                                         ptrdiff_t lanes_per_component, ptrdiff_t n_c, double *buf)
{
    const ptrdiff_t ld = DPC_CHUNK_SIZE;
    /* doubles */
    ptrdiff_t o_ll = d * ld;
    ptrdiff_t o_tmp = o_ll + ld;
    ptrdiff_t o_lanes = o_tmp + 2 * ld;
    ptrdiff_t o_f = o_lanes + dpf_round8(K * lanes_per_component);
    /* floats, from o_f doubles on */
    ptrdiff_t f_d = d * ld;
    ptrdiff_t f_w = f_d + (n_work >= 1 ? d * ld : 0);
    ptrdiff_t f_l = f_w + (n_work >= 2 ? d * ld : 0);
    ptrdiff_t f_sg = f_l + K * ld;
    ptrdiff_t f_lanes = f_sg + ld;
    ptrdiff_t f_c = f_lanes + dpf_round8(K * lanes_per_component);
    ptrdiff_t f_end = f_c + dpf_round8(n_c);
    s->lanes_per_component = lanes_per_component;
    s->size = o_f + (f_end + 1) / 2;
    if (buf == NULL) {
        s->Xt = s->ll = s->tmp = s->lanes = NULL;
        s->Xs = s->D = s->W = s->L = s->sg = s->lanes32 = s->C = NULL;
    } else {
        float *f = (float *)(buf + o_f);
        s->Xt = buf;
        s->ll = buf + o_ll;
        s->tmp = buf + o_tmp;
        s->lanes = lanes_per_component > 0 ? buf + o_lanes : NULL;
        s->Xs = f;
        s->D = n_work >= 1 ? f + f_d : NULL;
        s->W = n_work >= 2 ? f + f_w : NULL;
        s->L = f + f_l;
        s->sg = f + f_sg;
        s->lanes32 = lanes_per_component > 0 ? f + f_lanes : NULL;
        s->C = n_c > 0 ? f + f_c : NULL;
    }
    return s->size;
}

#endif /* DPC_SCRATCH_H */
