"""A privacy budget ledger in the style of diffprivlib's BudgetAccountant."""
import math

from ._base import PrivacyAccountant, check_tags
from ._events import DpEvent
from ._registry import get_accountant
from ._validation import (check_delta, check_int, check_neighbouring,
                          check_positive, check_privacy_unit)
from ._warnings import BudgetExceededError

__all__ = ["BudgetLedger"]


class BudgetLedger:
    """Track spends against a total (epsilon, delta) budget.

    Parameters
    ----------
    epsilon : float
        Total epsilon, > 0.
    delta : float
        Total delta in (0, 1), under the public δ policy: refused above
        :data:`DELTA_MAX` and :class:`LargeDeltaWarning` above :data:`DELTA_WARN`
        (δ must be far below 1/n for n records; see the user guide).
    accountant : str, PrivacyAccountant subclass or callable, default "rdp"
        How spends are composed: a name of :data:`ACCOUNTANTS`, an
        accountant class (both instantiated with the ledger's
        ``neighbouring``), or a zero-argument factory of fresh accountants,
        which must have the ledger's relation (checked: ``ValueError``
        naming ``neighbouring`` otherwise).  ``None`` is the same as
        ``"rdp"``.  The spent epsilon is the accountant's epsilon of *all*
        spends composed, at the total delta.
    neighbouring : {"replace", "add_remove"}, default "replace"
        The relation the budget is stated under ("(epsilon, delta)-DP with
        respect to replacing / adding or removing one record"); the default
        is the estimators' default.

    Notes
    -----
    Relations: an untagged event is read under the ledger's
    ``neighbouring``, i.e. its noise parameters must be relative to
    sensitivities derived under that relation.  An event wrapped in
    :class:`NeighbouringEvent` is accepted only if every tag in it is the
    ledger's relation; otherwise ``spend`` and ``check`` raise
    :class:`NeighbouringMismatchError` and nothing is recorded (no
    conversion between relations is attempted).  The same holds for the
    privacy unit: an event tagged with another unit than the ledger's (or
    with both) raises :class:`NeighbouringMismatchError`; an untagged event
    is read under the ledger's unit.

    ``spend`` composes the candidate event into a fresh accountant together
    with the previous spends and raises :class:`BudgetExceededError` before
    recording anything if the total epsilon would exceed the budget.
    ``remaining()`` is ``(epsilon - spent epsilon, delta)``: with
    non-additive accountants (RDP, zCDP, GDP) the remaining epsilon is not
    the epsilon of a further spend, use :meth:`check` for that.
    """

    def __init__(self, epsilon, delta, accountant="rdp", *,
                 neighbouring="replace", privacy_unit="row"):
        self._epsilon = check_positive("epsilon", epsilon)
        self._delta = check_delta("delta", delta)
        self._neighbouring = check_neighbouring(neighbouring)
        self._unit = check_privacy_unit(privacy_unit)
        if accountant is None:
            accountant = "rdp"
        if isinstance(accountant, str) or (
                isinstance(accountant, type)
                and issubclass(accountant, PrivacyAccountant)):
            self._factory = get_accountant(accountant, self._neighbouring)
        elif callable(accountant):
            self._factory = accountant
        else:
            raise TypeError(f"accountant must be a name, an accountant class "
                            f"or a factory, got {accountant!r}")
        self._fresh()   # a factory of the wrong relation fails here
        self._entries = []  # (label, event, count)

    def _fresh(self):
        acct = self._factory()
        if not isinstance(acct, PrivacyAccountant):
            raise TypeError(f"accountant factory must return a "
                            f"PrivacyAccountant, got {acct!r}")
        if acct.neighbouring != self._neighbouring:
            raise ValueError(
                f"neighbouring={self._neighbouring!r} but the accountant "
                f"factory makes {type(acct).__name__} with neighbouring="
                f"{acct.neighbouring!r}; pass neighbouring="
                f"{acct.neighbouring!r} or a factory of the ledger's "
                f"relation")
        return acct

    @property
    def neighbouring(self):
        """The relation of the budget and of every spend (read-only)."""
        return self._neighbouring

    @property
    def privacy_unit(self):
        """What one neighbour differs by, ``"row"`` or ``"group"`` (read-only)."""
        return self._unit

    @property
    def total(self):
        """The total budget ``(epsilon, delta)``."""
        return (self._epsilon, self._delta)

    @property
    def entries(self):
        """Copy of the recorded ``(label, event, count)`` spends."""
        return list(self._entries)

    def _checked(self, event, count):
        if not isinstance(event, DpEvent):
            raise TypeError(f"event must be a DpEvent, got {event!r}")
        count = check_int("count", count)
        check_tags(event, self._neighbouring, "BudgetLedger", self._unit)
        return count

    def _epsilon_with(self, extra):
        acct = self._fresh()
        for _, event, count in self._entries + extra:
            acct.compose(event, count)
        return acct.get_epsilon(self._delta)

    def check(self, event, count=1):
        """Whether spending ``event`` (``count`` times) fits in the budget.

        Raises :class:`NeighbouringMismatchError` for an event tagged with
        another relation than the ledger's.
        """
        count = self._checked(event, count)
        return self._epsilon_with([(None, event, count)]) <= self._epsilon

    def spend(self, event, count=1, label=None):
        """Record a spend; raise :class:`BudgetExceededError` if over budget.

        Returns the total epsilon spent after this spend.  An event tagged
        with another relation than the ledger's raises
        :class:`NeighbouringMismatchError`, and nothing is recorded.
        """
        count = self._checked(event, count)
        total = self._epsilon_with([(label, event, count)])
        if not total <= self._epsilon:
            raise BudgetExceededError(
                f"spending {label or type(event).__name__!s} would bring "
                f"epsilon to {total:.6g} > budget {self._epsilon:.6g} "
                f"(delta={self._delta:g}); nothing was recorded")
        self._entries.append((label, event, count))
        return total

    def spent(self):
        """``(epsilon, delta)`` spent so far (epsilon at the total delta)."""
        if not self._entries:
            return (0.0, 0.0)
        return (self._epsilon_with([]), self._delta)

    def remaining(self):
        """``(epsilon_total - epsilon_spent, delta_total)``."""
        eps = self.spent()[0]
        return (max(self._epsilon - eps, 0.0) if math.isfinite(eps) else 0.0,
                self._delta)

    def __repr__(self):
        return (f"BudgetLedger(epsilon={self._epsilon!r}, "
                f"delta={self._delta!r}, "
                f"neighbouring={self._neighbouring!r}, "
                f"privacy_unit={self._unit!r}, "
                f"n_spends={len(self._entries)})")
