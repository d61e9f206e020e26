"""Privacy-loss-distribution (PLD) accountant, native numpy (private module).

Definitions
-----------
For a pair of distributions ``(P, Q)`` the privacy loss of an outcome ``o``
is ``L(o) = log(P(o) / Q(o))`` and its distribution under ``o ~ P`` is the
PLD ``omega``.  The hockey-stick divergence (the smallest delta at a given
epsilon) is

    ``delta(eps) = omega({+inf}) + E_omega[(1 - exp(eps - L))_+]``.

A pair ``(P, Q)`` *dominates* a mechanism ``M`` when, for every ordered
pair of neighbours ``(D, D')``, ``H_a(M(D) || M(D')) <= H_a(P || Q)`` for
every ``a = e^eps >= 0`` (Zhu, Dong & Wang 2022, "Optimal accounting of
differential privacy via characteristic function").  The adaptive
composition of mechanisms is dominated by the product of their dominating
pairs, whose PLD is the convolution of their PLDs (Zhu, Dong & Wang 2022;
Koskela, Jaelkoe & Honkela 2020; Sommer, Meiser & Mohammadi 2019).

Pessimistic discretisation ("connect the dots")
-----------------------------------------------
Losses are put on the grid ``h Z`` (``h`` = ``value_discretization``).  For
every cell ``(a, a + h]`` the P-mass ``p`` and the Q-mass ``q`` of the
outcomes whose loss falls in the cell are split between two atoms at the
cell's ends, ``p+`` at ``a + h`` and ``p- = p - p+`` at ``a``, such that
both masses are kept: ``p- e^{-a} + p+ e^{-a-h} = q``, i.e. ``p+ = (p - q
e^a) / (1 - e^{-h})``.  The result is the PLD of a pair ``(P~, Q~)``
(Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, "Connect the dots",
Sec. 3): its ``delta`` is exact at every grid point and linear in
``e^eps`` in between, where the true ``delta`` is convex in ``e^eps``
(a hockey-stick divergence is convex in its parameter), hence

    **Theorem** (Doroshenko et al. 2022, the pessimistic connect-the-dots
    PLD; composition as in Zhu, Dong & Wang 2022).  ``(P~, Q~)`` dominates
    ``(P, Q)`` for every ``a >= 0``; so the composition of the discretised
    PLDs gives a ``delta(eps)`` that is an upper bound on the true one, and
    the reported epsilon is an upper bound on the smallest epsilon.

Plain (not subsampled) Gaussian releases are composed in closed form first
(``mu^2`` adds up) and their product is discretised once; a plan of plain
Gaussian releases only is answered from the exact curve of its product
(Balle & Wang 2018), as :class:`~dpem_fast.accounting.GDPAccountant` does.

This is the pessimistic estimate of the privacy-buckets / PLD literature
(Meiser & Mohammadi 2018; Koskela et al. 2020, 2021; Gopi, Lee &
Wutschitz 2021), made tighter: plain rounding of every loss *up* to the
grid adds ``h / 2`` on average per composed event, ``k h / 2`` after ``k``
events, whereas the split above is mean-preserving up to ``h^2 / 8``
(``E[L~ | L] - L = u (h - u) / 2 + O(h^3)`` for ``L = a + u``), so the bias
after ``k`` events is ``<= k h^2 / 8`` and a coarse grid (default ``h =
1e-3``) is accurate to well under 1% for thousands of events.
``pessimistic=False`` rounds every loss *down* to the grid instead (drops
the mass above the grid): a lower bound, for checking.

Every other approximation moves mass the pessimistic way:

* tails of a single event beyond ``_TAIL`` (in the noise's own quantiles):
  mass below the grid goes to its lowest point, mass above to ``+inf``;
* ``k``-fold self-composition is one FFT power on a window chosen by a
  Chernoff bound on the discretised PLD, ``P(S_k > hi) <= min_lam
  M(lam)^k e^{-lam hi}``: the mass above the window (it would wrap around
  to low losses) is bounded and added to the ``+inf`` mass; mass below the
  window wraps to higher losses (pessimistic);
* after each operation tails of mass ``<= _TRIM`` are trimmed: the top to
  ``+inf``, the bottom onto the lowest kept point;
* floating-point round-off of the FFTs: the largest negative output
  (pure round-off) times the window length is added to ``+inf`` (an
  estimate, not a proof).

For the optimistic variant the same steps go the other way (mass dropped,
bounds subtracted from delta).

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
    orders; it is what this module composes.

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
from scipy import fft as sfft
from scipy import special

from ._base import PrivacyAccountant, untag
from ._events import (DiscreteGaussianEvent, GaussianEvent, LaplaceEvent,
                      NeighbouringEvent, PoissonSampledEvent,
                      SampledWithoutReplacementEvent)
from ._validation import check_positive

__all__ = ["PLDAccountant"]

_TAIL = 1e-20           # noise quantile mass left out of a single event
_TRIM = 1e-18           # tail mass trimmed after every operation
_WINDOW_TOL = 1e-18     # Chernoff bound on the mass above a k-fold window
_Z_TAIL = -special.ndtri(_TAIL)   # ~9.26 standard deviations
_MAX_GRID = 20_000_000  # points of one discretised event
_EPS = np.finfo(float).eps


# ------------------------------------------------------------ the PLD --
class _Pld:
    """Discretised PLD: ``pmf[i]`` at loss ``(lo + i) h``, ``inf`` at
    ``+inf`` (pessimistic: includes every allowance), ``neg`` subtracted
    from delta (optimistic only).  Arrays are read-only once built."""

    __slots__ = ("h", "lo", "pmf", "inf", "neg", "pessimistic")

    def __init__(self, h, lo, pmf, inf, neg, pessimistic):
        self.h, self.lo, self.pessimistic = h, int(lo), pessimistic
        pmf = np.asarray(pmf, dtype=float)
        pmf.setflags(write=False)
        self.pmf, self.inf, self.neg = pmf, float(inf), float(neg)

    @property
    def losses(self):
        return (self.lo + np.arange(self.pmf.size)) * self.h

    def delta(self, eps):
        """``delta(eps)`` of the PLD (pessimistic or optimistic bound)."""
        l = self.losses
        m = l > eps
        d = self.inf + float(np.sum(self.pmf[m] * -np.expm1(eps - l[m])))
        return min(max(d - self.neg, 0.0), 1.0)

    def epsilon(self, delta):
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta``."""
        target = delta + self.neg
        if self.inf >= target:
            return math.inf
        l = self.losses
        first = int(np.searchsorted(l, 0.0, side="right"))  # l > 0 from here
        l, p = l[first:], self.pmf[first:]
        if p.size == 0:
            return 0.0
        # A[i] = sum_{k >= i} p_k, logB[i] = log sum_{k >= i} p_k e^{-l_k}
        tail_a = np.cumsum(p[::-1])[::-1]
        with np.errstate(divide="ignore"):
            logb = np.logaddexp.accumulate((np.log(p) - l)[::-1])[::-1]
        # delta at eps = 0 and at every grid point l_i (atoms above it)
        a_next = np.append(tail_a[1:], 0.0)
        logb_next = np.append(logb[1:], -np.inf)
        d_grid = self.inf + a_next - np.exp(l + logb_next)
        d0 = self.inf + tail_a[0] - math.exp(logb[0])
        if d0 <= target:
            return 0.0
        i = int(np.argmax(d_grid <= target))   # first grid point that works
        # on (l_{i-1}, l_i]: delta(eps) = inf + A_i - e^eps B_i
        num = self.inf + tail_a[i] - target
        eps = math.log(num) - logb[i] if num > 0 else l[i]
        lower = l[i - 1] if i > 0 else 0.0
        return float(min(max(eps, lower), l[i]))


def _identity(h, pessimistic):
    return _Pld(h, 0, [1.0], 0.0, 0.0, pessimistic)


def _is_identity(pld):
    return (pld.lo == 0 and pld.pmf.size == 1 and pld.pmf[0] == 1.0
            and pld.inf == 0.0 and pld.neg == 0.0)


def _trim(h, lo, pmf, inf, neg, pessimistic):
    """Drop tails of mass ``<= _TRIM`` (pessimistic: the top to ``+inf``,
    the bottom onto the lowest kept point; optimistic: dropped)."""
    pmf = np.maximum(pmf, 0.0)
    nz = np.flatnonzero(pmf)
    if nz.size == 0:
        return _Pld(h, 0, [0.0], inf, neg, pessimistic)
    c_lo = np.cumsum(pmf)
    c_hi = np.cumsum(pmf[::-1])[::-1]
    i0 = int(np.searchsorted(c_lo, _TRIM, side="right"))
    i1 = pmf.size - 1 - int(np.searchsorted(c_hi[::-1], _TRIM, side="right"))
    i0, i1 = min(i0, int(nz[-1])), max(i1, int(nz[0]))
    if i1 < i0:
        i0 = i1 = int(np.argmax(pmf))
    below = float(c_lo[i0 - 1]) if i0 > 0 else 0.0
    above = float(c_hi[i1 + 1]) if i1 + 1 < pmf.size else 0.0
    out = np.array(pmf[i0:i1 + 1])
    if pessimistic:
        out[0] += below
        inf = inf + above
    return _Pld(h, lo + i0, out, inf, neg, pessimistic)


# ------------------------------------------------- discretisation --
def _discretise(sf_p, sf_q, l_lo, l_hi, h, pessimistic):
    """Discretised PLD of a pair given ``sf_p(t) = P(L > t)`` and
    ``sf_q(t) = Q(L > t)`` (vectorised) on a loss range holding all but a
    negligible mass (see the module docstring)."""
    i0 = math.floor(l_lo / h)
    i1 = math.floor(l_hi / h) + 1
    if i1 - i0 + 1 > _MAX_GRID:
        raise ValueError(
            f"value_discretization={h!r} needs {i1 - i0 + 1} grid points for "
            f"one event (losses from {l_lo:.4g} to {l_hi:.4g}); use a larger "
            f"value_discretization")
    t = np.arange(i0, i1 + 1) * h
    sp = np.asarray(sf_p(t), dtype=float)
    p = np.maximum(sp[:-1] - sp[1:], 0.0)          # cells (t_j, t_j + h]
    pmf = np.zeros(t.size)
    if pessimistic:
        sq = np.asarray(sf_q(t), dtype=float)
        qc = np.maximum(sq[:-1] - sq[1:], 0.0)
        with np.errstate(divide="ignore"):
            ratio = np.exp(np.log(qc) + t[:-1])       # q e^a, no overflow
        up = np.clip((p - ratio) / -math.expm1(-h), 0.0, p)
        pmf[1:] += up
        pmf[:-1] += p - up
        pmf[0] += max(1.0 - sp[0], 0.0)              # mass at or below t_0
        inf = float(sp[-1])                           # mass above the grid
    else:
        pmf[:-1] += p                                 # round down
        inf = 0.0
    return _trim(h, i0, pmf, inf, 0.0, pessimistic)


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


# ---------------------------------------------------- composition --
def _roundoff(res):
    """Allowance for FFT round-off: the largest negative output (which can
    only be round-off) times the number of outputs."""
    neg = -float(res.min())
    return 2.0 * res.size * max(neg, 0.0)


def _combine_inf(a, b):
    return a + b - a * b


def _convolve(x, y):
    """Composition of two PLDs (linear convolution, no aliasing)."""
    if _is_identity(x):
        return y
    if _is_identity(y):
        return x
    n = x.pmf.size + y.pmf.size - 1
    if x.pmf.size * y.pmf.size <= 50_000:
        res = np.convolve(x.pmf, y.pmf)
        extra = 0.0
    else:
        w = sfft.next_fast_len(n, real=True)
        res = sfft.irfft(sfft.rfft(x.pmf, w) * sfft.rfft(y.pmf, w), w)[:n]
        extra = _roundoff(res)
    inf = _combine_inf(x.inf, y.inf)
    if x.pessimistic:
        inf += extra
    return _trim(x.h, x.lo + y.lo, res, inf, x.neg + y.neg, x.pessimistic)


def _log_mgf(pld, lams):
    """``log E[e^{lam L}; L finite]`` for every ``lam`` (discretised PLD)."""
    nz = np.flatnonzero(pld.pmf)
    l = (pld.lo + nz) * pld.h
    e = np.log(pld.pmf[nz])[None, :] + lams[:, None] * l[None, :]
    m = e.max(axis=1)
    return m + np.log(np.exp(e - m[:, None]).sum(axis=1))


def _int_power(spec, k):
    """``spec ** k`` by repeated squaring (complex, elementwise)."""
    out = None
    while True:
        if k & 1:
            out = spec if out is None else out * spec
        k >>= 1
        if not k:
            return out
        spec = spec * spec


def _power(x, k):
    """``k``-fold self-composition by one FFT power on a Chernoff window."""
    if k == 1 or _is_identity(x):
        return x
    h, pmf = x.h, x.pmf
    nz = np.flatnonzero(pmf)
    first, last = x.lo + int(nz[0]), x.lo + int(nz[-1])
    l = (x.lo + np.arange(pmf.size)) * h
    mass = pmf.sum()
    mean = float(np.dot(pmf, l) / mass)
    sd = math.sqrt(max(float(np.dot(pmf, (l - mean) ** 2) / mass), h * h))
    # around the optimum for a Gaussian sum (any lam > 0 gives a valid bound)
    lams = (math.sqrt(-2.0 * math.log(_WINDOW_TOL)) / (sd * math.sqrt(k))
            * np.array([0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5]))
    log_tol = math.log(_WINDOW_TOL)
    lm_up, lm_down = _log_mgf(x, lams), _log_mgf(x, -lams)
    up = (k * lm_up - log_tol) / lams
    down = (log_tol - k * lm_down) / lams
    hi_i = min(k * last, math.ceil(float(up.min()) / h))
    lo_i = max(k * first, math.floor(float(down.max()) / h))
    lo_i = min(lo_i, hi_i)
    w = sfft.next_fast_len(max(hi_i - lo_i + 1, pmf.size), real=True)
    base = k * x.lo
    # bounds on the k-fold mass above / below the window (Chernoff)
    above = 0.0
    if lo_i + w - 1 < k * last:
        s = (lo_i + w) * h
        above = float(np.exp(np.min(k * lm_up - lams * s)))
    below = 0.0
    if lo_i > k * first:
        s = (lo_i - 1) * h
        below = float(np.exp(np.min(k * lm_down + lams * s)))
    if pmf.size > w:  # fold the single event onto the window (mod w)
        pmf = np.bincount(np.arange(pmf.size) % w, weights=pmf, minlength=w)
    spec = sfft.rfft(pmf, w)
    res = sfft.irfft(_int_power(spec, k), w)
    res = np.roll(res, -((lo_i - base) % w))
    inf = -math.expm1(k * math.log1p(-x.inf)) if x.inf < 1 else 1.0
    neg = k * x.neg
    if x.pessimistic:
        inf += above + _roundoff(res)
    else:
        neg += below
    return _trim(h, lo_i, res, inf, neg, x.pessimistic)


# ------------------------------------------------------ accountant --
class _State:
    """PLDs of the removal and addition directions (the same object when
    every composed event is symmetric), and ``mu2``: the sum of ``1/z^2``
    of the plain Gaussian releases, composed in closed form (their product
    pair is ``(N(mu, 1), N(0, 1))`` with ``mu^2`` the sum: Dong, Roth & Su
    2019, Cor. 2.3) and discretised once, when a query needs it."""

    __slots__ = ("remove", "add", "mu2", "_final")

    def __init__(self, remove, add, mu2=0.0):
        self.remove, self.add, self.mu2 = remove, add, float(mu2)
        self._final = None

    def gaussian_only(self):
        return (self.mu2 > 0.0 and _is_identity(self.remove)
                and _is_identity(self.add))

    def pairs(self, h, pessimistic):
        """The PLDs to query (memoised; the state is immutable)."""
        if self._final is None:
            remove, add = self.remove, self.add
            if self.mu2 > 0.0:
                gauss = _gaussian_pld(math.sqrt(self.mu2), h, pessimistic)
                same = add is remove
                remove = _convolve(remove, gauss)
                add = remove if same else _convolve(add, gauss)
            self._final = (remove,) if add is remove else (remove, add)
        return self._final


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


class PLDAccountant(PrivacyAccountant):
    """Privacy-loss-distribution accountant (native; numpy FFTs).

    Parameters
    ----------
    neighbouring : {"add_remove", "replace"}
        Relation under which the events' noise parameters are expressed.
    value_discretization : float, default 1e-3
        Grid step ``h`` of the privacy losses (finite, > 0).  The reported
        epsilon is an upper bound for every ``h``; its excess over the exact
        value shrinks like ``k h^2`` after ``k`` composed events.
    pessimistic : bool, default True
        ``True``: "connect the dots" discretisation, an upper bound (use
        this for privacy claims).  ``False``: losses rounded down, a lower
        bound (for checks only).

    Notes
    -----
    Theorem, constructions and references: see the module docstring of
    :mod:`dpem_fast.accounting._pld` (Koskela, Jaelkoe & Honkela 2020;
    Koskela et al. 2021; Gopi, Lee & Wutschitz 2021; Doroshenko et al. 2022
    "Connect the dots"; Zhu, Dong & Wang 2022; Balle, Barthe & Gaboardi
    2018).  In short: each event's PLD is discretised pessimistically
    (it dominates the true pair), compositions are convolutions computed
    with FFTs (``SelfComposedEvent`` and ``compose(event, count)``: one FFT
    power), and every truncation moves mass towards larger losses or to
    ``+inf``.  Under ``"add_remove"`` the removal and the addition PLDs are
    composed side by side and the worse one is reported.

    Supported: ``GaussianEvent``, ``LaplaceEvent``, ``DiscreteGaussianEvent``
    (integer sensitivity, scalar), their Poisson-sampled versions under
    ``"add_remove"``, their sampled-without-replacement versions under
    ``"replace"``, and compositions.  ``dp_accounting`` is not needed (it is
    a test-only cross-check).
    """

    def __init__(self, *, neighbouring="add_remove", value_discretization=1e-3,
                 pessimistic=True):
        self._h = check_positive("value_discretization", value_discretization)
        if not isinstance(pessimistic, (bool, np.bool_)):
            raise TypeError(f"pessimistic must be a bool, got {pessimistic!r}")
        self._pessimistic = bool(pessimistic)
        super().__init__(neighbouring=neighbouring)

    @property
    def value_discretization(self):
        return self._h

    @property
    def pessimistic(self):
        return self._pessimistic

    def __repr__(self):
        return (f"PLDAccountant(neighbouring={self._neighbouring!r}, "
                f"value_discretization={self._h!r}, "
                f"pessimistic={self._pessimistic!r}, "
                f"n_entries={len(self._ledger)})")

    # -- hooks ---------------------------------------------------------
    def _zero(self):
        one = _identity(getattr(self, "_h", 1e-3),
                        getattr(self, "_pessimistic", True))
        return _State(one, one)

    def _leaf(self, event):
        # sampling everything is the base event, whatever it is
        if ((isinstance(event, PoissonSampledEvent)
             and event.sampling_probability == 1.0)
                or (isinstance(event, SampledWithoutReplacementEvent)
                    and event.sample_size == event.population_size)):
            return self._contribution(event.event)
        base = event
        while isinstance(base, NeighbouringEvent):
            base = untag(base, self._neighbouring, type(self).__name__)
        if isinstance(base, GaussianEvent):
            one = _identity(self._h, self._pessimistic)
            return _State(one, one, base.noise_multiplier ** -2)
        try:
            remove, add = _leaf_plds(event, self._neighbouring, self._h,
                                     self._pessimistic)
        except _Refused as exc:
            self._unsupported(event, exc.args[0])
        return _State(remove, add)

    def _scale(self, contrib, count):
        if count == 1:
            return contrib
        remove = _power(contrib.remove, count)
        add = (remove if contrib.add is contrib.remove
               else _power(contrib.add, count))
        return _State(remove, add, contrib.mu2 * count)

    def _add(self, a, b):
        remove = _convolve(a.remove, b.remove)
        if a.add is a.remove and b.add is b.remove:
            add = remove
        else:
            add = _convolve(a.add, b.add)
        return _State(remove, add, a.mu2 + b.mu2)

    def _pairs(self):
        return self._state.pairs(self._h, self._pessimistic)

    def _epsilon(self, delta):
        if self._state.gaussian_only():
            return _gaussian_epsilon(math.sqrt(self._state.mu2), delta)
        return max(p.epsilon(delta) for p in self._pairs())

    def _delta(self, epsilon):
        if self._state.gaussian_only():
            return _gaussian_delta(math.sqrt(self._state.mu2), epsilon)
        return max(p.delta(epsilon) for p in self._pairs())
