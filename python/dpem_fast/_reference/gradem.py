"""Numpy twins of the gradient-EM kernel (``dpem_fast._dpcore._gradem``): the test oracle
and the benchmark baseline.

Models (known isotropic covariance ``sigma2 I``, equal weights):

* symmetric two-component mixture ``y = z beta + e``, ``z = +-1``, ``e ~ N(0, sigma2 I)``
  (Balakrishnan, Wainwright & Yu 2017, Sec. 3.1; Wang et al. 2020, Sec. 5; DG-EM Sec. 4).
  Per-sample gradient of ``Q(. | beta)`` at ``beta`` (scaled by ``sigma2``)::

      g_i(beta) = tanh(<beta, y_i> / sigma2) y_i - beta        (= (2 w_i - 1) y_i - beta)

* K-component mixture of means ``mu_k`` with weights 1/K; per-sample gradient with respect
  to ``mu_k`` (scaled by ``sigma2``)::

      g_ik(mu) = gamma_ik (y_i - mu_k),   gamma_ik = softmax_k(-|y_i - mu_k|^2 / (2 sigma2))

Robust coordinate estimator (Catoni & Giulini 2017; Holland 2019; Wang et al. 2020,
Algorithm 2; DG-EM Steps 1-3): with the soft truncation

    psi(x) = x - x^3/6  (|x| <= sqrt 2),   +-2 sqrt2 / 3  (otherwise)

and multiplicative noise ``1 + eps``, ``eps ~ N(0, 1/beta_m)`` integrated out in closed
form, each coordinate contributes ``s E_eps psi(g (1 + eps) / s)``.

At the extremes (rows up to 1e150, tiny ``sigma2`` or ``s``) these twins do what the kernel
does (see ``dpem_fast._dpcore._gradem``): posteriors from the squared distances when every
log-term underflows (the nearest mean(s) take the row), a rescaled dot product when its
terms overflow, ``E psi`` at its limit from ``U_SATURATE`` on, an overflow- and
underflow-safe clipping, and rows with a non-finite gradient or contribution left out and
counted (``"n_nonfinite"``).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import erfc

__all__ = ["psi", "expected_psi", "expected_psi_sup", "gradem_stats_reference",
           "symmetric_gradient_reference", "mixture_gradient_reference", "GL_NODES", "U_SATURATE"]

SQRT2 = math.sqrt(2.0)
PSI_MAX = 2.0 * SQRT2 / 3.0
#: below this standard deviation of ``u (1 + eps)`` the truncated-moment recursion is used,
#: above it Gauss-Legendre quadrature over [-sqrt 2, sqrt 2] (see ``expected_psi``)
TAU_SWITCH = 0.5
#: Gauss-Legendre nodes on [-1, 1]
GL_NODES = 20
#: from this |u| on (and at +-inf) ``expected_psi`` is its limit
#: ``sign(u) PSI_MAX erf(sqrt(beta_m / 2))``, which it equals to double precision there
U_SATURATE = 2.0 ** 60
_TWO_M600, _TWO_600, _TWO_599 = 2.0 ** -600, 2.0 ** 600, 2.0 ** 599
#: below this ``sum_j g_j^2`` the clipped estimator takes the norm after scaling by max |g_j|
_SS_MIN = 1e-290
_DBL_MIN = float(np.finfo(np.float64).tiny)
_DBL_MAX = float(np.finfo(np.float64).max)
_X, _W = np.polynomial.legendre.leggauss(GL_NODES)


def psi(x):
    """Catoni-Giulini soft truncation (DG-EM Step 1; Catoni & Giulini 2017, eq. (2.2))."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.abs(x) <= SQRT2, x - x ** 3 / 6.0, np.sign(x) * PSI_MAX)


def _phi(z):
    return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _upper(z):
    """P(Z > z) without cancellation."""
    return 0.5 * erfc(z / SQRT2)


def expected_psi(u, beta_m):
    """``E psi(u (1 + eps))``, ``eps ~ N(0, 1/beta_m)``, in closed form.

    ``Y = u (1 + eps) ~ N(u, tau^2)``, ``tau = |u| / sqrt(beta_m)``.  With a = sqrt 2::

        E psi(Y) = E[(Y - Y^3/6) 1{|Y| <= a}] + (2a/3) (P(Y > a) - P(Y < -a))

    The truncated moments ``m_k = E[Y^k 1{-a < Y < a}]`` follow from
    ``m_k = u m_{k-1} + (k-1) tau^2 m_{k-2} - tau (a^{k-1} phi(b) - (-a)^{k-1} phi(al))``
    (integration by parts; al, b the standardised ends) for ``tau < TAU_SWITCH``.  For larger
    tau that recursion cancels, and the middle integral is taken by ``GL_NODES``-point
    Gauss-Legendre quadrature of the smooth integrand.  Expanding ``E[Y - Y^3/6]`` over
    the whole line gives the form of Holland (2019) / DG-EM: ``u - u^3 (1 + 3/beta_m)/6``
    plus the correction term of the truncated tails, which equals the above.

    For ``|u| >= U_SATURATE`` (and ``u = +-inf``, where the closed form is NaN) the limit
    ``sign(u) PSI_MAX erf(sqrt(beta_m / 2))``: psi(Y) differs from ``sign(Y) PSI_MAX`` only
    on ``|Y| <= sqrt 2``, of probability ``<= 2 sqrt(2 beta_m) / (|u| sqrt(2 pi))``, so the
    value is within ~1.5/|u| of its limit, relatively: below an ulp from 2^60 on.
    """
    u = np.asarray(u, dtype=np.float64)
    out = np.where(np.isnan(u), u, 0.0)
    sat = np.abs(u) >= U_SATURATE
    out[sat] = np.copysign(PSI_MAX * math.erf(math.sqrt(beta_m / 2.0)), u[sat])
    nz = (u != 0.0) & ~sat & ~np.isnan(u)
    uu = u[nz]
    tau = np.abs(uu) / math.sqrt(beta_m)
    a = SQRT2
    tails = PSI_MAX * (_upper((a - uu) / tau) - _upper((a + uu) / tau))
    mid = np.empty_like(uu)
    small = tau < TAU_SWITCH
    if np.any(small):
        us, ts = uu[small], tau[small]
        al, b = (-a - us) / ts, (a - us) / ts
        m0 = 1.0 - _upper(b) - _upper(-al)
        pa, pb = _phi(al), _phi(b)
        m1 = us * m0 - ts * (pb - pa)
        m2 = us * m1 + ts * ts * m0 - ts * a * (pb + pa)
        m3 = us * m2 + 2.0 * ts * ts * m1 - ts * a * a * (pb - pa)
        mid[small] = m1 - m3 / 6.0
    big = ~small
    if np.any(big):
        ub, tb = uu[big][:, None], tau[big][:, None]
        y = a * _X[None, :]
        dens = np.exp(-0.5 * ((y - ub) / tb) ** 2) / (tb * math.sqrt(2.0 * math.pi))
        mid[big] = np.sum(a * _W[None, :] * (y - y ** 3 / 6.0) * dens, axis=1)
    out[nz] = mid + tails
    return out


@functools.lru_cache(maxsize=64)
def expected_psi_sup(beta_m):
    """``M(beta_m) = sup_u |E psi(u (1 + eps))|`` (odd in u: the sup over u > 0).

    A log grid over u in [1e-3, 1e6] refined by golden-section search around its best
    point, and the limit ``(2a/3)(1 - 2 P(eps < -1)) = (2a/3) erf(sqrt(beta_m / 2))`` as
    u -> inf (the middle mass vanishes), whichever is larger.  ``E psi`` is smooth in u,
    so the refined maximum is accurate far below the 1e-6 relative margin the estimator
    adds.  Always ``< 2 sqrt2 / 3``: the paper's bound is not attained once the
    multiplicative noise is integrated out.
    """
    beta_m = float(beta_m)
    grid = np.logspace(-3, 6, 4001)
    vals = expected_psi(grid, beta_m)
    i = int(np.argmax(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    g = (math.sqrt(5.0) - 1.0) / 2.0
    f = lambda x: float(expected_psi(np.array([x]), beta_m)[0])  # noqa: E731
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = f(c), f(d)
    for _ in range(200):
        if fc > fd:
            hi, d, fd = d, c, fc
            c = hi - g * (hi - lo)
            fc = f(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + g * (hi - lo)
            fd = f(d)
    best = max(float(vals[i]), fc, fd)
    limit = PSI_MAX * math.erf(math.sqrt(beta_m / 2.0))
    return max(best, limit), float((lo + hi) / 2.0) if best >= limit else math.inf


def _dot_in_order(X, beta):
    """``X @ beta`` summed coordinate by coordinate, as the kernel (no fused multiply-adds:
    at the extremes ``B b - B b`` must be exactly 0, whatever the BLAS)."""
    t = np.zeros(X.shape[0])
    for j in range(X.shape[1]):
        t = t + beta[j] * X[:, j]
    return t


def _symmetric_fallback(X, beta, sigma2):
    """``<beta, y>/sigma2`` with beta scaled by 2^-600 (exact), and ``-min_z |y - z beta|^2 /
    (2 sigma2)`` (z = sign of it): the kernel's ``_symmetric_fallback``, row by row."""
    t = ((_dot_in_order(X, beta * _TWO_M600)) / sigma2) * _TWO_600
    z = np.where(t < 0.0, -1.0, 1.0)
    diff = X - z[:, None] * beta[None, :]
    return t, -(np.sum(diff * diff, axis=1) / sigma2) * 0.5


def symmetric_gradient_reference(X, beta, sigma2):
    """Per-sample gradients ``tanh(<beta, y>/sigma2) y - beta`` (n, d) and log p(y_i) (n,).

    Where ``<beta, y>`` is NaN (terms overflowing to +inf and -inf) it is recomputed with
    beta scaled by 2^-600; where ``-(|y|^2 + |beta|^2)/(2 sigma2) + |t|`` is inf - inf, the
    equal ``-min_z |y - z beta|^2/(2 sigma2)`` is used (as the kernel).
    """
    X = np.asarray(X, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    d = X.shape[1]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        t = _dot_in_order(X, beta) / sigma2
        quad = -(np.sum(X * X, 1) + beta @ beta) / (2.0 * sigma2) + np.abs(t)
        bad = np.isnan(t) | np.isnan(quad)
        if np.any(bad):
            t_fb, q_fb = _symmetric_fallback(X[bad], beta, sigma2)
            t[bad] = np.where(np.isnan(t[bad]), t_fb, t[bad])
            quad[bad] = q_fb
        g = np.tanh(t)[:, None] * X - beta[None, :]
        at = np.abs(t)
        ll = quad + np.log1p(np.exp(-2.0 * at)) - math.log(2.0) - 0.5 * d * math.log(2.0 * math.pi * sigma2)
    return g, ll


def _mixture_fallback(X, means, sigma2):
    """The kernel's ``_mixture_fallback`` for rows with no finite log-term (or a NaN one):
    unnormalised posteriors ``exp(-(s_k - s_min)/(2 sigma2))`` from the squared distances
    s_k (rescaled by 2^-600 where one overflows) and the largest log-term."""
    diff = X[:, None, :] - means[None, :, :]
    s = np.sum(diff * diff, axis=2)
    scaled = np.any(s == np.inf, axis=1)
    if np.any(scaled):
        ds = diff[scaled] * _TWO_M600
        s[scaled] = np.sum(ds * ds, axis=2)
    smin = np.min(np.where(np.isnan(s), np.inf, s), axis=1)
    e = np.where(scaled[:, None], (((s - smin[:, None]) * _TWO_600) / sigma2) * _TWO_599,
                 ((s - smin[:, None]) / sigma2) * 0.5)
    top = np.where(scaled, -((smin * _TWO_600) / sigma2) * _TWO_599, -(smin / sigma2) * 0.5)
    return np.exp(-e), top


def mixture_gradient_reference(X, means, sigma2):
    """Per-sample gradients ``gamma_ik (y_i - mu_k)`` (n, K*d) and log p(y_i) (n,).

    Rows where every log-term ``-|y - mu_k|^2/(2 sigma2)`` is -inf (or one is NaN) take
    their posteriors from the squared distances (``_mixture_fallback``): the sigma2 -> 0
    limit, the nearest mean(s) sharing the row equally.
    """
    X = np.asarray(X, dtype=np.float64)
    means = np.asarray(means, dtype=np.float64)
    K, d = means.shape
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        diff = X[:, None, :] - means[None, :, :]
        lp = -np.sum(diff * diff, axis=2) / (2.0 * sigma2)
        bad = np.all(lp == -np.inf, axis=1) | np.any(np.isnan(lp), axis=1)
        lse = np.empty(X.shape[0])
        gam = np.empty_like(lp)
        ok = ~bad
        if np.any(ok):
            # max-subtracted softmax, normalised by the sum (as the kernel): exp(lp - lse)
            # loses the sum when |max| is huge (-2.5e302 + log 2 == -2.5e302)
            mx = np.max(lp[ok], axis=1)
            w = np.exp(lp[ok] - mx[:, None])
            tot = w.sum(1)
            gam[ok] = w / tot[:, None]
            lse[ok] = mx + np.log(tot)
        if np.any(bad):
            w, top = _mixture_fallback(X[bad], means, sigma2)
            tot = w.sum(1)
            gam[bad] = w / tot[:, None]
            lse[bad] = top + np.log(tot)
        g = (gam[:, :, None] * diff).reshape(X.shape[0], K * d)
    ll = lse - math.log(K) - 0.5 * d * math.log(2.0 * math.pi * sigma2)
    return g, ll


def _clip_reference(g, C):
    """``g min(1, C/|g|)`` per row and whether the row was clipped, as the kernel's ``_clip``:
    the plain ``g (C/|g|)`` where ``sum g^2`` is in [1e-290, DBL_MAX] and ``C/|g|`` is normal,
    else ``((g / max|g_j|) / r) C`` with the norm taken after scaling."""
    out = g.copy()
    clipped = np.zeros(g.shape[0], dtype=bool)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        ss = np.sum(g * g, axis=1)
        nrm = np.sqrt(ss)
        plain = (ss >= _SS_MIN) & (ss <= _DBL_MAX)
        f = C / np.where(plain, nrm, 1.0)
        cl = plain & (nrm > C)
        clipped |= cl
        normal = cl & (f >= _DBL_MIN)
        out[normal] = g[normal] * f[normal, None]
        sub = cl & ~normal
        out[sub] = (g[sub] / nrm[sub, None]) * C
        for i in np.flatnonzero(~plain):
            amax = float(np.max(np.abs(g[i]))) if g.shape[1] else 0.0
            if amax == 0.0:
                continue
            r = math.sqrt(float(np.sum((g[i] / amax) ** 2)))
            if r <= C / amax:
                continue
            clipped[i] = True
            out[i] = ((g[i] / amax) / r) * C
    return out, clipped


def gradem_stats_reference(X, means, sigma2, *, symmetric, estimator, scale, beta_m=1.0):
    """The statistics the kernel returns, summed over all rows.

    Returns
    -------
    dict with ``"raw"`` (m,) ``sum_i g_i``; ``"grad"`` (m,): ``sum_i s E psi(g_i / s)``
    per coordinate (``estimator="truncated"``, s = ``scale``) or ``sum_i g_i min(1, C/|g_i|)``
    (``"clipped"``, C = ``scale``); ``"loglik"`` float; ``"n_clipped"`` int (rows whose
    gradient norm exceeds C, or with some |g_ij| > sqrt2 s, or left out);
    ``"n_nonfinite"`` int: rows whose gradient is not finite (left out of ``"raw"`` and
    ``"grad"``) or whose contribution is not (left out of ``"grad"``): the kernel's last guard.
    """
    if symmetric:
        g, ll = symmetric_gradient_reference(X, np.asarray(means).reshape(-1), sigma2)
    else:
        g, ll = mixture_gradient_reference(X, means, sigma2)
    good = np.all(np.isfinite(g), axis=1)
    g = np.where(good[:, None], g, 0.0)
    if estimator == "truncated":
        with np.errstate(over="ignore"):
            stat = scale * expected_psi(g / scale, beta_m)
        hit = np.any(np.abs(g) > SQRT2 * scale, axis=1)
    else:
        stat, hit = _clip_reference(g, scale)
    fine = np.all(np.isfinite(stat), axis=1)
    stat = np.where(fine[:, None], stat, 0.0)
    left_out = ~good | ~fine
    n_clipped = int(np.sum(hit & ~left_out) + np.sum(left_out))
    return {"raw": g.sum(0), "grad": stat.sum(0), "loglik": float(ll.sum()), "n_clipped": n_clipped,
            "n_nonfinite": int(np.sum(left_out))}
