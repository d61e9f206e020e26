"""The one base of every private estimator, and the loops built on it.

:class:`PrivateEstimator` owns what every private estimator does the same way, so that no
model restates it:

* the **common parameters and their checks**, declared once: ``epsilon`` (``inf``: no
  privacy), ``delta``, the neighbouring relation (a model declares the relations it is
  accounted under in ``_relations``; one that takes no ``neighbouring`` parameter uses the
  first), ``budget`` (a :class:`~dpem_fast.accounting.BudgetLedger` of that relation, refused
  for a non-private fit), ``n_threads``, ``random_state`` and ``verbose``;
* the **parameter checks** (:meth:`_validate_params`) of what each class declares in
  ``_parameter_constraints`` (:mod:`dpem_fast._validation`), merged along its bases;
* the **key** of a fit (:meth:`_fit_key`: from ``random_state``, or the OS);
* the **public row count** a model may use (:meth:`_public_rows`): the count under
  replace-one, ``None`` under add/remove, where it is private, and for every person-level fit;
* **person-level privacy** (issue 27): ``max_rows_per_group`` (m, public) and ``fit``'s
  ``groups`` (:meth:`_resolve_groups`): the rows are bounded to at most m per group and every
  sensitivity of the plan is the group's (:mod:`~dpem_fast._engine._groups`); the relation
  is then "add/remove or replace one group's rows", and the ledger must be of that unit;
* **registry membership** (:class:`~dpem_fast._registry.Registered`: saved attributes, the
  command line, ``save`` and what a pickle carries).

Three loops run on it, each on a :class:`~dpem_fast._engine._loops.PrivateRun`
(:meth:`~._loops.PrivateRun.of`), whose are the plan's one budget charge before any statistic of
the data is computed, the releases and the one privacy record (:meth:`~._loops.PrivateRun.once`):

* **full pass** — :class:`~dpem_fast._engine._base.PrivateEM`: every round reads every row
  (EM: Gaussian, Bernoulli and gradient-EM mixtures, k-means, factor analysis);
* **minibatch** — :meth:`~._loops.PrivateRun.minibatches`: each round keeps every record
  independently with a public probability q (the amplification is in the plan:
  :class:`~dpem_fast.accounting.PoissonSampledEvent`); private LDA's SVI;
* **sequential** — :meth:`~._loops.PrivateRun.sequence`: one release per step, drawn in bulk
  from the release layer for a compiled loop (DP-SEP).

A model hook receives a :class:`Context` — the round, the plan's public release records and
the public row count or ``None`` — never side-effect attributes of the fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator

from .. import accounting as acc
from .._registry import Registered
from .._rng import make_key
from .._validation import BOOLEAN, check_delta, declared_constraints, instance_of, interval, options, validate_params
from ..accounting._validation import NEIGHBOURING_RELATIONS
from ._groups import check_max_rows_per_group, split_groups

__all__ = ["PrivateEstimator", "Context", "check_ledger"]


@dataclass(frozen=True)
class Context:
    """What a model's update may read besides the released values: public quantities only.

    Attributes
    ----------
    t : int
        The round (0-based).
    releases : dict of str to Release
        The plan's public release records (noise scales, sensitivities).
    n_public : int or None
        The number of rows where it is public (replace-one); ``None`` under add/remove.
    domain : DataDomain or None
        The fit's data domain (declared, or released by the private estimate; a
        ``bounds="from_data"`` fit is flagged not private), for projections into its image
        (:func:`~dpem_fast._preprocess.project_into_domain`); None for a fixed-domain model.
    n_threads : int
        The threads the fit's kernels use (public), which the update's compiled
        post-processing may use too; its result never depends on it.
    """

    t: int
    releases: dict
    n_public: int | None = None
    domain: object = None
    n_threads: int = 1


class PrivateEstimator(Registered, BaseEstimator):
    """Base class of every private estimator (not for direct use; see the module docstring).

    A subclass lists its parameters in its own ``__init__`` (scikit-learn's ``get_params``),
    declares ``_relations``, the neighbouring relations it is accounted under (the first is
    the default of a model without a ``neighbouring`` parameter), and the constraints of its
    own parameters in ``_parameter_constraints`` (those here cover the common ones).
    """

    _relations = ("replace", "add_remove")
    _parameter_constraints = {
        "epsilon": [interval("real", 0, math.inf, "right", hint="epsilon=inf fits without privacy")],
        "delta": [interval("real", 0, 1, "neither")],
        "neighbouring": [options(*NEIGHBOURING_RELATIONS)],
        "budget": [None, instance_of(acc.BudgetLedger)],
        "n_threads": [None, interval("int", 1), interval("int", None, -1, hint="None or -1: all cores")],
        "random_state": [None, interval("int", 0), instance_of(np.random.SeedSequence, np.random.Generator,
                                                              np.random.RandomState)],
        "verbose": [interval("int", 0), BOOLEAN],
        "max_rows_per_group": [None, interval("int", 1)],
    }
    #: The loop the estimator runs (module docstring): ``"full_pass"``, ``"minibatch"`` or
    #: ``"sequential"``; the audit picks its target by it, never by the model's class.
    _loop = None

    # ------------------------------------------------------------ parameters
    def _relation(self):
        """The fit's neighbouring relation."""
        return getattr(self, "neighbouring", self._relations[0])

    def _max_rows_per_group(self):
        """m of a person-level fit (validated), or None for a row-level one."""
        return check_max_rows_per_group(getattr(self, "max_rows_per_group", None))

    def _privacy_unit(self):
        """``"group"`` for a person-level fit (``max_rows_per_group`` set), else ``"row"``."""
        return "row" if self._max_rows_per_group() is None else "group"

    def _resolve_groups(self, X, groups, private):
        """``(X, groups)`` of a ``fit(X, groups=...)`` call, checked against the parameters
        before anything is read or charged: a column name is taken out of a DataFrame X;
        ``groups`` needs ``max_rows_per_group`` (the public bound) and a private fit, and
        ``max_rows_per_group`` needs ``groups``.  The ids themselves are validated against the
        rows by :func:`~dpem_fast._engine._groups.check_groups`."""
        m = self._max_rows_per_group()
        if groups is None:
            if m is not None:
                raise ValueError(f"groups: max_rows_per_group={m} asks for person-level privacy but fit got "
                                 "no groups; pass groups= (one id per row, or a DataFrame column name), or "
                                 "set max_rows_per_group=None for row-level privacy")
            return X, None
        if m is None:
            raise ValueError("max_rows_per_group: fitting with groups needs the public bound m on the rows "
                             "kept per group (e.g. max_rows_per_group=10): a group's contribution, and "
                             "every sensitivity, is m times a row's")
        if not private:
            raise ValueError("groups: a non-private fit (epsilon=inf) has no privacy unit; drop groups and "
                             "max_rows_per_group, or give a finite epsilon")
        return split_groups(X, groups)

    def _is_private(self):
        """Whether the fit is private (read after the constraints): ``epsilon`` is finite."""
        return not math.isinf(self.epsilon)

    def _validate_params(self):
        """The checks that read no data, before anything is read or charged: the declared
        constraints, then the common joint ones (δ policy, relation, ledger); True if private."""
        validate_params(declared_constraints(type(self)), self.get_params(deep=False))
        private = self._is_private()
        if private:
            check_delta(self.delta, "delta")        # the public δ policy: refuse or warn
        rel = self._relation()
        if rel not in self._relations:
            raise ValueError(f"neighbouring must be one of {self._relations} for {type(self).__name__}, "
                             f"got {rel!r}")
        from_data = isinstance(getattr(self, "bounds", None), str)      # bounds="from_data": not private
        check_ledger(getattr(self, "budget", None), private and not from_data, rel, self._privacy_unit())
        return private

    def privacy_plan(self, n_features, n_samples=None):
        """The calibrated privacy plan of a fit on rows of ``n_features`` features, before any fit.

        Reads no data and charges nothing: from the parameters and the public shape only, so that
        a caller can check a budget first (``plan.to_dp_event()``, ``budget.check(plan.event)``,
        :mod:`dpem_fast.interop`).  The estimator is not changed.

        Parameters
        ----------
        n_features : int
            Columns of the rows to be fitted (the vocabulary size of a topic model).
        n_samples : int, optional
            The row count, read only where it is public (row-level replace-one): a model whose
            plan depends on it there (DP-SEP) needs it; elsewhere it is ignored.

        Returns
        -------
        Plan
            ``event`` (tagged with the relation and the unit), ``epsilon_spent`` at ``delta -
            delta_tail``, the ``releases``; the fit's ``privacy_`` records the same event.

        .. versionadded:: 0.1 (issue 38)
        """
        from sklearn.base import clone

        if not self._validate_params():
            raise ValueError("epsilon: a non-private estimator (epsilon=inf) has no privacy plan")
        d = int(n_features)
        if d != n_features or d < 1:
            raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
        n_public = None if n_samples is None else self._public_rows(int(n_samples))
        return clone(self)._plan_for(d, n_public)      # a clone: no state is left on self

    def _plan_for(self, d, n_public):
        """The plan of :meth:`privacy_plan` on a clone (each loop's hook)."""
        raise NotImplementedError(f"{type(self).__name__} has no privacy plan before a fit")

    # ------------------------------------------------------------------- fit
    def _fit_key(self):
        """The fit's key: from ``random_state`` (an int, SeedSequence or Generator) or the OS."""
        return make_key(self.random_state)

    def _count_private(self):
        """Whether the row count is private (add/remove, or any person-level fit): a model that
        divides by it then releases a noisy count (``row_count``) instead of reading it."""
        return self._public_rows(0) is None

    def _public_rows(self, n):
        """``n`` where the row count is public (replace-one of rows), else None (add/remove, and
        every person-level fit: a group's row count changes between neighbours)."""
        return int(n) if self._relation() == "replace" and self._privacy_unit() == "row" else None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


def check_ledger(budget, private, relation, unit):
    """A ``budget`` ledger (or None) fits the release: the fit is private, accounted under the
    ledger's neighbouring ``relation`` and per its privacy ``unit``."""
    if budget is None:
        return
    if not private:
        raise ValueError("budget: a non-private fit (epsilon=inf, or bounds='from_data') cannot be charged to a "
                         "ledger")
    if budget.neighbouring != relation:
        raise ValueError(f"budget: the ledger accounts under neighbouring={budget.neighbouring!r}, "
                         f"this fit under neighbouring={relation!r}")
    if budget.privacy_unit != unit:
        raise ValueError(f"budget: the ledger accounts per {budget.privacy_unit!r}, this fit per {unit!r} "
                         "(max_rows_per_group); row-level and person-level spends never mix")

