"""The model hooks of :class:`~dpem_fast._engine._base.PrivateEM` and their defaults.

A model overrides the hooks it needs (the contract of each is in ``PrivateEM``'s docstring,
"Model hooks", and in each hook's own docstring below); the engine's fit loop, plan, charge
and record stay in :mod:`~dpem_fast._engine._base`.  Besides the defaults, the hooks that
widen a statistic's sensitivity for float rounding (:meth:`ModelHooks._iteration_specs`,
:meth:`ModelHooks._rounding_factor`, :meth:`ModelHooks._start_release_specs`) live here, from
public quantities only (:mod:`~dpem_fast._engine._specs`, "Rounding")."""
from __future__ import annotations

import numpy as np

from .._dpcore._contract import superblock_rows
from .._preprocess import resolve_domain
from . import _specs
from ._specs import float32_specs, float64_exact_sum_factor, float64_rounding_factor, rounding_specs

__all__ = ["ModelHooks"]


class ModelHooks:
    """The model hooks of :class:`~dpem_fast._engine._base.PrivateEM` with their defaults (a
    mixin: the engine's base class inherits them, a model overrides what it needs)."""

    def _check_model_params(self, n_samples, n_features):
        """The model's checks that read the rows' shape or join several parameters (each
        parameter alone is declared in ``_parameter_constraints``), before anything is
        charged.  ``n_samples`` is the row count where it is public (replace-one of rows, or a
        non-private fit), else None: a check of ``n_samples`` applies only when it is not None,
        and a message quotes only that public value.  The default: no fewer rows than components."""
        K = getattr(self, "n_components", None)
        if n_samples is not None and K is not None and n_samples < K:
            raise ValueError(f"n_samples={n_samples} should be >= n_components={K}")

    def _statistics_task(self):
        """The statistics kernel ``kernel(X, params, domain, n_threads) -> Statistics``, as a
        module-level function or a ``functools.partial`` of one binding public
        hyperparameters only (see PrivateEM's docstring: it goes into every Dask task)."""
        raise NotImplementedError(f"{type(self).__name__} defines no statistics kernel")

    def _float32_statistics(self):
        """True when the model's statistics kernel has a float32 path (single precision for
        float32 rows, :mod:`~dpem_fast._engine._specs`, "Float32 rows").  A capability only:
        whether a fit uses it is :meth:`_float32_path`.  Default False: float32 rows are
        computed in float64 and the specs hold as declared."""
        return False

    def _float32_path(self):
        """True when float32 rows of this fit run the kernel's float32 path; the engine then
        widens every iteration statistic's sensitivity for float rounding
        (:func:`~dpem_fast._engine._specs.float32_specs`).  That bound holds row by row, so only
        under row-level replace-one: under add/remove a removed row moves every later row to
        another float lane, and so does replacing one group's rows by a group of another size
        in a person-level fit (``max_rows_per_group``); there float32 rows are computed in
        float64.  Public parameters only."""
        return (self._float32_statistics() and self.neighbouring == "replace"
                and self._max_rows_per_group() is None)

    def _block_rows(self, n_rows, d):
        """At most how many rows one float64 partial of the model's kernel sums in floats (a block
        of its plan, ``dpc_contract.h``) when it is given ``n_rows`` rows of ``d`` features; public
        quantities only.  Default: the rows of one call, at most ``min(n_rows, superblock_rows(d))``
        (rows in this process reach a kernel one superblock at a time, and a Dask task cuts its
        chunk into superblocks, :func:`~dpem_fast._engine._base._statistics_of`), since a
        partial never sums more rows than its call gets.  A model whose kernel cuts rows into the contract's blocks returns
        its block size (:mod:`~dpem_fast._engine._specs`, "Rounding", (e))."""
        return max(1, min(int(n_rows), superblock_rows(int(d))))

    def _rounding_factor(self, d, n_public):
        """The float64 rounding widening of this fit's iteration statistics
        (:func:`~dpem_fast._engine._specs.float64_rounding_factor`; module docstring of
        :mod:`~dpem_fast._engine._specs`, "Rounding").  Row-level replace-one with ``n_public``
        rows: every other partial is bit-identical, ``b`` the blocks of a call on at most
        ``n_public`` rows.  Add/remove and person-level fits (``n_public`` None: a removed row, or
        a group of another size, moves every later row to another block): the bound at the
        public cap :data:`~dpem_fast._engine._specs.ROUNDING_ROW_CAP`, ``b`` the blocks of one
        kernel call, which never gets more than one superblock of rows (:meth:`_block_rows` of
        ``superblock_rows(d)``); a fit on more rows is refused before the charge
        (:func:`~dpem_fast._engine._specs.check_row_cap`)."""
        if n_public is not None and not self._count_private():
            return float64_rounding_factor(n_public, self._block_rows(n_public, d))
        return float64_rounding_factor(_specs.ROUNDING_ROW_CAP, self._block_rows(superblock_rows(int(d)), d),
                                       shifts=True)

    def _start_release_specs(self, d, n_public):
        """The specs the plan holds for a private start (:meth:`_start_specs`, or ``()``): its
        non-integer sums, whose per-row terms are summed exactly (``_start.cell_sums``), widened
        by :func:`~dpem_fast._engine._specs.float64_exact_sum_factor` at the public row count of
        a row-level replace-one fit, else at the public cap; its integer counts as declared."""
        start = tuple(self._start_specs(d))
        if not start:
            return ()
        public = n_public is not None and not self._count_private()
        return rounding_specs(start, float64_exact_sum_factor(n_public if public else None))

    def _one_off_releases(self, d):
        """A model's own releases made once before the loop, in the same plan, and their shares
        of it: ``(specs, {name: share})`` (default none; the mixed model's marginals).  The model
        makes them in :meth:`_private_start`, which then runs with or without a private start."""
        return (), {}

    def _iteration_specs(self, d, dtype=np.float64, n_public=None):
        """The specs a fit on rows of ``dtype`` releases: :meth:`_statistic_specs`, widened by
        :func:`~dpem_fast._engine._specs.float32_specs` when float32 rows run the float32 path
        (:meth:`_float32_path`), and by the float64 rounding factor (:meth:`_rounding_factor`).
        The dtype and ``n_public`` (the row count where it is public, else None) are public."""
        specs = tuple(self._statistic_specs(d))
        if np.dtype(dtype) == np.float32 and self._float32_path():
            specs = float32_specs(specs)
        return rounding_specs(specs, self._rounding_factor(d, n_public))

    def _statistics(self, X, params, domain, n_threads):
        """The statistics of the rows ``X`` (in memory: the kernel of :meth:`_statistics_task`)."""
        return self._statistics_task()(X, params, domain, n_threads)

    def _rows_task(self):
        """The model's row check / transform ``f(X) -> X`` as a module-level function or a
        ``functools.partial`` of one binding public parameters, or None (rows are fitted as
        they are).  Runs in every Dask task; evaluated on the client, so a bad
        hyperparameter fails before anything is sent."""
        return None

    def _prepare_rows(self, X):
        """Model-specific input checks and row-wise, data-independent transforms (e.g. a
        binarisation threshold) — :meth:`_rows_task`; returns the rows to fit."""
        task = self._rows_task()
        return X if task is None else task(X)

    def _mechanisms(self):
        """{statistic name: "gaussian" | "laplace"}; None = all Gaussian."""
        return None

    def _shares(self):
        """{statistic name: relative share of each iteration's budget}; None = equal."""
        return None

    def _describe(self):
        """(mechanism text, tuple of notes) for ``privacy_``."""
        return type(self).__name__, ()

    def _joint_sensitivity(self, a, neighbouring):
        """``{name: Δ_r²/σ_r²} -> sup over neighbours of Σ_r ‖δ_r‖²/σ_r²``, or None to compose
        an iteration's releases separately (the default)."""
        return None

    def _start_specs(self, n_features):
        """The one-off releases of a private start (:mod:`~dpem_fast._engine._start`), or ``()``
        for a data-independent (or user-given) start.  They are in the fit's one plan, on
        :data:`~dpem_fast._engine._start.START_SHARE` of it, charged with it before any
        statistic; public parameters only decide whether there are any."""
        return ()

    def _private_start(self, rows, layer, domain, key, n_threads):
        """Initial parameters from the :meth:`_start_specs` releases, made through ``layer``
        (each once, index 0); everything after a release is post-processing."""
        raise NotImplementedError(f"{type(self).__name__} declares start releases but no private start")

    def _n_release_rounds(self):
        """J: rounds of statistics → release → update (from public parameters only).

        Default ``max_iter``.  A one-release model (e.g. factor analysis) returns 1 and
        iterates on the released statistics inside its update (post-processing).
        """
        return self.max_iter

    def _n_averaged(self, n_iter):
        """How many final iterations update from the running mean of the noisy statistics
        (0 or 1: none)."""
        return 0

    def _column_values(self, n_features):
        """``{column: its public values}`` for the columns outside :meth:`_domain_columns` of a
        ball model (a mixed table's categorical codes), ``{}`` when the domain covers every
        column.  The audit's canaries and base rows take these values there."""
        return {}

    def _extreme_rows(self, n_features, key):
        """Rows (m, n_features) in the units of X at which one row's contribution to the
        statistics is largest in the model's *fixed* domain — from the domain and public
        parameters alone (``key`` seeds any random ones) — or None for a model with a declared
        domain, whose boundary the audit searches itself.  The canary candidates of
        :func:`dpem_fast.audit.audit`; no fit calls it."""
        return None

    def _check_plan(self, plan, n_public, rounds):
        """Refuse (``ValueError``) a fit that is hopeless from public quantities alone: the
        calibrated ``plan`` (its releases' noise scales), the row count ``n_public`` where it is
        public (replace-one; else None) and the rounds J.  Runs before the budget is charged
        and before any statistic of the data is computed.  Default: nothing to refuse."""

    def _domain_columns(self, n_features):
        """The columns of the rows that the ball domain maps (an integer index array into the
        ``n_features`` columns), or None for all of them (the default).  A model whose rows
        also hold columns that live in a fixed domain of their own (the category codes of a
        mixed table) returns its numeric columns: the declared domain, the private domain
        estimate (its histograms: one count per *domain* column and row) and the data's box
        then cover those columns only.  Public parameters only."""
        return None

    def _releases_radius(self, source, n_public):
        """True when a private fit releases the radius of its rows inside the domain's box
        (:mod:`~dpem_fast._engine._radius`, on its share of the plan) and works in the ball of
        that radius; ``source``: the domain's source (``"declared"``, ``"estimate"``, ``"data"``,
        None); ``n_public``: the row count where it is public, else None.  Default False;
        public quantities only."""
        return False

    def _declared_domain(self, n_domain):
        """The declared domain of ``n_domain`` columns (:func:`~dpem_fast._preprocess.resolve_domain`
        of ``data_norm`` and ``bounds``); a model whose ``bounds`` take another public form
        (per column name) converts them here.  Reads only the declaration."""
        return resolve_domain(n_domain, self.data_norm, self.bounds)

    def _working_domain(self, domain):
        """The domain the fit works in, from the declared / estimated / data-derived one
        (ball models, private fits).  A model may only make the map coarser from public
        quantities (e.g. one scale for every feature: ``scale`` raised to its maximum keeps every
        clipped row in the unit ball, so every sensitivity still holds).  Default: unchanged."""
        return domain

    def _finish(self, params, noisy, ctx):
        """Post-processing after the last round of a private fit: ``params`` (the last
        update's), ``noisy`` and ``ctx`` what that update saw (the released, possibly
        tail-averaged, statistics and their public release records).  Returns the params
        handed to ``_set_fitted``; e.g. a mixture drops components whose noisy counts are
        indistinguishable from zero.  Default: ``params`` unchanged."""
        return params
