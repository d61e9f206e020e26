"""The private-EM engine: one fit loop, one release layer and one privacy record for every model.

A model (a subclass of :class:`PrivateEM`) supplies three things:

1. a **statistics kernel** — :meth:`PrivateEM._statistics_task`: rows + current parameters →
   named, additive statistics (:class:`~dpem_fast._engine._statistics.Statistics`), as a
   module-level function and the model's public hyperparameters it reads — what a Dask
   worker receives (never the estimator, see :mod:`~dpem_fast._engine._sources._dask`);
2. a **spec** of each statistic — :meth:`PrivateEM._statistic_specs`: shape, symmetry and
   sensitivity under each neighbouring relation, derived in the model's docstring;
3. an **update** — :meth:`PrivateEM._update`: noisy statistics → parameters (the M-step
   and its projections), plus :meth:`PrivateEM._exact_update` for ``epsilon=inf``.

The engine owns everything privacy-critical: argument checks, the data domain (declared,
privately estimated, or an explicit non-private opt-in) and the row clipping it implies,
the key, the calibration of the plan, the budget charge, the iteration loop, the release
of every statistic (only through :class:`~dpem_fast._engine._release.ReleaseLayer`), and
``privacy_`` / ``diagnostics_``.  The update sees the noisy statistics and the plan's
public noise scales, never the exact statistics.  A gradient, natural-gradient or SVI
estimator that does not use the loop can still use :func:`make_plan` and the release
layer directly.

Order of a private fit (what touches the data, and when):

1. arguments, the declared domain and user-supplied initial parameters are checked;
2. the plan is calibrated from public quantities (d, the specs, J, ε, δ, the relation);
3. the model may refuse a fit that is hopeless from public quantities (``_check_plan``);
   then the whole plan is charged to the ``budget`` ledger, if any — before any statistic of
   the data is computed (only input validation has read the data until here);
4. if no domain was declared, it is estimated privately (two released histograms);
5. the initialisation is data-independent (or the user's public parameters), or a private
   start (``_start_specs`` / ``_private_start``: two releases in the same plan, on
   :data:`~dpem_fast._engine._start.START_SHARE` of it, :mod:`~dpem_fast._engine._start`);
6. J iterations: statistics → release → update; no data-dependent stopping;
7. ``_finish``: post-processing of the last update's released statistics.

J is the number of release rounds, :meth:`PrivateEM._n_release_rounds` (default
``max_iter``): it sets the loop length, the plan's J (each iteration statistic is released
J times), ``privacy_.n_iter`` and ``n_iter_`` (which a model's ``_set_fitted`` may
refine).  A model that releases its statistics once and then iterates on the released
values alone (factor analysis: one release of the second moment, then EM as
post-processing) returns 1 and runs its iterations inside ``_update`` / ``_exact_update``.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from .. import accounting as acc
from .._preprocess import DataDomain, usable_box
from .._progress import Progress, plan_spent
from .._rng import make_key
from .._threads import blas_single_thread, effective_n_threads
from .._validation import ARRAY_LIKE, interval, options
from .._dpcore._contract import superblock_rows
from ._sources import bounded_rows, group_rows, validated_rows
from ._statistics import StatisticsSum
from ._estimator import Context, PrivateEstimator
from ._hooks import ModelHooks
from ._domain import check_estimable, domain_from_data, domain_shares, domain_specs, estimate_domain
from ._plan import make_plan
from ._radius import radius_shares, radius_specs, release_radius
from ._start import start_shares
from ._record import NOT_PRIVATE
from ._loops import PrivateRun

__all__ = ["PrivateEM"]

#: Largest |value| the non-private EM accepts: squares and sums of squares stay finite.
_MAX_ABS_EXACT = 1e150
_SOURCES = {"declared": "declared", "estimate": "private estimate", "data": "from data (NOT private)"}


def _statistics_of(kernel, params, domain, n_threads, block):
    """One block's statistics: what a Dask task of an EM pass runs (``functools.partial`` of
    this with the model's public kernel, the released parameters, the domain, the thread
    count).  A chunk larger than a superblock is cut into superblocks (``superblock_rows``)
    whose statistics are added by Sum2, as rows in this process are: so no kernel call ever
    gets more than one superblock of rows, whatever the chunking — the ``b`` of the float64
    rounding bound (:meth:`PrivateEM._block_rows`)."""
    step = superblock_rows(block.shape[1])
    if block.shape[0] <= step:
        return kernel(block, params, domain, n_threads)
    total = StatisticsSum()
    for r0 in range(0, block.shape[0], step):
        total.add(kernel(block[r0:r0 + step], params, domain, n_threads))
    return total.result()


def clip_rows(block, domain, columns=None):
    """The rows of ``block`` clipped to a declared ``domain`` in the original units, as a
    private fit clips them (its box, then its ball: ``‖(a - c) / s‖ <= 1``), without the map:
    what the non-private fit (``epsilon=inf``) fits when a domain is declared.  ``columns``:
    the domain's columns (None: all).  Rows inside the domain keep their values bit for bit;
    a new array (the caller's rows are never written).  Same dtype."""
    X = np.array(block, copy=True)
    cols = slice(None) if columns is None else np.asarray(columns, dtype=np.intp)
    A = np.asarray(X[:, cols], dtype=np.float64)
    if domain.bounds is not None:
        A = np.clip(A, domain.bounds[0], domain.bounds[1])
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.sqrt(np.einsum("ij,ij->i", (A - domain.center) / domain.scale, (A - domain.center) / domain.scale))
    over = ~(r <= 1.0)
    if np.any(over):
        A[over] = domain.center + (A[over] - domain.center) / np.where(np.isfinite(r[over]), r[over], np.inf)[:, None]
    X[:, cols] = A.astype(X.dtype, copy=False)
    return X


class TailAverage:
    """Running mean of the noisy statistics of the last ``m`` of ``n_iter`` iterations.

    ``add(it, noisy)`` returns what the update of iteration ``it`` sees: ``(noisy,
    releases)`` before the tail, then the mean of the tail's releases so far and release
    records whose ``noise_scale`` is the standard deviation of that mean's noise (every
    release of a statistic has the same scale: σ/√k after k releases).  Post-processing.
    """

    def __init__(self, releases, n_iter, m):
        self.releases = releases
        self.start = n_iter - (int(m) if int(m) > 1 else 0)
        self.sums = None
        self.k = 0

    def add(self, it, noisy):
        if it < self.start:
            return noisy, self.releases
        self.k += 1
        if self.sums is None:
            self.sums = {name: np.array(v, dtype=np.float64) for name, v in noisy.items()}
        else:
            for name, v in noisy.items():
                self.sums[name] += v
        if self.k == 1:
            return noisy, self.releases
        root = math.sqrt(self.k)
        mean = {name: v / self.k for name, v in self.sums.items()}
        scaled = {name: _with_noise_scale(r, r.noise_scale / root) if name in mean else r
                  for name, r in self.releases.items()}
        return mean, scaled


def _with_noise_scale(release, noise_scale):
    """``dataclasses.replace(release, noise_scale=noise_scale)`` for the frozen
    :class:`~dpem_fast._engine._record.Release` (no validation to rerun), at a fraction of its
    cost: it runs for every statistic of every tail iteration."""
    out = object.__new__(type(release))
    out.__dict__.update(release.__dict__)
    out.__dict__["noise_scale"] = noise_scale
    return out


class PrivateEM(ModelHooks, PrivateEstimator):
    """Base class of the private EM estimators (not for direct use).

    Subclasses list every parameter in their own ``__init__`` (scikit-learn's
    ``get_params``); the engine reads these common ones: ``epsilon``, ``delta``,
    ``max_iter``, ``neighbouring``, ``accountant``, ``noise``, ``n_threads``,
    ``random_state``, ``budget``, ``verbose``, ``max_rows_per_group`` (person-level privacy,
    with ``fit``'s ``groups``; :mod:`~dpem_fast._engine._groups`), and for a model with
    ``_domain_kind = "ball"`` also ``data_norm`` and ``bounds``.

    Model hooks
    -----------
    _domain_kind : {"ball", "fixed"}
        ``"ball"``: rows are mapped into the unit ball of a declared, privately
        estimated or (opt-in) data-derived domain, and the kernel clips them there.
        ``"fixed"``: the model's rows live in a bounded domain of their own (checked by
        :meth:`_prepare_rows`); the specs' sensitivities hold on it.
    _statistic_specs(n_features) -> tuple of StatSpec
    _statistics_task() -> callable
        The statistics kernel, ``kernel(X, params, domain, n_threads) -> Statistics``
        (``domain``: the :class:`DataDomain` to map rows into, or None for no mapping).  It
        is pickled into every Dask task of a pass, so it must hold **public values only**:
        a module-level function, or a ``functools.partial`` of one binding the model's
        hyperparameters that the kernel reads (numbers, strings, public arrays) — never the
        estimator, a bound method, a lambda or closure (they carry the estimator and with it
        ``random_state``, ``budget``, ``privacy_``), ``random_state``, ``budget``, the key or
        anything derived from it.  The dask path checks the form
        (:func:`~dpem_fast._engine._sources._dask.check_public`), not the values.  Besides the
        kernel a task holds only the released (or data-independent or user-given initial)
        ``params``, the ``domain`` and ``n_threads``.  In memory, the engine calls
        :meth:`_statistics`, which calls this kernel: one definition for both paths.
    _update(noisy, params, ctx) -> params
        ``noisy``: dict name -> noisy array; ``ctx``: a :class:`~dpem_fast._engine.Context`
        (the round ``t``, the plan's public release records ``ctx.releases`` and the row
        count ``ctx.n_public`` where it is public — replace-one — else None).  Nothing else
        of the fit: no side-effect attributes.
    _exact_update(stats, params) -> params
    _initial_parameters(summary, domain, key, private) -> params
        ``summary`` is a :class:`~dpem_fast._engine._sources._memory.DataSummary`; in private mode it
        holds only the shape (the initialisation must not depend on the data).
    _set_fitted(params, domain, dtype)
    _parameter_constraints (each parameter's allowed values, :mod:`dpem_fast._validation`)
    Optional: _check_model_params(n_samples, n_features) (checks of the rows' shape or of
    several parameters at once), _check_plan(plan, n_public, rounds)
    (refuse a hopeless fit from public quantities, before the charge; ``n_samples`` is the
    public row count, None in a private fit whose count is private — add/remove, person-level —
    so that no refusal tells neighbours n and n + 1 apart, issue 34), _finish(params, noisy,
    ctx) (post-processing after the last round, e.g. dropping dead components), _rows_task() (the row check or
    transform ``f(X) -> X``, or None; the public-values-only rule of ``_statistics_task``
    holds: it runs in every Dask task; :meth:`_prepare_rows` calls it), _mechanisms(),
    _shares(), _default_accountant(mechanisms), _describe() -> (mechanism, notes),
    _joint_sensitivity(a, neighbouring) (joint accounting of an iteration's Gaussian
    releases, :mod:`~dpem_fast._engine._plan`), _domain_columns(d) and _declared_domain(dd)
    (a ball domain over some of the columns only, e.g. a mixed table's numeric ones), _n_averaged(n_iter) (tail averaging, below),
    _working_domain(domain) (a public coarsening of the domain map), _n_release_rounds() (J,
    the number of statistics → release → update rounds; default ``max_iter``; public
    parameters only), _start_specs(n_features) and _private_start(rows,
    layer, domain, key, n_threads) (a private start: one-off releases in the same plan, made
    after the domain and before the loop, in place of ``_initial_parameters``),
    _extreme_rows(n_features, key) (a fixed-domain model's rows of largest contribution: the
    audit's canary candidates), _column_values(n_features) (the public values of a ball
    model's columns outside its domain, for the audit).

    Tail averaging: with ``_n_averaged(J) = m > 1``, the update of each of the last ``m``
    iterations receives the mean of the noisy statistics released since iteration
    ``J - m`` (and release records whose ``noise_scale`` is that mean's noise standard
    deviation).  This is post-processing of released values: no privacy cost.  Near the
    fixed point of EM consecutive statistics differ little while their noises are
    independent, so the final parameters see about ``1/m`` of one release's noise
    variance (a Polyak-Ruppert average of the noisy fixed-point iteration).
    """

    _domain_kind = "ball"
    _loop = "full_pass"
    _parameter_constraints = {
        "max_iter": [interval("int", 1)],
        "noise": [options("gaussian", "discrete_gaussian")],
        "accountant": [None, options(*acc.ACCOUNTANTS)],
        "data_norm": [None, interval("real", 0, None, "neither")],
        "bounds": [None, options("from_data"), ARRAY_LIKE],
    }

    # ------------------------------------------------------------- the loop's
    def _pass(self, rows, params, domain, n_threads):
        """The summed statistics of one pass over ``rows``.  Rows held by Dask workers get a
        task of public values only (:func:`_statistics_of` with the model's kernel); rows in
        this process go through :meth:`_statistics`."""
        if rows.remote:
            return rows.reduce(functools.partial(_statistics_of, self._statistics_task(), params, domain,
                                                 n_threads))
        return rows.reduce(lambda block: self._statistics(block, params, domain, n_threads))

    def _domain_source(self):
        """"declared", "estimate" or "data" (ball models only)."""
        if isinstance(self.bounds, str):
            return "data"
        return "declared" if self.bounds is not None or self.data_norm is not None else "estimate"

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None, groups=None):
        """Fit the model with ``_n_release_rounds()`` (default ``max_iter``) private EM
        rounds; returns ``self``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), numpy.memmap, or block source
            Rows in memory, memory-mapped, or streamed from a block source
            (:mod:`dpem_fast.io`, e.g. ``NpyBlocks``): one pass per iteration, the same
            result as in memory.
            Or a ``dask.array.Array`` (``pip install dpem_fast[dask]``): never gathered;
            validation and each chunk's statistics run on the workers, the per-chunk
            statistics are summed on the client in chunk order and released there (see
            :mod:`dpem_fast._engine._sources._dask`); equal to the in-memory fit to rounding.
        y : ignored
        groups : array-like of shape (n_samples,), str, or None
            Person-level privacy (with ``max_rows_per_group``): the group (person) of each
            row — integers, strings or finite floats, no missing ids — or, when X is a pandas
            DataFrame, the name of the column that holds them (dropped from the features).
            Each group keeps at most ``max_rows_per_group`` rows, chosen uniformly at random
            with the fit's key, and the guarantee is for adding/removing (or replacing) all
            of one group's rows (:mod:`dpem_fast._engine._groups`).  A block source takes an
            in-memory array in the order of its rows; a dask X a dask array chunked like X's
            rows with every group inside one chunk.

            .. versionadded:: 0.1 (issue 27)
        """
        private = self._validate_params()
        X, groups = self._resolve_groups(X, groups, private)
        rows = validated_rows(self, X, private)
        grouping = group_rows(rows, groups)         # validated before anything is charged
        return self._fit_rows(rows, grouping, private)

    def _fit_rows(self, rows, grouping, private):
        """The fit on validated ``rows`` (a :class:`Rows`, possibly of no row) and their
        ``grouping`` (or None): the model's checks, the private (or exact) fit, the fitted
        attributes; returns ``self``.  :meth:`fit` and a private selection's trials
        (:func:`~dpem_fast.model_selection._selection.fit_trial`) run it.  A private count is
        never read by a refusal (n = K - 1 and n = K are neighbours under add/remove and
        person-level; a fit with fewer rows than components is valid there): the checks get
        :meth:`_public_rows`."""
        self._check_model_params(self._public_rows(rows.n_rows) if private else rows.n_rows, rows.n_features)
        n_threads = effective_n_threads(self.n_threads)
        key = make_key(self.random_state)
        if private:
            params, domain, record = self._fit_private(rows, key, n_threads, grouping)
        else:
            params, domain, record = self._fit_exact(rows, key, n_threads)
        self.n_iter_ = self._n_release_rounds()     # a model's _set_fitted may refine it
        self._set_fitted(params, domain, rows.dtype)
        self.privacy_ = record
        return self

    def _exact_domain(self, summary, cols, dd):
        """``(clip, box)`` of a non-private fit (``epsilon=inf`` is the same model with no noise,
        issue 35): ``clip`` the declared domain its rows are clipped to, as a private fit clips
        them (None where nothing is declared: the rows are fitted as they are), ``box`` the
        ``(lower, upper)`` the fitted model reports and samples in — the declared box, else the
        data's bounding box of the domain columns (read from the data: the fit is not private),
        or None (a fixed-domain model, or a declaration without a box: ``data_norm`` only)."""
        if self._domain_kind != "ball" or dd == 0:
            return None, None
        if self._domain_source() == "declared":
            declared = self._declared_domain(dd)
            return declared, declared.bounds
        if summary.column_min is None:
            return None, None
        lo, hi = summary.column_min, summary.column_max
        if cols is not None:
            lo, hi = lo[cols], hi[cols]
        return None, (np.asarray(lo, dtype=np.float64).copy(), np.asarray(hi, dtype=np.float64).copy())

    def _fit_exact(self, rows, key, n_threads):
        """Non-private EM (epsilon=inf): no noise, no domain map; the rows are clipped to a
        declared domain as the private fit clips them, and the fitted model keeps the declared
        box (:meth:`_exact_domain`).  The reference of the private fit."""
        summary, n, d = rows.summary, rows.n_rows, rows.n_features
        if summary.max_abs > _MAX_ABS_EXACT:
            raise ValueError(f"X: values up to {summary.max_abs:.3g} overflow the non-private EM's second "
                             "moments; rescale the data, or fit privately with a declared domain")
        cols = self._domain_columns(d)
        dd = d if cols is None else len(cols)
        domain = DataDomain(np.zeros(dd), np.ones(dd), None, False)
        clip, box = self._exact_domain(summary, cols, dd)
        if clip is not None:
            rows = rows.with_transform(functools.partial(clip_rows, domain=clip, columns=cols))
            if clip.bounds is not None and summary.column_min is not None:
                # the clipped rows' range (the initial draw is placed in it): the box clip of the range
                idx = slice(None) if cols is None else np.asarray(cols, dtype=np.intp)
                lo, hi = summary.column_min.copy(), summary.column_max.copy()
                lo[idx] = np.clip(lo[idx], *clip.bounds)
                hi[idx] = np.clip(hi[idx], *clip.bounds)
                summary = dataclasses.replace(summary, column_min=lo, column_max=hi)
        params = self._initial_parameters(summary, domain, key, False)
        train_ll = []
        rounds = self._n_release_rounds()
        progress = Progress(self.verbose, rounds, type(self).__name__)
        with blas_single_thread(), progress:    # the update's LAPACK too: OpenMP kernels own the cores
            for it in range(rounds):
                stats = self._pass(rows, params, None, n_threads)
                # (a statistic held as its rows, not summed, is the validated rows themselves:
                # finite, and within _MAX_ABS_EXACT, so its products are)
                if not all(np.all(np.isfinite(v)) for v in stats.values() if isinstance(v, np.ndarray)):
                    raise ValueError(f"X: the non-private EM statistics overflowed (largest |value| "
                                     f"{summary.max_abs:.3g}); rescale the data, or fit privately")
                train_ll.append(stats.loglik / n)
                params = self._exact_update(stats, params)
                progress.step()
        self._set_diagnostics(train_ll, 0)
        if box is not None:         # the model keeps the declared (else the data's) box; units unchanged
            domain = DataDomain(domain.center, domain.scale, box, False)
        return params, domain, None

    def _private_plan(self, n_public, d, dtype=np.float64):
        """The calibrated plan of a private fit on rows of ``d`` features, from public
        quantities only (the parameters, ``d``, ``n_public``: the row count where it is public,
        else None, and the rows' ``dtype``: float32 rows on a float32 path widen the
        sensitivities, :meth:`_iteration_specs`), with the model's public refusals (``_check_plan``, the domain estimate's
        check).  Returns ``(plan, specs, source, domain)`` (``domain``: the declared one, or
        None).  Reads no data; a meta-estimator (:mod:`dpem_fast.model_selection`) calls it to
        bound a candidate's event before any fit (``n_features_in_`` must be set: a model's
        split may read it)."""
        rounds = self._n_release_rounds()
        specs = self._iteration_specs(d, dtype, n_public)
        source = self._domain_source() if self._domain_kind == "ball" else None
        cols = self._domain_columns(d)
        dd = d if cols is None else len(cols)       # the columns the domain maps
        if dd == 0:
            source = None                           # no column to map: every column's domain is fixed
        domain = None
        if source == "declared":
            domain = self._declared_domain(dd)      # reads only the declaration
        start = self._start_release_specs(d, n_public)     # a private start's one-off releases, or ()
        one_off = (domain_specs(dd) if source == "estimate" else ()) + start
        shares = domain_shares() if source == "estimate" else {}
        if start:
            split = start_shares(dd, self.neighbouring)     # the start reads the domain columns
            if set(split) != {s.name for s in start}:
                raise ValueError(f"{type(self).__name__}: a private start releases {sorted(split)}, the model "
                                 f"declares {[s.name for s in start]}")
            shares.update(split)
        extra, extra_shares = self._one_off_releases(d)     # a model's own one-offs (issue 37)
        one_off, shares = one_off + tuple(extra), {**shares, **extra_shares}
        if self._releases_radius(source, n_public):                   # a declared box's private radius (issue 40)
            one_off, shares = one_off + radius_specs(), {**shares, **radius_shares()}
        mechanisms = self._mechanisms()
        accountant = self.accountant or self._default_accountant(mechanisms, self.noise)
        if accountant == "gdp" and mechanisms and "laplace" in mechanisms.values():
            raise ValueError("accountant='gdp' is exact for Gaussian releases only; this plan has Laplace releases")
        plan = make_plan(
            specs, rounds, epsilon=self.epsilon, delta=self.delta, neighbouring=self.neighbouring,
            accountant=accountant, mechanisms=mechanisms, shares=self._shares(),
            one_off_specs=one_off,
            one_off_share=(shares if one_off else 0.0), noise=self.noise,
            joint=self._joint_bound(), max_rows_per_group=self._max_rows_per_group(),
        )
        if source == "estimate":
            check_estimable(plan, dd, n_public)    # public quantities: before the charge
        self._check_plan(plan, n_public, rounds)        # public quantities only, before the charge
        return plan, specs, source, domain

    def _plan_for(self, d, n_public):
        """The plan of :meth:`~._estimator.PrivateEstimator.privacy_plan` (on a clone): the
        model's checks at the public count, then :meth:`_private_plan`."""
        self.n_features_in_ = d             # a model's split may read it
        self._check_model_params(n_public, d)
        return self._private_plan(n_public, d)[0]

    def _fit_private(self, rows, key, n_threads, grouping=None):
        d = rows.n_features
        n_public = self._public_rows(rows.n_rows)   # None under add/remove or per group: private
        rounds = self._n_release_rounds()
        plan, specs, source, domain = self._private_plan(n_public, d, rows.dtype)
        start = tuple(self._start_specs(d)) + tuple(self._one_off_releases(d)[0])  # made in _private_start
        # the whole plan, before any statistic (the private row count, before grouping, checked first)
        run = PrivateRun.of(self, plan, key, n_threads, private_count=rows.n_rows if n_public is None else None)
        if grouping is not None:                    # at most m rows per group, from here on
            rows = bounded_rows(rows, grouping, key, plan.max_rows_per_group, n_threads)
        n, layer = rows.n_rows, run.layer
        cols = self._domain_columns(d)
        coverage = {}
        if source == "estimate":
            domain = estimate_domain(rows, layer, n_threads, columns=cols, report=coverage)
        elif source == "data":
            domain = domain_from_data(rows, columns=cols)
        if source in ("estimate", "data"):
            domain = usable_box(domain)             # no degenerate (zero-width) feature; a declared box as declared
        if domain is not None:
            domain = self._working_domain(domain)
        radius = None
        if self._releases_radius(source, n_public):
            domain, radius = release_radius(rows, layer, domain, n_public, cols)
        if start:
            with blas_single_thread():
                params = self._private_start(rows, layer, domain, key, n_threads)
        else:
            params = self._initial_parameters(rows.summary, domain, key, True)
        train_ll, n_clipped = [], 0
        names = tuple(s.name for s in specs)        # what each round releases
        tail = TailAverage(plan.releases, rounds, self._n_averaged(rounds))
        progress = Progress(self.verbose, rounds, type(self).__name__, plan_spent(plan, rounds, self.delta),
                            self.delta)
        with blas_single_thread(), progress:    # the update's LAPACK too: OpenMP kernels own the cores
            for it in range(rounds):
                stats = self._pass(rows, params, domain, n_threads)
                train_ll.append(stats.loglik / max(n, 1))     # 0 rows: a selection trial's empty part
                n_clipped = stats.n_clipped
                noisy = layer.release({name: stats[name] for name in names}, it)
                seen, releases = tail.add(it, noisy)
                ctx = Context(it, releases, n_public, domain, n_threads)
                params = self._update(seen, params, ctx)
                progress.step()
            params = self._finish(params, seen, ctx)
        self._set_diagnostics(train_ll, n_clipped)
        mechanism, notes = self._describe()
        if np.dtype(rows.dtype) == np.float32 and self._float32_path():
            notes = tuple(notes) + ("float32 rows in single precision (float64 accumulation): every "
                                    "iteration sensitivity widened by 2^-8 for float rounding "
                                    "(dpem_fast._engine._specs, 'Float32 rows')",)
        data_domain = self._domain_record(domain, source, coverage)
        if radius is not None:      # a declared box's released radius (_radius.release_radius)
            data_domain["radius"] = radius
        record = run.record(mechanism=mechanism, n_iter=rounds, epsilon=self.epsilon, data_domain=data_domain,
                            notes=notes, private=source != "data", noise=self.noise)
        return params, domain, record

    def _joint_bound(self):
        """The model's joint bound under this fit's relation, as ``make_plan`` takes it.

        Person-level under replace, a group's pairs may be a row against no row (padding,
        :mod:`~dpem_fast._engine._groups`): the row-level add/remove joint change at the same
        noise, ``J_ar(a (Δ_ar/Δ_rep)²)``, must then not exceed ``J_rep(a)``; it never does for
        the models here, and a plan where it would is refused rather than under-noised."""
        if type(self)._joint_sensitivity is PrivateEM._joint_sensitivity:
            return None
        rel = self.neighbouring
        if rel != "replace" or self._max_rows_per_group() is None:
            return lambda a: self._joint_sensitivity(a, rel)
        ratio = {s.name: (s.l2["add_remove"] / max(s.l2["replace"], s.l2["add_remove"])) ** 2
                 for s in self._statistic_specs(self.n_features_in_)}

        def joint(a):
            bound = self._joint_sensitivity(a, "replace")
            if self._joint_sensitivity({k: v * ratio[k] for k, v in a.items()}, "add_remove") > bound * (1 + 1e-12):
                raise ValueError(f"{type(self).__name__}: its joint bound under replace does not cover a group's "
                                 "padded pairs (a row against no row); derive the person-level joint bound")
            return bound
        return joint

    @staticmethod
    def _default_accountant(mechanisms, noise):
        """Exact Gaussian DP for all-Gaussian plans; zCDP for discrete Gaussian releases (their
        proved guarantee is ρ-zCDP, CKS 2020 Thm 4); Renyi DP with Laplace releases."""
        if noise == "discrete_gaussian":
            return "zcdp"
        return "rdp" if mechanisms and "laplace" in mechanisms.values() else "gdp"

    @staticmethod
    def _domain_record(domain, source, coverage=None):
        if source is None:
            return {"source": "the model's fixed domain", "scale": None}
        out = {
            "source": _SOURCES[source],
            "center": domain.center.copy(),
            "scale": domain.scale.copy(),
            "bounds": None if domain.bounds is None else (domain.bounds[0].copy(), domain.bounds[1].copy()),
            "from_data": source == "data",
        }
        if coverage:        # a private estimate's released coverage (_domain.coverage_report)
            out["coverage"] = dict(coverage)
        return out

    def _set_diagnostics(self, train_ll, n_clipped):
        self.diagnostics_ = {
            "status": NOT_PRIVATE,
            "n_rows_clipped": int(n_clipped),
            "train_loglik_per_row": np.asarray(train_ll),
        }
