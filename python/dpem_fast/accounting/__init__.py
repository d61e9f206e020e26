"""Privacy accounting for dpem_fast.

Events describe mechanisms; accountants compose them and convert to
(epsilon, delta).  See ``python -m dpem_fast.accounting`` for the noise
table of the DP-EM GGG plan (the plan itself is
:func:`dpem_fast.mixture.dpem_plan`).

Neighbouring relation: every event's noise parameter is relative to a
sensitivity the caller derives under a neighbouring relation
(``"add_remove"`` or ``"replace"``).  Wrap the event in
:class:`NeighbouringEvent` to state which; accountants and ledgers of the
other relation then raise :class:`NeighbouringMismatchError`.  An untagged
event is read under the accountant's own ``neighbouring``.

δ policy: every entry point that takes a privacy ``delta`` (the estimators, the selection,
:class:`BudgetLedger`, the calibration functions, :func:`noise_table`) refuses δ above
:data:`DELTA_MAX` and warns (:class:`LargeDeltaWarning`) above :data:`DELTA_WARN`.
"""
from ._base import PrivacyAccountant
from ._calibration import (calibrate_epsilon_per_release,
                           calibrate_noise_multiplier)
from ._dp_composition import AdvancedAccountant, LinearAccountant
from ._events import (ComposedEvent, DiscreteGaussianEvent, DpEvent,
                      GaussianEvent, LaplaceEvent, NeighbouringEvent,
                      PoissonSampledEvent, RepeatAndSelectEvent,
                      SampledWithoutReplacementEvent, SelfComposedEvent)
from ._gdp import GDPAccountant
from ._rdp import repetition_gamma, repetition_pmf, repetition_tail
from ._ledger import BudgetLedger
from ._pld import PLDAccountant
from ._rdp_accountants import MomentsAccountant, RDPAccountant
from ._registry import ACCOUNTANTS, get_accountant
from ._table import (default_table_accountants, format_noise_table,
                     noise_table)
from ._validation import DELTA_MAX, DELTA_WARN
from ._warnings import (BudgetExceededError, DomainCoverageWarning, LargeDeltaWarning,
                        NeighbouringMismatchError, NoiseDominatedWarning, PrivacyLeakWarning, UnsupportedEventError)
from ._zcdp import ZCDPAccountant

__all__ = [
    "DpEvent", "GaussianEvent", "LaplaceEvent", "DiscreteGaussianEvent",
    "PoissonSampledEvent", "SampledWithoutReplacementEvent",
    "SelfComposedEvent", "ComposedEvent", "NeighbouringEvent", "RepeatAndSelectEvent",
    "repetition_gamma", "repetition_pmf", "repetition_tail",
    "PrivacyAccountant", "LinearAccountant", "AdvancedAccountant",
    "ZCDPAccountant", "MomentsAccountant", "RDPAccountant", "GDPAccountant",
    "PLDAccountant", "ACCOUNTANTS", "get_accountant",
    "calibrate_noise_multiplier", "calibrate_epsilon_per_release",
    "BudgetLedger", "BudgetExceededError", "PrivacyLeakWarning", "NoiseDominatedWarning",
    "DomainCoverageWarning", "LargeDeltaWarning", "DELTA_MAX", "DELTA_WARN",
    "UnsupportedEventError", "NeighbouringMismatchError",
    "noise_table", "format_noise_table",
    "default_table_accountants",
]
