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


# dp_accounting's REPLACE_ONE reads a Gaussian noise multiplier relative to
# the per-record bound C (a replacement moves the sum by 2C); ours is
# relative to the replace-one sensitivity itself (see the class docstring)
_REPLACE_GAUSSIAN_FACTOR = 2.0


class PLDAccountant(PrivacyAccountant):
    """Privacy-loss-distribution accountant delegated to ``dp_accounting``.

    Events are translated to ``dp_accounting`` events and composed by its
    ``pld.PLDAccountant``; what cannot be translated exactly is refused
    (:class:`UnsupportedEventError`, state unchanged).  The import is lazy:
    constructing the accountant without dp_accounting raises an
    :class:`ImportError` saying what to install.

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

    **Translation.**  In dpem_fast a noise parameter is relative to the
    sensitivity under the accountant's relation (a Gaussian ``z = sigma /
    Delta``: two neighbours' outputs are ``N(f(D), sigma^2)`` and
    ``N(f(D'), sigma^2)`` with ``|f(D) - f(D')| <= Delta``).  In
    dp_accounting a ``GaussianDpEvent(s)`` is noise ``s C`` on a sum of
    records of norm ``<= C`` (``dp_event.GaussianDpEvent``), and its PLD
    code analyses the pair of noise distributions shifted by ``+C`` and
    ``-C`` under ``REPLACE_ONE`` (``privacy_loss_mechanism.
    AdditiveNoisePrivacyLoss``, ``AdjacencyType.REPLACE``: "the same privacy
    loss distribution with twice the sensitivity"; used by
    ``privacy_loss_distribution.from_gaussian_mechanism`` and
    ``pld_privacy_accountant.PLDAccountant._maybe_compose``), but by one
    shift of ``C`` under ``ADD_OR_REMOVE_ONE``.  So:

    ``"add_remove"``
        Gaussian ``z`` -> ``GaussianDpEvent(z)``; Laplace ``epsilon`` ->
        ``LaplaceDpEvent(1 / epsilon)``; Poisson sampling -> their
        ``PoissonSampledDpEvent`` (their ``C`` is our add/remove
        sensitivity: exact).
    ``"replace"``
        Gaussian ``z`` -> ``GaussianDpEvent(2 z)``: the shift is ``2C =
        Delta``, the noise ``2 z C = z Delta``, the same pair of Gaussians
        (``mu = 1/z``-GDP, as :class:`GDPAccountant` gives).  Without the
        factor, ``z = 1`` at ``delta = 1e-5`` gave epsilon 9.997 instead of
        4.377.  Refused: Laplace (dp_accounting's PLD accountant refuses
        ``LaplaceDpEvent`` under ``REPLACE_ONE``, and no other of its events
        has that loss); Poisson sampling with ``q < 1`` (their replace-one
        subsampled PLD assumes a record's absence leaves the output at the
        midpoint of its two replacements, i.e. add/remove sensitivity
        ``Delta / 2``, which an event stating only the replace-one
        sensitivity does not give: a histogram has ``Delta = sqrt(2)`` but a
        record moves it by 1, so the translation would understate the loss;
        :class:`RDPAccountant` refuses it too).

    Either relation: sampling without replacement with ``m < n`` is refused
    (dp_accounting 0.6.0's PLD accountant has no such event), ``m = n`` and
    ``q = 1`` are the base event; the discrete Gaussian is refused.
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
        replace = self._neighbouring == "replace"
        if isinstance(event, NeighbouringEvent):
            return self._translate(untag(event, self._neighbouring,
                                         type(self).__name__))
        if isinstance(event, GaussianEvent):
            z = event.noise_multiplier
            return dpa.GaussianDpEvent(_REPLACE_GAUSSIAN_FACTOR * z if replace
                                       else z)
        if isinstance(event, LaplaceEvent):
            if replace:
                self._unsupported(event, "dp_accounting's PLD refuses "
                                  "LaplaceDpEvent under REPLACE_ONE")
            return dpa.LaplaceDpEvent(1.0 / event.epsilon)
        if isinstance(event, PoissonSampledEvent):
            if replace and event.sampling_probability < 1.0:
                self._unsupported(event, "dp_accounting's replace-one "
                                  "subsampled PLD needs an add/remove "
                                  "sensitivity of Delta/2, which the event "
                                  "does not state")
            return dpa.PoissonSampledDpEvent(event.sampling_probability,
                                             self._translate(event.event))
        if isinstance(event, SampledWithoutReplacementEvent):
            if event.sample_size == event.population_size:
                return self._translate(event.event)
            self._unsupported(event, "dp_accounting's PLD accountant has no "
                              "sampling without replacement")
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
