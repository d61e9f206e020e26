"""Sequential (DP-)SEP and EP loops for a Gaussian mixture with unknown means (one nogil loop).

Each step takes one row ``x``, forms the cavity over the J component means, matches the
moments of the tilted distribution in closed form (derivation in
:mod:`dpem_fast.mixture._dp_sep`) and returns the intermediate factor ``f_n``; SEP then
damps the shared factor towards it, EP replaces the row's own site.  A step depends on the
one before, so the loop is sequential: no threads, and the result is the same for every
thread count by construction.  The steps come in batches that share one cavity (the last
release); the private loop adds one precomputed noise row per batch (the release layer draws
them in bulk), projects each precision onto the PSD cone, with a box clamps the factor's own
mean into it (eta rebuilt from the clamped mean), and clips the factor's norm.

Rounding (issue 34; ``dpem_fast.mixture._dp_sep``, "Rounding").  A batch's clipped sites are
summed in floats over blocks of ``SITE_BLOCK`` consecutive steps and the block partials exactly
(a superaccumulator per entry, ``dpc_exactsum.h``), rounded once; the data part
``step * sum`` then gets the release's noise *before* the public damped factor is added, so the
release is ``fl(step * sum) + noise`` and the factor's update is post-processing of it.

Layout: a "site" is ``theta (J, P)``, ``P = d + d*d``, row j = ``[eta_j, Lambda_j.ravel()]``
(precision-weighted mean, precision).  Twin: :mod:`dpem_fast._reference.sep`.
"""
from libc.math cimport exp, log, sqrt, fabs, M_PI, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from .dpc_exactsum cimport dpc_xs_add, dpc_xs_init, dpc_xs_round, dpc_xsum

cdef enum:
    # steps whose clipped sites a batch sums in floats before adding the partial exactly
    _SITE_BLOCK = 256

SITE_BLOCK = _SITE_BLOCK


cdef int _chol(const double *A, double *L, Py_ssize_t d) noexcept nogil:
    """Lower Cholesky factor of the d x d matrix A (row-major); 1 if A is not PD."""
    cdef Py_ssize_t i, j, k
    cdef double s
    for i in range(d):
        for j in range(i + 1):
            s = A[i * d + j]
            for k in range(j):
                s -= L[i * d + k] * L[j * d + k]
            if i == j:
                if not s > 0.0:
                    return 1
                L[i * d + i] = sqrt(s)
            else:
                L[i * d + j] = s / L[j * d + j]
        for j in range(i + 1, d):
            L[i * d + j] = 0.0
    return 0


cdef void _chol_solve(const double *L, double *b, Py_ssize_t d) noexcept nogil:
    """b <- A^-1 b for A = L L^T."""
    cdef Py_ssize_t i, k
    cdef double s
    for i in range(d):
        s = b[i]
        for k in range(i):
            s -= L[i * d + k] * b[k]
        b[i] = s / L[i * d + i]
    for i in range(d - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, d):
            s -= L[k * d + i] * b[k]
        b[i] = s / L[i * d + i]


cdef void _chol_inv(const double *L, double *Ainv, double *col, Py_ssize_t d) noexcept nogil:
    """Ainv <- (L L^T)^-1, symmetrised."""
    cdef Py_ssize_t i, j
    for j in range(d):
        for i in range(d):
            col[i] = 1.0 if i == j else 0.0
        _chol_solve(L, col, d)
        for i in range(d):
            Ainv[i * d + j] = col[i]
    for i in range(d):
        for j in range(i):
            Ainv[i * d + j] = 0.5 * (Ainv[i * d + j] + Ainv[j * d + i])
            Ainv[j * d + i] = Ainv[i * d + j]


cdef int _site_update(const double *theta_c, const double *x, const double *log_w, double s2,
                      Py_ssize_t J, Py_ssize_t d, double *fn, double *work) noexcept nogil:
    """fn <- natural parameters of proj[tilted] / cavity; 1 (fn untouched) if a cavity
    precision or a tilted covariance is not PD."""
    cdef Py_ssize_t P = d + d * d, dd = d * d, j, a, b
    cdef Py_ssize_t per = 2 * dd + 2 * d
    cdef double *L = work + J * per
    cdef double *T = L + dd
    cdef double *col = T + dd
    cdef double *u = col + d
    cdef double *logz = u + d
    cdef double *V
    cdef double *m
    cdef double *Vp
    cdef double *mp
    cdef const double *eta_c
    cdef const double *lam_c
    cdef double q, logdet, top, tot, r, dl
    for j in range(J):
        eta_c = theta_c + j * P
        lam_c = eta_c + d
        V = work + j * per
        m = V + dd
        Vp = m + d
        mp = Vp + dd
        if _chol(lam_c, L, d):
            return 1
        _chol_inv(L, V, col, d)
        for a in range(d):
            m[a] = eta_c[a]
        _chol_solve(L, m, d)
        # predictive N(x; m, V + s2 I)
        for a in range(dd):
            T[a] = V[a]
        for a in range(d):
            T[a * d + a] += s2
        if _chol(T, L, d):
            return 1
        logdet = 0.0
        for a in range(d):
            logdet += 2.0 * log(L[a * d + a])
            u[a] = x[a] - m[a]
        # q = u^T A^-1 u via forward substitution only
        q = 0.0
        for a in range(d):
            dl = u[a]
            for b in range(a):
                dl -= L[a * d + b] * u[b]
            u[a] = dl / L[a * d + a]
            q += u[a] * u[a]
        logz[j] = log_w[j] - 0.5 * (d * log(2.0 * M_PI) + logdet + q)
        # posterior of mu_j given x alone: precision lam_c + I/s2, shift eta_c + x/s2
        for a in range(dd):
            T[a] = lam_c[a]
        for a in range(d):
            T[a * d + a] += 1.0 / s2
            mp[a] = eta_c[a] + x[a] / s2
        if _chol(T, L, d):
            return 1
        _chol_inv(L, Vp, col, d)
        _chol_solve(L, mp, d)
    top = logz[0]
    for j in range(1, J):
        if logz[j] > top:
            top = logz[j]
    tot = 0.0
    for j in range(J):
        logz[j] = exp(logz[j] - top)
        tot += logz[j]
    # the tilted covariance of every component first: a failure leaves fn untouched
    for j in range(J):
        r = logz[j] / tot
        V = work + j * per
        m = V + dd
        Vp = m + d
        mp = Vp + dd
        if r == 0.0:
            continue
        for a in range(d):
            mp[a] -= m[a]                         # delta
        for a in range(d):
            for b in range(d):
                Vp[a * d + b] = ((1.0 - r) * V[a * d + b] + r * Vp[a * d + b]
                                 + r * (1.0 - r) * mp[a] * mp[b])    # tilted covariance S
        for a in range(d):
            mp[a] = m[a] + r * mp[a]              # tilted mean E
        if _chol(Vp, L, d):
            return 1
        _chol_inv(L, V, col, d)                   # V <- S^-1 (the new precision)
    for j in range(J):
        r = logz[j] / tot
        eta_c = theta_c + j * P
        lam_c = eta_c + d
        V = work + j * per
        m = V + dd
        Vp = m + d
        mp = Vp + dd
        if r == 0.0:
            for a in range(P):
                fn[j * P + a] = 0.0
            continue
        for a in range(d):
            dl = 0.0
            for b in range(d):
                dl += V[a * d + b] * mp[b]
            fn[j * P + a] = dl - eta_c[a]
        for a in range(dd):
            fn[j * P + d + a] = V[a] - lam_c[a]
    for a in range(J * P):
        if not fabs(fn[a]) < INFINITY:            # overflow (huge rows) or NaN: no update
            return 1
    return 0


cdef void _clip(double *v, Py_ssize_t n, double c) noexcept nogil:
    cdef Py_ssize_t i
    cdef double s = 0.0
    for i in range(n):
        s += v[i] * v[i]
    s = sqrt(s)
    if s > c:
        s = c / s
        for i in range(n):
            v[i] *= s


cdef void _psd_floor(double *A, Py_ssize_t d, double *W, double *U) noexcept nogil:
    """Symmetrise A and, if it has a negative eigenvalue, set those to 0 (cyclic Jacobi)."""
    cdef Py_ssize_t i, j, k, p, qq, sweep
    cdef double off, tot, th, t, c, s, x1, x2, lo
    for i in range(d):
        for j in range(i):
            A[i * d + j] = 0.5 * (A[i * d + j] + A[j * d + i])
            A[j * d + i] = A[i * d + j]
    for i in range(d * d):
        W[i] = A[i]
        U[i] = 0.0
    for i in range(d):
        U[i * d + i] = 1.0
    for sweep in range(100):
        off = 0.0
        tot = 0.0
        for i in range(d):
            for j in range(d):
                tot += W[i * d + j] * W[i * d + j]
                if i != j:
                    off += W[i * d + j] * W[i * d + j]
        if off <= 1e-32 * tot:
            break
        for p in range(d):
            for qq in range(p + 1, d):
                if W[p * d + qq] == 0.0:
                    continue
                th = (W[qq * d + qq] - W[p * d + p]) / (2.0 * W[p * d + qq])
                t = 1.0 / (fabs(th) + sqrt(th * th + 1.0))
                if th < 0.0:
                    t = -t
                c = 1.0 / sqrt(t * t + 1.0)
                s = t * c
                for k in range(d):
                    x1 = W[k * d + p]
                    x2 = W[k * d + qq]
                    W[k * d + p] = c * x1 - s * x2
                    W[k * d + qq] = s * x1 + c * x2
                for k in range(d):
                    x1 = W[p * d + k]
                    x2 = W[qq * d + k]
                    W[p * d + k] = c * x1 - s * x2
                    W[qq * d + k] = s * x1 + c * x2
                for k in range(d):
                    x1 = U[k * d + p]
                    x2 = U[k * d + qq]
                    U[k * d + p] = c * x1 - s * x2
                    U[k * d + qq] = s * x1 + c * x2
    lo = W[0]
    for i in range(1, d):
        if W[i * d + i] < lo:
            lo = W[i * d + i]
    if lo >= 0.0:
        return
    for i in range(d):
        for j in range(i + 1):
            t = 0.0
            for k in range(d):
                if W[k * d + k] > 0.0:
                    t += U[i * d + k] * W[k * d + k] * U[j * d + k]
            A[i * d + j] = t
            A[j * d + i] = t


cdef void _eta_into_box(double *eta, const double *A, Py_ssize_t d, const double *W, const double *U,
                        const double *lo, const double *hi, double *m) noexcept nogil:
    """eta <- A clamp(A^+ eta, [lo, hi]) for the PSD precision A = U diag(W) U^T (W floored at 0).

    The factor's own mean ``A^+ eta`` (pseudo-inverse: directions of eigenvalue 0 carry no
    mean) is clamped into the box per coordinate, then eta is rebuilt from it, so a direction
    whose precision is (near) 0 keeps no noise in eta and the mean ``A^-1 eta`` stays inside
    the box.  Equivalent to ``_reference.sep.project_factor`` (the ``lo``/``hi`` branch)."""
    cdef Py_ssize_t a, b, k
    cdef double t, wk
    for a in range(d):
        m[a] = 0.0
    for k in range(d):
        wk = W[k * d + k]
        if not wk > 0.0:
            continue
        t = 0.0
        for a in range(d):
            t += U[a * d + k] * eta[a]
        t /= wk
        for a in range(d):
            m[a] += U[a * d + k] * t
    for a in range(d):
        if m[a] < lo[a]:
            m[a] = lo[a]
        elif m[a] > hi[a]:
            m[a] = hi[a]
    for a in range(d):
        t = 0.0
        for b in range(d):
            t += A[a * d + b] * m[b]
        eta[a] = t


cdef void _project(double *theta, Py_ssize_t J, Py_ssize_t d, double clip, double *W, double *U,
                   const double *lo, const double *hi, double *m) noexcept nogil:
    """PSD floor of every precision; with a box (lo != NULL) eta made consistent with it (the
    factor's mean clamped into the box); then the norm clipped to ``clip``."""
    cdef Py_ssize_t j, k, P = d + d * d
    for j in range(J):
        _psd_floor(theta + j * P + d, d, W, U)
        if lo != NULL:
            for k in range(d):
                if W[k * d + k] < 0.0:
                    W[k * d + k] = 0.0
            _eta_into_box(theta + j * P, theta + j * P + d, d, W, U, lo, hi, m)
    _clip(theta, J * P, clip)


def sep_loop(const double[:, ::1] X,          # IN  (n, d) rows
             const long long[::1] order,       # IN  (S,) row of each step
             double[:, ::1] theta_f,           # IN/OUT (J, P) the shared factor
             const double[:, ::1] theta0,      # IN  (J, P) the prior
             const double[::1] log_w,          # IN  (J,) log mixing weights
             double s2, double n_copies, double step, double clip,
             noise=None,                       # IN  (ceil(S / batch), J, P) or None (non-private)
             Py_ssize_t batch=1,               # IN  steps per update (and per release)
             lo=None, hi=None):                # IN  (d,) box of the factor's mean, or None
    """SEP over the steps ``order``; with ``noise``, DP-SEP (Algorithm 3). Returns skipped steps.

    The steps are cut into consecutive batches of ``batch`` (the last may be shorter).  Per
    batch of b steps: one cavity ``theta0 + (n_copies - 1) theta_f`` from the factor at the
    batch's start; for each step, ``f_n`` by moment matching, clipped to norm ``clip``;
    ``theta_f <- (1 - b step) theta_f + (step sum f_n [+ noise[batch index]])`` (the sum exact
    over blocks of ``SITE_BLOCK`` float partials, the noise added to the data part first);
    then (with noise, or with a box) the projection: precisions floored at eigenvalue 0, with
    a box the factor's mean ``Lambda^+ eta`` clamped into ``[lo, hi]`` and eta rebuilt from it,
    and the norm clipped to ``clip``.  ``batch = 1`` is the paper's one release per step.
    A non-private step whose cavity is not PD (or whose f_n overflows) is skipped (b counts
    the steps kept); a private one uses f_n = 0 instead and still counts (b is public; the
    projected factor is PSD, so the cavity is PD; f_n = 0 only on overflow).  With noise, a
    step ``order[s] = -1`` is an empty slot (a person-level fit's group with fewer than m rows):
    f_n = 0, counted in b, not a skip.
    Equivalent to: ``_reference.sep.sep_run``.
    """
    cdef Py_ssize_t J = theta_f.shape[0], d = X.shape[1], P = d + d * d
    cdef Py_ssize_t S = order.shape[0], s, k, skipped = 0, nb, bi, s_end, kept
    cdef const double[:, :, ::1] nz
    cdef const double[::1] lov
    cdef const double[::1] hiv
    cdef const double *noisep = NULL
    cdef const double *lop = NULL
    cdef const double *hip = NULL
    cdef bint proj
    if theta_f.shape[1] != P or theta0.shape[0] != J or theta0.shape[1] != P or log_w.shape[0] != J:
        raise ValueError("theta_f, theta0 and log_w must have shapes (J, d + d*d) and (J,)")
    if batch < 1:
        raise ValueError("batch must be >= 1")
    nb = (S + batch - 1) // batch
    if noise is not None:
        nz = noise
        if nz.shape[0] != nb or nz.shape[1] != J or nz.shape[2] != P:
            raise ValueError("noise must have shape (ceil(len(order) / batch), J, d + d*d)")
        if S:
            noisep = &nz[0, 0, 0]
    if (lo is None) != (hi is None):
        raise ValueError("lo and hi must be given together")
    if lo is not None:
        lov = lo
        hiv = hi
        if lov.shape[0] != d or hiv.shape[0] != d:
            raise ValueError("lo and hi must have shape (d,)")
        lop = &lov[0]
        hip = &hiv[0]
    proj = noisep != NULL or lop != NULL
    for s in range(S):
        if not (0 <= order[s] < X.shape[0] or (order[s] == -1 and noisep != NULL)):
            raise ValueError("order holds a row index outside X (-1, an empty slot, only with noise)")
    if S == 0:
        return 0
    cdef double *work = <double *> malloc((J * (2 * d * d + 2 * d) + 2 * d * d + 3 * d + J
                                           + 3 * J * P + 2 * d * d + d) * sizeof(double))
    cdef dpc_xsum *acc = <dpc_xsum *> malloc(J * P * sizeof(dpc_xsum))
    cdef double y
    if work == NULL or acc == NULL:
        free(work)
        free(acc)
        raise MemoryError()
    cdef double *fn = work + J * (2 * d * d + 2 * d) + 2 * d * d + 3 * d + J
    cdef double *cav = fn + J * P
    cdef double *tot = cav + J * P
    cdef double *W = tot + J * P
    cdef double *U = W + d * d
    cdef double *mvec = U + d * d
    cdef double *tf = &theta_f[0, 0]
    cdef const double *t0 = &theta0[0, 0]
    cdef const double *xs = &X[0, 0]
    cdef const double *lw = &log_w[0]
    with nogil:
        for bi in range(nb):
            s_end = (bi + 1) * batch
            if s_end > S:
                s_end = S
            for k in range(J * P):
                cav[k] = t0[k] + (n_copies - 1.0) * tf[k]
                tot[k] = 0.0
                dpc_xs_init(&acc[k])
            kept = 0
            for s in range(bi * batch, s_end):
                if order[s] < 0:                  # an empty slot of a group (private only): f_n = 0
                    for k in range(J * P):
                        fn[k] = 0.0
                elif _site_update(cav, xs + order[s] * d, lw, s2, J, d, fn, work):
                    skipped += 1
                    if noisep == NULL:
                        continue
                    for k in range(J * P):        # private: the step still happens, f_n = 0
                        fn[k] = 0.0
                _clip(fn, J * P, clip)
                for k in range(J * P):
                    tot[k] += fn[k]
                kept += 1
                if kept % _SITE_BLOCK == 0:       # a block's float partial, added exactly
                    for k in range(J * P):
                        dpc_xs_add(&acc[k], tot[k])
                        tot[k] = 0.0
            if kept == 0:
                continue
            if kept % _SITE_BLOCK != 0:
                for k in range(J * P):
                    dpc_xs_add(&acc[k], tot[k])
            for k in range(J * P):
                y = step * dpc_xs_round(&acc[k])  # the data part, then its noise (the release)
                if noisep != NULL:
                    y = y + noisep[bi * J * P + k]
                tf[k] = (1.0 - kept * step) * tf[k] + y
            if proj:
                _project(tf, J, d, clip, W, U, lop, hip, mvec)
    free(work)
    free(acc)
    return skipped


def project_factor(double[:, ::1] theta, Py_ssize_t d, double clip, lo=None, hi=None):
    """In place: the private loop's projection (PSD precisions, with a box the factor's mean
    clamped into it, then norm <= clip)."""
    cdef Py_ssize_t J = theta.shape[0]
    cdef const double[::1] lov
    cdef const double[::1] hiv
    cdef const double *lop = NULL
    cdef const double *hip = NULL
    if lo is not None:
        lov = lo
        hiv = hi
        if lov.shape[0] != d or hiv.shape[0] != d:
            raise ValueError("lo and hi must have shape (d,)")
        lop = &lov[0]
        hip = &hiv[0]
    cdef double *W = <double *> malloc((2 * d * d + d) * sizeof(double))
    if W == NULL:
        raise MemoryError()
    _project(&theta[0, 0], J, d, clip, W, W + d * d, lop, hip, W + 2 * d * d)
    free(W)


def ep_loop(const double[:, ::1] X, const long long[::1] order,
            double[:, :, ::1] sites,          # IN/OUT (n, J, P)
            double[:, ::1] q,                 # IN/OUT (J, P) = theta0 + sum of sites
            const double[::1] log_w, double s2, double damping):
    """Full EP (non-private) over the steps ``order``; returns skipped steps.

    Equivalent to: ``_reference.sep.ep_run``.
    """
    cdef Py_ssize_t J = q.shape[0], d = X.shape[1], P = d + d * d, dd = d * d
    cdef Py_ssize_t S = order.shape[0], s, k, j, skipped = 0, i
    cdef int bad
    if sites.shape[0] != X.shape[0] or sites.shape[1] != J or sites.shape[2] != P or q.shape[1] != P:
        raise ValueError("sites must have shape (n, J, d + d*d) and q (J, d + d*d)")
    for s in range(S):
        if not 0 <= order[s] < X.shape[0]:
            raise ValueError("order holds a row index outside X")
    if S == 0:
        return 0
    cdef double *work = <double *> malloc((J * (2 * dd + 2 * d) + 2 * dd + 3 * d + J
                                           + 3 * J * P + dd) * sizeof(double))
    if work == NULL:
        raise MemoryError()
    cdef double *fn = work + J * (2 * dd + 2 * d) + 2 * dd + 3 * d + J
    cdef double *cav = fn + J * P
    cdef double *nw = cav + J * P
    cdef double *L = nw + J * P
    cdef double *qp = &q[0, 0]
    cdef double *site
    cdef const double *xs = &X[0, 0]
    cdef const double *lw = &log_w[0]
    with nogil:
        for s in range(S):
            i = order[s]
            site = &sites[i, 0, 0]
            bad = 0
            for k in range(J * P):
                cav[k] = qp[k] - site[k]
            for j in range(J):
                if _chol(cav + j * P + d, L, d):
                    bad = 1
                    break
            if bad or _site_update(cav, xs + i * d, lw, s2, J, d, fn, work):
                skipped += 1
                continue
            for k in range(J * P):
                nw[k] = (1.0 - damping) * site[k] + damping * fn[k]
                fn[k] = cav[k] + nw[k]
            for j in range(J):
                if _chol(fn + j * P + d, L, d):
                    bad = 1
                    break
            if bad:
                skipped += 1
                continue
            memcpy(site, nw, J * P * sizeof(double))
            memcpy(qp, fn, J * P * sizeof(double))
    free(work)
    return skipped
