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
from scipy.optimize import minimize_scalar

__all__ = ["psi", "expected_psi", "expected_psi_sup", "gradem_stats_reference",
           "symmetric_gradient_reference", "mixture_gradient_reference", "U_SATURATE", "PSI_MAX", "SQRT2"]

SQRT2 = math.sqrt(2.0)
PSI_MAX = 2.0 * SQRT2 / 3.0
#: from this |u| on (and at +-inf) the kernel returns the limit of ``E psi`` (its public
#: constant, written out; ``tests/kernels/test_gradem.py`` checks that it is the kernel's)
U_SATURATE = 2.0 ** 60
#: Gauss-Legendre rule of ``E psi``'s integrals (over at most 20 standard deviations)
_Z, _W = np.polynomial.legendre.leggauss(64)
#: coordinates integrated at once (bounds the memory of the node arrays)
_BATCH = 1 << 14


def psi(x):
    """Catoni-Giulini soft truncation: ``x - x^3/6`` on ``|x| <= sqrt 2``, ``+-2 sqrt2/3`` beyond."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.abs(x) <= SQRT2, x - x ** 3 / 6.0, np.sign(x) * PSI_MAX)


def expected_psi(u, beta_m):
    """``E psi(Y)``, ``Y = u (1 + eps) = u + tau Z``, ``tau = |u| / sqrt(beta_m)``, Z standard normal.

    psi is odd, so for ``u > 0`` (and ``-E psi(-Y)`` for ``u < 0``)
    ``E psi(Y) = int_0^inf psi(y) (phi((y - u)/tau) - phi((y + u)/tau)) dy / tau``, a positive
    weight (no cancellation): the cubic ``y - y^3/6`` on [0, sqrt 2] plus ``PSI_MAX`` times the
    weight's mass beyond, each an integral over z = (y - u)/tau cut to [-10, 10] (the normal
    density is below 1e-21 of its peak beyond) by 64-point Gauss-Legendre quadrature.  Where
    ``u +- 10 tau`` lies inside (0, sqrt 2), the moments of the cubic instead:
    ``u - (u^3 + 3 u tau^2)/6``.  For ``|u| >= U_SATURATE`` (and +-inf) the limit
    ``sign(u) PSI_MAX erf(sqrt(beta_m / 2))``, as the kernel; 0 at 0, NaN at NaN.
    """
    u = np.asarray(u, dtype=np.float64)
    shape, u = u.shape, u.ravel()
    out = np.where(np.isnan(u), u, 0.0)
    sat = np.abs(u) >= U_SATURATE
    out[sat] = np.copysign(PSI_MAX * math.erf(math.sqrt(beta_m / 2.0)), u[sat])
    live = (u != 0.0) & ~sat & ~np.isnan(u)
    v = np.abs(u[live])
    tau = v / math.sqrt(beta_m)
    value = np.empty_like(v)
    inside = (v - 10.0 * tau > 0.0) & (v + 10.0 * tau < SQRT2)
    vi, ti = v[inside], tau[inside]
    value[inside] = vi - (vi ** 3 + 3.0 * vi * ti * ti) / 6.0
    rest = np.flatnonzero(~inside)
    for i in range(0, rest.size, _BATCH):
        b = rest[i:i + _BATCH]
        value[b] = (_weighted_integral(v[b], tau[b], beta_m, 0.0, SQRT2, lambda y: y - y ** 3 / 6.0)
                    + _weighted_integral(v[b], tau[b], beta_m, SQRT2, np.inf, lambda y: PSI_MAX))
    out[live] = np.copysign(value, u[live])
    return out.reshape(shape)


def _weighted_integral(v, tau, beta_m, lo, hi, f):
    """``int_lo^hi f(y) (phi((y - v)/tau) - phi((y + v)/tau)) dy / tau`` (0 <= lo, v > 0) as
    ``int phi(z) (1 - exp(-2 (r + z) r)) f(y) dz`` over ``y = v + tau z`` in [lo, hi], z in
    [-10, 10] (``r = v / tau = sqrt(beta_m)``, so ``2 (r + z) r = 2 y v / tau^2``)."""
    r = math.sqrt(beta_m)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        zl = np.maximum((lo - v) / tau, -10.0)
        zh = np.minimum((hi - v) / tau, 10.0)
        half = np.maximum(zh - zl, 0.0) / 2.0
        z = (zl + zh)[:, None] / 2.0 + half[:, None] * _Z[None, :]
        y = v[:, None] + tau[:, None] * z
        weight = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) * -np.expm1(-2.0 * (r + z) * r)
        total = half * np.sum(_W * f(y) * weight, axis=1)
    return np.where(half > 0.0, total, 0.0)


@functools.lru_cache(maxsize=64)
def expected_psi_sup(beta_m):
    """``(M, u*)``: ``M = sup_u |E psi(u (1 + eps))|`` (odd in u: the sup over u > 0) and where.

    The larger of the limit ``PSI_MAX erf(sqrt(beta_m / 2))`` as u -> inf (then ``u* = inf``)
    and the largest value on a log grid of u in [1e-3, 1e6], refined by scipy's bounded
    scalar search between the grid neighbours of the best point.
    """
    beta_m = float(beta_m)
    limit = PSI_MAX * math.erf(math.sqrt(beta_m / 2.0))
    grid = np.logspace(-3, 6, 9001)
    vals = expected_psi(grid, beta_m)
    i = int(np.argmax(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    best = minimize_scalar(lambda t: -float(expected_psi(np.array([t]), beta_m)[0]), bounds=(lo, hi),
                           method="bounded", options={"xatol": 1e-12 * hi})
    top = max(float(vals[i]), -float(best.fun))
    if top <= limit:
        return limit, math.inf
    return top, float(best.x) if -best.fun >= vals[i] else float(grid[i])


_TWO_M600, _TWO_600, _TWO_599 = 2.0 ** -600, 2.0 ** 600, 2.0 ** 599
#: below this ``sum_j g_j^2`` the clipped estimator takes the norm after scaling by max |g_j|
_SS_MIN = 1e-290
_DBL_MIN = float(np.finfo(np.float64).tiny)
_DBL_MAX = float(np.finfo(np.float64).max)


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
