"""RDP and moments accountants."""
import functools
import math

import numpy as np

from . import _rdp
from ._base import AdditiveAccountant, untag
from ._events import (ComposedEvent, DiscreteGaussianEvent, GaussianEvent,
                      LaplaceEvent, NeighbouringEvent, PoissonSampledEvent,
                      RepeatAndSelectEvent, SampledWithoutReplacementEvent,
                      SelfComposedEvent)
from ._validation import check_choice, check_int
from ._warnings import UnsupportedEventError
from ._zcdp import discrete_gaussian_rho

__all__ = ["RDPAccountant", "MomentsAccountant"]

_CONVERSIONS = ("improved", "classic")
_WOR_MAX_ORDER = 256  # WBK bound evaluated exactly up to this integer order

_REPLACE_POISSON_MSG = (
    "the Poisson-subsampled Gaussian RDP of Mironov, Talwar & Zhang (2019) "
    "holds for the add/remove-one relation only; use neighbouring="
    "'add_remove' (a replace-one neighbour is a removal plus an addition, so "
    "an add/remove noise multiplier can be derived by the caller)")


def _pure_epsilon(event):
    """Pure-DP epsilon of an event, ``inf`` if not pure DP (tags are checked
    by the caller's curve of the same event).

    Laplace: ``epsilon`` (Dwork & Roth 2014, Thm 3.6); compositions add
    (basic composition); sampling everything is the base event; sampling
    ``m`` of ``n`` without replacement (replace-one, the only relation in
    which the RDP accountant accepts it) gives ``log(1 + (m/n) (e^eps -
    1))`` (Balle, Barthe & Gaboardi 2018, amplification by subsampling
    without replacement under substitution, with delta = 0).  Poisson
    sampling with ``q < 1`` returns ``inf`` (its RDP curve already refuses
    a non-Gaussian base).
    """
    if isinstance(event, LaplaceEvent):
        return event.epsilon
    if isinstance(event, NeighbouringEvent):
        return _pure_epsilon(event.event)
    if isinstance(event, SelfComposedEvent):
        return event.count * _pure_epsilon(event.event)
    if isinstance(event, ComposedEvent):
        return sum(_pure_epsilon(e) for e in event.events)
    if isinstance(event, PoissonSampledEvent):
        if event.sampling_probability == 1.0:
            return _pure_epsilon(event.event)
        return math.inf
    if isinstance(event, SampledWithoutReplacementEvent):
        eps = _pure_epsilon(event.event)
        if event.sample_size == event.population_size or math.isinf(eps):
            return eps
        gamma = event.sample_size / event.population_size
        return math.log1p(gamma * math.expm1(eps))
    return math.inf


@functools.lru_cache(maxsize=1024)
def _event_rdp(event, orders, neighbouring):
    """RDP curve of ``event`` at ``orders`` (tuple); read-only array.

    Raises UnsupportedEventError.  Memoised on immutable arguments.
    """
    out = _event_rdp_uncached(event, orders, neighbouring)
    out = np.array(out, dtype=float)
    out.setflags(write=False)
    return out


def _event_rdp_uncached(event, orders, neighbouring):
    a = np.asarray(orders, dtype=float)
    if isinstance(event, NeighbouringEvent):
        return _event_rdp(untag(event, neighbouring), orders, neighbouring)
    if isinstance(event, GaussianEvent):
        return _rdp.gaussian_rdp(event.noise_multiplier, a)
    if isinstance(event, LaplaceEvent):
        return _rdp.laplace_rdp(event.epsilon, a)
    if isinstance(event, DiscreteGaussianEvent):
        # rho-zCDP => (alpha, rho*alpha)-RDP for all alpha (Bun & Steinke 2016)
        return discrete_gaussian_rho(event) * a
    if isinstance(event, SelfComposedEvent):
        return event.count * _event_rdp(event.event, orders, neighbouring)
    if isinstance(event, ComposedEvent):
        total = np.zeros(a.size)
        for sub in event.events:
            total = total + _event_rdp(sub, orders, neighbouring)
        return total
    if isinstance(event, RepeatAndSelectEvent):
        inner = _event_rdp(event.event, orders, neighbouring)
        return _rdp.repeat_and_select_rdp(a, inner, event.mean, event.shape)
    if isinstance(event, PoissonSampledEvent):
        if event.sampling_probability == 1.0:
            return _event_rdp(event.event, orders, neighbouring)
        if neighbouring != "add_remove":
            raise UnsupportedEventError(
                "PoissonSampledEvent with neighbouring='replace': "
                + _REPLACE_POISSON_MSG)
        base = event.event
        while isinstance(base, NeighbouringEvent):
            base = untag(base, neighbouring)
        if not isinstance(base, GaussianEvent):
            raise UnsupportedEventError(
                "PoissonSampledEvent is supported for a GaussianEvent base "
                f"only, got {type(base).__name__}")
        return _rdp.subsampled_gaussian_rdp(event.sampling_probability,
                                            base.noise_multiplier, orders)
    if isinstance(event, SampledWithoutReplacementEvent):
        if event.sample_size == event.population_size:
            return _event_rdp(event.event, orders, neighbouring)
        if neighbouring != "replace":
            raise UnsupportedEventError(
                "SampledWithoutReplacementEvent requires neighbouring="
                "'replace' (Wang, Balle & Kasiviswanathan 2019 bound)")
        max_int = int(min(max(2.0, math.ceil(a.max())), _WOR_MAX_ORDER))
        int_orders = tuple(float(k) for k in range(2, max_int + 1))
        base = _event_rdp(event.event, int_orders, neighbouring)
        gamma = event.sample_size / event.population_size
        ints, vals = _rdp.wor_rdp_integer(gamma, np.asarray(base),
                                          _pure_epsilon(event.event), max_int)
        vals = np.minimum(vals, base)  # subsampling never hurts
        return _rdp.interpolate_convex(a, ints, vals)
    raise UnsupportedEventError(
        f"no RDP curve for {type(event).__name__}")


class RDPAccountant(AdditiveAccountant):
    """Renyi-DP accountant over a grid of real orders.

    Parameters
    ----------
    orders : sequence of float, optional
        RDP orders (all > 1).  Default: a grid of 263 orders from 1.01 to
        10000, denser at small orders, containing dp_accounting's defaults.
    conversion : {"improved", "classic"}
        RDP -> (epsilon, delta) conversion: ``"improved"`` (default) is
        Canonne, Kamath & Steinke (2020) Prop. 12 / Asoodeh et al. (2021);
        ``"classic"`` is Mironov (2017) Prop. 3.
    neighbouring : {"add_remove", "replace"}

    Notes
    -----
    Privacy: RDP composes additively (Mironov 2017, Prop. 1).  Supported:
    Gaussian (Mironov 2017, Prop. 7), Laplace (Prop. 6), discrete Gaussian
    via its zCDP bound (Canonne, Kamath & Steinke 2020), Poisson-subsampled
    Gaussian under add/remove (Mironov, Talwar & Zhang 2019; the
    ``"replace"`` relation raises :class:`UnsupportedEventError`), sampling
    without replacement of any supported base under ``"replace"`` (Wang,
    Balle & Kasiviswanathan 2019, Thm 9, exact at integer orders up to 256,
    convex chord interpolation in between, ``inf`` above), and compositions.
    Per-event curves are memoised, so composing an event ``count`` times is
    one multiply-add over the orders.

    Order infinity: beside the grid, the accountant keeps the pure-DP
    epsilon of the composition (the Renyi divergence of order infinity,
    Mironov 2017; ``inf`` as soon as a non-pure event is composed).  A plan
    of Laplace releases is then reported at its pure epsilon, whatever
    ``delta``, when that is smaller than the finite-order conversion
    (a single Laplace release at ``delta = 1e-10`` was 12% above its
    epsilon).  :class:`MomentsAccountant` does not use it (Park et al.'s
    moments accountant, unchanged).
    """

    _default_conversion = "improved"
    _pure_order = True

    def __init__(self, orders=None, *, conversion=None,
                 neighbouring="add_remove"):
        if orders is None:
            self._orders = _rdp.DEFAULT_ORDERS
        else:
            arr = np.asarray(orders, dtype=float).ravel()
            if arr.size == 0 or not np.all(arr > 1.0) or not np.all(
                    np.isfinite(arr)):
                raise ValueError(f"orders must be finite and > 1, "
                                 f"got {orders!r}")
            self._orders = tuple(float(x) for x in arr)
        self._orders_arr = np.asarray(self._orders)
        self._conversion = check_choice(
            "conversion", conversion or self._default_conversion,
            _CONVERSIONS)
        super().__init__(neighbouring=neighbouring)

    @property
    def orders(self):
        """The RDP orders (copy)."""
        return self._orders_arr.copy()

    @property
    def conversion(self):
        return self._conversion

    @property
    def rdp(self):
        """The composed RDP curve over ``orders`` (copy)."""
        return np.array(self._state[:-1], dtype=float)

    @property
    def pure_epsilon(self):
        """Pure-DP epsilon of the composition (order infinity; ``inf`` if
        a non-pure event was composed; 0 when empty)."""
        return float(self._state[-1])

    # the state is the curve over ``orders`` followed by the pure epsilon
    def _zero(self):
        return np.zeros(len(self._orders) + 1)

    def _contribution(self, event):
        curve = _event_rdp(event, self._orders, self._neighbouring)
        return np.append(curve, _pure_epsilon(event))

    def _leaf(self, event):  # pragma: no cover - _contribution overrides
        return self._contribution(event)

    def _epsilon(self, delta):
        eps = _rdp.rdp_to_epsilon(self._orders_arr, self._state[:-1], delta,
                                  self._conversion)[0]
        if self._pure_order:
            eps = min(eps, float(self._state[-1]))
        return eps

    def _delta(self, epsilon):
        if self._pure_order and epsilon >= self._state[-1]:
            return 0.0
        return _rdp.rdp_to_delta(self._orders_arr, self._state[:-1], epsilon,
                                 self._conversion)[0]


class MomentsAccountant(RDPAccountant):
    """Moments accountant of Abadi et al. (2016) as used by Park et al. (2017).

    Tracks the log-moments ``alpha(lambda)`` at integer ``lambda = 1..
    max_lambda`` (Park et al. 2017, Eq. 2-4) and converts with the tail
    bound ``delta = min_lambda exp(alpha(lambda) - lambda * eps)`` (Eq. 3).

    Parameters
    ----------
    max_lambda : int, default 256
    conversion : {"classic", "improved"}
        ``"classic"`` (default) is the paper's Eq. 3; ``"improved"`` applies
        Canonne, Kamath & Steinke (2020) Prop. 12 at the same orders.
    neighbouring : {"add_remove", "replace"}

    Notes
    -----
    The moment of order ``lambda`` is the RDP of order ``lambda + 1`` times
    ``lambda``: Gaussian ``(lambda^2 + lambda) / (2 z^2)`` (Eq. 20), Laplace
    Eq. 19, subsampled Gaussian by the exact binomial expansion (MTZ 2019),
    which equals the numerical integral of Abadi et al. (2016, Sec. 3.2).
    """

    _default_conversion = "classic"
    _pure_order = False

    def __init__(self, max_lambda=256, *, conversion=None,
                 neighbouring="add_remove"):
        self._max_lambda = check_int("max_lambda", max_lambda)
        super().__init__(orders=np.arange(2, self._max_lambda + 2),
                         conversion=conversion, neighbouring=neighbouring)

    @property
    def lambdas(self):
        """Moment orders ``1..max_lambda`` (copy)."""
        return np.arange(1, self._max_lambda + 1)

    @property
    def log_moments(self):
        """Composed log-moments ``alpha(lambda)`` (copy)."""
        return self.lambdas * np.asarray(self._state[:-1])
