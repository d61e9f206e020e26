"""Dominating pairs: the privacy-loss distribution of each mechanism (private; part of
:mod:`dpem_fast.accounting._pld`).

What is here: the base pairs of the additive-noise mechanisms (Gaussian, Laplace,
discrete Gaussian), the pairs of their subsampled versions under each neighbouring
relation, the discretised ``(remove, add)`` PLDs of one leaf event (``_leaf_plds``,
memoised), the refusals (``_Refused``), and the Gaussian pair in closed form: its exact
``delta(eps)`` curve, its inverse, and its discretisation (``_gaussian_pld``), used for
plain Gaussian releases composed as ``mu^2``.  A pair reaches the grid of
:mod:`dpem_fast.accounting._pld_grid` as the survival functions of its loss under
``P`` and ``Q`` and a loss range; every base cuts its noise at quantile mass ``_TAIL``
(``_Z_TAIL`` standard deviations for the Gaussians) and the discretisation moves what
was cut the pessimistic way.

Mechanisms and relations
------------------------
Every base mechanism is an additive-noise mechanism with sensitivity 1 in
the units of its parameter, dominated by the shifted pair ``(P1, P0)`` =
(noise centred at 1, noise centred at 0): Gaussian ``N(., z^2)`` (Dong, Roth
& Su 2019), Laplace ``Lap(., 1/eps)`` (Dwork & Roth 2014) and the discrete
Gaussian ``N_Z(., sigma^2)`` with an integer shift ``Delta`` (Canonne,
Kamath & Steinke 2020, exact (eps, delta) curve of the discrete Gaussian:
the worst case over ``|q(x) - q(x')| <= Delta`` is a shift of ``Delta``;
``tests/accounting/test_pld.py`` checks this numerically).  These pairs are symmetric (``(P1, P0)`` and ``(P0,
P1)`` have the same PLD) and have a monotone likelihood ratio ``r(x) =
log(P1(x) / P0(x))``.

``"add_remove"``, Poisson sampling with probability ``q``
    Removal: ``(A, B) = (q P1 + (1 - q) P0, P0)``; addition: ``(B, A)``
    (Zhu, Dong & Wang 2022, Poisson subsampling; Koskela et al. 2020).  Each ordered
    relation has its own dominating pair for every ``a >= 0``, so the
    accountant composes a removal PLD and an addition PLD side by side and
    reports the worse of the two.
``"replace"``, sampling ``m`` of ``n`` without replacement, ``g = m / n``
    Balle, Barthe & Gaboardi (2018, advanced joint convexity) give
    ``H_a(M(D) || M(D')) <= H_a(A || B)`` for ``a >= 1`` and both orders of
    ``(D, D')`` with ``(A, B) = (g P1 + (1 - g) P0, P0)``; equivalently
    ``H_a <= H_a(B || A)`` for ``a < 1`` (``H_a(P||Q) = 1 - a + a
    H_{1/a}(Q||P)``; as stated by Zhu, Dong & Wang 2022).
    The pair ``X`` whose PLD is that of ``(A, B)`` on ``(0, inf]``, that of
    ``(B, A)`` on ``(-inf, 0)`` and the remaining mass ``B(B >= A) - A(A >
    B) >= 0`` at 0 (non-negative for symmetric bases) has exactly this
    hockey-stick curve, so ``X`` dominates for every ``a >= 0`` and both
    orders; it is what the accountant composes.

Refused (:class:`UnsupportedEventError`), mirroring
:class:`~dpem_fast.accounting.RDPAccountant`: Poisson sampling with ``q < 1``
under ``"replace"``, sampling without replacement with ``m < n`` under
``"add_remove"``, subsampling of a composite event, and the discrete
Gaussian with a non-integer sensitivity or ``dimension > 1`` (its PLD is
not a function of the l2 sensitivity).
"""
import functools
import math

import numpy as np
from scipy import special

from ._base import untag
from ._events import (DiscreteGaussianEvent, GaussianEvent, LaplaceEvent,
                      NeighbouringEvent, PoissonSampledEvent,
                      SampledWithoutReplacementEvent)
from ._pld_grid import _MAX_GRID, _discretise

_TAIL = 1e-20           # noise quantile mass left out of a single event
_Z_TAIL = -special.ndtri(_TAIL)   # ~9.26 standard deviations


# ------------------------------------------------------ base pairs --
class _GaussianBase:
    """``P0 = N(0, z^2)``, ``P1 = N(1, z^2)``, ``r(x) = (2x - 1) / (2 z^2)``."""

    def __init__(self, z):
        self.z = z

    def _x(self, g):
        return self.z * self.z * g + 0.5

    def sf(self, g, shifted):   # P(r > g)
        x = self._x(g) - (1.0 if shifted else 0.0)
        return special.ndtr(-x / self.z)

    def cdf(self, g, shifted):  # P(r <= g)
        x = self._x(g) - (1.0 if shifted else 0.0)
        return special.ndtr(x / self.z)

    def r_range(self):
        z, c = self.z, _Z_TAIL
        return (-2.0 * c * z - 1.0) / (2 * z * z), (2.0 * c * z + 1.0) / (2 * z * z)


class _LaplaceBase:
    """``P0 = Lap(0, b)``, ``P1 = Lap(1, b)``, ``b = 1 / eps``;
    ``r(x) = eps (|x| - |x - 1|)`` in ``[-eps, eps]``."""

    def __init__(self, eps):
        self.eps = eps

    def _xg(self, g):
        g = np.asarray(g, dtype=float)
        return np.clip((1.0 + g / self.eps) / 2.0, 0.0, 1.0)

    def sf(self, g, shifted):
        g = np.asarray(g, dtype=float)
        xg = self._xg(g)
        if shifted:
            mid = 1.0 - 0.5 * np.exp(-self.eps * (1.0 - xg))
        else:
            mid = 0.5 * np.exp(-self.eps * xg)
        return np.where(g >= self.eps, 0.0, np.where(g < -self.eps, 1.0, mid))

    def cdf(self, g, shifted):
        g = np.asarray(g, dtype=float)
        xg = self._xg(g)
        if shifted:
            mid = 0.5 * np.exp(-self.eps * (1.0 - xg))
        else:
            mid = 1.0 - 0.5 * np.exp(-self.eps * xg)
        return np.where(g >= self.eps, 1.0, np.where(g < -self.eps, 0.0, mid))

    def r_range(self):
        return -self.eps, self.eps


@functools.lru_cache(maxsize=16)
def _discrete_gaussian_table(sigma, k):
    """Support ``-k..k``, survival ``P(X > x)`` and cdf ``P(X <= x)`` of
    ``N_Z(0, sigma^2)`` truncated to it (the rest is ``< _TAIL``)."""
    x = np.arange(-k, k + 1, dtype=float)
    w = np.exp(-x * x / (2.0 * sigma * sigma))
    w /= w.sum()
    cdf = np.cumsum(w)
    sf = np.append(np.cumsum(w[::-1])[::-1][1:], 0.0)
    for a in (cdf, sf):
        a.setflags(write=False)
    return cdf, sf


class _DiscreteGaussianBase:
    """``P0 = N_Z(0, s^2)``, ``P1 = N_Z(D, s^2)`` (integer ``D``),
    ``r(x) = (2 D x - D^2) / (2 s^2)``."""

    def __init__(self, sigma, shift):
        self.sigma, self.shift = sigma, shift
        self.k = int(math.ceil(_Z_TAIL * sigma + 2)) + int(shift)
        if 2 * self.k + 1 > _MAX_GRID:
            raise _Refused("sigma too large for an exact discrete-Gaussian "
                           "PLD")
        self.cdf_t, self.sf_t = _discrete_gaussian_table(sigma, self.k)

    def _xg(self, g, shifted):
        s2, d = self.sigma ** 2, self.shift
        with np.errstate(invalid="ignore"):
            x = (2.0 * s2 * np.asarray(g, dtype=float) + d * d) / (2.0 * d)
        return x - (d if shifted else 0.0)

    def _index(self, g, shifted):
        x = self._xg(g, shifted)
        idx = np.floor(np.clip(x, -self.k - 1, self.k + 1)) + self.k
        return idx.astype(np.int64)

    def sf(self, g, shifted):   # P(X > x) = sf_t[floor(x)]
        idx = self._index(g, shifted)
        out = self.sf_t[np.clip(idx, 0, 2 * self.k)]
        return np.where(idx < 0, 1.0, np.where(idx > 2 * self.k, 0.0, out))

    def cdf(self, g, shifted):  # P(X <= x) = cdf_t[floor(x)]
        idx = self._index(g, shifted)
        out = self.cdf_t[np.clip(idx, 0, 2 * self.k)]
        return np.where(idx < 0, 0.0, np.where(idx > 2 * self.k, 1.0, out))

    def r_range(self):
        s2, d, k = self.sigma ** 2, self.shift, self.k
        return (-2 * d * k - d * d) / (2 * s2), (2 * d * (k + d) - d * d) / (2 * s2)


class _Refused(Exception):
    """A base the PLD accountant has no proof for (reason in args[0])."""


def _loss_of_r(r, q):
    """``log(1 - q + q e^r)``."""
    if q == 1.0:
        return np.asarray(r, dtype=float)
    return np.log1p(q * np.expm1(r))


def _r_of_loss(t, q):
    """``g(t)`` with ``log(1 - q + q e^r) > t  <=>  r > g(t)`` (``-inf``
    when every ``r`` qualifies)."""
    t = np.asarray(t, dtype=float)
    u = np.expm1(t) + q
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.log(u) - math.log(q)
    return np.where(u > 0, g, -np.inf)


def _remove_pair(base, q):
    """``(sf_p, sf_q, lo, hi)`` of ``(q P1 + (1-q) P0, P0)``."""
    def sf_p(t):
        g = _r_of_loss(t, q)
        return (1.0 - q) * base.sf(g, False) + q * base.sf(g, True)

    def sf_q(t):
        return base.sf(_r_of_loss(t, q), False)
    r_lo, r_hi = base.r_range()
    return sf_p, sf_q, float(_loss_of_r(r_lo, q)), float(_loss_of_r(r_hi, q))


def _add_pair(base, q):
    """``(sf_p, sf_q, lo, hi)`` of ``(P0, q P1 + (1-q) P0)``: loss ``-L``."""
    def sf_p(t):
        return base.cdf(_r_of_loss(-np.asarray(t, dtype=float), q), False)

    def sf_q(t):
        g = _r_of_loss(-np.asarray(t, dtype=float), q)
        return (1.0 - q) * base.cdf(g, False) + q * base.cdf(g, True)
    r_lo, r_hi = base.r_range()
    return sf_p, sf_q, -float(_loss_of_r(r_hi, q)), -float(_loss_of_r(r_lo, q))


def _replace_wor_pair(base, g):
    """The pair ``X``: ``(A, B)`` above loss 0, ``(B, A)`` below."""
    rp, rq, rlo, rhi = _remove_pair(base, g)
    ap, aq, alo, ahi = _add_pair(base, g)

    def sf_p(t):
        t = np.asarray(t, dtype=float)
        return np.where(t >= 0, rp(np.maximum(t, 0)), ap(np.minimum(t, 0)))

    def sf_q(t):
        t = np.asarray(t, dtype=float)
        return np.where(t >= 0, rq(np.maximum(t, 0)), aq(np.minimum(t, 0)))
    return sf_p, sf_q, min(rlo, alo), max(rhi, ahi)


def _base_of(event, neighbouring):
    """The base pair of a leaf event (tags untagged), or raise."""
    while isinstance(event, NeighbouringEvent):
        event = untag(event, neighbouring, "PLDAccountant")
    if isinstance(event, GaussianEvent):
        return _GaussianBase(event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        return _LaplaceBase(event.epsilon)
    if isinstance(event, DiscreteGaussianEvent):
        if event.dimension not in (None, 1):
            raise _Refused(
                "a DiscreteGaussianEvent with dimension > 1: the PLD of a "
                "multivariate discrete Gaussian is not determined by its l2 "
                "sensitivity")
        if event.sensitivity != math.floor(event.sensitivity):
            raise _Refused(
                "a DiscreteGaussianEvent needs an integer sensitivity (the "
                "largest shift of an integer-valued query), got "
                f"{event.sensitivity!r}")
        return _DiscreteGaussianBase(event.sigma, int(event.sensitivity))
    raise _Refused(f"no PLD for a {type(event).__name__} base: subsampling "
                   "is accounted for a single Gaussian, Laplace or discrete "
                   "Gaussian release")


@functools.lru_cache(maxsize=256)
def _leaf_plds(event, neighbouring, h, pessimistic):
    """``(remove, add)`` PLDs of a leaf or sampled leaf (memoised)."""
    q = 1.0
    wor = False
    if isinstance(event, PoissonSampledEvent):
        q = event.sampling_probability
        if q < 1.0 and neighbouring != "add_remove":
            raise _Refused(
                "Poisson sampling with neighbouring='replace': the "
                "subsampled dominating pair (Zhu, Dong & Wang 2022) "
                "is proved for add/remove-one neighbours; use neighbouring="
                "'add_remove' (a replace-one neighbour is a removal plus an "
                "addition, so the caller can derive an add/remove noise "
                "multiplier)")
        event = event.event
    elif isinstance(event, SampledWithoutReplacementEvent):
        q = event.sample_size / event.population_size
        if q < 1.0 and neighbouring != "replace":
            raise _Refused(
                "SampledWithoutReplacementEvent requires neighbouring="
                "'replace' (Balle, Barthe & Gaboardi 2018 bound)")
        wor = q < 1.0
        event = event.event
    base = _base_of(event, neighbouring)
    if q == 1.0:
        pld = _discretise(*_remove_pair(base, 1.0), h, pessimistic)
        return pld, pld
    if wor:
        pld = _discretise(*_replace_wor_pair(base, q), h, pessimistic)
        return pld, pld
    return (_discretise(*_remove_pair(base, q), h, pessimistic),
            _discretise(*_add_pair(base, q), h, pessimistic))


# ---------------------------------- the Gaussian pair in closed form --
def _gaussian_delta(mu, eps):
    """Exact ``delta(eps)`` of ``(N(mu, 1), N(0, 1))`` (Balle & Wang 2018,
    Thm 8; Dong, Roth & Su 2019, Cor. 2.13)."""
    return max(float(special.ndtr(-eps / mu + mu / 2)
                     - math.exp(eps) * special.ndtr(-eps / mu - mu / 2)), 0.0)


def _gaussian_epsilon(mu, delta):
    """Smallest ``eps >= 0`` with ``_gaussian_delta(mu, eps) <= delta``: a
    bisection that keeps the feasible end (so it is an upper bound)."""
    if _gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, mu * mu / 2 + mu * (2.0 - special.ndtri(delta))
    while _gaussian_delta(mu, hi) > delta:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-13 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if _gaussian_delta(mu, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


@functools.lru_cache(maxsize=64)
def _gaussian_pld(mu, h, pessimistic):
    return _discretise(*_remove_pair(_GaussianBase(1.0 / mu), 1.0), h,
                       pessimistic)
