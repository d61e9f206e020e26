"""The two ends of the one privacy path: the charge and the record (issue 36).

Every private fit goes plan (:func:`~dpem_fast._engine._plan.make_plan` or
:func:`~dpem_fast._engine._plan.make_event_plan`) → charge → releases → record, run by a loop of
:mod:`~dpem_fast._engine._loops`, which calls this module: :func:`charge` is the library's only
call of ``BudgetLedger.spend`` (before any statistic of the data is computed), and
:func:`build_record` its only construction of a :class:`~dpem_fast._engine._record.PrivacyRecord`
(the file codec in ``_persist`` apart, which loads saved ones).  A change to what every fit
charges or records is made here, once.
"""
from __future__ import annotations

import dataclasses

from .. import accounting as acc
from ._plan import Plan
from ._record import PrivacyRecord

__all__ = ["charge", "build_record", "chain_record"]


def charge(budget, event, label, *, accountant=None, delta_tail=0.0):
    """Charge ``event`` (a whole plan) to ``budget`` (nothing if None): the one spend of the
    library.  A refused charge raises :class:`~dpem_fast.accounting.BudgetExceededError` and
    records nothing.  ``accountant``: the registry name the plan was calibrated with (the ledger
    then also bounds its spends with it); ``delta_tail``: a δ outside the event
    (:attr:`~dpem_fast._engine._plan.Plan.delta_tail`)."""
    if budget is not None:
        budget.spend(event, label=label, accountant=accountant, delta_tail=delta_tail)


def build_record(plan, *, mechanism, n_iter, delta, data_domain, epsilon=None, notes=(), private=True,
                 noise="gaussian"):
    """The :class:`~dpem_fast._engine._record.PrivacyRecord` of a fit that released ``plan``.

    ``epsilon``: the target as the user gave it (default: what the plan spends, for a plan set by
    a noise multiplier); ``delta``: the fit's target δ (the plan's event is accounted at ``delta -
    plan.delta_tail``); ``private``: False only for a domain read from the raw data."""
    return PrivacyRecord(
        mechanism=mechanism, neighbouring=plan.neighbouring, accountant=plan.accountant,
        epsilon=float(plan.epsilon_spent if epsilon is None else epsilon), delta=float(delta),
        epsilon_spent=float(plan.epsilon_spent), n_iter=int(n_iter), releases=dict(plan.releases),
        event=plan.event, data_domain=data_domain, notes=tuple(notes), private=private, noise=noise,
        joint_multiplier=plan.joint_multiplier, delta_tail=float(plan.delta_tail),
        privacy_unit=plan.privacy_unit, max_rows_per_group=plan.max_rows_per_group)


def chain_record(prev, plan, stat, *, name, mechanism, delta, data_domain):
    """The record after one more call of a sequence of charged calls (LDA's ``partial_fit``):
    ``prev`` (None, a fit's record, or an earlier chain's) composed with ``plan``, whose one
    statistic ``stat`` joins the record as ``name`` (one entry per distinct (sensitivity, noise
    scale), ``count`` calls each; ``name_1``, ``name_2``, ... for the others).  A chain's
    record has ``mechanism``; its event composes each call's event (a prior fit's as one part)
    under the plan's relation, accounted with the plan's accountant at ``delta``."""
    r = dataclasses.replace(plan.releases[stat], name=name)
    inner = plan.event.event                        # the NeighbouringEvent's content
    if prev is None:
        events, releases, n_iter = (inner,), {}, 0
    else:
        prior = prev.event.event
        events = prior.events if prev.mechanism == mechanism else (prior,)
        events, releases, n_iter = (*events, inner), dict(prev.releases), prev.n_iter
    for key, old in releases.items():
        if key.startswith(name) and (old.sensitivity, old.noise_scale) == (r.sensitivity, r.noise_scale):
            releases[key] = dataclasses.replace(old, count=old.count + 1)
            break
    else:
        k = sum(key.startswith(name) for key in releases)
        key = name if k == 0 else f"{name}_{k}"
        releases[key] = dataclasses.replace(r, name=key)
    event = acc.NeighbouringEvent(plan.neighbouring, acc.ComposedEvent(events), plan.privacy_unit)
    spent = acc.get_accountant(plan.accountant, plan.neighbouring)().compose(event).get_epsilon(float(delta))
    chained = Plan(releases, event, plan.accountant, plan.neighbouring, float(spent), None, plan.privacy_unit,
                   plan.max_rows_per_group)
    return build_record(chained, mechanism=mechanism, n_iter=n_iter + 1, delta=delta, data_domain=data_domain,
                        epsilon=spent, notes=(() if prev is None else prev.notes))
