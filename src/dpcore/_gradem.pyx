"""Gradient-EM statistics: per-sample gradients, their robust (truncated) or clipped sum.

Two Gaussian mixtures with known covariance ``sigma2 I`` and equal weights:

* ``symmetric``: ``y = z beta + e``, ``z = +-1`` (Balakrishnan, Wainwright & Yu 2017;
  Wang et al. 2020; DG-EM Sec. 4); per-sample gradient of Q(. | beta) at beta, times
  sigma2: ``g_i = tanh(<beta, y_i>/sigma2) y_i - beta`` (d coordinates);
* K components: ``g_ik = gamma_ik (y_i - mu_k)`` (K d coordinates), gamma the posterior.

Per row the kernel forms ``g_i`` (m coordinates) and adds into its block's partials:

* ``raw``:  ``g_i`` (the non-private gradient EM, ``epsilon=inf``);
* ``stat``: ``estimator=1`` (DG-EM, truncated): per coordinate ``s E psi(g_ij (1 + eps)/s)``
  with the Catoni-Giulini psi and eps ~ N(0, 1/beta_m) integrated out in closed form
  (``expected_psi``); ``estimator=2`` (clipped): ``g_i min(1, C / |g_i|)``; 0: nothing;
* the log-likelihood of the row and whether it was truncated / clipped (diagnostics).

At the extremes (rows up to ``MAX_ABS_VALUE`` = 1e150, tiny ``sigma2`` or ``s``) every row
still gets a finite contribution, so no single row can turn the statistic into NaN:

* the K-means posteriors are a max-subtracted softmax whose maximum starts at -inf; when
  every log-term ``-|y - mu_k|^2 / (2 sigma2)`` is -inf (underflow: the sigma2 -> 0 limit) or
  NaN, they are recomputed from the squared distances themselves, relative to the smallest
  (``_mixture_fallback``): the nearest mean(s) get the row, ties split equally;
* in the symmetric model a dot product ``<beta, y>`` whose terms overflow to +-inf is
  recomputed with beta scaled by 2^-600 (``_symmetric_fallback``);
* ``E psi(u (1 + eps))`` is returned as its limit ``sign(u) (2 sqrt2/3) erf(sqrt(beta_m/2))``
  for ``|u| >= U_SATURATE`` (2^60) and at ``u = +-inf`` (``g / s`` overflowed);
* the clipped sum rescales g by ``C / |g|`` only where that factor is a normal double;
  otherwise (squares that overflow or underflow, a factor in the subnormal range) it scales
  ``g / |g|`` with a norm taken after dividing by ``max_j |g_j|``;
* last guard: a row whose gradient is not finite (non-finite parameters, e.g. released
  means that overflowed) adds nothing to ``raw`` or ``stat``, one whose contribution is not
  finite nothing to ``stat``; it is counted in ``part_nonfinite`` (and as clipped).  A zero
  contribution has norm 0, within any sensitivity bound.

Work layout (reproducibility contract): rows are cut into ``dpc_block_count(n, 2 m + 2)``
blocks of whole chunks (``DPC_CHUNK_SIZE`` rows, ``dpc_plan_blocks``); block b owns row b
of every partial array and walks its rows in order; the caller sums the partial rows in
block order.  The block count depends on n and m only, so results do not depend on the
thread count.  The blocks are run by the kernels' one parallel driver (``_driver.pxd``);
the row counts (clipped, left out) are int64, as in every kernel.
"""
from cython cimport floating
from libc.float cimport DBL_MAX, DBL_MIN
from libc.math cimport INFINITY, copysign, erf, erfc, exp, fabs, ldexp, log, log1p, sqrt, tanh, M_PI
from libc.stdint cimport int64_t
from libc.string cimport memset

from ._driver cimport run_row_blocks, run_row_chunks
from .dpc_contract cimport (
    DPC_CHUNK_SIZE, dpc_block_count, dpc_block_plan, dpc_chunk_count, dpc_chunk_rows,
    dpc_plan_blocks, dpc_plan_end, dpc_plan_first,
)

cdef double _SQRT2 = 1.4142135623730951
cdef double _PSI_MAX = 0.9428090415820634      # 2 sqrt(2) / 3
#: tau below which the truncated-moment recursion is used (quadrature above); as
#: dpem_fast._reference.gradem.TAU_SWITCH
TAU_SWITCH = 0.5
cdef double _TAU_SWITCH = 0.5
#: |u| from which E psi(u (1 + eps)) is its limit sign(u) (2 sqrt2/3) erf(sqrt(beta_m/2)) to
#: double precision (relative distance <= ~1.5/|u|; see _expected_psi); as
#: dpem_fast._reference.gradem.U_SATURATE
U_SATURATE = 1152921504606846976.0     # 2^60
cdef double _U_SATURATE = 1152921504606846976.0
cdef double _TWO_M600 = ldexp(1.0, -600)      # exact rescaling of terms that overflow
cdef double _TWO_600 = ldexp(1.0, 600)
cdef double _TWO_599 = ldexp(1.0, 599)
#: sum_j g_j^2 below this is recomputed after scaling by max |g_j| (clipped estimator): above
#: it the squares that underflow change the sum by less than 1e-30 of itself
cdef double _SS_MIN = 1e-290


def block_count(Py_ssize_t n, Py_ssize_t m):
    """Partial rows (blocks) for n rows of m gradient coordinates; independent of threads.

    Equivalent to: ``_contract.block_count(n, 2 * m + 2)``.
    """
    return dpc_block_count(n, 2 * m + 2)


cdef inline double _upper(double z) noexcept nogil:
    """P(Z > z)."""
    return 0.5 * erfc(z / _SQRT2)


cdef inline double _phi(double z) noexcept nogil:
    return exp(-0.5 * z * z) * 0.3989422804014327


cdef double _expected_psi(double u, double beta_m, const double *glx, const double *glw,
                          Py_ssize_t ngl) noexcept nogil:
    """E psi(u (1 + eps)), eps ~ N(0, 1/beta_m): as ``_reference.gradem.expected_psi``.

    For ``|u| >= U_SATURATE`` and ``u = +-inf`` the limit ``sign(u) (2 sqrt2/3)
    erf(sqrt(beta_m/2))``: psi(Y) differs from ``sign(Y) 2 sqrt2/3`` only where
    ``|Y| <= sqrt2``, an event of probability ``<= 2 sqrt2 sqrt(beta_m) / (|u| sqrt(2 pi))``,
    so the distance to the limit is below ~1.5/|u| of it: less than an ulp from 2^60 on,
    where the closed form itself degrades (tau overflows for beta_m < 1, NaN at inf).
    The limit is at most ``M(beta_m)`` (``expected_psi_sup`` includes it).
    """
    cdef double a = _SQRT2, tau, tails, al, b, m0, m1, m2, m3, pa, pb, y, z, mid
    cdef Py_ssize_t q
    if u == 0.0:
        return 0.0
    if u != u:
        return u
    if fabs(u) >= _U_SATURATE:
        return copysign(_PSI_MAX * erf(sqrt(0.5 * beta_m)), u)
    tau = fabs(u) / sqrt(beta_m)
    tails = _PSI_MAX * (_upper((a - u) / tau) - _upper((a + u) / tau))
    if tau < _TAU_SWITCH:
        al = (-a - u) / tau
        b = (a - u) / tau
        m0 = 1.0 - _upper(b) - _upper(-al)
        pa = _phi(al)
        pb = _phi(b)
        m1 = u * m0 - tau * (pb - pa)
        m2 = u * m1 + tau * tau * m0 - tau * a * (pb + pa)
        m3 = u * m2 + 2.0 * tau * tau * m1 - tau * a * a * (pb - pa)
        return (m1 - m3 / 6.0) + tails
    mid = 0.0
    for q in range(ngl):
        y = a * glx[q]
        z = (y - u) / tau
        mid = mid + glw[q] * (y - y * y * y / 6.0) * exp(-0.5 * z * z)
    return mid * (a / (tau * sqrt(2.0 * M_PI))) + tails


def expected_psi(const double[::1] u,       # IN  (n,)
                 double beta_m,
                 const double[::1] glx,     # IN  (q,) Gauss-Legendre nodes on [-1, 1]
                 const double[::1] glw,     # IN  (q,) their weights
                 double[::1] out):          # OUT (n,)
    """Test wrapper of the kernel's closed form.

    Equivalent to: ``_reference.gradem.expected_psi(u, beta_m)``.
    """
    cdef Py_ssize_t i
    if out.shape[0] != u.shape[0] or glx.shape[0] != glw.shape[0] or glx.shape[0] < 1:
        raise ValueError("shapes do not match")
    if not beta_m > 0.0:
        raise ValueError("beta_m must be > 0")
    for i in range(u.shape[0]):
        out[i] = _expected_psi(u[i], beta_m, &glx[0], &glw[0], glx.shape[0])


cdef double _symmetric_fallback(const floating *y, Py_ssize_t d, const double *beta, double sigma2,
                               double *t) noexcept nogil:
    """``<beta, y> / sigma2`` into t when the plain dot product is NaN (terms overflowing to
    +inf and -inf): beta scaled by 2^-600 first (exact, up to terms below 2^-1074 that cannot
    matter next to an overflowing one).  Returns ``-min_z |y - z beta|^2 / (2 sigma2)`` (z = +-1,
    the sign of t), which the plain form ``-(|y|^2 + |beta|^2)/(2 sigma2) + |t|`` computes as
    inf - inf."""
    cdef Py_ssize_t j
    cdef double dot = 0.0, ss = 0.0, z, diff
    for j in range(d):
        dot = dot + (beta[j] * _TWO_M600) * y[j]
    t[0] = ((dot / sigma2) * _TWO_600)
    z = -1.0 if t[0] < 0.0 else 1.0
    for j in range(d):
        diff = y[j] - z * beta[j]
        ss = ss + diff * diff
    return -(ss / sigma2) * 0.5


cdef double _mixture_fallback(const floating *y, Py_ssize_t d, Py_ssize_t K, const double *means,
                              double sigma2, double *lp) noexcept nogil:
    """Unnormalised posteriors into lp (K) when no log-term ``-|y - mu_k|^2 / (2 sigma2)`` is
    finite (all -inf: sigma2 -> 0 or the squares overflowed) or one is NaN; returns the
    largest log-term.

    From the squared distances s_k themselves: ``lp_k = exp(-(s_k - s_min) / (2 sigma2))``, so
    the nearest mean gets exp(0) = 1 and the sum is >= 1 (never 0/0); ties split equally; a
    difference that overflows gives exactly 0 (the hard assignment).  If some s_k overflowed,
    all are recomputed with the differences scaled by 2^-600 (exact) and the factor 2^1200
    applied after dividing by sigma2.  NaN parameters stay NaN (the caller's last guard).
    """
    cdef Py_ssize_t j, k
    cdef double s, diff, smin = INFINITY
    cdef int scaled = 0
    for k in range(K):
        s = 0.0
        for j in range(d):
            diff = y[j] - means[k * d + j]
            s = s + diff * diff
        lp[k] = s
        if s == INFINITY:
            scaled = 1
    if scaled:
        for k in range(K):
            s = 0.0
            for j in range(d):
                diff = (y[j] - means[k * d + j]) * _TWO_M600
                s = s + diff * diff
            lp[k] = s
    for k in range(K):
        if lp[k] < smin:
            smin = lp[k]
    for k in range(K):
        if scaled:
            lp[k] = exp(-(((lp[k] - smin) * _TWO_600) / sigma2) * _TWO_599)
        else:
            lp[k] = exp(-((lp[k] - smin) / sigma2) * 0.5)
    if scaled:
        return -((smin * _TWO_600) / sigma2) * _TWO_599
    return -(smin / sigma2) * 0.5


cdef double _row_gradient(const floating *y, Py_ssize_t d, Py_ssize_t K, const double *means,
                          double sigma2, int symmetric, double *g, double *lp) noexcept nogil:
    """g (m coordinates) of one row; returns log p(y).

    lp (K): symmetric, ``lp[0] = <beta, y> / sigma2``; K means, the unnormalised posteriors.
    """
    cdef Py_ssize_t j, k
    cdef double t = 0.0, yy = 0.0, bb = 0.0, w, at, diff, mx, s, ll
    cdef int bad = 0
    cdef double norm_const = -0.5 * d * log(2.0 * M_PI * sigma2)
    if symmetric:
        for j in range(d):
            t = t + means[j] * y[j]
            yy = yy + (<double> y[j]) * y[j]
            bb = bb + means[j] * means[j]
        t = t / sigma2
        if t != t:                      # terms of <beta, y> overflowed to +inf and -inf
            ll = _symmetric_fallback(y, d, means, sigma2, &t)
        else:
            ll = -(yy + bb) / (2.0 * sigma2) + fabs(t)
            if ll != ll:                # -inf + inf: sigma2 tiny or the squares overflowed
                ll = _symmetric_fallback(y, d, means, sigma2, &w)
        w = tanh(t)
        for j in range(d):
            g[j] = w * y[j] - means[j]
        lp[0] = t
        at = fabs(t)
        return ll + log1p(exp(-2.0 * at)) - log(2.0) + norm_const
    mx = -INFINITY
    for k in range(K):
        s = 0.0
        for j in range(d):
            diff = y[j] - means[k * d + j]
            s = s + diff * diff
        lp[k] = -s / (2.0 * sigma2)
        if lp[k] > mx:
            mx = lp[k]
        elif lp[k] != lp[k]:
            bad = 1
    if mx == -INFINITY or bad:
        mx = _mixture_fallback(y, d, K, means, sigma2, lp)
        s = 0.0
        for k in range(K):
            s = s + lp[k]
    else:
        s = 0.0
        for k in range(K):
            lp[k] = exp(lp[k] - mx)
            s = s + lp[k]
    ll = mx + log(s)
    for k in range(K):
        w = lp[k] / s
        for j in range(d):
            g[k * d + j] = w * (y[j] - means[k * d + j])
    return ll - log(<double> K) + norm_const


cdef inline int _all_finite(const double *v, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(m):
        if not (fabs(v[j]) <= DBL_MAX):
            return 0
    return 1


cdef int _clip(double *g, Py_ssize_t m, double C) noexcept nogil:
    """g <- g min(1, C / |g|) in place (the clipped estimator's contribution); 1 if clipped.

    Where ``sum_j g_j^2`` lies in [_SS_MIN, DBL_MAX] and ``C / |g|`` is a normal double, the
    plain ``g_j (C / |g|)``.  Otherwise the norm is taken after dividing by ``max_j |g_j|``
    and the contribution is ``((g_j / max) / r) C``, r = |g| / max in [1, sqrt m]: no square
    overflows or underflows, and no factor lands in the subnormal range, where rounding is
    absolute and could lift |contribution| above C.
    """
    cdef Py_ssize_t j
    cdef double ss = 0.0, nrm, f, amax = 0.0, r = 0.0, v
    for j in range(m):
        ss = ss + g[j] * g[j]
    if _SS_MIN <= ss <= DBL_MAX:
        nrm = sqrt(ss)
        if nrm <= C:
            return 0
        f = C / nrm
        if f >= DBL_MIN:
            for j in range(m):
                g[j] = g[j] * f
        else:
            for j in range(m):
                g[j] = (g[j] / nrm) * C
        return 1
    for j in range(m):
        if fabs(g[j]) > amax:
            amax = fabs(g[j])
    if amax == 0.0:
        return 0
    for j in range(m):
        v = g[j] / amax
        r = r + v * v
    r = sqrt(r)
    if r <= C / amax:                   # |g| = amax r <= C (C / amax may underflow to 0: clipped)
        return 0
    for j in range(m):
        g[j] = ((g[j] / amax) / r) * C
    return 1


cdef struct _Args:
    # what a block of either pass reads (from the driver's arguments) and writes
    Py_ssize_t n, d, K, m         # m = d (symmetric) or K d gradient coordinates
    dpc_block_plan plan           # gradem_stats: the chunks of each block
    const double *means
    double sigma2
    int symmetric, estimator
    double scale, beta_m
    const double *glx
    const double *glw
    Py_ssize_t ngl
    double *raw                   # gradem_stats: (n_blocks, m), (n_blocks, m), (n_blocks,)
    double *stat                  # partials; row b is block b's
    double *ll
    int64_t *clipped              # (n_blocks,) rows truncated / clipped / left out
    int64_t *nonfinite            # (n_blocks,) rows left out by the last guard
    double *out_ll                # gradem_loglik: (n,) and (n, 2 or K) outputs
    double *out_resp


cdef void _set_args(_Args *a, Py_ssize_t n, Py_ssize_t d, Py_ssize_t K, const double *means,
                    double sigma2, int symmetric) noexcept:
    """The arguments both passes read; everything else empty (NULL / 0)."""
    memset(a, 0, sizeof(_Args))
    a.n, a.d, a.K, a.m = n, d, K, (d if symmetric else K * d)
    a.means, a.sigma2, a.symmetric = means, sigma2, symmetric


cdef void _rows(const floating *X, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t d, Py_ssize_t K,
                const double *means, double sigma2, int symmetric, int estimator,
                double scale, double beta_m, const double *glx, const double *glw, Py_ssize_t ngl,
                double *raw, double *stat, double *ll_acc, int64_t *clip_acc, int64_t *bad_acc,
                double *g, double *lp) noexcept nogil:
    """Rows r0..r1-1 in order, added into one block's partial row.

    Last guard: a row whose gradient is not finite adds nothing to raw or stat, one whose
    contribution is not finite nothing to stat; either is counted in ``bad_acc`` and
    ``clip_acc``.  Only non-finite parameters get there (finite ones give finite g and
    contributions at any finite row); a zero contribution has norm 0, within the bound.
    """
    cdef Py_ssize_t m = d if symmetric else K * d
    cdef Py_ssize_t i, j
    cdef double ll = 0.0
    cdef int64_t nclip = 0, nbad = 0
    cdef int hit
    for i in range(r0, r1):
        ll = ll + _row_gradient(X + i * d, d, K, means, sigma2, symmetric, g, lp)
        if not _all_finite(g, m):
            nbad += 1
            nclip += 1
            continue
        for j in range(m):
            raw[j] = raw[j] + g[j]
        if estimator == 1:
            hit = 0
            for j in range(m):
                if fabs(g[j]) > _SQRT2 * scale:
                    hit = 1
                g[j] = scale * _expected_psi(g[j] / scale, beta_m, glx, glw, ngl)
        elif estimator == 2:
            hit = _clip(g, m, scale)
        else:
            continue
        if not _all_finite(g, m):
            nbad += 1
            nclip += 1
            continue
        for j in range(m):
            stat[j] = stat[j] + g[j]
        nclip += hit
    ll_acc[0] = ll
    clip_acc[0] = nclip
    bad_acc[0] = nbad


cdef int _block(const floating *X, const void *args, Py_ssize_t b, double *buf) noexcept nogil:
    """Block ``b`` (the driver's body): its rows, into its partial row."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t r0 = dpc_plan_first(&a.plan, b) * DPC_CHUNK_SIZE
    cdef Py_ssize_t r1 = min(a.n, dpc_plan_end(&a.plan, b) * DPC_CHUNK_SIZE)
    _rows(X, r0, r1, a.d, a.K, a.means, a.sigma2, a.symmetric, a.estimator, a.scale, a.beta_m,
          a.glx, a.glw, a.ngl, a.raw + b * a.m, a.stat + b * a.m, a.ll + b, a.clipped + b,
          a.nonfinite + b, buf, buf + a.m)
    return 0


def gradem_stats(const floating[:, ::1] X,       # IN  (n, d)
                 const double[:, ::1] means,     # IN  (1, d) beta if symmetric, else (K, d)
                 double sigma2,
                 int symmetric,
                 int estimator,                  # 0 raw only, 1 truncated, 2 clipped
                 double scale,                   # s (truncated) or C (clipped)
                 double beta_m,                  # precision of the multiplicative noise
                 const double[::1] glx,          # IN  (q,) Gauss-Legendre nodes on [-1, 1]
                 const double[::1] glw,          # IN  (q,)
                 double[:, ::1] part_raw,        # OUT (n_blocks, m)
                 double[:, ::1] part_stat,       # OUT (n_blocks, m)
                 double[::1] part_ll,            # OUT (n_blocks,)
                 int64_t[::1] part_clipped,      # OUT (n_blocks,) rows truncated / clipped / left out
                 int64_t[::1] part_nonfinite,    # OUT (n_blocks,) rows zeroed by the last guard
                 int n_threads):
    """Per-block float64 partials of the gradient-EM statistics.

    ``n_blocks`` must equal ``block_count(n, m)`` (m = d if symmetric else K d); sum the
    partials over axis 0 in block order.

    Equivalent to: ``_reference.gradem.gradem_stats_reference`` split over blocks of rows.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t m = d if symmetric else K * d
    cdef Py_ssize_t nb = block_count(n, m)
    cdef Py_ssize_t ngl = glx.shape[0]
    cdef _Args a
    if means.shape[1] != d or K < 1 or (symmetric and K != 1):
        raise ValueError("means must have shape (1, d) (symmetric) or (K, d)")
    if (part_raw.shape[0] != nb or part_raw.shape[1] != m or part_stat.shape[0] != nb
            or part_stat.shape[1] != m or part_ll.shape[0] != nb or part_clipped.shape[0] != nb
            or part_nonfinite.shape[0] != nb):
        raise ValueError("partial arrays must have n_blocks = block_count(n, m) rows of m")
    if ngl < 1 or glw.shape[0] != ngl:
        raise ValueError("quadrature nodes and weights must have the same length >= 1")
    if not (sigma2 > 0.0 and scale > 0.0 and beta_m > 0.0) or estimator < 0 or estimator > 2:
        raise ValueError("sigma2, scale and beta_m must be > 0; estimator in {0, 1, 2}")
    part_raw[:, :] = 0.0
    part_stat[:, :] = 0.0
    part_ll[:] = 0.0
    part_clipped[:] = 0
    part_nonfinite[:] = 0
    if n == 0:
        return
    _set_args(&a, n, d, K, &means[0, 0], sigma2, symmetric)
    a.plan = dpc_plan_blocks(dpc_chunk_count(n), nb)
    a.estimator, a.scale, a.beta_m = estimator, scale, beta_m
    a.glx, a.glw, a.ngl = &glx[0], &glw[0], ngl
    a.raw, a.stat, a.ll = &part_raw[0, 0], &part_stat[0, 0], &part_ll[0]
    a.clipped, a.nonfinite = &part_clipped[0], &part_nonfinite[0]
    run_row_blocks(&X[0, 0], _block[float], _block[double], &a, a.plan.n_busy, m + K,
                   n_threads, "gradient-EM scratch")


cdef int _loglik_chunk(const floating *X, const void *args, Py_ssize_t c,
                       double *buf) noexcept nogil:
    """Chunk ``c`` of gradem_loglik (the driver's body): log p(y) and the posteriors of its
    rows."""
    cdef const _Args *a = <const _Args *> args
    cdef Py_ssize_t d = a.d, K = a.K, m = a.m, i, k, kk = 2 if a.symmetric else a.K
    cdef Py_ssize_t r0 = c * DPC_CHUNK_SIZE, r1 = r0 + dpc_chunk_rows(a.n, c)
    cdef double *resp
    cdef double t, w
    for i in range(r0, r1):
        a.out_ll[i] = _row_gradient(X + i * d, d, K, a.means, a.sigma2, a.symmetric, buf, buf + m)
        resp = a.out_resp + i * kk
        if a.symmetric:
            w = 2.0 * buf[m]            # 2 <beta, y> / sigma2, overflow-safe
            resp[0] = 1.0 / (1.0 + exp(-w))
            resp[1] = 1.0 / (1.0 + exp(w))
        else:
            t = 0.0
            for k in range(K):
                t = t + buf[m + k]
            for k in range(K):
                resp[k] = buf[m + k] / t
    return 0


def gradem_loglik(const floating[:, ::1] X,      # IN  (n, d)
                  const double[:, ::1] means,    # IN  (1, d) or (K, d)
                  double sigma2,
                  int symmetric,
                  double[::1] out_ll,            # OUT (n,) log p(y_i)
                  double[:, ::1] out_resp,       # OUT (n, 2 if symmetric else K) posteriors
                  int n_threads):
    """Per-row log-likelihood and posteriors (score_samples / predict_proba).

    Symmetric: component 0 has mean beta, component 1 mean -beta.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], K = means.shape[0]
    cdef Py_ssize_t m = d if symmetric else K * d, kk = 2 if symmetric else K
    cdef _Args a
    if means.shape[1] != d or K < 1 or (symmetric and K != 1):
        raise ValueError("means must have shape (1, d) (symmetric) or (K, d)")
    if out_ll.shape[0] != n or out_resp.shape[0] != n or out_resp.shape[1] != kk or not sigma2 > 0.0:
        raise ValueError("shapes do not match")
    if n == 0:
        return
    _set_args(&a, n, d, K, &means[0, 0], sigma2, symmetric)
    a.out_ll, a.out_resp = &out_ll[0], &out_resp[0, 0]
    run_row_chunks(&X[0, 0], n, _loglik_chunk[float], _loglik_chunk[double], &a, m + K,
                   n_threads, "gradient-EM scratch")
