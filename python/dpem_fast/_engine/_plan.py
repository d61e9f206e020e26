"""A fit's privacy plan: the noise of every release, calibrated to the total (ε, δ).

A model declares its statistics (:class:`~dpem_fast._engine._statistics.StatSpec`); the
estimator picks a mechanism for each and a relative share of the budget.  One scalar
parameter sets every noise scale, and it is calibrated so that the whole plan — every
iteration's releases and the one-off releases before the loop — meets the target (ε, δ)
under the chosen accountant:

* all releases Gaussian: noise multiplier ``z_r = s / sqrt(w_r)`` with the shares ``w_r``
  of the per-iteration budget normalised to sum to 1.  For Gaussian mechanisms the share
  is exact in every additive currency (ρ = 1/(2 z²) in zCDP, μ² = 1/z² in GDP), so a
  release with share w gets a fraction w of each iteration's privacy loss.
* some releases Laplace (DP-EM's LLG scenario, Park et al. 2017 Sec. 4.2): per-release
  epsilons ``ε_r = w_r e`` (shares normalised by their maximum), and a Gaussian release
  tied to its share as in the paper, ``σ = sqrt(2 ln(1.25/δ_i)) Δ / ε_r`` with
  ``δ_i = 1e-8``; ``e`` is calibrated.

A one-off release (e.g. the private domain estimate) is Gaussian and takes a share of
the whole fit: ``w = f J Σ_r w_r / (1 - f)`` in the units above, so that it holds a
fraction f of the plan's total.

Joint accounting of an iteration's Gaussian releases: the releases of one iteration are
one Gaussian mechanism on the stacked statistic, with privacy loss
``μ² = sup Σ_r ‖δ_r‖² / σ_r²`` over neighbouring datasets (δ_r the change of statistic r).
Composing them separately bounds this by ``Σ_r Δ_r² / σ_r²``, attained only if every
statistic's worst case happens for the same pair of neighbours.  A model that can bound
the joint supremum (``joint``: the map ``{name: Δ_r²/σ_r²} -> sup Σ_r ‖δ_r‖²/σ_r²``,
homogeneous of degree one) gets one ``GaussianEvent`` per iteration with multiplier
``1/sqrt(sup)``: exact under GDP, and never looser than the separate composition.

The plan's event is tagged with the neighbouring relation
(:class:`~dpem_fast.accounting.NeighbouringEvent`): re-accounting it under the other
relation raises instead of understating the loss.

Person-level plans (``max_rows_per_group=m``, issue 27): every statistic, one-offs included,
is released with its group-level sensitivity (:func:`~dpem_fast._engine._groups.group_spec`:
m times the row-level one, padded under replace), here and nowhere else; the multipliers, and
so the calibration, are the same functions of the shares, the joint bound (homogeneous of
degree one) evaluated at the group-level ``a_r`` is the group-level joint bound, and the event
is tagged ``privacy_unit="group"`` (derivations in :mod:`dpem_fast._engine._groups`).

The event seam (issue 36): a mechanism whose event the plan cannot derive from StatSpecs (DP-SEP's
sequential releases on shuffled or sampled batches, a private selection's random stopping) gives
:func:`make_event_plan` its event factory ``make_event(p)`` (the way dp-accounting's calibration
takes ``make_event_from_param``) and its releases as :class:`EventRelease` declarations; the engine
calibrates ``p``, builds the :class:`Release` records and the :class:`Plan`.  No module outside the
engine builds a ``Plan`` or a ``Release``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Callable
import dataclasses
from dataclasses import dataclass

from .. import accounting as acc
from ..accounting import _calibration
from ._groups import check_max_rows_per_group, group_spec
from ._lattice import lattice, noised_size
from ._record import Release

__all__ = ["Plan", "make_plan", "EventRelease", "make_event_plan", "stacked_plan", "PAPER_DELTA_PER_RELEASE"]

#: δ_i of a Gaussian release tied to a Laplace epsilon (DP-EM Sec. 5.1 uses 1e-6 and 1e-8).
PAPER_DELTA_PER_RELEASE = 1e-8


@dataclass(frozen=True)
class Plan:
    """The calibrated plan of a private fit.

    Attributes
    ----------
    releases : dict of str to Release
        Every release, by statistic name, in the order they happen (one-offs first).
    event : DpEvent
        The whole plan, tagged with ``neighbouring``.
    accountant : str
        Registry name of the accountant that calibrated it.
    neighbouring : str
    epsilon_spent : float
        ε of ``event`` under that accountant at the target δ (≤ the target).
    joint_multiplier : float or None
        Noise multiplier of each iteration's releases accounted jointly as one Gaussian
        mechanism (``1/sqrt(sup Σ_r ‖δ_r‖²/σ_r²)``); None when they are composed separately.
    privacy_unit : {"row", "group"}
        What one neighbour differs by (the event's tags carry it).
    max_rows_per_group : int or None
        m of a group-level plan (every sensitivity is the group's), None for a row-level one.
    delta_tail : float
        A δ the plan's guarantee has outside ``event`` (a private selection's wall time); the
        event is accounted at ``delta - delta_tail``.  0 for a single fit.
    open_ended : tuple of str
        Statistics whose number of releases is random and accounted by ``event`` itself (a
        selection's trials): their ``count`` is the public bound recorded, and the release layer
        may release them beyond it.
    """

    releases: dict
    event: object
    accountant: str
    neighbouring: str
    epsilon_spent: float
    joint_multiplier: float | None = None
    privacy_unit: str = "row"
    max_rows_per_group: int | None = None
    delta_tail: float = 0.0
    open_ended: tuple = ()

    def to_dp_event(self, accountant="rdp"):
        """``event`` as Google's ``dp_accounting.DpEvent``, before any fit (as
        :meth:`PrivacyRecord.to_dp_event <dpem_fast._engine._record.PrivacyRecord.to_dp_event>`;
        accounted at ``delta - delta_tail``).

        .. versionadded:: 0.1 (issue 38)
        """
        from ..interop.dp_accounting import to_dp_event
        return to_dp_event(self, accountant=accountant)


def make_plan(iteration_specs, n_iter, *, epsilon, delta, neighbouring, accountant,
              mechanisms=None, shares=None, one_off_specs=(), one_off_share=0.0,
              noise="gaussian", joint=None, sampling_rate=None, noise_multiplier=None,
              one_off_multipliers=None, max_rows_per_group=None) -> Plan:
    """Calibrate the noise of every release for the total (ε, δ).

    Parameters
    ----------
    iteration_specs : sequence of StatSpec
        Statistics released once per iteration.
    n_iter : int
        Iterations J.
    epsilon, delta : float
        Target of the whole fit.
    neighbouring : {"add_remove", "replace"}
    accountant : str
        Registry name (:func:`dpem_fast.accounting.get_accountant`).
    mechanisms : dict of str to {"gaussian", "laplace"}, optional
        Per iteration statistic; default all Gaussian.
    shares : dict of str to float, optional
        Relative share of each iteration statistic; default equal.
    one_off_specs : sequence of StatSpec
        Gaussian releases made once before the loop; together they take a fraction
        ``one_off_share`` of the whole plan, split equally.
    one_off_share : float in [0, 1), or mapping of one-off name to float
        A float: the one-offs together take this fraction of the whole plan, split equally.
        A mapping (every one-off named): each its own fraction, summing to less than 1 (e.g.
        the private domain estimate and a private start side by side).
    one_off_multipliers : dict of str to float, optional
        Fixed noise multipliers of the one-off releases (every one-off named), chosen by the
        estimator from public quantities; the iteration releases are then calibrated to the
        rest of the budget (the accountant composes both exactly) and ``one_off_share`` is
        ignored.  This is how a subsampled plan carries one-offs: a share in Gaussian units
        means little once amplification bends each iteration's loss.
    noise : {"gaussian", "discrete_gaussian"}
        ``"discrete_gaussian"``: every (Gaussian) release is exact discrete Gaussian noise on
        an integer lattice (:mod:`dpem_fast._engine._lattice`), accounted as
        :class:`~dpem_fast.accounting.DiscreteGaussianEvent` (ρ-zCDP, CKS 2020 Thm 4) with
        the rounding-widened sensitivity; the multipliers z = σ_Z/Δ_int are calibrated as
        for the continuous plan.  Laplace releases are refused.
    sampling_rate : float in (0, 1], optional
        Each iteration's statistics are computed on a Poisson subsample (every record kept
        independently with this probability): each iteration's event is wrapped in
        :class:`~dpem_fast.accounting.PoissonSampledEvent`, so that the accountant can
        amplify it.  Requires ``neighbouring="add_remove"`` (the amplification theorems
        are stated for it), continuous Gaussian noise, and one-off releases (on the whole
        data, not subsampled) only with ``one_off_multipliers``.
    noise_multiplier : float, optional
        Skip the calibration: use this common scale (the multiplier z of every iteration
        release with equal shares) and record the ε it spends at ``delta``;
        ``epsilon`` is then ignored.
    max_rows_per_group : int, optional
        A person-level plan: the rows were bounded to at most m per group, every spec (one-offs
        included) is replaced by its group-level spec, and the event is tagged
        ``privacy_unit="group"`` (module docstring).  With ``sampling_rate`` the sampled unit
        must be the group.
    """
    m_group = check_max_rows_per_group(max_rows_per_group)
    unit = "row" if m_group is None else "group"
    specs = tuple(iteration_specs)
    one_off_specs = tuple(one_off_specs)
    if m_group is not None:          # the one place where a sensitivity becomes a group's
        specs = tuple(group_spec(s, m_group) for s in specs)
        one_off_specs = tuple(group_spec(s, m_group) for s in one_off_specs)
    names = [s.name for s in specs]
    mechanisms = {n: "gaussian" for n in names} if mechanisms is None else dict(mechanisms)
    shares = {n: 1.0 for n in names} if shares is None else dict(shares)
    if set(mechanisms) != set(names) or set(shares) != set(names):
        raise ValueError(f"mechanisms and shares must name exactly the statistics {names}")
    for spec in specs:
        mech = mechanisms[spec.name]
        if mech not in ("gaussian", "laplace"):
            raise ValueError(f"mechanism of {spec.name!r} must be 'gaussian' or 'laplace', got {mech!r}")
        if mech == "laplace" and spec.symmetric:
            raise ValueError(f"statistic {spec.name!r}: symmetric releases are Gaussian (Analyze-Gauss)")
        if mech == "laplace" and spec.l1 is None:
            raise ValueError(f"statistic {spec.name!r}: a Laplace release needs an l1 sensitivity")
    if noise not in ("gaussian", "discrete_gaussian"):
        raise ValueError(f"noise must be 'gaussian' or 'discrete_gaussian', got {noise!r}")
    discrete = noise == "discrete_gaussian"
    if discrete and any(m == "laplace" for m in mechanisms.values()):
        raise ValueError("noise='discrete_gaussian' releases every statistic with discrete Gaussian "
                         "noise; this plan has Laplace releases (use Gaussian ones)")
    if sampling_rate is not None:
        q = float(sampling_rate)
        if not 0.0 < q <= 1.0:
            raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}")
        if neighbouring != "add_remove":
            raise ValueError("sampling_rate: Poisson subsampling is accounted under neighbouring='add_remove' "
                             f"only, got {neighbouring!r}")
        if discrete or (one_off_specs and one_off_multipliers is None) or any(
                m != "gaussian" for m in mechanisms.values()):
            raise ValueError("sampling_rate: a subsampled plan has continuous Gaussian iteration releases "
                             "and one-off releases only at fixed one_off_multipliers")
    fixed = None
    if one_off_multipliers is not None:
        fixed = {str(k): float(v) for k, v in dict(one_off_multipliers).items()}
        if set(fixed) != {s.name for s in one_off_specs}:
            raise ValueError(f"one_off_multipliers must name exactly the one-off statistics "
                             f"{[s.name for s in one_off_specs]}, got {sorted(fixed)}")
        if discrete or any(m == "laplace" for m in mechanisms.values()) or not all(
                z > 0 and math.isfinite(z) for z in fixed.values()):
            raise ValueError(f"one_off_multipliers must be finite and > 0, in an all-Gaussian continuous "
                             f"plan, got {fixed}")
    lattices = {s.name: lattice(s, neighbouring) for s in (*one_off_specs, *specs)} if discrete else {}
    names_one = [s.name for s in one_off_specs]
    if isinstance(one_off_share, Mapping):
        fractions = {str(k): float(v) for k, v in one_off_share.items()}
        if one_off_specs and fixed is None and (set(fractions) != set(names_one) or not all(
                v > 0 and math.isfinite(v) for v in fractions.values())):
            raise ValueError(f"one_off_share must give every one-off statistic {names_one} a fraction > 0, "
                             f"got {fractions}")
        total_share = math.fsum(fractions.get(n, 0.0) for n in names_one)
    else:
        total_share = float(one_off_share)
        fractions = {n: total_share / max(len(names_one), 1) for n in names_one}
    if one_off_specs and fixed is None and not 0.0 < total_share < 1.0:
        raise ValueError(f"one_off_share must be in (0, 1) with one-off releases, got {one_off_share!r}")
    factory = acc.get_accountant(accountant, neighbouring)
    J = int(n_iter)
    w_raw = [float(shares[n]) for n in names]
    laplace = any(mechanisms[n] == "laplace" for n in names)
    if laplace:
        top = max(w_raw)
        w = [x / top for x in w_raw]
    else:
        total = math.fsum(w_raw)
        w = [x / total for x in w_raw]
    # joint accounting: the iteration's μ² per unit p⁻² (Σ w = 1 when composed separately)
    joint_w = None
    if joint is not None and specs and not laplace and not discrete:
        joint_w = float(joint(dict(zip(names, w))))
        if not 0.0 < joint_w <= math.fsum(w) * (1 + 1e-12):
            raise ValueError(f"joint sensitivity {joint_w!r} must be in (0, {math.fsum(w)!r}]: the joint "
                             "supremum is positive and never exceeds the separate composition")
    # each one-off release's weight, in the same units as w (w_one[name])
    if not one_off_specs or fixed is not None:
        w_one = {n: 0.0 for n in names_one}
    elif specs:
        total = math.fsum(w) if joint_w is None else joint_w
        w_one = {n: J * total * fractions[n] / (1.0 - total_share) for n in names_one}
    elif isinstance(one_off_share, Mapping):
        # nothing else in the plan: the one-offs share it in proportion to their fractions
        w_one = {n: fractions[n] / total_share for n in names_one}
    else:
        w_one = {n: 1.0 for n in names_one}     # nothing else in the plan: equal shares

    # noise(p) gives each release as (mechanism, a, b): a Gaussian multiplier z = a / b (its
    # sigma is Delta * a / b), a Laplace epsilon a * b
    if not laplace:
        def noise(p):
            """Every release Gaussian with z = p / sqrt(w) for the common scale p = s (fixed
            one-offs: their own z)."""
            if fixed is not None:
                return ([("gaussian", fixed[s.name], 1.0) for s in one_off_specs],
                        [("gaussian", p, math.sqrt(wr)) for wr in w])
            return ([("gaussian", p, math.sqrt(w_one[s.name])) for s in one_off_specs],
                    [("gaussian", p, math.sqrt(wr)) for wr in w])
        calibrate = _calibration._calibrate_noise_multiplier     # δ checked by the estimator
    else:
        c = math.sqrt(2.0 * math.log(1.25 / PAPER_DELTA_PER_RELEASE))

        def noise(p):
            """Laplace epsilon w p; Gaussian z = c / (w p), for the common scale p = e."""
            return ([("gaussian", c, w_one[s.name] * p) for s in one_off_specs],
                    [("laplace", wr, p) if mechanisms[n] == "laplace" else ("gaussian", c, wr * p)
                     for n, wr in zip(names, w)])
        calibrate = _calibration._calibrate_epsilon_per_release

    def leaf(spec, mech, a, b):
        if mech == "laplace":
            return acc.LaplaceEvent(a * b)
        if discrete:
            _, delta_int, m = lattices[spec.name]
            return acc.DiscreteGaussianEvent(a / b * delta_int, delta_int, m)
        return acc.GaussianEvent(a / b)

    def make_event(p):
        one, it = noise(p)
        parts = [leaf(s, *m) for s, m in zip(one_off_specs, one)]
        if it and joint_w is not None:
            step = acc.GaussianEvent(p / math.sqrt(joint_w))
        elif it:
            step = acc.ComposedEvent([leaf(s, *m) for s, m in zip(specs, it)])
        if it and sampling_rate is not None:
            # the releases of one iteration see the same subsample: one Gaussian mechanism on
            # the stacked statistic, multiplier 1/sqrt(sum 1/z_r^2) (exact; == z_r for one)
            if joint_w is None:
                step = acc.GaussianEvent(1.0 / math.sqrt(math.fsum((b / a) ** 2 for _, a, b in it)))
            step = acc.PoissonSampledEvent(float(sampling_rate), step)
        if it:
            parts.append(acc.SelfComposedEvent(step, J))
        inner = parts[0] if len(parts) == 1 and it else acc.ComposedEvent(parts)
        return acc.NeighbouringEvent(neighbouring, inner, unit)

    if not factory().supports(make_event(1.0)):
        raise ValueError(f"accountant={accountant!r} does not support this plan's releases "
                         f"(noise={noise!r}, neighbouring={neighbouring!r})")

    if noise_multiplier is not None:
        p = float(noise_multiplier)
        if not (p > 0 and math.isfinite(p)):
            raise ValueError(f"noise_multiplier must be finite and > 0, got {noise_multiplier!r}")
        if laplace:
            raise ValueError("noise_multiplier: a plan with Laplace releases is calibrated by epsilon")
    else:
        p = calibrate(make_event, float(epsilon), float(delta), accountant=factory)
    event = make_event(p)
    one, it = noise(p)
    releases = {}
    for spec, m in zip(one_off_specs, one):
        releases[spec.name] = _release(spec, *m, neighbouring, 1, lattices.get(spec.name))
    for spec, m in zip(specs, it):
        releases[spec.name] = _release(spec, *m, neighbouring, J, lattices.get(spec.name))
    spent = factory().compose(event).get_epsilon(float(delta))
    name = accountant if isinstance(accountant, str) else accountant.__name__
    joint_z = None if joint_w is None else p / math.sqrt(joint_w)
    return Plan(releases, event, name, neighbouring, float(spent), joint_z, unit, m_group)


def _release(spec, mech, a, b, neighbouring, count, lattice_=None):
    """A Release of multiplier z = a / b (Gaussian, σ = Δ a / b; discrete on ``lattice_`` =
    (γ, Δ_int, m): σ_Z = z Δ_int, recorded in real units γ σ_Z and γ Δ_int) or epsilon a b
    (Laplace)."""
    if lattice_ is not None:
        gamma, delta_int, m = lattice_
        return Release(spec.name, "discrete_gaussian", "l2", gamma * delta_int, gamma * (a / b * delta_int),
                       spec.shape, spec.symmetric, count, gamma, m)
    m = noised_size(spec)
    if mech == "gaussian":
        delta_ = spec.sensitivity("l2", neighbouring)
        return Release(spec.name, "gaussian", "l2", delta_, delta_ * a / b, spec.shape, spec.symmetric, count,
                       None, m)
    delta_ = spec.sensitivity("l1", neighbouring)
    return Release(spec.name, "laplace", "l1", delta_, delta_ / (a * b), spec.shape, False, count, None, m)


@dataclass(frozen=True)
class EventRelease:
    """A Gaussian release declared to :func:`make_event_plan`: what the plan cannot derive from a
    :class:`~dpem_fast._engine._statistics.StatSpec`.

    Attributes
    ----------
    name : str
    sensitivity : float
        l2-sensitivity under the plan's relation and unit (the model's derivation; a person-level
        model declares its group's).
    shape : tuple
    count : int
        Releases in one fit (the public bound of an open-ended one).
    size : int or None
        Noised coordinates.
    noise_scale : callable or None
        ``p -> σ`` of the calibrated parameter ``p``; default ``sensitivity * p`` (``p`` the noise
        multiplier).  A mechanism stated by another parameter gives its own (a selection's
        ``μ = 1/z``: ``σ = Δ / μ``), so that σ is the float the mechanism defines.
    """

    name: str
    sensitivity: float
    shape: tuple
    count: int = 1
    size: int | None = None
    noise_scale: Callable | None = None

    def release(self, p):
        sigma = self.sensitivity * p if self.noise_scale is None else self.noise_scale(p)
        return Release(self.name, "gaussian", "l2", self.sensitivity, sigma, self.shape, False, self.count,
                       None, self.size)


def make_event_plan(make_event, releases, *, epsilon, delta, neighbouring, accountant, max_rows_per_group=None,
                    noise_multiplier=None, delta_tail=0.0, open_ended=(), xtol=None) -> Plan:
    """The plan of a mechanism given by its event factory: calibrate ``p`` so that
    ``make_event(p)`` meets (ε, δ - ``delta_tail``), and record ``releases`` at that ``p``.

    Parameters
    ----------
    make_event : callable
        ``p -> NeighbouringEvent`` of the whole fit, non-increasing in privacy loss as ``p`` (a
        noise multiplier) grows, tagged with ``neighbouring`` and the plan's unit.
    releases : sequence of EventRelease
    epsilon, delta : float
        Target of the whole fit (``epsilon`` is ignored with ``noise_multiplier``).
    neighbouring : {"add_remove", "replace"}
    accountant : str or PrivacyAccountant subclass
    max_rows_per_group : int, optional
        m of a person-level plan (the releases' sensitivities are already the group's).
    noise_multiplier : float, optional
        ``p`` chosen by the caller (e.g. calibrated with public quantities the releases' bounds
        are not yet known for): no calibration, the plan records what it spends.
    delta_tail : float
        δ spent outside the event (:attr:`Plan.delta_tail`).
    open_ended : sequence of str
        Released statistics whose count is random (:attr:`Plan.open_ended`).
    xtol : float, optional
        The calibration's tolerance on ``log p`` (the accounting default if None).
    """
    m_group = check_max_rows_per_group(max_rows_per_group)
    unit = "row" if m_group is None else "group"
    releases = tuple(releases)
    if not all(isinstance(r, EventRelease) for r in releases):
        raise TypeError("releases must be EventRelease declarations")
    names = [r.name for r in releases]
    if len(set(names)) != len(names) or not set(open_ended) <= set(names):
        raise ValueError(f"releases must have distinct names and open_ended must name some of them, got "
                         f"{names} and {list(open_ended)}")
    delta_event = float(delta) - float(delta_tail)
    factory = acc.get_accountant(accountant, neighbouring)
    if noise_multiplier is None:
        kw = {} if xtol is None else {"xtol": xtol}
        p = _calibration._calibrate_noise_multiplier(make_event, epsilon, delta_event, accountant=factory, **kw)
    else:
        p = float(noise_multiplier)
        if not (p > 0 and math.isfinite(p)):
            raise ValueError(f"noise_multiplier must be finite and > 0, got {noise_multiplier!r}")
    event = make_event(p)
    if not (isinstance(event, acc.NeighbouringEvent) and event.neighbouring == neighbouring
            and event.privacy_unit == unit):
        raise ValueError(f"make_event must give a NeighbouringEvent tagged ({neighbouring!r}, {unit!r}), got "
                         f"{event!r}")
    spent = factory().compose(event).get_epsilon(delta_event)
    name = accountant if isinstance(accountant, str) else accountant.__name__
    return Plan({r.name: r.release(p) for r in releases}, event, name, neighbouring, float(spent), None, unit,
                m_group, float(delta_tail), tuple(open_ended))


def stacked_plan(plan, names, m):
    """``plan`` with each release of ``names`` stacked ``m`` times: shape ``(m, *shape)``, the
    same noise scale, mechanism and event per entry, so a :class:`~._release.ReleaseLayer` of it
    draws ``m`` i.i.d. releases of each at the plan's scale in one call (the auditor's trials, on
    the code path of every fit).  The other releases and the event are the plan's."""
    m = int(m)
    if m < 1:
        raise ValueError(f"m must be a positive integer, got {m}")
    releases = dict(plan.releases)
    for g in names:
        releases[g] = dataclasses.replace(plan.releases[g], shape=(m, *tuple(plan.releases[g].shape)))
    return dataclasses.replace(plan, releases=releases)
