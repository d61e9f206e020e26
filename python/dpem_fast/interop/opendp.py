"""A private estimator as an OpenDP measurement (issue 38).

:func:`make_measurement` wraps an unfitted private estimator as an OpenDP ``Measurement``
(``dp.m.make_user_measurement``): its function fits a clone of the estimator on the rows and
returns the fitted model's public parameters and its privacy record; its privacy map is our
claim, so that the fit can enter an OpenDP compositor, odometer or privacy filter like any
OpenDP measurement.

Trust flags.  ``make_user_measurement`` is behind OpenDP's ``"contrib"`` and
``"honest-but-curious"`` features (:func:`make_measurement` enables both): OpenDP does not
check a user measurement's privacy map against its function — it *trusts* that our map bounds
the privacy loss of our fit (the derivations and tests of dpem_fast stand behind it, not
OpenDP's proofs), and that the function has no side effects.  The one side effect a fit can
have is a charge to a ``budget`` ledger the estimator holds: the OpenDP accounting is then in
addition to that ledger's, never instead of it.

Metrics, one per relation (a row-level fit; a person-level one is refused — its unit is a
group, which a row metric does not count):

* ``neighbouring="add_remove"`` → ``dp.insert_delete_distance()`` (rows inserted or deleted);
* ``neighbouring="replace"`` → ``dp.hamming_distance()`` (rows replaced in place, same size; a
  replacement is *two* steps of the symmetric distance, so that metric would misstate the claim).
  The row count is then public: ``n_samples`` may be given and a data set of another size is
  refused.

Both are OpenDP's *ordered* metrics: distance 0 is the very same sequence of rows.  The unordered
ones (``symmetric_distance``, ``change_one_distance``) would claim (0, 0) between two orders of
the same rows, and a fit's float sums (or a DP-SEP pass) may differ in the last bits between
orders; ``dp.t.make_ordered_random`` turns a symmetric-distance pipeline into an ordered one.

Measures: ``"approximate"`` (default): ``dp.approximate(dp.max_divergence())``, the map's value
at ``d_in = 1`` is ``(epsilon_spent, delta)`` of the plan (the record's claim, its ``delta_tail``
included); ``"zcdp"``: ``dp.zero_concentrated_divergence()``, the ρ of a plan accounted with zCDP
(discrete Gaussian noise, ``accountant="zcdp"``).  At ``d_in = k > 1`` the map is group privacy,
exact for plans without subsampling or selection: every Gaussian release at k times its
sensitivity (multiplier z/k), every Laplace ε times k, every discrete Gaussian ρ times k²,
re-accounted with the plan's own accountant at the same δ (ρ for zCDP); a subsampled or
selection plan refuses ``d_in > 1``.  ``d_in = 0`` costs nothing.

Privacy: the map reads the plan's public event only; the function returns the fitted public
parameters (:func:`~dpem_fast._registry.public_state`: never the key, ``random_state``, the
ledger or ``diagnostics_``, which is not private) and ``privacy_``.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import accounting as acc
from ..accounting import PrivacyLeakWarning
from .._registry import public_state

__all__ = ["make_measurement"]

#: The output measures :func:`make_measurement` takes
MEASURES = ("approximate", "zcdp")


def _import():
    try:
        import opendp.prelude as dp
    except ImportError as exc:          # pragma: no cover - the extra is installed in CI
        raise ImportError("dpem_fast.interop.opendp needs OpenDP: pip install \"dpem_fast[interop]\" "
                          "(opendp==0.16.0)") from exc
    return dp


def make_measurement(estimator, n_features, *, n_samples=None, measure="approximate"):
    """An OpenDP ``Measurement`` that fits a clone of ``estimator`` (module docstring).

    Parameters
    ----------
    estimator : private estimator
        Unfitted (it is cloned for every invocation), with a finite ``epsilon``, row-level.
    n_features : int
        Columns of the rows (the input domain holds 2-d numeric arrays, or DataFrames, of this
        width).
    n_samples : int, optional
        Under replace-one, the public row count (DP-SEP needs it); the domain then holds data
        sets of exactly that size.  Refused under add/remove, where the count is private.
    measure : {"approximate", "zcdp"}
        OpenDP's approximate DP ``(ε, δ)`` or zCDP ``ρ`` (plans accounted with ``"zcdp"`` only).

    Returns
    -------
    opendp.mod.Measurement
        ``meas(X)`` returns ``{"params": {name: value}, "privacy_": PrivacyRecord}``;
        ``meas.map(1)`` is the claim.
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    if estimator._max_rows_per_group() is not None:
        raise ValueError("max_rows_per_group: a person-level fit's unit is a group, which an OpenDP row metric "
                         "does not count; account it with dpem_fast.interop.to_dp_event (its 'one' is one group)")
    if getattr(estimator, "random_state", None) is not None:
        warnings.warn("random_state: every invocation of the measurement fits a clone with this fixed seed, so "
                      "all of them draw the same noise and their differences are noise-free; leave it None "
                      "(fresh OS entropy per invocation)", PrivacyLeakWarning, stacklevel=2)
    rel = estimator._relation()
    if n_samples is not None and rel != "replace":
        raise ValueError("n_samples: the row count is private under add/remove; leave it None")
    plan = estimator.privacy_plan(n_features, n_samples)
    if measure == "zcdp" and plan.accountant != "zcdp":
        raise ValueError(f"measure='zcdp': this plan is accounted with {plan.accountant!r}; give measure="
                         "'approximate', or fit with accountant='zcdp' (or discrete Gaussian noise)")
    dp = _import()
    dp.enable_features("contrib", "honest-but-curious")
    d, n = int(n_features), None if n_samples is None else int(n_samples)
    delta = float(estimator.delta)

    def member(X):
        shape = np.shape(X)
        return len(shape) == 2 and shape[1] == d and (n is None or shape[0] == n)

    domain = dp.user_domain(f"Rows(n_features={d}{'' if n is None else f', n_samples={n}'})", member)
    metric = dp.insert_delete_distance() if rel == "add_remove" else dp.hamming_distance()
    output = dp.approximate(dp.max_divergence()) if measure == "approximate" else dp.zero_concentrated_divergence()

    def function(X):
        if not member(X):           # the domain's public shape (the count only where it is public)
            raise ValueError(f"X: the measurement's domain holds {d}-column data"
                             + ("" if n is None else f" of {n} rows"))
        model = _clone(estimator).fit(X)
        state = public_state(model, dict(vars(model)))
        return {"params": {k: v for k, v in state.items() if k.endswith("_") and k != "privacy_"},
                "privacy_": model.privacy_}

    def privacy_map(d_in):
        return _loss(plan, int(d_in), delta, measure)

    return dp.m.make_user_measurement(domain, metric, output, function, privacy_map)


def _clone(estimator):
    from sklearn.base import clone
    return clone(estimator)


def _loss(plan, k, delta, measure):
    """The map at ``d_in = k``: the plan's claim at 1, group privacy above (module docstring)."""
    if k < 0:
        raise ValueError(f"d_in must be >= 0, got {k}")
    if k == 0:
        return (0.0, 0.0) if measure == "approximate" else 0.0
    event = plan.event if k == 1 else _scaled(plan.event, k)
    accountant = acc.get_accountant(plan.accountant, plan.neighbouring)().compose(event)
    if measure == "zcdp":
        return float(accountant.rho)
    eps = plan.epsilon_spent if k == 1 else float(accountant.get_epsilon(delta - plan.delta_tail))
    return (float(eps), float(delta))


def _scaled(e, k):
    """``e`` at k times every sensitivity (group privacy of k rows; module docstring)."""
    if isinstance(e, acc.NeighbouringEvent):
        return acc.NeighbouringEvent(e.neighbouring, _scaled(e.event, k), e.privacy_unit)
    if isinstance(e, acc.GaussianEvent):
        return acc.GaussianEvent(e.noise_multiplier / k)
    if isinstance(e, acc.LaplaceEvent):
        return acc.LaplaceEvent(e.epsilon * k)
    if isinstance(e, acc.DiscreteGaussianEvent):
        return acc.DiscreteGaussianEvent(e.sigma, e.sensitivity * k, e.dimension)
    if isinstance(e, acc.SelfComposedEvent):
        return acc.SelfComposedEvent(_scaled(e.event, k), e.count)
    if isinstance(e, acc.ComposedEvent):
        return acc.ComposedEvent([_scaled(x, k) for x in e.events])
    raise ValueError(f"d_in > 1: group privacy of a plan with {type(e).__name__} (subsampling or selection) is "
                     "not derived; this measurement's map is defined at d_in <= 1 only")
