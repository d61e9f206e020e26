"""The private Gaussian mixture's full-covariance M-step and precision Cholesky factors, compiled.

Post-processing of released statistics (issue 26): the same computation as
``mixture._gmm_mstep.private_m_step`` (maximum likelihood, ``covariance_type="full"``) followed
by ``compute_precision_cholesky``, in one call without Python objects per component, so that
the serial part of a private EM iteration at small n is not numpy's per-call overhead.  Every
step reads the noisy statistics and public constants only:

1. weights: the counts clipped at 0 and renormalised, each at least ``WEIGHT_FLOOR``;
2. counts floored at ``count_floor`` (``max(1, 3 σ_N)``);
3. means ``S1_k / Ñ_k``, shrunk towards 0 by the positive-part James-Stein factor of their
   noise ``sd1 / Ñ_k`` (d ≥ 3), clipped to the box image ``[-b, b]`` (if any) and scaled onto
   the unit ball when outside it;
4. covariances ``S2_k / Ñ_k - μ_k μ_kᵀ`` symmetrised, eigenvalues (LAPACK ``dsyevd``, as
   ``numpy.linalg.eigh``) clipped to ``[floor_k, 1]``, ``floor_k = min(max(low, min(cap,
   sigma2 / Ñ_k)), 1)``, rebuilt ``V diag(w) Vᵀ`` (``dgemm``), each feature's variance capped
   at ``b_i²`` (``D Σ D``);
5. precision Cholesky factors: ``dpotrf`` + ``dtrtrs`` (as scipy's wrappers call them), ``P_k =
   L_k⁻ᵀ``.

Elementwise steps follow numpy's operation order, the weights' sums run left to right as
numpy's for fewer than 8 components, and the squared norms follow numpy's einsum order
(:func:`_sum_squares`); the eigendecomposition, the rebuild and the Cholesky factors call
the LAPACK/BLAS routines the numpy path calls (scipy's build of them).  Where a build
groups a sum differently the results agree to rounding (the tests check both).  Steps 2-5
run per component, one task of the kernels' driver each (issue 41), every task reading its own
component's statistics and writing its own outputs: the same bits for any thread count.
"""
from libc.math cimport sqrt, isfinite
from libc.string cimport memcpy, memset
from scipy.linalg.cython_lapack cimport dsyevd, dsytd2, dsteqr, dorm2r, dpotrf, dtrtrs
from scipy.linalg.cython_blas cimport dgemm

import numpy as np

from ._driver cimport run_blocks

# the mixing-weight floor of mixture._common (WEIGHT_FLOOR)
cdef double _WEIGHT_FLOOR = 1e-12
# dsyevd's own steps are called directly (:func:`_eigh_lower`) for 2 <= d <= _DIRECT_MAX_D:
# there its tridiagonal reduction is one unblocked dsytd2 (dsytrd's block size 32 > d), its
# divide and conquer one dsteqr (dstedc's SMLSIZ 25 >= d) and its back-transformation one
# dorm2r (dormqr's block size 32 > d - 1), the reference ILAENV's values
cdef int _DIRECT_MAX_D = 25
# ... and for a largest |entry| within [2^-400, 2^400], well inside dsyevd's no-scaling band
# [sqrt(safmin / eps), sqrt(eps / safmin)] = [2^-485, 2^485] (a NaN, zero or extreme matrix
# goes through dsyevd itself)
cdef double _DIRECT_LOW = 2.0 ** -400, _DIRECT_HIGH = 2.0 ** 400
# below this many features a component's steps (~1 us at d = 5) cost less than handing the
# components to other threads: one thread (the same bits either way)
cdef int _PARALLEL_MIN_D = 6


cpdef int component_threads(int K, int d, int n_threads) noexcept:
    """The threads :func:`full_m_step` runs its ``K`` components over (at most ``n_threads``,
    one below ``_PARALLEL_MIN_D`` features), as the kernels' driver clamps them: a caller that
    must prepare for a threaded call (BLAS held to one thread) asks here."""
    if d < _PARALLEL_MIN_D or n_threads < 1:
        return 1
    return n_threads if n_threads < K else (K if K > 1 else 1)


cdef inline double _sum_squares(const double *x, Py_ssize_t n) noexcept nogil:
    """``np.einsum("i,i->", x, x)`` in numpy's own order (its contiguous two-operand sum of
    products, two lanes (SSE2 baseline), an unrolled block of four lane pairs accumulated
    last pair first, zero-padded tail, lanes summed), so that the means keep numpy's bits."""
    cdef double v0 = 0.0, v1 = 0.0, a0, a1
    cdef Py_ssize_t c = n
    cdef const double *p = x
    while c >= 8:
        a0 = p[6] * p[6] + v0
        a1 = p[7] * p[7] + v1
        a0 = p[4] * p[4] + a0
        a1 = p[5] * p[5] + a1
        a0 = p[2] * p[2] + a0
        a1 = p[3] * p[3] + a1
        v0 = p[0] * p[0] + a0
        v1 = p[1] * p[1] + a1
        c -= 8
        p += 8
    while c > 0:
        v0 = p[0] * p[0] + v0
        v1 = (p[1] * p[1] if c > 1 else 0.0) + v1
        c -= 2
        p += 2
    return v0 + v1


cdef double *_eigh_lower(double *A, int d, double *w, double *work, int lwork, int *iwork, int liwork,
                         int *info) noexcept nogil:
    """Eigenvalues (ascending, into ``w``) and eigenvectors of the symmetric ``A`` (column-major,
    its lower triangle read; overwritten) as ``dsyevd("V", "L")`` computes them, bit for bit:
    returns where the eigenvectors are (column-major: ``A`` itself, or the start of ``work``).

    For small, well-scaled matrices (``_DIRECT_MAX_D``, ``_DIRECT_LOW``/``_DIRECT_HIGH``) the
    steps dsyevd takes there are called directly: ``dsytd2``, ``dsteqr("I")``, then ``dorm2r``
    on the vectors (``dormtr("L", "L", "N")``'s call for a lower reduction), the same
    operations in the same order without the driver's ILAENV / DLAMCH / DLANSY queries and
    final copy (about half a microsecond of a 10 x 10 decomposition).  ``work`` holds
    dsyevd's minimal workspace ``1 + 6d + 2d²`` at least."""
    cdef int i, j, m = d - 1
    cdef double anrm = 0.0, x
    cdef char jobz = b'V', uplo = b'L', compz = b'I', side = b'L', trans = b'N'
    cdef double *Z
    cdef double *e
    cdef double *tau
    if 2 <= d <= _DIRECT_MAX_D:
        for j in range(d):                      # DLANSY("M", "L"): the largest |entry|
            for i in range(j, d):
                x = A[i + j * d]
                x = x if x >= 0 else -x
                if not x <= anrm:               # (a NaN: kept, and outside the band)
                    anrm = x
        if _DIRECT_LOW <= anrm <= _DIRECT_HIGH:
            Z, e = work, work + d * d
            tau = e + d
            dsytd2(&uplo, &d, A, &d, w, e, tau, info)
            if info[0] != 0:
                return A
            dsteqr(&compz, &d, w, e, Z, &d, tau + d, info)
            if info[0] != 0:
                return A
            dorm2r(&side, &trans, &m, &d, &m, A + 1, &d, tau, Z + 1, &d, tau + d, info)
            return Z
    dsyevd(&jobz, &uplo, &d, A, &d, w, work, &lwork, iwork, &liwork, info)
    return A


def eigh_lower(double[:, ::1] A):                   # IN (d, d) symmetric, d >= 1; copied
    """``(w, V, info)``: :func:`_eigh_lower` of ``A``, as ``scipy.linalg.lapack.dsyevd(A,
    compute_v=1, lower=1)`` gives them (the tests compare the bits)."""
    import numpy as np
    cdef int d = <int> A.shape[0], info = 0, lwork = -1, liwork = -1, iw_query = 0
    cdef double work_query = 0.0
    cdef char jobz = b'V', uplo = b'L'
    if A.shape[1] != d or d < 1:
        raise ValueError("eigh_lower: A must be square, d >= 1")
    dsyevd(&jobz, &uplo, &d, &work_query, &d, &work_query, &work_query, &lwork, &iw_query, &liwork, &info)
    lwork, liwork = <int> work_query, max(1, iw_query)
    M = np.array(np.asarray(A).T, order="C")       # A column-major: the rows of M are its columns
    w, work, V = np.empty(d), np.empty(lwork), np.empty((d, d))
    iwork = np.empty(liwork, dtype=np.intc)
    cdef double[:, ::1] Mv = M, Vv = V
    cdef double[::1] wv = w, workv = work
    cdef int[::1] iworkv = iwork
    cdef double *Q = _eigh_lower(&Mv[0, 0], d, &wv[0], &workv[0], lwork, &iworkv[0], liwork, &info)
    memcpy(&Vv[0, 0], Q, d * d * sizeof(double))
    return w, np.ascontiguousarray(V.T), info


cdef int _project_psd(double *S, double floor, int d, double *V, double *w, double *work, int lwork,
                      int *iwork, int liwork, double *out) noexcept nogil:
    """``out = V clip(w, floor, 1) Vᵀ`` for the eigendecomposition of the symmetrised S
    (row-major, d x d; overwritten).  Returns LAPACK's info."""
    cdef int i, j, info = 0
    cdef char tn = b'N', tt = b'T'
    cdef double one = 1.0, zero = 0.0, x
    # (S + Sᵀ) / 2, copied column-major into V for dsyevd (symmetric: the same values)
    for i in range(d):
        for j in range(d):
            V[i + j * d] = (S[i * d + j] + S[j * d + i]) / 2
    V = _eigh_lower(V, d, w, work, lwork, iwork, liwork, &info)     # (the vectors: V or work)
    if info != 0:
        return info
    for j in range(d):
        x = w[j]
        if x < floor:
            x = floor
        if x > 1.0:
            x = 1.0
        w[j] = x
    # numpy: (V * w[None, :]) @ V.T, row-major; here column-major: S = V diag(w) and
    # out (row-major) = (V diag(w)) Vᵀ, i.e. out^T = V (V diag(w))^T computed column-major
    for j in range(d):
        for i in range(d):
            S[i + j * d] = V[i + j * d] * w[j]
    # out_rowmajor = A Vᵀ with A = V diag(w) (both column-major): as column-major the
    # product B = V Aᵀ is its transpose, which is out read row-major
    dgemm(&tn, &tt, &d, &d, &d, &one, V, &d, S, &d, &zero, out, &d)
    return 0


cdef struct _MArgs:
    const double *nk            # (K,) noisy counts
    const double *s1            # (K, d) noisy first moments
    const double *s2            # (K, d, d) noisy second moments
    const double *box           # (d,) box image half-widths, or NULL
    const double *bsq           # (d,) the box's variance caps b_i² (b_i ≤ 1), or NULL
    double *means               # (K, d) OUT
    double *covs                # (K, d, d) OUT
    double *prec                # (K, d, d) OUT
    int *stage                  # (K,) OUT (zeroed by the caller): the step that failed, or 0
    int *info                   # (K,) OUT (zeroed by the caller): LAPACK's info of that step
    int d, lwork, liwork
    double count_floor, sd1, sigma2, low, cap


cdef int _component(const void *args, Py_ssize_t k, double *scratch) noexcept nogil:
    """Steps 2-5 of component ``k`` (module docstring), with the calling thread's scratch
    (``2 d² + d + lwork`` doubles, then ``liwork`` ints).  Reads component k's statistics and
    the public constants, writes component k's outputs and its status only: which thread runs
    it never changes a bit."""
    cdef const _MArgs *a = <const _MArgs *> args
    cdef int d = a.d, i, j, info = 0
    cdef double x, sq, f, floor, nf
    cdef double *V = scratch
    cdef double *S = scratch + d * d
    cdef double *w = scratch + 2 * d * d
    cdef double *work = w + d
    cdef int *iwork = <int *> (work + a.lwork)
    cdef double *mu = a.means + k * d
    cdef const double *s1 = a.s1 + k * d
    cdef const double *s2 = a.s2 + k * d * d
    cdef double *ck = a.covs + k * d * d
    cdef char uplo = b'L', diag_n = b'N'
    nf = a.nk[k] if a.nk[k] > a.count_floor else a.count_floor
    # means: S1 / Ñ, James-Stein factor, box clip, unit ball
    for i in range(d):
        mu[i] = s1[i] / nf
    sq = _sum_squares(mu, d)
    if d >= 3:
        x = a.sd1 / nf
        if sq > 0:
            f = 1.0 - (d - 2) * (x * x) / sq
            f = f if f > 0.0 else 0.0
        else:
            f = 0.0
        for i in range(d):
            mu[i] = mu[i] * f
    if a.box != NULL:
        for i in range(d):
            x = mu[i]
            if x < -a.box[i]:
                x = -a.box[i]
            if x > a.box[i]:
                x = a.box[i]
            mu[i] = x
    sq = sqrt(_sum_squares(mu, d))
    if sq > 1.0:
        for i in range(d):
            mu[i] = mu[i] / sq
    # covariances
    for i in range(d):
        for j in range(d):
            S[i * d + j] = s2[i * d + j] / nf - mu[i] * mu[j]
    x = a.sigma2 / nf
    floor = a.cap if x > a.cap else x
    floor = a.low if a.low > floor else floor
    floor = floor if floor < 1.0 else 1.0
    info = _project_psd(S, floor, d, V, w, work, a.lwork, iwork, a.liwork, ck)
    if info != 0:
        a.stage[k], a.info[k] = 1, info
        return 0
    if a.box != NULL:
        for i in range(d):
            x = a.bsq[i] / ck[i * d + i]
            w[i] = sqrt(x if x < 1.0 else 1.0)
        for i in range(d):
            for j in range(d):
                ck[i * d + j] = ck[i * d + j] * w[i] * w[j]
    # 5. precision Cholesky factor: L = chol(Σ), P = L⁻ᵀ
    for i in range(d * d):
        if not isfinite(ck[i]):
            a.stage[k] = 2
            return 0
    # column-major copy (as scipy's wrapper passes it: its lower triangle is the row-major
    # matrix's lower triangle; the rebuilt Σ need not be bit-symmetric)
    for i in range(d):
        for j in range(d):
            V[i + j * d] = ck[i * d + j]
    dpotrf(&uplo, &d, V, &d, &info)
    if info != 0:
        a.stage[k], a.info[k] = 3, info
        return 0
    for j in range(d):                                    # clean=1: zero the upper
        for i in range(j):
            V[i + j * d] = 0.0
    memset(S, 0, d * d * sizeof(double))
    for i in range(d):
        S[i + i * d] = 1.0
    dtrtrs(&uplo, &diag_n, &diag_n, &d, &d, V, &d, S, &d, &info)
    if info != 0:
        a.stage[k], a.info[k] = 4, info
        return 0
    memcpy(a.prec + k * d * d, S, d * d * sizeof(double))  # L⁻¹ column-major = L⁻ᵀ row-major
    return 0


def full_m_step(const double[::1] nk,            # IN  (K,) noisy counts
                const double[:, ::1] s1,         # IN  (K, d) noisy first moments
                const double[:, :, ::1] s2,      # IN  (K, d, d) noisy second moments
                double count_floor,              # max(1, 3 sd of a noisy count)
                double sd1,                      # sd of a noisy first-moment coordinate
                double sigma2,                   # noise scale of a second-moment entry
                double low,                      # max(reg_covar, 1e-6)
                const double[::1] box,           # IN  (d,) box image half-widths, or None
                double[::1] weights,             # OUT (K,)
                double[:, ::1] means,            # OUT (K, d)
                double[:, :, ::1] covs,          # OUT (K, d, d)
                double[:, :, ::1] prec_chol,     # OUT (K, d, d) precision Cholesky factors
                int n_threads=1):
    """Weights, means, covariances and precision Cholesky factors from noisy statistics (see
    the module docstring).  Raises ``numpy.linalg.LinAlgError`` as the numpy path does (for
    the first component, in order, whose step fails).

    The components (steps 2-5) run as tasks of the kernels' driver over at most
    ``n_threads`` threads: each reads its own statistics and writes its own outputs, so the
    result is the same, bit for bit, for every thread count (issue 41: the M-step is what
    many cores wait on between two E-steps).

    Equivalent to: ``private_m_step(nk, s1, s2, releases, reg_covar, None, domain, "full")``
    then ``compute_precision_cholesky(covs)`` (``mixture._gmm_mstep``).
    """
    cdef int K = <int> s1.shape[0], d = <int> s1.shape[1]
    cdef int k, i, info = 0, lwork = -1, liwork = -1, iw_query = 0, stage = 0
    cdef double total, x, b
    cdef double work_query = 0.0
    cdef double *bsq = NULL
    cdef char jobz = b'V', uplo = b'L'
    cdef bint has_box = box is not None
    cdef _MArgs a
    if (nk.shape[0] != K or s2.shape[0] != K or s2.shape[1] != d or s2.shape[2] != d
            or weights.shape[0] != K or means.shape[0] != K or means.shape[1] != d
            or covs.shape[0] != K or covs.shape[1] != d or covs.shape[2] != d
            or prec_chol.shape[0] != K or prec_chol.shape[1] != d or prec_chol.shape[2] != d
            or (has_box and box.shape[0] != d)):
        raise ValueError("full_m_step: inconsistent shapes")
    if K == 0 or d == 0:
        return
    # workspace query of dsyevd (as numpy.linalg.eigh sizes it)
    dsyevd(&jobz, &uplo, &d, &work_query, &d, &work_query, &work_query, &lwork, &iw_query, &liwork, &info)
    lwork = <int> work_query
    liwork = iw_query if iw_query > 1 else 1
    status = np.zeros((2, K), dtype=np.intc)
    cdef int[:, ::1] st = status
    bsq_arr = np.empty(d) if has_box else None
    cdef double[::1] bsq_v
    # 1. weights from the counts
    total = 0.0
    for k in range(K):
        x = nk[k] if nk[k] > 0.0 else 0.0
        weights[k] = x
        total = x if k == 0 else total + x
    for k in range(K):
        x = weights[k] / total if total > 0 else 1.0 / K
        weights[k] = x if x > _WEIGHT_FLOOR else _WEIGHT_FLOOR
    total = weights[0]
    for k in range(1, K):
        total = total + weights[k]
    for k in range(K):
        weights[k] = weights[k] / total
    # 3. the box and its variance cap (b_i² with b_i ≤ 1; cap = min_i b_i²)
    a.cap = 1.0
    if has_box:
        bsq_v = bsq_arr
        bsq = &bsq_v[0]
        for i in range(d):
            b = box[i] if box[i] < 1.0 else 1.0
            bsq[i] = b * b
            if i == 0 or bsq[i] < a.cap:
                a.cap = bsq[i]
    a.nk, a.s1, a.s2 = &nk[0], &s1[0, 0], &s2[0, 0, 0]
    a.box, a.bsq = (&box[0] if has_box else NULL), bsq
    a.means, a.covs, a.prec = &means[0, 0], &covs[0, 0, 0], &prec_chol[0, 0, 0]
    a.stage, a.info = &st[0, 0], &st[1, 0]
    a.d, a.lwork, a.liwork = d, lwork, liwork
    a.count_floor, a.sd1, a.sigma2, a.low = count_floor, sd1, sigma2, low
    run_blocks(_component, &a, K, 2 * d * d + d + lwork + (liwork + 1) // 2,
               component_threads(K, d, n_threads), "the M-step's workspace")
    for k in range(K):
        if st[0, k]:
            stage, info = st[0, k], st[1, k]
            break
    if stage:
        from numpy.linalg import LinAlgError
        if stage == 1:
            raise LinAlgError("Eigenvalues did not converge")
        if stage == 2:
            raise ValueError("array must not contain infs or NaNs")
        if stage == 3:
            raise LinAlgError(f"{info}-th leading minor of the array is not positive definite")
        raise LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")


def is_upper_triangular(const double[:, :, ::1] P):   # IN (K, d, d)
    """True when every ``P[k]`` is upper triangular (the E-step's choice of solve).

    Equivalent to: ``not np.any(np.tril(P, -1))``.
    """
    cdef Py_ssize_t k, i, j
    for k in range(P.shape[0]):
        for i in range(1, P.shape[1]):
            for j in range(min(i, P.shape[2])):
                if P[k, i, j] != 0.0:
                    return False
    return True
