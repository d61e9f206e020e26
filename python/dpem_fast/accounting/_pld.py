"""Thin wrapper around Google's ``dp_accounting`` PLD accountant (optional)."""
import importlib

from ._base import PrivacyAccountant, untag
from ._events import (ComposedEvent, GaussianEvent, LaplaceEvent,
                      NeighbouringEvent, PoissonSampledEvent,
                      SampledWithoutReplacementEvent, SelfComposedEvent)

__all__ = ["PLDAccountant"]


def _import_dp_accounting():
    try:
        return importlib.import_module("dp_accounting")
    except ImportError as exc:  # pragma: no cover - depends on environment
        raise ImportError(
            "PLDAccountant needs Google's optional 'dp-accounting' package "
            "(pip install dp-accounting); the other accountants of "
            "dpem_fast.accounting do not.") from exc


class PLDAccountant(PrivacyAccountant):
    """Privacy-loss-distribution accountant delegated to ``dp_accounting``.

    Events are translated to ``dp_accounting`` events (Gaussian, Laplace with
    noise multiplier ``1/epsilon``, Poisson / without-replacement sampling,
    self-composed and composed); the discrete Gaussian is not supported.
    The import is lazy: constructing the accountant without dp_accounting
    raises an :class:`ImportError` saying what to install.

    Parameters
    ----------
    value_discretization_interval : float, default 1e-4
        Passed to ``dp_accounting.pld.PLDAccountant``.
    neighbouring : {"add_remove", "replace"}
        Mapped to ``ADD_OR_REMOVE_ONE`` / ``REPLACE_ONE``.

    Notes
    -----
    Privacy: Koskela et al. (2020); Doroshenko et al. (2022), as implemented
    by dp_accounting (pessimistic discretisation).
    """

    def __init__(self, *, value_discretization_interval=1e-4,
                 neighbouring="add_remove"):
        dpa = _import_dp_accounting()
        self._dpa = dpa
        self._vdi = value_discretization_interval
        super().__init__(neighbouring=neighbouring)
        rel = dpa.NeighboringRelation
        self._rel = (rel.ADD_OR_REMOVE_ONE if self._neighbouring ==
                     "add_remove" else rel.REPLACE_ONE)
        self._inner = dpa.pld.PLDAccountant(
            neighboring_relation=self._rel,
            value_discretization_interval=self._vdi)

    def _translate(self, event):
        dpa = self._dpa
        if isinstance(event, NeighbouringEvent):
            return self._translate(untag(event, self._neighbouring,
                                         type(self).__name__))
        if isinstance(event, GaussianEvent):
            return dpa.GaussianDpEvent(event.noise_multiplier)
        if isinstance(event, LaplaceEvent):
            return dpa.LaplaceDpEvent(1.0 / event.epsilon)
        if isinstance(event, PoissonSampledEvent):
            return dpa.PoissonSampledDpEvent(event.sampling_probability,
                                             self._translate(event.event))
        if isinstance(event, SampledWithoutReplacementEvent):
            return dpa.SampledWithoutReplacementDpEvent(
                event.population_size, event.sample_size,
                self._translate(event.event))
        if isinstance(event, SelfComposedEvent):
            return dpa.SelfComposedDpEvent(self._translate(event.event),
                                           event.count)
        if isinstance(event, ComposedEvent):
            return dpa.ComposedDpEvent([self._translate(e)
                                        for e in event.events])
        self._unsupported(event, "no dp_accounting PLD equivalent")

    # The state lives in dp_accounting's accountant; contributions are the
    # translated events, composed only after ``supports`` succeeded.
    def _contribution(self, event):
        theirs = self._translate(event)
        if not self._inner.supports(theirs):
            self._unsupported(event, "dp_accounting PLD refuses it under "
                              f"{self._rel}")
        return theirs

    def _leaf(self, event):  # pragma: no cover - _contribution overrides
        return self._translate(event)

    def _zero(self):
        return None

    def _scale(self, contrib, count):
        return (contrib, count)

    def _add(self, state, scaled):
        contrib, count = scaled
        self._inner.compose(contrib, count)
        return None

    def _epsilon(self, delta):
        return self._inner.get_epsilon(delta)

    def _delta(self, epsilon):
        return self._inner.get_delta(epsilon)
