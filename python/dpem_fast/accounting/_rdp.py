"""Renyi-DP curves and RDP -> (epsilon, delta) conversions (private).

All functions are pure, work in log space and take/return numpy arrays of
orders ``alpha > 1``.  Memoised curves are keyed by immutable values only and
returned read-only; callers add them into their own arrays.
"""
import functools
import math

import numpy as np
from scipy import special

_LOG_TOL = 30.0  # series terms below exp(-30) x running sum end the series


# ---------------------------------------------------------------- orders --
def default_orders():
    """Default RDP grid: 1.01..10000, denser at small orders.

    It contains dp_accounting's default grid (1.1..10.9 step 0.1, 11..63,
    128, 256, 512, 1024) so that our epsilon is never larger than theirs,
    plus 1.01..1.09, a geometric set of real orders between 1.1 and 64 and
    a geometric set of *integer* orders from 64 to 10000 (integer orders
    use the exact binomial expansion, which is also the cheapest).
    """
    small = 1.0 + np.arange(1, 10) / 100.0
    theirs = np.concatenate([1.0 + np.arange(1, 100) / 10.0,
                             np.arange(11, 64, dtype=float),
                             [128.0, 256.0, 512.0, 1024.0]])
    mid = 1.0 + np.geomspace(0.1, 63.0, 60)
    big = np.unique(np.round(np.geomspace(64, 10000, 40)))
    return np.unique(np.concatenate([small, theirs, mid, big]))


DEFAULT_ORDERS = tuple(float(a) for a in default_orders())


# ---------------------------------------------------- simple mechanisms --
def gaussian_rdp(z, orders):
    """RDP of the Gaussian mechanism, ``alpha / (2 z^2)`` (Mironov 2017, Prop. 7)."""
    return np.asarray(orders, dtype=float) / (2.0 * z * z)


def laplace_rdp(eps, orders):
    """RDP of the Laplace mechanism (Mironov 2017, Prop. 6).

    ``D_a = log[a/(2a-1) e^{(a-1) eps} + (a-1)/(2a-1) e^{-a eps}] / (a-1)``,
    capped at ``eps`` (pure DP bounds every order).
    """
    a = np.asarray(orders, dtype=float)
    log_sum = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) * eps,
                           np.log((a - 1) / (2 * a - 1)) - a * eps)
    return np.minimum(log_sum / (a - 1), eps)


def laplace_log_moment(eps, lam):
    """Park et al. (2017) Eq. 19: log-moment of order ``lam`` of Laplace.

    ``log[(lam+1)/(2lam+1) e^{lam eps} + lam/(2lam+1) e^{-eps(lam+1)}]``,
    equal to ``lam * laplace_rdp(eps, lam + 1)``.
    """
    lam = np.asarray(lam, dtype=float)
    return np.logaddexp(np.log((lam + 1) / (2 * lam + 1)) + lam * eps,
                        np.log(lam / (2 * lam + 1)) - eps * (lam + 1))


# ------------------------------------- Poisson-subsampled Gaussian (MTZ) --
@functools.lru_cache(maxsize=64)
def _log_factorials(n):
    return special.gammaln(np.arange(n + 1, dtype=float) + 1.0)


def _segment_logsumexp(values, starts, seg=None):
    """logsumexp of consecutive segments of a flat array (``seg``: the
    segment index of every element, if already known)."""
    seg_max = np.maximum.reduceat(values, starts)
    if seg is None:
        lengths = np.diff(np.append(starts, values.size))
        shifted = np.exp(values - np.repeat(seg_max, lengths))
    else:
        shifted = np.exp(values - seg_max[seg])
    return seg_max + np.log(np.add.reduceat(shifted, starts))


@functools.lru_cache(maxsize=32)
def _integer_layout(orders):
    """Flat layout of the pairs ``(n, k)``, ``0 <= k <= n``, for a tuple of
    integer orders: segment starts, segment index, ``k`` and ``n - k``."""
    n = np.asarray(orders, dtype=np.int64)
    lengths = n + 1
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    seg = np.repeat(np.arange(n.size), lengths)
    k = np.arange(lengths.sum()) - starts[seg]
    out = (n, starts, seg, k, n[seg] - k)
    for arr in out:
        arr.setflags(write=False)
    return out


def log_a_integer(q, z, int_orders):
    """``log(A_alpha - 1)`` for integer ``alpha >= 2`` (MTZ 2019, Sec. 3.3).

    ``A_alpha = sum_k C(alpha, k) (1-q)^{alpha-k} q^k exp((k^2 - k) / (2 z^2))``,
    evaluated as one segmented logsumexp over all orders at once.  All
    ``alpha + 1`` terms of every order are summed (no truncation).
    """
    n = np.asarray(int_orders, dtype=np.int64)
    if n.size == 0:
        return np.zeros(0)
    n, starts, seg, k, n_k = _integer_layout(tuple(int(a) for a in n))
    n_max = int(n.max())
    lf = _log_factorials(n_max)
    logq, log1mq = math.log(q), math.log1p(-q)
    # sum_k C(n,k) (1-q)^{n-k} q^k = 1, so A - 1 is the same sum with
    # e^{k(k-1)/(2 z^2)} replaced by expm1(.): all terms positive, and
    # log(A - 1) keeps full relative precision when A is close to 1.
    # The log-term  log C(n,k) + k log q + (n-k) log(1-q) + log expm1(x_k)
    # splits as  a(n) + b(k) - log((n-k)!)  with
    #   a(n) = log n! + n log(1-q),
    #   b(k) = log expm1(x_k) - log k! + k (log q - log(1-q)),
    # so the transcendental functions run over 0..max(n) only, a(n) leaves
    # the segment's logsumexp and each of the sum(n + 1) terms costs two
    # gathers and one subtraction before its exp.
    kk = np.arange(n_max + 1, dtype=float)
    x = kk * (kk - 1.0) / (2.0 * z * z)
    with np.errstate(divide="ignore"):
        log_em1 = x + np.log(-np.expm1(-x))  # log(expm1(x)), -inf at x = 0
    b = log_em1 - lf + kk * (logq - log1mq)
    a = lf[n] + n * log1mq
    return a + _segment_logsumexp(b[k] - lf[n_k], starts, seg)  # log(A-1)


def _logsumexp_rows(x):
    """``log(sum(exp(x), axis=1))`` for a 2-D array (rows of -inf give -inf).

    As scipy's logsumexp: the largest term is taken out of the sum,
    ``m + log1p(sum_{others} exp(x - m))``, which keeps full precision when
    the others are small (the fractional series cancels ``pos - neg``).
    """
    rows = np.arange(x.shape[0])
    j = np.argmax(x, axis=1)
    m = x[rows, j]
    m0 = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m0[:, None])
    e[rows, j] = 0.0
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(m), np.log1p(np.sum(e, axis=1)) + m0, m)


_BINOMIAL_CACHE_MAX = 16_384  # entries per memoised block (128 KiB each)


def _binomial_rows(orders, start, block):
    """``log|C(a, i)|`` and the sign of ``C(a, i)`` for real orders ``a``
    (a tuple) and ``i = start .. start + block - 1``; read-only.  Depends
    on neither q nor z: small blocks are memoised and reused for every
    trial z (the series of a calibration's few orders, the default grid's
    first block)."""
    if len(orders) * block <= _BINOMIAL_CACHE_MAX:
        return _binomial_block(orders, start, block)
    return _binomial_block.__wrapped__(orders, start, block)


@functools.lru_cache(maxsize=128)
def _binomial_block(orders, start, block):
    a = np.asarray(orders, dtype=float)[:, None]
    i = np.arange(start, start + block, dtype=float)[None, :]
    lbin = (special.gammaln(a + 1) - special.gammaln(i + 1)
            - special.gammaln(a - i + 1))
    sign = special.gammasgn(a - i + 1)
    lbin.setflags(write=False)
    sign.setflags(write=False)
    return lbin, sign


def log_a_fractional(q, z, frac_orders, block=64, max_terms=200_000):
    """``log A_alpha`` for real ``alpha > 1`` by the MTZ (2019) series.

    Splitting the integral at ``z0 = z^2 log(1/q - 1) + 1/2`` (MTZ Sec. 3.3):
    ``A = sum_i C(a, i) [ (1-q)^{a-i} q^i e^{(i^2-i)/(2z^2)} Phi((z0 - i)/z)
    + q^{a-i} (1-q)^i e^{((a-i)^2-(a-i))/(2z^2)} Phi((a - i - z0)/z) ]``
    with generalised (signed) binomial coefficients.  Positive and negative
    terms are summed separately in log space; each order stops once its
    terms are ``exp(-40)`` below its running sum.
    """
    a_all = np.asarray(frac_orders, dtype=float)
    out = np.empty(a_all.size)
    if a_all.size == 0:
        return out
    logq, log1mq = math.log(q), math.log1p(-q)
    z0 = z * z * (log1mq - logq) + 0.5
    inv2z2 = 1.0 / (2.0 * z * z)
    pos = np.full(a_all.size, -np.inf)
    neg = np.full(a_all.size, -np.inf)
    active = np.arange(a_all.size)
    start = 0
    while active.size:
        a = a_all[active][:, None]
        i = np.arange(start, start + block, dtype=float)[None, :]
        lbin, sign = _binomial_rows(tuple(a_all[active].tolist()), start,
                                    block)
        j = a - i
        t1 = (lbin + j * log1mq + i * logq + (i * i - i) * inv2z2
              + special.log_ndtr((z0 - i) / z))
        t2 = (lbin + j * logq + i * log1mq + (j * j - j) * inv2z2
              + special.log_ndtr((j - z0) / z))
        terms = np.logaddexp(t1, t2)
        p_terms = np.where(sign > 0, terms, -np.inf)
        n_terms = np.where(sign < 0, terms, -np.inf)
        pos[active] = np.logaddexp(pos[active], _logsumexp_rows(p_terms))
        neg[active] = np.logaddexp(neg[active], _logsumexp_rows(n_terms))
        tail = terms[:, -block // 4:].max(axis=1)
        done = (tail < pos[active] - _LOG_TOL) & (start + block > a[:, 0])
        # Past i > alpha the series alternates with decreasing terms: the
        # remainder is at most the largest tail term; add it (soundness).
        pos[active[done]] = np.logaddexp(pos[active[done]], tail[done])
        start += block
        if start >= max_terms:  # pragma: no cover - safety net
            out[active[~done]] = np.inf
            pos[active[~done]] = np.inf
            done[:] = True
        active = active[~done]
        block = min(block * 2, 4096)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(neg < pos, neg - pos, 0.0)
        out = pos + np.log1p(-np.exp(diff))
    out[neg >= pos] = np.inf  # cancellation failure: give up soundly
    return out


def _subsampled_gaussian_rdp_uncached(q, z, orders):
    a = np.asarray(orders, dtype=float)
    if q == 1.0:
        return gaussian_rdp(z, a)
    is_int = a == np.round(a)
    log_a = np.empty(a.size)
    log_a[is_int] = np.logaddexp(
        0.0, log_a_integer(q, z, a[is_int].astype(np.int64)))
    log_a[~is_int] = log_a_fractional(q, z, a[~is_int])
    log_a = np.where(np.isnan(log_a), np.inf, log_a)  # overflow => no bound
    rdp = np.maximum(log_a, 0.0) / (a - 1.0)
    # Subsampling never hurts (quasi-convexity of Renyi divergence).
    return np.minimum(rdp, gaussian_rdp(z, a))


@functools.lru_cache(maxsize=512)
def _subsampled_gaussian_rdp_cached(q, z, orders):
    curve = _subsampled_gaussian_rdp_uncached(q, z, orders)
    curve.setflags(write=False)
    return curve


def subsampled_gaussian_rdp(q, z, orders):
    """RDP of the Poisson-subsampled Gaussian (add/remove relation).

    Mironov, Talwar & Zhang (2019), Sec. 3.3: ``D_alpha = log(A_alpha) /
    (alpha - 1)``, exact binomial sum at integer orders, convergent series at
    fractional orders.  ``orders`` must be a tuple (memoisation key); the
    returned array is read-only.
    """
    return _subsampled_gaussian_rdp_cached(float(q), float(z), orders)


def abadi_log_moment_numerical(q, z, lam):
    """Log-moment of the subsampled Gaussian by numerical integration.

    Abadi et al. (2016), Sec. 3.2 / Park et al. (2016): ``alpha(lam) =
    log E_{x ~ mu0}[(mu(x)/mu0(x))^{lam+1}]``... written as
    ``log int mu0 (mu/mu0)^{lam+1}`` with ``mu0 = N(0, z^2)`` and
    ``mu = (1-q) N(0, z^2) + q N(1, z^2)``.  Slow; cross-check only.
    """
    from scipy import integrate

    def integrand(x):
        log_mu0 = -x * x / (2 * z * z)
        # log(mu/mu0) = log(1 - q + q exp((2x - 1)/(2 z^2)))
        ratio = np.logaddexp(math.log1p(-q),
                             math.log(q) + (2 * x - 1) / (2 * z * z))
        return np.exp(log_mu0 + (lam + 1) * ratio) / (z * math.sqrt(2 * math.pi))

    z0 = 0.5 + z * z * math.log(max(1.0 / q - 1.0, 1e-300))
    pts = sorted({0.0, 1.0, z0, (lam + 1) * 1.0})
    total = 0.0
    edges = [-np.inf] + pts + [np.inf]
    for lo, hi in zip(edges[:-1], edges[1:]):
        total += integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-12,
                                limit=200)[0]
    return math.log(total)


# ------------------------------------------ sampling without replacement --
def wor_rdp_integer(gamma, base_rdp_int, eps_inf, max_order):
    """WBK (2019) Thm 9 bound at integer orders ``2..max_order``.

    ``eps'(a) <= log(1 + g^2 C(a,2) min{4(e^{e(2)}-1), e^{e(2)} min{2,
    (e^{e_inf}-1)^2}} + sum_{j=3}^a g^j C(a,j) e^{(j-1) e(j)}
    min{2, (e^{e_inf}-1)^j}) / (a - 1)`` with ``g = m/n`` the sampling ratio,
    ``e(j)`` the base RDP at order ``j`` (``base_rdp_int[j - 2]``) and
    ``e_inf`` the base's pure-DP epsilon (``inf`` if none).  Replace-one.
    """
    orders = np.arange(2, max_order + 1)
    lf = _log_factorials(max_order)
    lg = math.log(gamma)
    e2 = base_rdp_int[0]
    if math.isinf(eps_inf):
        log_m = np.full(max_order + 1, math.log(2.0))
    else:
        jj = np.arange(max_order + 1)
        log_m = np.minimum(math.log(2.0), jj * math.log(math.expm1(eps_inf))
                           if eps_inf > 0 else -np.inf)
    second = min(math.log(4.0) + math.log(math.expm1(e2)) if e2 > 0 else -np.inf,
                 e2 + log_m[2])
    j = np.arange(3, max_order + 1)
    higher = (j * lg + (j - 1) * base_rdp_int[1:] + log_m[3:]
              - lf[j])  # C(a, j) = a!/(j!(a-j)!) applied below
    out = np.empty(orders.size)
    for idx, a in enumerate(orders):
        t = [0.0, 2 * lg + lf[a] - lf[2] - lf[a - 2] + second]
        if a >= 3:
            jj = j[: a - 2]
            t.append(special.logsumexp(higher[: a - 2] + lf[a] - lf[a - jj]))
        out[idx] = special.logsumexp(t) / (a - 1)
    return orders, out


def interpolate_convex(orders, int_orders, int_values):
    """Conservative RDP at real orders from integer-order upper bounds.

    ``(a - 1) D_a`` is convex in ``a`` (a cumulant generating function), so
    the chord between consecutive integers upper-bounds it.  Orders outside
    the integer range get ``inf``.
    """
    a = np.asarray(orders, dtype=float)
    g = (np.asarray(int_orders, dtype=float) - 1) * int_values
    lo = np.floor(a).astype(np.int64)
    out = np.full(a.size, np.inf)
    first, last = int(int_orders[0]), int(int_orders[-1])
    ok = (a >= first) & (a <= last)
    lo_c = np.clip(lo, first, last)
    hi_c = np.clip(lo + 1, first, last)
    t = a - lo_c
    gl, gh = g[lo_c - first], g[hi_c - first]
    val = ((1 - t) * gl + t * gh) / (a - 1)
    val = np.where(lo_c == hi_c, gl / (a - 1), val)
    out[ok] = val[ok]
    # order below the first integer (1 < a < 2): chord from (1, 0) to (2, g2)
    below = (a > 1) & (a < first)
    if first == 2:
        out[below] = g[0]  # (a-1) D_a <= (a-1) g2  =>  D_a <= g2
    return out


# ------------------------------------------------------- conversions --
def rdp_to_epsilon(orders, rdp, delta, conversion="improved"):
    """Smallest epsilon over orders for the target delta.

    * ``"classic"``: ``eps = rdp + log(1/delta) / (a - 1)`` (Mironov 2017,
      Prop. 3; the moments accountant tail bound, Park et al. 2017 Eq. 3).
    * ``"improved"``: ``eps = rdp + log((a-1)/a) - (log delta + log a)/(a-1)``
      (Canonne, Kamath & Steinke 2020, Prop. 12; Asoodeh et al. 2021).

    Returns ``(epsilon, order)``.
    """
    a = np.asarray(orders, dtype=float)
    eps = epsilon_per_order(a, rdp, delta, conversion)
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), float(a[i])


def epsilon_per_order(orders, rdp, delta, conversion="improved"):
    """Per-order epsilon bounds whose minimum (clipped at 0) is
    :func:`rdp_to_epsilon`; ``nan`` becomes ``inf``.  Every entry is a valid
    epsilon on its own, so the minimum over any subset of the orders is
    ``>=`` the minimum over all of them."""
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp, dtype=float)
    log_delta = math.log(delta)
    with np.errstate(invalid="ignore"):
        if conversion == "classic":
            eps = r - log_delta / (a - 1)
        else:
            eps = r + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1)
    return np.where(np.isnan(eps), np.inf, eps)


def rdp_to_delta(orders, rdp, epsilon, conversion="improved"):
    """Smallest delta over orders for the target epsilon (inverse of
    :func:`rdp_to_epsilon`, same references).  Returns ``(delta, order)``."""
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp, dtype=float)
    with np.errstate(invalid="ignore"):
        if conversion == "classic":
            log_d = (a - 1) * (r - epsilon)
        else:
            log_d = (a - 1) * (r - epsilon + np.log1p(-1.0 / a)) - np.log(a)
    log_d = np.where(np.isnan(log_d), np.inf, log_d)
    i = int(np.argmin(log_d))
    return min(math.exp(min(float(log_d[i]), 0.0)), 1.0), float(a[i])


# ------------------------------------------------ private selection --
def _tnb_mean(gamma, shape):
    """Mean of the truncated negative binomial ``TNB(gamma, shape)`` (see
    :func:`repetition_gamma`)."""
    if gamma >= 1.0:
        return 1.0
    if shape == 0.0:
        return (1.0 - gamma) / (gamma * -math.log(gamma))
    return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * math.log(gamma)))


def repetition_gamma(shape, mean):
    """The ``gamma`` in (0, 1] of the truncated negative binomial with the given
    ``shape`` (eta >= 0) whose mean is at least ``mean`` (and within 1e-12 of it).

    ``P[T = k] = (1-gamma)^k / Z * prod_{l<k} (l + eta) / (l + 1)`` for ``k >= 1``
    (Papernot & Steinke 2022, Sec. 3): ``eta = 0`` is the logarithmic distribution,
    mean ``(1-gamma) / (gamma log(1/gamma))``; ``eta > 0`` the negative binomial
    conditioned on ``T >= 1``, mean ``eta (1-gamma) / (gamma (1 - gamma^eta))``.
    The mean decreases from infinity to 1 as gamma goes from 0 to 1; bisection on
    ``log gamma`` keeps the lower end, so the distribution sampled with the returned
    gamma has mean ``>= mean`` (the accountant uses that exact mean).
    """
    if mean <= 1.0:
        return 1.0
    lo, hi = -800.0, 0.0            # log gamma; the mean at exp(-800) is astronomically large
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _tnb_mean(math.exp(mid), shape) >= mean:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15 * max(1.0, abs(lo)):
            break
    return math.exp(lo)


def repetition_pmf(shape, mean, k_max):
    """``P[T = k]`` for ``k = 0 .. k_max`` (Poisson when ``shape`` is None)."""
    from scipy import stats
    k = np.arange(k_max + 1)
    if shape is None:
        return stats.poisson.pmf(k, mean)
    gamma = repetition_gamma(shape, mean)
    out = np.zeros(k_max + 1)
    if gamma >= 1.0:
        out[1] = 1.0
        return out
    if shape == 0.0:
        out[1:] = stats.logser.pmf(k[1:], 1.0 - gamma)
    else:
        out[1:] = stats.nbinom.pmf(k[1:], shape, gamma) / -math.expm1(shape * math.log(gamma))
    return out


def repetition_tail(shape, mean, k):
    """``P[T > k]`` computed from the survival function (no ``1 - cdf`` cancellation)."""
    from scipy import stats
    if shape is None:
        return float(stats.poisson.sf(k, mean))
    gamma = repetition_gamma(shape, mean)
    if gamma >= 1.0:
        return 0.0 if k >= 1 else 1.0
    if k < 1:
        return 1.0
    if shape == 0.0:
        return float(stats.logser.sf(k, 1.0 - gamma))
    return float(stats.nbinom.sf(k, shape, gamma) / -math.expm1(shape * math.log(gamma)))


def repeat_and_select_rdp(orders, rdp, mean, shape):
    """RDP curve of running a mechanism ``T`` times and releasing only the best run.

    ``orders``/``rdp``: the curve of one run at orders > 1.  Papernot & Steinke
    (ICLR 2022):

    * ``shape = eta >= 0`` (truncated negative binomial, Thm 2): for every ``lam > 1``
      and every ``lam_hat >= 1`` the selection is ``(lam, eps')``-RDP with
      ``eps' = rdp(lam) + (1 + eta) [(1 - 1/lam_hat) rdp(lam_hat) + log(1/gamma)/lam_hat]
      + log(E[T]) / (lam - 1)``; the bracket is minimised over the grid's orders.
    * ``shape = None`` (Poisson, Thm 6): ``eps' = rdp(lam) + E[T] delta_hat +
      log(E[T]) / (lam - 1)`` with ``delta_hat`` the run's delta at ``eps_hat =
      log(1 + 1/(lam - 1))``, here from the run's own RDP curve (Canonne, Kamath &
      Steinke 2020, Prop. 12).

    Renyi divergence does not decrease with the order, so a bound at a larger order
    holds at a smaller one: the result is replaced by its suffix minimum over the
    sorted orders.  ``E[T]`` and ``gamma`` are those of the distribution actually
    sampled (:func:`repetition_gamma`).
    """
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp, dtype=float)
    out = np.full(a.size, np.inf)
    ok = a > 1.0
    if shape is None:
        for i in np.flatnonzero(ok):
            eps_hat = math.log1p(1.0 / (a[i] - 1.0))
            delta_hat = rdp_to_delta(a, r, eps_hat, "improved")[0]
            out[i] = r[i] + mean * delta_hat + math.log(mean) / (a[i] - 1.0)
    else:
        gamma = repetition_gamma(shape, mean)
        exact_mean = _tnb_mean(gamma, shape)
        with np.errstate(invalid="ignore"):
            bracket = (1.0 - 1.0 / a) * r - math.log(gamma) / a
        c = (1.0 + shape) * float(np.nanmin(np.where(a >= 1.0, bracket, np.inf)))
        out[ok] = r[ok] + math.log(exact_mean) / (a[ok] - 1.0) + c
    order = np.argsort(a)
    suffix = np.minimum.accumulate(out[order][::-1])[::-1]
    result = np.empty_like(out)
    result[order] = suffix
    return result
