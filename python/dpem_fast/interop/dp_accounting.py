"""A fit's privacy as Google's dp-accounting events (issue 38).

:func:`to_dp_event` maps the event of a :class:`~dpem_fast._engine._record.PrivacyRecord`
(``model.privacy_``), of a plan (:meth:`~dpem_fast._engine._estimator.PrivateEstimator.privacy_plan`,
before any fit) or of one of our :class:`~dpem_fast.accounting.DpEvent` trees onto the
``dp_accounting.DpEvent`` tree of the same mechanism, so that dp-accounting (and the libraries
built on it) can compose one of our fits with its own events; :func:`neighboring_relation` is the
relation to account it under, and :func:`make_accountant` an accountant of dp-accounting holding it.

The mapping, leaf by leaf (our class → dp-accounting's):

* ``GaussianEvent(z)`` → ``GaussianDpEvent(z)``; ``LaplaceEvent(ε)`` → ``LaplaceDpEvent(1/ε)``;
* ``DiscreteGaussianEvent(σ, Δ)`` → ``ZCDpEvent(Δ²/(2σ²))``: dp-accounting has no discrete
  Gaussian, and ρ-zCDP is exactly what we claim for it (Canonne, Kamath & Steinke 2020, Thm 4;
  our plans of discrete noise are accounted with zCDP).  Only ``RdpAccountant`` composes it;
* ``PoissonSampledEvent``, ``SampledWithoutReplacementEvent``, ``SelfComposedEvent``,
  ``ComposedEvent`` → their namesakes; ``RepeatAndSelectEvent(e, mean, shape)`` →
  ``RepeatAndSelectDpEvent(e, mean, shape)`` with Poisson (our ``shape=None``) as ``shape=inf``;
* ``NeighbouringEvent`` (the relation and the privacy unit) has no dp-accounting event: it is
  removed, and its relation is :func:`neighboring_relation`'s (one relation, one unit per tree).

Noise multipliers are relative to the sensitivities under the record's relation, as
dp-accounting's ``GaussianDpEvent`` reads them in ``RdpAccountant`` (either relation) and in
``PLDAccountant`` under ``ADD_OR_REMOVE_ONE``.  dp-accounting's ``PLDAccountant`` under
``REPLACE_ONE`` reads them differently: a replaced record moves the statistic by *twice* the
sensitivity the multiplier refers to (its Gaussian privacy loss is between ``N(-Δ, σ²)`` and
``N(Δ, σ²)``, DP-SGD's convention of a per-record bound).  Our replace-one sensitivities are
already the whole change, so for that accountant the event is made with ``accountant="pld"``,
which doubles every Gaussian multiplier of a replace-one event (exact, no loss: the shift is then
our Δ); the default event read by ``PLDAccountant(REPLACE_ONE)`` overstates ε (safe), and the
``"pld"`` event read by an RDP accountant would *understate* it — use each with its accountant.

The person-level unit (``privacy_unit="group"``, ``max_rows_per_group`` m): the event's noise
multipliers are relative to one group's sensitivities (m rows, :mod:`dpem_fast._engine._groups`),
so the same dp-accounting relation holds with "one" meaning one group: ``ADD_OR_REMOVE_ONE``
adds or removes all of one person's rows, ``REPLACE_ONE`` replaces them.  Compose it only with
events of the same unit.

δ: a record's event re-accounts to ``epsilon_spent`` at ``event_delta = delta - delta_tail``
(``delta_tail``: a private selection's wall time, outside the event).

Privacy: the converter reads the event, the relation and the unit, public values only.

``dp_accounting`` is an optional dependency: ``pip install "dpem_fast[interop]"``.
"""
from __future__ import annotations

import math

from .. import accounting as acc
from ..accounting._events import tagged_relations, tagged_units

__all__ = ["to_dp_event", "neighboring_relation", "make_accountant"]

#: What :func:`make_accountant` builds: dp-accounting's RDP and PLD accountants
KINDS = ("rdp", "pld")


def _import():
    try:
        import dp_accounting
    except ImportError as exc:          # pragma: no cover - the extra is installed in CI
        raise ImportError("dpem_fast.interop.dp_accounting needs Google's dp-accounting: "
                          "pip install \"dpem_fast[interop]\" (dp-accounting==0.6.0)") from exc
    return dp_accounting


def _event_of(source):
    """Our event of a record, a plan or an event (tagged with one relation and one unit)."""
    event = getattr(source, "event", source) if not isinstance(source, acc.DpEvent) else source
    if not isinstance(event, acc.DpEvent):
        raise TypeError(f"source must be a PrivacyRecord, a Plan or a dpem_fast DpEvent, got {source!r}")
    rels, units = tagged_relations(event), tagged_units(event)
    if len(rels) != 1 or len(units) != 1:
        raise ValueError(f"source: the event must carry one neighbouring relation and one privacy unit "
                         f"(NeighbouringEvent), got relations {sorted(rels)} and units {sorted(units)}")
    return event, rels.pop()


def neighboring_relation(source):
    """The ``dp_accounting.NeighboringRelation`` of ``source``'s event: ``ADD_OR_REMOVE_ONE`` for
    ``"add_remove"``, ``REPLACE_ONE`` for ``"replace"`` (of one row, or of one group's rows for a
    person-level fit; module docstring)."""
    dpa = _import()
    _, rel = _event_of(source)
    return (dpa.NeighboringRelation.ADD_OR_REMOVE_ONE if rel == "add_remove"
            else dpa.NeighboringRelation.REPLACE_ONE)


def to_dp_event(source, *, accountant="rdp"):
    """The ``dp_accounting.DpEvent`` of a fit's record, a plan, or a dpem_fast event.

    Parameters
    ----------
    source : PrivacyRecord, Plan or dpem_fast.accounting.DpEvent
        ``model.privacy_``, ``estimator.privacy_plan(...)``, or an event tagged with
        :class:`~dpem_fast.accounting.NeighbouringEvent`.
    accountant : {"rdp", "pld"}, default "rdp"
        The dp-accounting accountant the event is for.  They differ only for a replace-one
        event, whose Gaussian multipliers ``PLDAccountant(REPLACE_ONE)`` reads against half the
        change (module docstring): ``"pld"`` doubles them there, and refuses what that
        accountant cannot compose (Laplace under replace-one, discrete Gaussian, sampling
        without replacement, random stopping) with a ``ValueError``.

    Returns
    -------
    dp_accounting.DpEvent
        Account it with :func:`neighboring_relation`'s relation at the record's
        ``event_delta`` (:func:`make_accountant` does both).
    """
    if accountant not in KINDS:
        raise ValueError(f"accountant must be one of {KINDS}, got {accountant!r}")
    dpa = _import()
    event, rel = _event_of(source)
    double = accountant == "pld" and rel == "replace"
    return _convert(dpa, event, 2.0 if double else 1.0, accountant)


def _convert(dpa, e, scale, kind):
    """dp-accounting's event of ``e``, Gaussian multipliers times ``scale``."""
    def sub(x):
        return _convert(dpa, x, scale, kind)

    if isinstance(e, acc.NeighbouringEvent):
        return sub(e.event)
    if isinstance(e, acc.GaussianEvent):
        return dpa.dp_event.GaussianDpEvent(e.noise_multiplier * scale)
    if isinstance(e, acc.SelfComposedEvent):
        return dpa.dp_event.SelfComposedDpEvent(sub(e.event), e.count)
    if isinstance(e, acc.ComposedEvent):
        return dpa.dp_event.ComposedDpEvent([sub(x) for x in e.events])
    if isinstance(e, acc.PoissonSampledEvent):
        return dpa.dp_event.PoissonSampledDpEvent(e.sampling_probability, sub(e.event))
    if kind == "pld":
        what = ("a Laplace release under replace-one" if isinstance(e, acc.LaplaceEvent) and scale != 1.0 else
                None if isinstance(e, acc.LaplaceEvent) else type(e).__name__)
        if what is not None:
            raise ValueError(f"accountant='pld': dp-accounting's PLDAccountant cannot compose {what}; use "
                             "accountant='rdp' (RdpAccountant)")
    if isinstance(e, acc.LaplaceEvent):
        return dpa.dp_event.LaplaceDpEvent(1.0 / e.epsilon)
    if isinstance(e, acc.DiscreteGaussianEvent):
        return dpa.dp_event.ZCDpEvent(e.sensitivity ** 2 / (2.0 * e.sigma ** 2))
    if isinstance(e, acc.SampledWithoutReplacementEvent):
        return dpa.dp_event.SampledWithoutReplacementDpEvent(e.population_size, e.sample_size, sub(e.event))
    if isinstance(e, acc.RepeatAndSelectEvent):
        return dpa.dp_event.RepeatAndSelectDpEvent(sub(e.event), float(e.mean),
                                          math.inf if e.shape is None else float(e.shape))
    raise TypeError(f"no dp-accounting event for {type(e).__name__}")


def make_accountant(source, kind="pld", **kwargs):
    """A fresh dp-accounting accountant of ``source``'s relation holding its event.

    ``kind``: ``"rdp"`` (``RdpAccountant``) or ``"pld"`` (``PLDAccountant``), given ``kwargs``
    (e.g. ``value_discretization_interval``).  For a record, ``accountant.get_epsilon(
    record.event_delta)`` re-accounts the fit; more of the caller's events may be composed.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    dpa = _import()
    cls = dpa.rdp.RdpAccountant if kind == "rdp" else dpa.pld.PLDAccountant
    accountant = cls(neighboring_relation=neighboring_relation(source), **kwargs)
    accountant.compose(to_dp_event(source, accountant=kind))
    return accountant
