"""The maths of DG-EM's robust coordinate estimator that the estimator's privacy analysis
needs: the soft truncation ψ, ``E ψ(u (1 + ε))`` in closed form and its supremum
``M(β_m)``, which sets the sensitivity (see :class:`~dpem_fast.mixture.DPGradientEM`).

Production code in the kernel layer: the estimator and the kernel's Python face import it; the
numpy twin of the kernel (``dpem_fast._reference.gradem``, the test oracle) computes the same
quantities its own way.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import erfc

__all__ = ["psi", "expected_psi", "expected_psi_sup", "PSI_MAX", "GL_NODES", "U_SATURATE", "TAU_SWITCH"]

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
