"""Gaussian differential privacy: exact accounting of Gaussian compositions."""
import math

from scipy import optimize, special

from ._base import AdditiveAccountant
from ._events import GaussianEvent

__all__ = ["GDPAccountant"]


def gaussian_log_delta(mu, epsilon):
    """``log delta(epsilon)`` of a mu-GDP (Gaussian) mechanism.

    Balle & Wang (2018), Thm 8; Dong, Roth & Su (2019), Cor. 2.13:
    ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, evaluated as
    ``log Phi(a) + log1p(-exp(eps + log Phi(b) - log Phi(a)))``.
    """
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    la, lb = special.log_ndtr(a), special.log_ndtr(b)
    d = epsilon + lb - la
    if d >= 0.0:  # rounding only; the exact value is positive
        return -math.inf
    return la + math.log(-math.expm1(d))


def gaussian_delta(mu, epsilon):
    """``delta(epsilon)`` of a mu-GDP mechanism (see :func:`gaussian_log_delta`)."""
    return math.exp(gaussian_log_delta(mu, epsilon))


def gaussian_epsilon(mu, delta):
    """Smallest epsilon with ``delta(epsilon) <= delta`` for mu-GDP.

    Bracketed root finding (brentq) on ``log delta(eps) - log delta``, which
    is decreasing in eps; the returned value is nudged up until the
    recomputed delta does not exceed the target.
    """
    log_target = math.log(delta)
    if gaussian_log_delta(mu, 0.0) <= log_target:
        return 0.0
    # upper bracket from zCDP with rho = mu^2/2 (Bun & Steinke 2016, Prop 1.3)
    rho = mu * mu / 2.0
    hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1.0
    while gaussian_log_delta(mu, hi) > log_target:
        hi *= 2.0
    f = lambda e: gaussian_log_delta(mu, e) - log_target  # noqa: E731
    eps = optimize.brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12)
    step = 1e-12 * max(1.0, eps)
    while f(eps) > 0.0:
        eps += step
        step *= 2.0
    return eps


class GDPAccountant(AdditiveAccountant):
    """Exact accountant for compositions of (non-subsampled) Gaussian mechanisms.

    A Gaussian release with noise multiplier ``z`` is ``mu``-GDP with
    ``mu = 1/z``; ``mu``-GDP mechanisms compose to
    ``sqrt(sum mu_i^2)``-GDP exactly (Dong, Roth & Su 2019, Cor. 3.3), and
    the (epsilon, delta) curve of mu-GDP is the exact privacy profile of a
    Gaussian mechanism (Balle & Wang 2018, Thm 8).  It is therefore the
    tightest possible accountant for the DP-EM "GGG" plan.

    Only :class:`GaussianEvent` (possibly inside composed events) is
    supported; subsampled, Laplace and discrete-Gaussian events are refused.

    Parameters
    ----------
    neighbouring : {"add_remove", "replace"}
    """

    def _leaf(self, event):
        if isinstance(event, GaussianEvent):
            return 1.0 / event.noise_multiplier ** 2
        self._unsupported(event, "only exact continuous Gaussian events")

    @property
    def mu(self):
        """The composed GDP parameter ``sqrt(sum mu_i^2)``."""
        return math.sqrt(self._state)

    def _epsilon(self, delta):
        return gaussian_epsilon(self.mu, delta)

    def _delta(self, epsilon):
        return gaussian_delta(self.mu, epsilon)
