"""Discretised privacy-loss distributions on the grid ``h Z`` (private; part of
:mod:`dpem_fast.accounting._pld`).

What is here: the PMF type ``_Pld`` with its ``delta(eps)`` and ``epsilon(delta)``
queries, the pessimistic discretisation of a pair given the survival functions of its
loss (``_discretise``), the trimming of negligible tails (``_trim``), and composition:
the convolution of two PLDs (``_convolve``) and the ``k``-fold self-composition by one
FFT power (``_power``).  Which pair dominates which mechanism is
:mod:`dpem_fast.accounting._pld_pairs`; the accountant that composes events is
:mod:`dpem_fast.accounting._pld` (the definitions of PLD, dominating pair and
hockey-stick divergence are in its docstring).

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

* tails of a single event beyond ``_TAIL`` (in the noise's own quantiles;
  the bases of :mod:`dpem_fast.accounting._pld_pairs` cut their noise
  there): ``_discretise`` puts the mass below the grid on its lowest point
  and the mass above it at ``+inf``;
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
"""
import math

import numpy as np
from scipy import fft as sfft

_TRIM = 1e-18           # tail mass trimmed after every operation
_WINDOW_TOL = 1e-18     # Chernoff bound on the mass above a k-fold window
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
