"""Abstract accountant (private module; the class is re-exported)."""
import abc
import copy
import math

from ._events import (ComposedEvent, DpEvent, NeighbouringEvent,
                      RepeatAndSelectEvent, SelfComposedEvent, tagged_relations,
                      tagged_units)
from ._validation import (check_int, check_neighbouring, check_nonnegative,
                          check_open_unit)
from ._warnings import NeighbouringMismatchError, UnsupportedEventError

__all__ = ["PrivacyAccountant"]


def mismatch_error(tag, neighbouring, who):
    """The :class:`NeighbouringMismatchError` for an event tagged ``tag``
    met by ``who`` (an accountant or ledger) of relation ``neighbouring``."""
    return NeighbouringMismatchError(
        f"{who} has neighbouring={neighbouring!r} but the event is tagged "
        f"neighbouring={tag!r}: its noise parameters are relative to "
        f"{tag!r} sensitivities, and relations are never converted (use "
        f"an accountant with neighbouring={tag!r}, or derive the "
        f"{neighbouring!r} sensitivity and build a new event)")


def untag(event, neighbouring, who="an accountant"):
    """``event.event`` of a :class:`NeighbouringEvent` whose relation is
    ``neighbouring``; raise :class:`NeighbouringMismatchError` otherwise."""
    if event.neighbouring != neighbouring:
        raise mismatch_error(event.neighbouring, neighbouring, who)
    return event.event


def check_tags(event, neighbouring, who, unit=None):
    """Raise :class:`NeighbouringMismatchError` if any tag in the tree of
    ``event`` differs from ``neighbouring``, if the tree's tags name both
    privacy units, or (``unit`` given) if any tag names another unit.
    Returns the one unit the tree's tags name, or None (untagged)."""
    for tag in sorted(tagged_relations(event)):
        if tag != neighbouring:
            raise mismatch_error(tag, neighbouring, who)
    units = tagged_units(event)
    if len(units) > 1:
        raise unit_error(sorted(units), None, who)
    found = next(iter(units)) if units else None
    if unit is not None and found is not None and found != unit:
        raise unit_error([found], unit, who)
    return found


def unit_error(units, unit, who):
    """The :class:`NeighbouringMismatchError` for events of privacy units
    ``units`` met by ``who`` of unit ``unit`` (None: an accountant that
    already holds or is given events of another unit)."""
    what = (f"{who} accounts per {unit!r}" if unit is not None
            else f"{who} cannot compose events of privacy units {units}")
    return NeighbouringMismatchError(
        f"{what} but the event is tagged privacy_unit={units[0]!r}: a "
        "row-level and a person-level (group) guarantee are about different "
        "neighbours and never compose into one (account each unit "
        "separately; a row-level guarantee becomes a group-level one only "
        "through a group-privacy conversion you derive)")


class PrivacyAccountant(abc.ABC):
    """Base class of all accountants.

    Parameters
    ----------
    neighbouring : {"add_remove", "replace"}
        Neighbouring relation under which event noise parameters are
        expressed (the caller derives sensitivities under this relation).

    Notes
    -----
    ``compose`` first computes the event's contribution without touching the
    state (a dry run); an unsupported event raises
    :class:`UnsupportedEventError` and leaves the accountant unchanged.
    A :class:`NeighbouringEvent` anywhere in the event tree is accounted as
    its inner event if its relation is ``neighbouring`` and raises
    :class:`NeighbouringMismatchError` (an ``UnsupportedEventError``)
    otherwise; untagged events are read under ``neighbouring``.
    The tags' privacy unit (``"row"`` or ``"group"``, issue 27) does not
    change the arithmetic, but an accountant composes one unit only: an
    event whose tags name both units, or another unit than the events
    composed so far, raises :class:`NeighbouringMismatchError` and leaves
    the accountant unchanged.
    Subclasses implement ``_contribution(event)`` (pure), ``_zero()``,
    ``_scale(contrib, count)``, ``_add(a, b)``, ``_epsilon(delta)`` and
    ``_delta(epsilon)``.
    """

    def __init__(self, *, neighbouring="add_remove"):
        self._neighbouring = check_neighbouring(neighbouring)
        self._ledger = []
        self._state = self._zero()
        self._unit = None       # the privacy unit of the tagged events composed so far

    # -- public API ----------------------------------------------------
    @property
    def neighbouring(self):
        """The neighbouring relation (read-only)."""
        return self._neighbouring

    @property
    def ledger(self):
        """A copy of the list of composed ``(event, count)`` entries."""
        return list(self._ledger)

    def supports(self, event):
        """Whether ``event`` can be composed into this accountant."""
        if not isinstance(event, DpEvent):
            return False
        try:
            check_tags(event, self._neighbouring, type(self).__name__,
                       self._unit)
            self._contribution(event)
        except UnsupportedEventError:
            return False
        return True

    def compose(self, event, count=1):
        """Compose ``event`` ``count`` times; returns ``self``.

        Raises
        ------
        TypeError
            If ``event`` is not a :class:`DpEvent` or ``count`` not an int.
        ValueError
            If ``count < 1``.
        UnsupportedEventError
            If the accountant cannot handle ``event`` (state unchanged).
        NeighbouringMismatchError
            If ``event`` contains a :class:`NeighbouringEvent` of another
            relation (state unchanged).
        """
        if not isinstance(event, DpEvent) or type(event) is DpEvent:
            raise TypeError(f"event must be a DpEvent instance, got {event!r}")
        count = check_int("count", count)
        unit = check_tags(event, self._neighbouring, type(self).__name__,
                          self._unit)
        contrib = self._contribution(event)          # dry run, may raise
        new_state = self._add(self._state, self._scale(contrib, count))
        self._state = new_state
        self._ledger.append((event, count))
        if unit is not None:
            self._unit = unit
        return self

    def get_epsilon(self, delta):
        """Smallest epsilon such that the composition is (epsilon, delta)-DP.

        Returns 0.0 for an empty accountant and ``inf`` when no finite
        epsilon is certified at this delta.
        """
        delta = check_open_unit("delta", delta)
        if not self._ledger:
            return 0.0
        return float(self._epsilon(delta))

    def get_delta(self, epsilon):
        """Smallest delta such that the composition is (epsilon, delta)-DP."""
        epsilon = check_nonnegative("epsilon", epsilon)
        if not self._ledger:
            return 0.0
        return float(min(max(self._delta(epsilon), 0.0), 1.0))

    def __repr__(self):
        return (f"{type(self).__name__}(neighbouring={self._neighbouring!r}, "
                f"n_entries={len(self._ledger)})")

    def _copy(self):
        """A copy holding the same composition that composes further on its own (what a
        :class:`BudgetLedger` tries a spend on).  Shallow: ``compose`` never changes a state
        in place (``_add`` and ``_scale`` return new objects), so the state is shared until
        either side composes; the list of entries is copied."""
        new = copy.copy(self)
        new._ledger = list(self._ledger)
        return new

    # -- helpers for subclasses ---------------------------------------
    def _unsupported(self, event, why=""):
        raise UnsupportedEventError(
            f"{type(self).__name__} (neighbouring={self._neighbouring!r}) "
            f"does not support {type(event).__name__}"
            + (f": {why}" if why else ""))

    def _fold(self, event, leaf):
        """Contribution of composite events from ``leaf(event)`` of leaves
        (tags of this accountant's relation are transparent)."""
        if isinstance(event, NeighbouringEvent):
            return self._fold(untag(event, self._neighbouring,
                                    type(self).__name__), leaf)
        if isinstance(event, SelfComposedEvent):
            return self._scale(self._fold(event.event, leaf), event.count)
        if isinstance(event, ComposedEvent):
            total = self._zero()
            for sub in event.events:
                total = self._add(total, self._fold(sub, leaf))
            return total
        if isinstance(event, RepeatAndSelectEvent):
            self._unsupported(event, "private selection (Papernot & Steinke 2022) is "
                              "accounted by the RDP accountant only")
        return leaf(event)

    def _contribution(self, event):
        return self._fold(event, self._leaf)

    # -- abstract ------------------------------------------------------
    @abc.abstractmethod
    def _leaf(self, event):
        """Contribution of a non-composite event (or raise unsupported)."""

    @abc.abstractmethod
    def _zero(self):
        """Neutral contribution."""

    @abc.abstractmethod
    def _scale(self, contrib, count):
        """``count``-fold composition of a contribution (new object)."""

    @abc.abstractmethod
    def _add(self, a, b):
        """Composition of two contributions (new object)."""

    @abc.abstractmethod
    def _epsilon(self, delta):
        """Epsilon of the current state for ``0 < delta < 1``."""

    @abc.abstractmethod
    def _delta(self, epsilon):
        """Delta of the current state for ``epsilon >= 0``."""


class AdditiveAccountant(PrivacyAccountant):
    """An accountant whose state composes by addition: a number (rho, mu^2)
    or an array over orders (RDP).  ``count``-fold composition multiplies."""

    def _zero(self):
        return 0.0

    def _scale(self, contrib, count):
        return contrib * count

    def _add(self, a, b):
        return a + b


def _inf_if_nan(x):
    return math.inf if math.isnan(x) else x
