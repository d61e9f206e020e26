"""Linear and advanced composition of (epsilon_i, delta_i)-DP mechanisms."""
import math

from ._base import PrivacyAccountant
from ._events import (DiscreteGaussianEvent, GaussianEvent, LaplaceEvent,
                      PoissonSampledEvent, SampledWithoutReplacementEvent)
from ._gdp import gaussian_epsilon
from ._validation import check_choice, check_open_unit
from ._zcdp import discrete_gaussian_rho, zcdp_epsilon_tight

__all__ = ["LinearAccountant", "AdvancedAccountant"]


def classic_gaussian_epsilon(z, delta_i):
    """Dwork & Roth (2014) Thm 3.22 / Park et al. (2017) Eq. 13-17:
    ``sigma >= sqrt(2 log(1.25/delta_i)) Delta / eps_i`` solved for eps_i,
    ``eps_i = sqrt(2 log(1.25/delta_i)) / z``; valid only for eps_i < 1."""
    return math.sqrt(2.0 * math.log(1.25 / delta_i)) / z


def _amplify(pairs, rate):
    """Amplification by subsampling of an (eps, delta) guarantee.

    ``eps' = log(1 + rate (e^eps - 1))``, ``delta' = rate delta`` (Balle,
    Barthe & Gaboardi 2018, Thm 8 (Poisson, add/remove) and Thm 9 (without
    replacement, replace-one)).  A composite base is first linearly composed.
    """
    eps = sum(m * e for (e, _), m in pairs.items())
    delta = sum(m * d for (_, d), m in pairs.items())
    return {(math.log1p(rate * math.expm1(eps)), rate * delta): 1}


class _PairAccountant(PrivacyAccountant):
    """Shared machinery: state is a dict ``{(eps_i, delta_i): multiplicity}``."""

    def __init__(self, *, delta_per_release=1e-8, gaussian_conversion="classic",
                 neighbouring="add_remove"):
        self._delta_i = check_open_unit("delta_per_release", delta_per_release)
        self._gauss_conv = check_choice("gaussian_conversion",
                                        gaussian_conversion,
                                        ("classic", "analytic"))
        super().__init__(neighbouring=neighbouring)

    @property
    def delta_per_release(self):
        return self._delta_i

    @property
    def pairs(self):
        """Copy of ``{(eps_i, delta_i): multiplicity}``."""
        return dict(self._state)

    def _zero(self):
        return {}

    def _scale(self, contrib, count):
        return {k: m * count for k, m in contrib.items()}

    def _add(self, a, b):
        out = dict(a)
        for k, m in b.items():
            out[k] = out.get(k, 0) + m
        return out

    def _gaussian_eps(self, z):
        d = self._delta_i
        if self._gauss_conv == "classic":
            eps = classic_gaussian_epsilon(z, d)
            if eps < 1.0:
                return eps
        # analytic Gaussian mechanism (Balle & Wang 2018), valid for all eps
        return gaussian_epsilon(1.0 / z, d)

    def _leaf(self, event):
        if isinstance(event, LaplaceEvent):
            return {(event.epsilon, 0.0): 1}
        if isinstance(event, GaussianEvent):
            return {(self._gaussian_eps(event.noise_multiplier),
                     self._delta_i): 1}
        if isinstance(event, DiscreteGaussianEvent):
            rho = discrete_gaussian_rho(event)
            return {(zcdp_epsilon_tight(rho, self._delta_i), self._delta_i): 1}
        if isinstance(event, PoissonSampledEvent):
            if (self._neighbouring != "add_remove"
                    and event.sampling_probability < 1.0):
                self._unsupported(event, "Poisson amplification is stated for "
                                  "add/remove neighbours")
            return _amplify(self._contribution(event.event),
                            event.sampling_probability)
        if isinstance(event, SampledWithoutReplacementEvent):
            if (self._neighbouring != "replace"
                    and event.sample_size < event.population_size):
                self._unsupported(event, "amplification without replacement "
                                  "is stated for replace-one neighbours")
            return _amplify(self._contribution(event.event),
                            event.sample_size / event.population_size)
        self._unsupported(event)

    def _sums(self):
        s_eps = s_delta = s_sq = s_exp = 0.0
        for (e, d), m in self._state.items():
            s_eps += m * e
            s_delta += m * d
            s_sq += m * e * e
            s_exp += m * e * math.expm1(e)
        return s_eps, s_delta, s_sq, s_exp


class LinearAccountant(_PairAccountant):
    """Basic (linear) composition: ``(sum eps_i, sum delta_i)``-DP.

    Dwork & Roth (2014), Thm 3.16; Park et al. (2017), Sec. 5 ("Lin").

    Parameters
    ----------
    delta_per_release : float, default 1e-8
        delta_i used to turn each Gaussian (or discrete Gaussian) release
        into an (eps_i, delta_i) guarantee (Park et al. 2017 use 1e-6 in
        Fig. 2 and 1e-8 in Fig. 3).
    gaussian_conversion : {"classic", "analytic"}
        ``"classic"`` (default, the paper's): ``eps_i = sqrt(2 log(1.25 /
        delta_i)) / z`` (Dwork & Roth 2014, Thm 3.22), valid only when
        ``eps_i < 1``; when it is not, the analytic Gaussian mechanism
        (Balle & Wang 2018) is used instead.  ``"analytic"``: always the
        exact analytic calibration.
    neighbouring : {"add_remove", "replace"}

    Notes
    -----
    ``get_epsilon(delta)`` is ``sum eps_i`` if ``delta >= sum delta_i`` and
    ``inf`` otherwise; ``get_delta(eps)`` is ``sum delta_i`` if
    ``eps >= sum eps_i`` and 1 otherwise.  Subsampled events use the
    amplification theorems of Balle, Barthe & Gaboardi (2018).
    """

    def _epsilon(self, delta):
        s_eps, s_delta, _, _ = self._sums()
        return s_eps if delta >= s_delta else math.inf

    def _delta(self, epsilon):
        s_eps, s_delta, _, _ = self._sums()
        return s_delta if epsilon >= s_eps else 1.0


class AdvancedAccountant(_PairAccountant):
    """Advanced composition (Dwork & Roth 2014, Thm 3.20).

    For releases ``(eps_i, delta_i)`` and slack ``delta'``:
    ``eps = sum eps_i (e^{eps_i} - 1) + sqrt(2 log(1/delta') sum eps_i^2)``,
    ``delta = delta' + sum delta_i``.  For ``k`` identical releases this is
    Park et al. (2017, Sec. 5) ``k eps_i (e^{eps_i} - 1) + sqrt(2 k
    log(1/delta')) eps_i``; the heterogeneous form is Dwork, Rothblum &
    Vadhan (2010), Thm III.3.

    Parameters
    ----------
    delta_slack : float or None, default None
        ``delta'``.  ``None`` spends the whole remaining budget on the slack,
        ``delta' = delta - sum delta_i`` (the smallest epsilon).
    delta_per_release, gaussian_conversion, neighbouring
        As for :class:`LinearAccountant`.
    """

    def __init__(self, *, delta_slack=None, delta_per_release=1e-8,
                 gaussian_conversion="classic", neighbouring="add_remove"):
        if delta_slack is not None:
            delta_slack = check_open_unit("delta_slack", delta_slack)
        self._slack = delta_slack
        super().__init__(delta_per_release=delta_per_release,
                         gaussian_conversion=gaussian_conversion,
                         neighbouring=neighbouring)

    @property
    def delta_slack(self):
        return self._slack

    def _epsilon(self, delta):
        _, s_delta, s_sq, s_exp = self._sums()
        slack = delta - s_delta if self._slack is None else self._slack
        if slack <= 0.0 or slack + s_delta > delta * (1 + 1e-12):
            return math.inf
        return s_exp + math.sqrt(2.0 * math.log(1.0 / slack) * s_sq)

    def _delta(self, epsilon):
        _, s_delta, s_sq, s_exp = self._sums()
        if self._slack is not None:
            eps = s_exp + math.sqrt(2.0 * math.log(1.0 / self._slack) * s_sq)
            return self._slack + s_delta if epsilon >= eps else 1.0
        if epsilon <= s_exp or s_sq == 0.0:
            return 1.0
        return math.exp(-(epsilon - s_exp) ** 2 / (2.0 * s_sq)) + s_delta
