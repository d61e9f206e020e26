"""Zero-concentrated DP accountant."""
import math

import numpy as np
from scipy import optimize

from ._base import AdditiveAccountant
from ._events import (DiscreteGaussianEvent, GaussianEvent, LaplaceEvent,
                      PoissonSampledEvent, SampledWithoutReplacementEvent)
from ._validation import check_choice

__all__ = ["ZCDPAccountant"]

_ALPHA_GRID = 1.0 + np.geomspace(1e-4, 1e6, 1200)


def discrete_gaussian_rho(event):
    """zCDP of a discrete Gaussian release (Canonne, Kamath & Steinke 2020).

    ``rho = Delta^2 / (2 sigma^2)`` for an integer-valued query with l2
    sensitivity ``Delta``, whatever its dimension.  Scalar case: CKS Thm 4,
    whose proof gives ``D_alpha(N_Z(0, s^2) || N_Z(m, s^2)) <= alpha m^2 /
    (2 s^2)`` for every integer shift ``m`` (the lattice sum
    ``sum_x exp(-(x - c)^2 / (2 s^2))`` is largest at integer ``c``).
    Independent coordinates: Renyi divergences of product distributions
    add, so ``D_alpha <= alpha sum_j m_j^2 / (2 s^2) = alpha Delta^2 /
    (2 s^2)``.  (The extra ``tau`` terms of the distributed discrete
    Gaussian, Kairouz, Liu & Steinke 2021, concern *sums* of discrete
    Gaussians and do not apply to one release.)
    """
    return event.sensitivity ** 2 / (2.0 * event.sigma ** 2)


def zcdp_epsilon_classic(rho, delta):
    """``rho + 2 sqrt(rho log(1/delta))`` (Bun & Steinke 2016, Prop. 1.3;
    Park et al. 2017, Sec. 5)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_delta_classic(rho, epsilon):
    """Inverse of :func:`zcdp_epsilon_classic`: ``exp(-(eps - rho)^2 / (4 rho))``."""
    if epsilon <= rho:
        return 1.0
    return math.exp(-(epsilon - rho) ** 2 / (4.0 * rho))


def _eps_at(alpha, rho, log_delta):
    # Canonne, Kamath & Steinke (2020) Prop. 12 with RDP rho*alpha:
    # eps = rho a + log((a-1)/a) - (log delta + log a) / (a - 1)
    return (rho * alpha + np.log1p(-1.0 / alpha)
            - (log_delta + np.log(alpha)) / (alpha - 1.0))


def _log_delta_at(alpha, rho, epsilon):
    # same proposition solved for delta
    return ((alpha - 1.0) * (rho * alpha - epsilon + np.log1p(-1.0 / alpha))
            - np.log(alpha))


def _minimise(fun):
    vals = fun(_ALPHA_GRID)
    i = int(np.argmin(vals))
    best = float(vals[i])
    lo = _ALPHA_GRID[max(i - 1, 0)]
    hi = _ALPHA_GRID[min(i + 1, _ALPHA_GRID.size - 1)]
    if hi > lo:
        res = optimize.minimize_scalar(lambda a: float(fun(np.float64(a))),
                                       bounds=(lo, hi), method="bounded",
                                       options={"xatol": 1e-10 * lo})
        if res.fun < best:
            best = float(res.fun)
    return best


def zcdp_epsilon_tight(rho, delta):
    """``min_{alpha > 1}`` of the CKS (2020, Prop. 12) bound at RDP ``rho alpha``
    (never larger than the classic conversion)."""
    log_delta = math.log(delta)
    eps = _minimise(lambda a: _eps_at(a, rho, log_delta))
    return max(0.0, min(eps, zcdp_epsilon_classic(rho, delta)))


def zcdp_delta_tight(rho, epsilon):
    """``min_{alpha > 1}`` delta of the CKS (2020, Prop. 12) bound."""
    log_d = _minimise(lambda a: _log_delta_at(a, rho, epsilon))
    return min(math.exp(min(log_d, 0.0)), zcdp_delta_classic(rho, epsilon))


class ZCDPAccountant(AdditiveAccountant):
    """Zero-concentrated DP accountant (Bun & Steinke 2016).

    Parameters
    ----------
    conversion : {"tight", "classic"}
        ``"classic"``: ``eps = rho + 2 sqrt(rho log(1/delta))`` (Bun &
        Steinke 2016, Prop. 1.3, used by Park et al. 2017, Sec. 5).
        ``"tight"`` (default): ``min_alpha rho alpha + log((alpha-1)/alpha)
        - (log delta + log alpha)/(alpha - 1)`` (Canonne, Kamath & Steinke
        2020, Prop. 12 / Asoodeh et al. 2021), never worse than classic.
    neighbouring : {"add_remove", "replace"}

    Notes
    -----
    Per-event rho: Gaussian ``1/(2 z^2)`` (Bun & Steinke 2016, Prop. 1.6),
    Laplace ``eps^2 / 2`` (Prop. 1.4), discrete Gaussian
    ``Delta^2/(2 sigma^2)`` (CKS 2020).  rho adds under composition
    (Lemma 1.7).  Subsampled events are refused (zCDP has no useful
    amplification by subsampling), except the trivial ``q = 1`` / ``m = n``.
    """

    def __init__(self, *, conversion="tight", neighbouring="add_remove"):
        self._conversion = check_choice("conversion", conversion,
                                        ("tight", "classic"))
        super().__init__(neighbouring=neighbouring)

    @property
    def conversion(self):
        return self._conversion

    @property
    def rho(self):
        """The composed zCDP parameter."""
        return float(self._state)

    def _leaf(self, event):
        if isinstance(event, GaussianEvent):
            return 1.0 / (2.0 * event.noise_multiplier ** 2)
        if isinstance(event, LaplaceEvent):
            return event.epsilon ** 2 / 2.0
        if isinstance(event, DiscreteGaussianEvent):
            return discrete_gaussian_rho(event)
        if (isinstance(event, PoissonSampledEvent)
                and event.sampling_probability == 1.0):
            return self._contribution(event.event)
        if (isinstance(event, SampledWithoutReplacementEvent)
                and event.sample_size == event.population_size):
            return self._contribution(event.event)
        self._unsupported(event, "no zCDP bound (subsampling is not "
                          "amplified under zCDP; use RDPAccountant)")

    def _epsilon(self, delta):
        if self._state == 0.0:
            return 0.0
        if self._conversion == "classic":
            return zcdp_epsilon_classic(self._state, delta)
        return zcdp_epsilon_tight(self._state, delta)

    def _delta(self, epsilon):
        if self._state == 0.0:
            return 0.0
        if self._conversion == "classic":
            return zcdp_delta_classic(self._state, epsilon)
        return zcdp_delta_tight(self._state, epsilon)
