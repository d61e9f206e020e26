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
groups a sum differently the results agree to rounding (the tests check both).  Serial
code: the same for any thread count.
"""
from libc.math cimport sqrt, isfinite
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from scipy.linalg.cython_lapack cimport dsyevd, dsytd2, dsteqr, dorm2r, dpotrf, dtrtrs
from scipy.linalg.cython_blas cimport dgemm

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
                double[:, :, ::1] prec_chol):    # OUT (K, d, d) precision Cholesky factors
    """Weights, means, covariances and precision Cholesky factors from noisy statistics (see
    the module docstring).  Raises ``numpy.linalg.LinAlgError`` as the numpy path does.

    Equivalent to: ``private_m_step(nk, s1, s2, releases, reg_covar, None, domain, "full")``
    then ``compute_precision_cholesky(covs)`` (``mixture._gmm_mstep``).
    """
    cdef int K = <int> s1.shape[0], d = <int> s1.shape[1]
    cdef int k, i, j, info = 0, lwork = -1, liwork = -1, iw_query = 0, stage = 0
    cdef double total, x, sq, f, cap, floor, b, nf
    cdef double work_query = 0.0
    cdef double *buf = NULL
    cdef double *V
    cdef double *w
    cdef double *S
    cdef double *work
    cdef double *bsq = NULL
    cdef double *ck
    cdef int *iwork = NULL
    cdef char jobz = b'V', uplo = b'L', diag_n = b'N'
    cdef bint has_box = box is not None
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
    liwork = iw_query
    buf = <double *> malloc((3 * d * d + d + lwork + d) * sizeof(double))
    iwork = <int *> malloc(max(1, liwork) * sizeof(int))
    if buf == NULL or iwork == NULL:
        free(buf)
        free(iwork)
        raise MemoryError("full_m_step: workspace")
    V, S, w = buf, buf + d * d, buf + 2 * d * d
    work, bsq = buf + 2 * d * d + d, buf + 2 * d * d + d + lwork
    try:
        with nogil:
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
            cap = 1.0
            if has_box:
                for i in range(d):
                    b = box[i] if box[i] < 1.0 else 1.0
                    bsq[i] = b * b
                    if i == 0 or bsq[i] < cap:
                        cap = bsq[i]
            for k in range(K):
                nf = nk[k] if nk[k] > count_floor else count_floor
                # means: S1 / Ñ, James-Stein factor, box clip, unit ball
                for i in range(d):
                    means[k, i] = s1[k, i] / nf
                sq = _sum_squares(&means[k, 0], d)
                if d >= 3:
                    x = sd1 / nf
                    if sq > 0:
                        f = 1.0 - (d - 2) * (x * x) / sq
                        f = f if f > 0.0 else 0.0
                    else:
                        f = 0.0
                    for i in range(d):
                        means[k, i] = means[k, i] * f
                if has_box:
                    for i in range(d):
                        x = means[k, i]
                        if x < -box[i]:
                            x = -box[i]
                        if x > box[i]:
                            x = box[i]
                        means[k, i] = x
                sq = sqrt(_sum_squares(&means[k, 0], d))
                if sq > 1.0:
                    for i in range(d):
                        means[k, i] = means[k, i] / sq
                # covariances
                for i in range(d):
                    for j in range(d):
                        S[i * d + j] = s2[k, i, j] / nf - means[k, i] * means[k, j]
                x = sigma2 / nf
                floor = cap if x > cap else x
                floor = low if low > floor else floor
                floor = floor if floor < 1.0 else 1.0
                info = _project_psd(S, floor, d, V, w, work, lwork, iwork, liwork, &covs[k, 0, 0])
                if info != 0:
                    stage = 1
                    break
                if has_box:
                    for i in range(d):
                        x = bsq[i] / covs[k, i, i]
                        w[i] = sqrt(x if x < 1.0 else 1.0)
                    for i in range(d):
                        for j in range(d):
                            covs[k, i, j] = covs[k, i, j] * w[i] * w[j]
                # 5. precision Cholesky factor: L = chol(Σ), P = L⁻ᵀ
                ck = &covs[k, 0, 0]
                for i in range(d * d):
                    if not isfinite(ck[i]):
                        stage = 2
                if stage:
                    break
                # column-major copy (as scipy's wrapper passes it: its lower triangle is the
                # row-major matrix's lower triangle; the rebuilt Σ need not be bit-symmetric)
                for i in range(d):
                    for j in range(d):
                        V[i + j * d] = ck[i * d + j]
                dpotrf(&uplo, &d, V, &d, &info)
                if info != 0:
                    stage = 3
                    break
                for j in range(d):                                    # clean=1: zero the upper
                    for i in range(j):
                        V[i + j * d] = 0.0
                memset(S, 0, d * d * sizeof(double))
                for i in range(d):
                    S[i + i * d] = 1.0
                dtrtrs(&uplo, &diag_n, &diag_n, &d, &d, V, &d, S, &d, &info)
                if info != 0:
                    stage = 4
                    break
                memcpy(&prec_chol[k, 0, 0], S, d * d * sizeof(double))  # L⁻¹ column-major = L⁻ᵀ row-major
    finally:
        free(buf)
        free(iwork)
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
