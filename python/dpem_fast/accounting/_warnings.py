"""Warning and error classes of :mod:`dpem_fast.accounting`."""

__all__ = ["PrivacyLeakWarning", "NoiseDominatedWarning", "DomainCoverageWarning", "LargeDeltaWarning", "BudgetExceededError",
           "UnsupportedEventError", "NeighbouringMismatchError"]


class PrivacyLeakWarning(UserWarning):
    """A quantity that should be data-independent was computed from the data.

    Estimators emit it when, e.g., a data bound (clip norm, range) is taken
    from the private data itself; the privacy guarantee then does not hold.
    """


class NoiseDominatedWarning(UserWarning):
    """The released statistics of a fit are dominated by their noise.

    Estimators emit it after a private fit when what they released cannot support the
    model that was asked for (e.g. most mixture components have noisy counts that are
    indistinguishable from zero, so they were dropped).  The decision and the message use
    released values and public quantities only.  The message names the remedies that lower the
    noise that was too large: for noisy counts a larger ``epsilon``, more rows or fewer
    components (not bounds: a count's noise does not depend on them); for noisy moments also
    tighter declared bounds; for components that the fit merged although their counts could be
    told from noise, that ``n_components`` equal to the live count is what the budget resolves.
    """


class DomainCoverageWarning(UserWarning):
    """A privately estimated data domain may not cover the data.

    Emitted after a private fit whose domain was estimated (no ``bounds`` / ``data_norm``
    declared) when the fit's own released count of the rows outside the estimated box is
    more than a public fraction of the released row count, when that release is too noisy
    to tell, or when a feature's range could not be resolved above the noise and was given
    a public placeholder box.  Rows outside the box are clipped to it, so the model may
    describe the data badly.  The decision and the message use released values and public
    quantities only; the model is returned (the budget is already spent).  The remedy is to
    declare ``bounds`` (the features' known ranges) from public knowledge.
    """


class LargeDeltaWarning(UserWarning):
    """A ``delta`` so large that the (ε, δ) guarantee may say little.

    (ε, δ)-DP allows a mechanism that publishes every record in the clear with probability δ,
    so δ means something only when it is far below 1/n for n records.  Raised for
    :data:`~dpem_fast.accounting.DELTA_WARN` < δ <= :data:`~dpem_fast.accounting.DELTA_MAX`
    (above :data:`~dpem_fast.accounting.DELTA_MAX`, δ is refused with a ``ValueError``) by the
    estimators, the selection, :class:`BudgetLedger` and the calibration functions, before
    anything is charged or computed.
    """


class BudgetExceededError(ValueError):
    """A spend would take a :class:`BudgetLedger` over its total budget."""


class UnsupportedEventError(NotImplementedError):
    """The accountant cannot account for this event (or this combination of
    event and neighbouring relation)."""


class NeighbouringMismatchError(UnsupportedEventError, ValueError):
    """An event tagged with one neighbouring relation met an accountant or
    ledger of the other.

    Its noise parameters are relative to sensitivities under the tag's
    relation; reading them under another relation would misstate the
    privacy loss, and no conversion is attempted.  A subclass of
    :class:`UnsupportedEventError` (so ``supports`` is False and the
    accountant is unchanged) and of ``ValueError`` (the argument is wrong,
    not the accountant).
    """
