"""A privacy budget ledger: the user's account of (epsilon, delta) spent across releases."""
import math
import threading

from ._base import PrivacyAccountant, check_tags
from ._events import DpEvent
from ._registry import ACCOUNTANTS, _CLASSES, get_accountant
from ._validation import (check_delta, check_int, check_neighbouring,
                          check_positive, check_privacy_unit)
from ._warnings import BudgetExceededError, UnsupportedEventError

__all__ = ["BudgetLedger"]

_OWN = None     # the key of the ledger's own accountant among the bounds


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
        spends composed, at the total delta (but see "Accountants" below).
    neighbouring : {"replace", "add_remove"}, default "replace"
        The relation the budget is stated under ("(epsilon, delta)-DP with
        respect to replacing / adding or removing one record"); the default
        is the estimators' default.
    privacy_unit : {"row", "group"}, default "row"
        What one neighbour differs by: one row, or all the rows of one group
        (person-level fits, ``max_rows_per_group``).

    Notes
    -----
    **Relations and units.**  An untagged event is read under the ledger's
    ``neighbouring``, i.e. its noise parameters must be relative to
    sensitivities derived under that relation.  An event wrapped in
    :class:`NeighbouringEvent` is accepted only if every tag in it is the
    ledger's relation; otherwise ``spend`` and ``check`` raise
    :class:`NeighbouringMismatchError` and nothing is recorded (no
    conversion between relations is attempted).  The same holds for the
    privacy unit, on every spend including the first: an event tagged with
    another unit than the ledger's (or with both) raises
    :class:`NeighbouringMismatchError`; an untagged event is read under the
    ledger's unit.

    **Spending.**  ``spend`` composes the candidate event together with the
    previous spends and raises :class:`BudgetExceededError` before
    recording anything if the total epsilon would exceed the budget.
    ``check`` and ``spend`` are atomic: a lock makes each ``spend`` one
    check-then-record step, so threads sharing a ledger (e.g. fits in a
    thread pool) can never bring it over its budget together.
    ``remaining()`` is ``(epsilon - spent epsilon, delta)``: with
    non-additive accountants (RDP, zCDP, GDP) the remaining epsilon is not
    the epsilon of a further spend, use :meth:`check` for that.

    **Accountants.**  A spend may declare the accountant its event was
    calibrated with (``spend(event, accountant="gdp")``; every estimator
    declares its plan's, ``privacy_.accountant``).  The spent epsilon is
    then the *smallest* of the bounds that each of these accountants gives
    for the composition of *every* spend: the ledger's own accountant and
    each accountant a spend declared, each composing all the spends (an
    accountant that cannot account for one of them is left out; when none
    can, the spend raises :class:`UnsupportedEventError`).  Every one of
    these is a valid (epsilon, delta) bound on the whole adaptive
    composition at the total delta, so their minimum is too; accountants are
    never mixed within one bound (epsilons of different accountants are
    never added).  In particular a ledger holding one fit agrees exactly
    with the fit's own calibration (same accountant, same event; at the
    fit's delta when it is the ledger's): a ledger of (1, 1e-5) accepts a
    fit of (1, 1e-5) calibrated with exact Gaussian DP, which its default
    RDP accountant alone would put at 1.09.  :attr:`spent_by` names the
    accountant of the current bound, :attr:`declared` each spend's.  (Like
    the RDP accountant's choice of order, the choice among these bounds
    reads the spends' public parameters only.  What the ledger certifies is
    the composition of the spends it holds; when the parameters of later
    spends are chosen from earlier results, it acts as a privacy filter only
    as far as filter theorems for its accountants go.)

    **One account, never copied.**  A ledger is the user's account: every
    estimator, clone and thread that holds it charges the same object.
    ``copy.copy`` and ``copy.deepcopy`` return the ledger itself, so
    scikit-learn's ``clone`` (which deep-copies non-estimator parameters),
    ``cross_val_score`` and ``GridSearchCV`` with ``n_jobs=1`` charge every
    fit to it.  A ledger cannot be pickled (``TypeError``): a copy in
    another process (a joblib worker with ``n_jobs > 1``, a Dask or
    multiprocessing task) would be an independent account that nobody reads,
    so e.g. ``cross_val_score(..., n_jobs=2)`` of an estimator holding a
    ledger refuses before any fit.  Fit in this process (``n_jobs=1``), or
    fit without the ledger elsewhere and :meth:`spend` the fits' events
    (``privacy_.event``) here.  A *fitted* private model's pickle and saved
    file hold ``budget=None`` (:mod:`dpem_fast._persist`): the account stays
    with its owner.
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
        # the registry name of the ledger's own accountant, when it is one (a
        # spend declaring that name then shares its bound)
        self._own_name = (accountant if isinstance(accountant, str) else
                          next((n for n, c in _CLASSES.items() if c is accountant), None))
        self._lock = threading.RLock()
        self._entries = []          # (label, event, count)
        self._declared = []         # the accountant each spend declared, or None
        self._tails = []            # each spend's delta outside its event (delta_tail)
        # key (None: the ledger's own accountant; else a registry name) ->
        # an accountant holding every spend, or None if it cannot account
        # for one of them
        self._bounds = {_OWN: self._fresh()}   # a factory of the wrong relation fails here
        self._own_label = self._own_name or type(self._bounds[_OWN]).__name__
        self._spent = 0.0
        self._spent_by = None

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

    # ------------------------------------------------- one account, never copied
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "a BudgetLedger cannot be pickled: it is the user's privacy account, and a copy in "
            "another process (a joblib worker with n_jobs > 1, a Dask or multiprocessing task) "
            "would charge an independent account that nobody reads.  Fit estimators holding "
            "it (budget=...) in this process (n_jobs=1), or fit without budget= elsewhere and "
            "spend their events (privacy_.event) on the ledger here")

    # ------------------------------------------------------------- properties
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
        with self._lock:
            return list(self._entries)

    @property
    def declared(self):
        """The accountant each recorded spend declared (a name of :data:`ACCOUNTANTS`, or
        None), in the order of :attr:`entries`."""
        with self._lock:
            return list(self._declared)

    @property
    def spent_by(self):
        """The accountant whose bound is the spent epsilon: a name of :data:`ACCOUNTANTS`, or
        the class name of the ledger's own accountant when it was given as a factory; None
        before the first spend."""
        with self._lock:
            return self._spent_by

    # ---------------------------------------------------------------- spending
    def _checked(self, event, count, accountant):
        if not isinstance(event, DpEvent):
            raise TypeError(f"event must be a DpEvent, got {event!r}")
        count = check_int("count", count)
        if accountant is not None and accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be None or one of {ACCOUNTANTS} (the accountant "
                             f"the event was calibrated with), got {accountant!r}")
        # the relation and the unit of every spend, the first one included (an
        # accountant learns the unit only from the tagged events it holds)
        check_tags(event, self._neighbouring, "BudgetLedger", self._unit)
        return count

    def _name(self, key):
        return self._own_label if key is _OWN else key

    def _replayed(self, key):
        """A fresh accountant of ``key`` (a registry name) holding every spend, or None if it
        cannot account for one of them."""
        acct = get_accountant(key, self._neighbouring)()
        try:
            for _, event, count in self._entries:
                acct.compose(event, count)
        except UnsupportedEventError:
            return None
        return acct

    def _trial(self, event, count, accountant, tail=0.0):
        """``(epsilon, key, bounds)``: the smallest epsilon of the spends so far and ``event``
        composed, at the total delta less every spend's ``delta_tail`` (``tail``: the new
        one's), the key of the accountant that gives it, and the accountants holding them all
        (None where one cannot).  Changes nothing."""
        event_delta = self._delta - math.fsum(self._tails + [tail])
        keys = list(self._bounds)
        if accountant is not None and accountant != self._own_name and accountant not in keys:
            keys.append(accountant)
        bounds, first_error = {}, None
        for key in keys:
            base = self._bounds[key] if key in self._bounds else self._replayed(key)
            trial = None
            if base is not None:
                trial = base._copy()
                try:
                    trial.compose(event, count)
                except UnsupportedEventError as exc:
                    first_error = first_error or exc
                    trial = None
            bounds[key] = trial
        best = None                 # (epsilon, key) of the smallest bound
        for key, acct in bounds.items():
            if acct is None:
                continue
            eps = acct.get_epsilon(event_delta) if event_delta > 0 else math.inf
            if math.isnan(eps):
                eps = math.inf
            if best is None or eps < best[0]:
                best = (eps, key)
        if best is None:
            if first_error is not None:
                raise first_error
            raise UnsupportedEventError(
                f"BudgetLedger: no accountant of this ledger can account for every spend "
                f"and {type(event).__name__}")
        return best[0], best[1], bounds

    def check(self, event, count=1, *, accountant=None, delta_tail=0.0):
        """Whether spending ``event`` (``count`` times) fits in the budget.

        ``accountant``, ``delta_tail``: as for :meth:`spend`.  Raises
        :class:`NeighbouringMismatchError` for an event tagged with another relation or unit
        than the ledger's.
        """
        with self._lock:
            count = self._checked(event, count, accountant)
            tail = self._checked_tail(delta_tail)
            return self._trial(event, count, accountant, tail)[0] <= self._epsilon

    def _checked_tail(self, delta_tail):
        tail = float(delta_tail)
        if not (0.0 <= tail < 1.0):     # a tail at or above what is left of delta does not fit
            raise ValueError(f"delta_tail must be in [0, 1), got {delta_tail!r}")
        return tail

    def spend(self, event, count=1, label=None, *, accountant=None, delta_tail=0.0):
        """Record a spend; raise :class:`BudgetExceededError` if over budget.

        ``accountant`` (a name of :data:`ACCOUNTANTS`, optional): the accountant the event
        was calibrated with; the ledger's bound then takes it into account (class
        docstring, "Accountants").  ``delta_tail`` (default 0): a δ the spend's guarantee
        has outside its event (:class:`~dpem_fast.model_selection.PrivateModelSelection`:
        the chance that its trial count exceeds its fixed work, ``privacy_.delta_tail``).
        It adds to the δ of the composition: the ledger's ε is that of every event composed
        at ``delta - Σ delta_tail``, so its (ε, δ) covers the spend's own (ε, δ).  Returns the total epsilon spent after this spend.  An
        event tagged with another relation or unit than the ledger's raises
        :class:`NeighbouringMismatchError`, and nothing is recorded.  Atomic: the check and
        the record happen under the ledger's lock.
        """
        with self._lock:
            count = self._checked(event, count, accountant)
            tail = self._checked_tail(delta_tail)
            total, key, bounds = self._trial(event, count, accountant, tail)
            if not total <= self._epsilon:
                raise BudgetExceededError(
                    f"spending {label or type(event).__name__!s} would bring "
                    f"epsilon to {total:.6g} > budget {self._epsilon:.6g} "
                    f"(delta={self._delta:g}, accountant {self._name(key)}); "
                    f"nothing was recorded")
            self._entries.append((label, event, count))
            self._declared.append(accountant)
            self._tails.append(tail)
            self._bounds = bounds
            self._spent, self._spent_by = total, self._name(key)
            return total

    def spent(self):
        """``(epsilon, delta)`` spent so far (epsilon at the total delta; :attr:`spent_by`
        says which accountant bounds it)."""
        with self._lock:
            if not self._entries:
                return (0.0, 0.0)
            return (self._spent, self._delta)

    def remaining(self):
        """``(epsilon_total - epsilon_spent, delta_total)``."""
        eps = self.spent()[0]
        return (max(self._epsilon - eps, 0.0) if math.isfinite(eps) else 0.0,
                self._delta)

    def __repr__(self):
        with self._lock:
            n = len(self._entries)
        return (f"BudgetLedger(epsilon={self._epsilon!r}, "
                f"delta={self._delta!r}, "
                f"neighbouring={self._neighbouring!r}, "
                f"privacy_unit={self._unit!r}, "
                f"n_spends={n})")
