"""Immutable descriptions of privacy mechanisms ("events").

An event says *which* mechanism ran, not how to account for it; each
accountant translates events into its own currency (RDP curve, zCDP rho,
(epsilon, delta) pairs, GDP mu, ...).

Neighbouring relation
---------------------
Noise parameters are expressed relative to a sensitivity, and a
sensitivity depends on the neighbouring relation (``"add_remove"`` or
``"replace"``): e.g. the DP-EM moment sensitivities of Park et al. (2017,
Eq. 9, 12, 14, 17) are replace-one sensitivities (``2/N``), and an
add/remove-one sensitivity of a sum of unit-norm vectors is 1 whereas its
replace-one sensitivity is 2.  The same noise multiplier therefore stands
for a different privacy loss under the other relation (twice the GDP mu
for that sum).

An event wrapped in :class:`NeighbouringEvent` carries the relation its
parameters were derived under; an accountant composes it only under that
relation and raises :class:`NeighbouringMismatchError` otherwise (no
conversion is attempted).  An untagged event is read under the
accountant's own relation.
"""
from dataclasses import dataclass, fields

from ._validation import (
    check_half_open_unit, check_int, check_neighbouring, check_nonnegative, check_positive,
    check_privacy_unit,
)

__all__ = [
    "DpEvent", "GaussianEvent", "LaplaceEvent", "DiscreteGaussianEvent",
    "PoissonSampledEvent", "SampledWithoutReplacementEvent",
    "SelfComposedEvent", "ComposedEvent", "NeighbouringEvent",
    "RepeatAndSelectEvent",
]


@dataclass(frozen=True, slots=True)
class DpEvent:
    """Base class of all events (abstract; carries no parameters)."""


def _set(obj, name, value):
    object.__setattr__(obj, name, value)


def _check_event(name, event):
    if not isinstance(event, DpEvent) or type(event) is DpEvent:
        raise TypeError(f"{name} must be a DpEvent instance, got {event!r}")
    return event


@dataclass(frozen=True, slots=True)
class GaussianEvent(DpEvent):
    """Gaussian mechanism ``f(D) + N(0, sigma^2 I)``.

    Parameters
    ----------
    noise_multiplier : float
        ``z = sigma / Delta`` with Delta the l2 sensitivity of ``f`` under the
        relation of the enclosing :class:`NeighbouringEvent`, else under the
        accountant's neighbouring relation; must be finite and > 0.

    Notes
    -----
    Privacy: log-moment ``(lambda^2 + lambda) / (2 z^2)`` (Park et al. 2017,
    Eq. 20); RDP ``alpha / (2 z^2)`` (Mironov 2017, Prop. 7); zCDP
    ``1 / (2 z^2)`` (Bun & Steinke 2016, Prop. 1.6); mu-GDP with
    ``mu = 1 / z`` (Dong, Roth & Su 2019).
    """
    noise_multiplier: float

    def __post_init__(self):
        _set(self, "noise_multiplier",
             check_positive("noise_multiplier", self.noise_multiplier))


@dataclass(frozen=True, slots=True)
class LaplaceEvent(DpEvent):
    """Laplace mechanism ``f(D) + Lap(Delta_1 / epsilon)``: pure epsilon-DP.

    Parameters
    ----------
    epsilon : float
        Finite, > 0.  ``Delta_1`` is the l1 sensitivity under the relation
        of the enclosing :class:`NeighbouringEvent`, else under the
        accountant's neighbouring relation.

    Notes
    -----
    Privacy: epsilon-DP (Dwork & Roth 2014, Thm 3.6); log-moment Park et al.
    (2017) Eq. 19; RDP Mironov (2017, Prop. 6); zCDP ``epsilon^2 / 2``
    (Bun & Steinke 2016, Prop. 1.4).
    """
    epsilon: float

    def __post_init__(self):
        _set(self, "epsilon", check_positive("epsilon", self.epsilon))


@dataclass(frozen=True, slots=True)
class DiscreteGaussianEvent(DpEvent):
    """Discrete Gaussian mechanism ``f(D) + N_Z(0, sigma^2)`` on integers.

    Parameters
    ----------
    sigma : float
        Scale of the discrete Gaussian (in integer units), finite and > 0.
    sensitivity : float
        l2 sensitivity of the integer-valued (scaled) query, finite and > 0.
    dimension : int or None
        Number of coordinates; ``None`` or 1 for a scalar query.

    Notes
    -----
    Privacy (Canonne, Kamath & Steinke 2020, Thm 4): ``Delta^2 / (2
    sigma^2)``-zCDP.  The same holds for any ``dimension`` with independent
    coordinates and ``Delta`` the l2 sensitivity, because Renyi divergences
    of product distributions add (see
    :func:`dpem_fast.accounting._zcdp.discrete_gaussian_rho`);
    ``dimension`` is recorded for re-accounting, not used in the bound.
    """
    sigma: float
    sensitivity: float
    dimension: int | None = None

    def __post_init__(self):
        _set(self, "sigma", check_positive("sigma", self.sigma))
        _set(self, "sensitivity",
             check_positive("sensitivity", self.sensitivity))
        if self.dimension is not None:
            _set(self, "dimension", check_int("dimension", self.dimension))


@dataclass(frozen=True, slots=True)
class PoissonSampledEvent(DpEvent):
    """Run ``event`` on a Poisson subsample (each record kept w.p. ``q``).

    Parameters
    ----------
    sampling_probability : float
        ``q`` in (0, 1].
    event : DpEvent
        The mechanism applied to the subsample.
    """
    sampling_probability: float
    event: DpEvent

    def __post_init__(self):
        _set(self, "sampling_probability",
             check_half_open_unit("sampling_probability",
                                  self.sampling_probability))
        _check_event("event", self.event)


@dataclass(frozen=True, slots=True)
class SampledWithoutReplacementEvent(DpEvent):
    """Run ``event`` on a uniformly random subset of fixed size.

    Parameters
    ----------
    population_size : int
        ``n >= 1``, size of the data set.
    sample_size : int
        ``1 <= m <= n``.
    event : DpEvent
        The mechanism applied to the subsample.

    Notes
    -----
    Accounted by the bound of Wang, Balle & Kasiviswanathan (2019, Thm 9),
    which holds for the replace-one relation only.
    """
    population_size: int
    sample_size: int
    event: DpEvent

    def __post_init__(self):
        n = check_int("population_size", self.population_size)
        m = check_int("sample_size", self.sample_size)
        if m > n:
            raise ValueError(f"sample_size must be <= population_size "
                             f"({n}), got {m!r}")
        _set(self, "population_size", n)
        _set(self, "sample_size", m)
        _check_event("event", self.event)


@dataclass(frozen=True, slots=True)
class SelfComposedEvent(DpEvent):
    """``event`` run ``count`` times (adaptively) on the same data."""
    event: DpEvent
    count: int

    def __post_init__(self):
        _check_event("event", self.event)
        _set(self, "count", check_int("count", self.count))


@dataclass(frozen=True, slots=True)
class ComposedEvent(DpEvent):
    """A heterogeneous sequence of events (stored as a tuple)."""
    events: tuple

    def __post_init__(self):
        if isinstance(self.events, DpEvent) or not hasattr(self.events,
                                                            "__iter__"):
            raise TypeError(f"events must be an iterable of DpEvent, "
                            f"got {self.events!r}")
        events = tuple(self.events)
        for i, ev in enumerate(events):
            _check_event(f"events[{i}]", ev)
        _set(self, "events", events)


@dataclass(frozen=True, slots=True)
class RepeatAndSelectEvent(DpEvent):
    """``event`` run a random number ``T`` of times, only the best run released.

    Private selection of Papernot & Steinke (ICLR 2022, arXiv 2110.03620):
    the mechanism ``Q`` described by ``event`` (for instance "pick a
    candidate with public randomness, fit it, release a noisy score") runs
    ``T`` times independently on the same data, ``T`` drawn from a
    distribution that does not depend on the data and is never revealed,
    and only the run with the best output (by any rule that reads the
    outputs alone) is released; the other runs and ``T`` stay secret.

    Parameters
    ----------
    event : DpEvent
        One run ``Q``.
    mean : float
        ``E[T]``, finite and ``>= 1``.
    shape : float or None
        The distribution of ``T``: ``None`` is Poisson with mean ``mean``
        (their Thm 6; ``T = 0`` releases nothing); a finite ``eta >= 0`` is
        the truncated negative binomial ``P[T = k] ∝ (1-γ)^k Π_{l<k}
        (l+eta)/(l+1)``, ``k >= 1``, with ``γ`` set by ``mean``
        (:func:`~dpem_fast.accounting.repetition_gamma`): ``eta = 0`` the
        logarithmic, ``eta = 1`` the geometric distribution (their Thm 2).
        dp_accounting's ``RepeatAndSelectDpEvent`` writes Poisson as
        ``shape=inf``.

    Notes
    -----
    Accounted by :class:`RDPAccountant` only (see
    :func:`dpem_fast.accounting._rdp.repeat_and_select_rdp`); the other
    accountants raise :class:`UnsupportedEventError`.
    """
    event: DpEvent
    mean: float
    shape: float | None

    def __post_init__(self):
        _check_event("event", self.event)
        mean = check_positive("mean", self.mean)
        if mean < 1.0:
            raise ValueError(f"mean must be >= 1 (the mean number of runs), got {self.mean!r}")
        _set(self, "mean", mean)
        if self.shape is not None:
            _set(self, "shape", check_nonnegative("shape", self.shape))


@dataclass(frozen=True, slots=True)
class NeighbouringEvent(DpEvent):
    """``event``, with the neighbouring relation its parameters refer to.

    The noise parameters inside ``event`` (noise multipliers, Laplace
    epsilons, discrete-Gaussian sensitivities, anywhere in its subtree) are
    relative to sensitivities derived under ``neighbouring``, and its
    sampling events are analysed under that relation.  An accountant whose own
    relation is ``neighbouring`` accounts for it exactly as for ``event``;
    any other accountant (or :class:`BudgetLedger`) raises
    :class:`NeighbouringMismatchError` and changes nothing.  There is no
    conversion between relations: a replace-one neighbour is a removal
    plus an addition, but which sensitivity that gives depends on the
    query (``2C`` for a sum of vectors of norm ``<= C``, ``sqrt(2)`` for a
    histogram), so only the caller can derive it.

    Parameters
    ----------
    neighbouring : {"add_remove", "replace"}
        Relation under which the sensitivities of ``event`` were derived.
    event : DpEvent
        The mechanism (any event, composite or not; tags may nest, and
        every tag in the tree is checked).
    privacy_unit : {"row", "group"}, default "row"
        What one neighbour adds, removes or replaces: one row (record-level
        DP), or all the rows of one group — a person, an author, an aircraft
        (person-level DP: the sensitivities were derived for a group's
        bounded contribution, e.g. at most m rows per group).  The
        accountants' arithmetic is the same for both (the noise parameters
        are relative to the unit's sensitivities), but a guarantee is about
        one unit: an accountant refuses to compose events of both units,
        and a :class:`BudgetLedger` accepts only its own unit.

        .. versionadded:: 0.1 (issue 27)
    """
    neighbouring: str
    event: DpEvent
    privacy_unit: str = "row"

    def __post_init__(self):
        _set(self, "neighbouring", check_neighbouring(self.neighbouring))
        _check_event("event", self.event)
        _set(self, "privacy_unit", check_privacy_unit(self.privacy_unit))


def _child_events(event):
    """The events directly inside ``event`` (wrappers and compositions)."""
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, DpEvent):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, DpEvent))


def tagged_relations(event):
    """Set of the relations of every :class:`NeighbouringEvent` in the tree."""
    return {tag.neighbouring for tag in _tags(event)}


def tagged_units(event):
    """Set of the privacy units of every :class:`NeighbouringEvent` in the tree."""
    return {tag.privacy_unit for tag in _tags(event)}


def _tags(event):
    found = []
    stack = [event]
    while stack:
        ev = stack.pop()
        if isinstance(ev, NeighbouringEvent):
            found.append(ev)
        stack.extend(_child_events(ev))
    return found
