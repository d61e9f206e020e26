"""A privacy budget ledger in the style of diffprivlib's BudgetAccountant."""
import math

from ._events import DpEvent
from ._validation import check_int, check_open_unit, check_positive
from ._warnings import BudgetExceededError

__all__ = ["BudgetLedger"]


class BudgetLedger:
    """Track spends against a total (epsilon, delta) budget.

    Parameters
    ----------
    epsilon : float
        Total epsilon, > 0.
    delta : float
        Total delta in (0, 1).
    accountant : class or callable, default RDPAccountant
        Factory of a fresh accountant; the spent epsilon is the accountant's
        epsilon of *all* spends composed, at the total delta.

    Notes
    -----
    ``spend`` composes the candidate event into a fresh accountant together
    with the previous spends and raises :class:`BudgetExceededError` before
    recording anything if the total epsilon would exceed the budget.
    ``remaining()`` is ``(epsilon - spent epsilon, delta)``: with
    non-additive accountants (RDP, zCDP, GDP) the remaining epsilon is not
    the epsilon of a further spend, use :meth:`check` for that.
    """

    def __init__(self, epsilon, delta, accountant=None):
        self._epsilon = check_positive("epsilon", epsilon)
        self._delta = check_open_unit("delta", delta)
        if accountant is None:
            from ._rdp_accountants import RDPAccountant
            accountant = RDPAccountant
        if not callable(accountant):
            raise TypeError(f"accountant must be a class or factory, "
                            f"got {accountant!r}")
        self._factory = accountant
        self._entries = []  # (label, event, count)

    @property
    def total(self):
        """The total budget ``(epsilon, delta)``."""
        return (self._epsilon, self._delta)

    @property
    def entries(self):
        """Copy of the recorded ``(label, event, count)`` spends."""
        return list(self._entries)

    def _epsilon_with(self, extra):
        acct = self._factory()
        for _, event, count in self._entries + extra:
            acct.compose(event, count)
        return acct.get_epsilon(self._delta)

    def check(self, event, count=1):
        """Whether spending ``event`` (``count`` times) fits in the budget."""
        if not isinstance(event, DpEvent):
            raise TypeError(f"event must be a DpEvent, got {event!r}")
        count = check_int("count", count)
        return self._epsilon_with([(None, event, count)]) <= self._epsilon

    def spend(self, event, count=1, label=None):
        """Record a spend; raise :class:`BudgetExceededError` if over budget.

        Returns the total epsilon spent after this spend.
        """
        if not isinstance(event, DpEvent):
            raise TypeError(f"event must be a DpEvent, got {event!r}")
        count = check_int("count", count)
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
                f"delta={self._delta!r}, n_spends={len(self._entries)})")
