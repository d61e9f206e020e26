"""Private model selection by random stopping (Papernot & Steinke, ICLR 2022).

:class:`PrivateModelSelection` chooses among candidate settings of a private estimator (the
number of components, ``max_iter``, any constructor parameter) within one accounted (ε, δ);
:func:`select_size` is the engine of the ``n_components="auto"`` / ``n_clusters="auto"``
shortcuts of :class:`~dpem_fast.DPGaussianMixture` and :class:`~dpem_fast.DPKMeans`.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils.validation import check_is_fitted

from .. import accounting as acc
from ..accounting import _calibration
from .._dpcore._contract import superblock_rows
from .._engine import PrivateEM, PrivateEstimator
from .._engine._groups import bound_mask, bounding_key, check_groups, check_max_rows_per_group
from .._engine._selection_loop import SCORE, TAIL_SHARE, TRIAL_FAILED, SelectionLoop, random_stopping_event  # noqa: F401
from .._engine._sources import DataSummary, Rows, validated_rows
from .._preprocess import resolve_domain
from .._registry import public_state
from .._threads import blas_single_thread, effective_n_threads
from .._validation import instance_of, interval
from ..io import as_row_source
from ._trials import (_gaussian_mu2, _group_holdout_mask, _holdout_mask, _trial_epsilon, clipped_score_sum, row_scores,
                      score_range)

__all__ = ["PrivateModelSelection", "select_size", "fit_auto"]

#: Constructor parameters of a candidate that the selection sets (the relation is the estimator's)
_OVERRIDDEN = ("epsilon", "delta", "accountant", "random_state", "budget", "verbose", "n_threads", "neighbouring")


def fit_trial(model, X, groups):
    """Fit the calibrated candidate ``model`` privately on a trial's training rows ``X`` (an
    in-memory float64 array, validated with the whole data before the charge; possibly
    empty) through the engine (:meth:`~dpem_fast._engine.PrivateEM._fit_rows`), as the
    model's own ``fit`` would, without validating the rows again: the model's checks see the
    public row count only (the training part's size under row-level replace, public coins on
    a public n; else None), as in :meth:`PrivateModelSelection._preflight`.  ``groups``: the
    rows' groups of a person-level trial (its rows are bounded to the candidate's m inside
    the fit, after its plan is made).

    What the trial releases is then a function of public values and of the fit's own noisy
    releases only: zero rows and fewer rows than components are fitted (noise), never
    refused (docs/model_selection.rst, "Failures")."""
    n, d = X.shape
    model._validate_params()
    model.n_features_in_ = d
    rows = Rows(as_row_source(model._prepare_rows(X), superblock_rows(d)), None, DataSummary(n, d))
    grouping = None if groups is None else check_groups(groups, n)
    return model._fit_rows(rows, grouping, True)


class PrivateModelSelection(PrivateEstimator):
    """Choose among candidate settings of a private estimator within one (ε, δ).

    Random stopping (Papernot & Steinke, "Hyperparameter tuning with Renyi differential
    privacy", ICLR 2022, arXiv 2110.03620): a mechanism Q — pick a candidate uniformly at
    random, fit it on a training part of the rows, release a noisy score of it on a hold-out
    part — runs T times, T drawn from a public distribution and kept secret, and only the
    best run (its candidate, model and noisy score) is released.

    Parameters
    ----------
    estimator : PrivateEM estimator
        The model to tune (e.g. ``DPGaussianMixture(bounds=...)``, ``DPKMeans(...)``), with a
        **declared** domain (``bounds`` or ``data_norm``; a privately estimated domain per
        trial is not supported in this version).  Its ``epsilon``, ``delta``,
        ``accountant``, ``random_state``, ``budget``, ``verbose`` and ``n_threads`` are set
        by the selection; its ``neighbouring`` (not a candidate parameter) is the selection's
        relation.
    param_grid : dict or list of dicts
        The candidates, as scikit-learn's ``ParameterGrid`` reads them (``{"n_components":
        [1, 2, 3], "max_iter": [10, 20]}``); any constructor parameter of ``estimator``.
    epsilon : float, default=1.0
        Total ε of the whole selection (every trial, every score).
    delta : float, default=1e-5
        Total δ, in (0, 1); a share :data:`TAIL_SHARE` of it pays for running a fixed number
        of trials (see Privacy).
    mean : float or None
        E[T], the mean number of trials.  ``None``: :func:`auto_mean` (public: the number of
        candidates, ε, δ, the relation), the largest of 3C, 2C, C, C/2, 3, 2 whose trial keeps
        half the μ of a single fit.
    shape : float or None, default=1.0
        The law of T: a finite η ≥ 0 the truncated negative binomial (Papernot & Steinke,
        Thm 2: 0 logarithmic, 1 geometric; T ≥ 1, so a model is always released), ``None``
        Poisson (Thm 6; T = 0 with probability e^-mean, and then nothing is released).
    holdout : float, default=0.25
        Probability of each row to be in the hold-out part (the rest trains).
    parsimony : float, default=0.0
        Trials are ranked by the noisy score minus ``parsimony × σ × complexity`` (σ: the
        score's public noise sd; complexity: the candidate's value of ``complexity``) — a
        fixed order on the released outputs (post-processing) that breaks the noise's ties
        towards smaller models.
    complexity : str or None
        The parameter that measures a candidate's size (e.g. ``"n_components"``); required
        when ``parsimony > 0``.
    random_state : None, int, SeedSequence or Generator
        Key of the selection (split, T, candidate draws, every trial's noise).
    n_threads : int or None
        Threads of every fit; results do not depend on it.
    budget : BudgetLedger or None
        Charged with the whole selection's event before any statistic of the data is
        computed (the event only: the ledger has no δ-only spend for δ_tail), declaring
        the RDP accountant that calibrated it.  ``clone`` keeps the very ledger; an unfitted
        selection holding one cannot be pickled.

    Attributes
    ----------
    best_estimator_ : estimator
        The released model of the best trial (fitted on the training part), with
        ``privacy_`` set to the selection's record (its guarantee is the whole selection's)
        and ``random_state=None``.
    best_params_ : dict
        The best trial's candidate.
    best_score_ : float
        Its noisy hold-out score (a sum over the hold-out rows of the clipped, centred row
        scores, in the working units; released).
    privacy_ : PrivacyRecord
        The whole selection: ``RepeatAndSelectEvent(GaussianEvent(z), mean, shape)`` tagged
        with the relation, accounted by the RDP accountant at ``delta - delta_tail``.

    A fitted selection pickles as a fitted private model does (no key, no ledger); it has no
    file of its own: save ``best_estimator_``, whose ``privacy_`` is the selection's record.

    Privacy
    -------
    Neighbouring relation: the estimator's ``neighbouring`` (replace one row, or add/remove
    one row); every step below is argued under both.

    **One trial Q** draws a candidate uniformly (public randomness), fits it on the training
    part (rows split once by public coins, probability ``holdout``) with its own private fit
    calibrated by exact Gaussian DP to a per-trial μ (every candidate's plan is checked, before
    any fit, to be Gaussian only with Σ 1/z² ≤ μ²), and releases ``S = Σ_{hold-out}
    (clip(v_i, L, U) - (L + U)/2) + N(0, (Δ z)²)``, ``z = 1/μ``, with sensitivity ``Δ = U - L``
    under replace and ``(U - L)/2`` under add/remove (times m per group for a person-level
    selection), widened by the float rounding of the exact sum.  The fit and the score read
    disjoint rows (parallel composition, argued for both relations), so Q is μ-GDP,
    ``GaussianEvent(1/μ)``.  **Random stopping**: Q runs T times, T secret from the public law,
    and only the best trial (rank: noisy score minus a public penalty) is released; the event
    ``RepeatAndSelectEvent(GaussianEvent(1/μ), mean, shape)`` is accounted by the RDP
    accountant at ``delta - delta_tail`` and μ is the largest that meets ε.  **Fixed work**:
    max(T, T_max) trials run, so the wall time reveals only T > T_max, of probability at most
    δ_tail / (1 + e^ε) (δ_tail = :data:`TAIL_SHARE` × δ).  **Failures**: every refusal is public
    (run before the charge at a public count) or impossible; a defect that raises in a trial is
    fatal, with the fixed text :data:`TRIAL_FAILED`, after every trial ran.  The full proof
    (parallel composition, person-level, random stopping, fixed work, failures) is on the
    documentation page :doc:`/model_selection`, "Privacy analysis in full".
    """

    _loop = "selection"

    _parameter_constraints = {
        "estimator": [instance_of(PrivateEM, name="a private EM estimator")],
        "param_grid": [instance_of(dict, list, tuple)],
        "mean": [None, interval("real", 1)],
        "shape": [None, interval("real", 0)],
        "holdout": [interval("real", 0, 1, "neither")],
        "parsimony": [interval("real", 0)],
        "complexity": [None, instance_of(str)],
    }

    def __init__(self, estimator, param_grid, *, epsilon=1.0, delta=1e-5, mean=None, shape=1.0,
                 holdout=0.25, parsimony=0.0, complexity=None, random_state=None, n_threads=None,
                 budget=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.mean = mean
        self.shape = shape
        self.holdout = holdout
        self.parsimony = parsimony
        self.complexity = complexity
        self.random_state = random_state
        self.n_threads = n_threads
        self.budget = budget

    # ------------------------------------------------------------ checks
    def _candidates(self):
        grid = self.param_grid
        if not isinstance(grid, (dict, list, tuple)):
            raise TypeError(f"param_grid must be a dict or a list of dicts, got {type(grid).__name__}")
        try:
            cands = list(ParameterGrid(grid))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"param_grid: {exc}") from None
        if not cands or cands == [{}]:
            raise ValueError("param_grid must name at least one candidate")
        names = set(self.estimator.get_params(deep=False))
        for c in cands:
            bad = sorted(set(c) - names)
            if bad:
                raise ValueError(f"param_grid: {type(self.estimator).__name__} has no parameter {bad[0]!r}")
            fixed = sorted(set(c) & set(_OVERRIDDEN))
            if fixed:
                raise ValueError(f"param_grid: {fixed[0]!r} is set by the selection, not a candidate parameter")
        return cands

    def _relation(self):
        """The estimator's relation: the selection's, and every candidate's."""
        return self.estimator._relation()

    def _max_rows_per_group(self):
        """M, the largest ``max_rows_per_group`` of the candidates (the estimator's, or the grid's:
        m may be a candidate parameter, then chosen privately like any other); None for a
        row-level selection.  The base's unit, ledger check and ``_resolve_groups`` read it."""
        base = self.estimator.get_params(deep=False).get("max_rows_per_group")
        ms = [check_max_rows_per_group(c.get("max_rows_per_group", base)) for c in self._candidates()]
        if any(m is None for m in ms) and any(m is not None for m in ms):
            raise ValueError("max_rows_per_group: every candidate is row-level or every one person-level")
        return None if ms[0] is None else max(ms)

    def _check_params(self):
        """The candidates, after the selection's checks (the base's common ones among them)."""
        est = self.estimator
        if not isinstance(est, PrivateEM) or est._domain_kind != "ball":
            raise TypeError("estimator must be a private EM estimator on a declared domain "
                            f"(DPGaussianMixture, DPKMeans, ...), got {type(est).__name__}")
        if not self._validate_params():
            raise ValueError("epsilon must be finite: a private selection needs a budget")
        p = self.parsimony
        if p > 0 and self.complexity is None:
            raise ValueError("complexity must name a parameter when parsimony > 0")
        cands = self._candidates()
        if self.complexity is not None:
            for c in cands:
                v = c.get(self.complexity, est.get_params(deep=False).get(self.complexity))
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
                    raise ValueError(f"complexity: every candidate's {self.complexity!r} must be a number, got {v!r}")
        return cands

    # --------------------------------------------------------- calibration
    def _law(self, n_candidates):
        """(mean, shape) of T: given, or the mean from :func:`auto_mean`."""
        shape = None if self.shape is None else float(self.shape)
        if self.mean is not None:
            return float(self.mean), shape
        return auto_mean(n_candidates, float(self.epsilon), float(self.delta), self._relation(),
                         1.0 if shape is None else shape), shape

    def _candidate_model(self, params, mu, rel, n_threads):
        """A fresh candidate calibrated (exact GDP) to the per-trial μ."""
        delta0 = float(self.delta)
        over = {"epsilon": _trial_epsilon(float(mu), rel, delta0), "delta": delta0, "random_state": None,
                "budget": None, "verbose": 0, "n_threads": n_threads}
        if "accountant" in self.estimator.get_params(deep=False):
            over["accountant"] = "gdp"
        return clone(self.estimator).set_params(**params, **over)

    def _preflight(self, cands, mu, rel, d, n_train_public, n_threads):
        """Every candidate's plan from public quantities: Gaussian only and within μ (so that
        ``GaussianEvent(1/μ)`` dominates it); the public refusals raise here, before the
        charge, and the candidate's own checks run at the count every trial's fit gives them
        (``n_train_public``: the training size under row-level replace, else None; the
        engine's ``_public_rows`` of a trial's rows), so that no trial can refuse what passed
        here (docs/model_selection.rst, "Failures")."""
        for params in cands:
            model = self._candidate_model(params, mu, rel, n_threads)
            params_d = model.get_params(deep=False)
            if params_d.get("bounds") is None and params_d.get("data_norm") is None \
                    or isinstance(params_d.get("bounds"), str):
                raise ValueError("estimator: declare the domain (bounds or data_norm) for a private "
                                 "selection; a per-trial domain estimate is not supported")
            model._validate_params()
            mech = model._mechanisms() or {}
            if any(m != "gaussian" for m in mech.values()) or getattr(model, "noise", "gaussian") != "gaussian":
                raise ValueError(f"param_grid: candidate {params} releases non-Gaussian noise (Laplace or "
                                 "discrete Gaussian); the selection bounds Gaussian plans only")
            model._check_model_params(n_train_public, d)     # the count every trial's checks see
            model.n_features_in_ = d
            try:
                plan = model._private_plan(n_train_public, d)[0]
            finally:
                del model.n_features_in_
            mu2 = _gaussian_mu2(plan.event)
            if mu2 is None:
                raise ValueError(f"param_grid: candidate {params} releases non-Gaussian noise (Laplace or "
                                 "discrete Gaussian); the selection bounds Gaussian plans only")
            if mu2 > mu * mu * (1.0 + 1e-6):
                raise RuntimeError(f"candidate {params}: its plan exceeds the trial's bound "
                                   f"({math.sqrt(mu2):.6g} > {mu:.6g}); please report")

    def _plan_for(self, d, n_public):
        """The plan of :meth:`privacy_plan`: the random-stopping event and the scores' releases
        (``n_public``: the row count where it is public; the candidates' plans are bounded by
        each trial's μ when a fit runs, :meth:`_preflight`)."""
        cands = self._check_params()
        return SelectionLoop(self, *self._law(len(cands))).plan(score_range(self.estimator, d), n_public)

    # ----------------------------------------------------------------- fit
    def fit(self, X, y=None, groups=None):
        """Run the selection on X; returns ``self``.  Exactly T_max trials run whatever the
        data (see Privacy), by the engine's selection loop (its privacy path:
        :class:`~dpem_fast._engine._selection_loop.SelectionLoop`).

        ``groups``: person-level selection (with the estimator's ``max_rows_per_group`` m), as
        for the estimator's own ``fit``: the rows are bounded to m per group once, the split
        puts each group whole in one part, each trial fits its candidate with the training
        part's groups, and a group's hold-out rows change the score by at most m times a
        row's (see Privacy)."""
        cands = self._check_params()
        X, groups = self._resolve_groups(X, groups, True)
        loop = SelectionLoop(self, *self._law(len(cands)))
        mu, rel, m = loop.mu, self._relation(), self._max_rows_per_group()
        n_threads = effective_n_threads(self.n_threads)
        probe = self._candidate_model(cands[0], mu, rel, n_threads)
        rows = validated_rows(probe, X, True)
        if rows.remote:
            raise ValueError("X: a private selection needs the rows in memory (an array or memmap)")
        for params in cands[1:]:        # every candidate's row check, on all rows, before the charge:
            model = self._candidate_model(params, mu, rel, n_threads)      # no trial's can refuse then
            if model._rows_task() is not None:
                validated_rows(model, X, True)
        grouping = check_groups(groups, rows.n_rows) if groups is not None else None
        Xa = np.asarray(X.to_numpy() if hasattr(X, "iloc") else X, dtype=np.float64)
        n, d = Xa.shape
        key = self._fit_key()
        codes = None
        if grouping is None:
            hold = _holdout_mask(key, n, float(self.holdout), n_threads)
        else:
            hold = _group_holdout_mask(key, grouping, float(self.holdout), n_threads)
        # the count every trial's checks see: the training size where the row count is public
        self._preflight(cands, mu, rel, d, self._public_rows(n - hold.sum()), n_threads)
        bounds = score_range(self.estimator, d)
        loop.charge_plan(bounds, n, key, n_threads)     # before any statistic of the data
        if grouping is not None:                # at most m rows per group, after the charge
            keep = bound_mask(grouping, bounding_key(key), m, n_threads)
            Xa, hold, codes = Xa[keep], hold[keep], grouping.codes[keep]
        c, (model, warned), score = self._run(Xa, hold, cands, mu, rel, n_threads, key, loop, bounds, codes)
        record = loop.record(len(cands), type(self.estimator).__name__)
        model.set_params(random_state=None)
        model.privacy_ = record
        model.__dict__.pop("diagnostics_", None)
        for message in warned:                  # the released trial's own warnings only
            warnings.warn(message, acc.NoiseDominatedWarning, stacklevel=2)
        self.best_estimator_ = model
        self.best_params_ = dict(cands[c])
        self.best_score_ = float(score)
        self.privacy_ = record
        return self

    def _run(self, X, hold, cands, mu, rel, n_threads, key, loop, bounds, codes=None):
        """The trials, run by ``loop`` (:meth:`~dpem_fast._engine._selection_loop.SelectionLoop.run`):
        each fits its candidate on the training part and scores it on the hold-out part.
        Returns (candidate index, (model, its warnings), noisy score).  ``codes``: the (bounded)
        rows' groups of a person-level selection, else None."""
        X_train, X_hold = X[~hold], X[hold]
        g_train = None if codes is None else codes[~hold]
        d = X.shape[1]

        def trial(c, seed):
            model = self._candidate_model(cands[c], mu, rel, n_threads).set_params(random_state=seed)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                fit_trial(model, X_train, g_train)
                domain = resolve_domain(d, model.data_norm, model.bounds)
                with blas_single_thread():
                    value = clipped_score_sum(row_scores(model, X_hold, domain), bounds)
            return value, (model, tuple(str(w.message) for w in seen
                                        if issubclass(w.category, acc.NoiseDominatedWarning)))
        sizes = None
        if self.parsimony:
            base = self.estimator.get_params(deep=False)
            sizes = [float(c.get(self.complexity, base.get(self.complexity))) for c in cands]
        return loop.run(key, len(cands), trial, float(self.parsimony), sizes)

    # -------------------------------------------------------------- public
    def __getstate__(self):     # off the registry (no file of its own): the registry's rule, its own list
        return public_state(self, BaseEstimator.__getstate__(self), ("best_estimator_", "best_params_", "best_score_"))

    def save(self, path, **options):
        """Refused: save ``best_estimator_``, the released model (its ``privacy_`` is the
        selection's record), and load it with :func:`dpem_fast.load`."""
        raise TypeError("save: a PrivateModelSelection has no saved file of its own; save its released model, "
                        "best_estimator_.save(path), whose privacy_ is the whole selection's record")

    def predict(self, X):
        """The best model's ``predict``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    def score(self, X, y=None):
        """The best model's ``score`` (reads X: not private)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X)


#: The law of T of the ``"auto"`` shortcuts (see :func:`select_size`): geometric (T >= 1, so
#: a selection always releases a model), mean from :func:`auto_mean`.
AUTO_LAW = {"shape": 1.0, "parsimony": 1.0}
#: :func:`auto_mean` keeps each trial's μ at least this fraction of a single fit's.
AUTO_MU_FRACTION = 0.5


def auto_mean(n_candidates, epsilon, delta, neighbouring, shape=1.0):
    """E[T] for a selection among ``n_candidates`` at (ε, δ), from public quantities only.

    The largest of 3C, 2C, C, C/2, 3, 2 (C candidates) whose per-trial μ is at least
    :data:`AUTO_MU_FRACTION` of the μ of one fit spending the whole (ε, δ) (exact GDP), else 2.
    A larger mean tries more candidates (each with probability about 1 - (1 - 1/C)^E[T]) but
    each trial gets less budget: on ``bench/model_selection.py``'s mixtures at ε = 1 the
    trial's fit quality limited the result (held-out scores improved from mean 3C to 2), while
    at large ε coverage matters.
    """
    one = _calibration._calibrate_noise_multiplier(lambda z: acc.NeighbouringEvent(neighbouring, acc.GaussianEvent(z)),
                                         epsilon, delta, "gdp")
    need = AUTO_MU_FRACTION / one
    C = int(n_candidates)
    tail = delta * (1.0 - TAIL_SHARE)
    for m in sorted({3.0 * C, 2.0 * C, float(C), C / 2.0, 3.0, 2.0}, reverse=True):
        if m < 2.0:
            continue
        z = _calibration._calibrate_noise_multiplier(random_stopping_event(neighbouring, "row", m, shape), epsilon,
                                                     tail, "rdp", xtol=1e-3)
        if 1.0 / z >= need:
            return m
    return 2.0


def select_size(estimator, size_param, max_size, X, groups=None, **law):
    """The ``"auto"`` shortcut: select ``size_param`` in 1 .. ``max_size`` for ``estimator``
    (its own ε, δ, relation, seed, threads and ledger) and return the fitted
    :class:`PrivateModelSelection`.

    ``law``: ``mean``, ``shape`` and ``parsimony`` of the selection, by default
    :data:`AUTO_LAW` (the mean: :func:`auto_mean`, public: the number of candidates, ε, δ, the
    relation), and ties of the noise broken towards fewer components (``parsimony``
    noise standard deviations of the score per component)."""
    params = estimator.get_params(deep=False)
    base = clone(estimator).set_params(**{size_param: 1})
    law = {**AUTO_LAW, **law}
    sel = PrivateModelSelection(
        base, {size_param: list(range(1, int(max_size) + 1))}, epsilon=params["epsilon"],
        delta=params["delta"], random_state=params.get("random_state"), n_threads=params.get("n_threads"),
        budget=params.get("budget"), complexity=size_param, **law)
    return sel.fit(X, groups=groups)


def fit_auto(estimator, size_param, max_param, X, *, strategy="select", overrides=None, groups=None):
    """Fit ``estimator`` (whose ``size_param`` is ``"auto"``) with its size chosen privately in
    1 .. ``getattr(estimator, max_param)`` within its own (ε, δ), and copy the released model's
    fitted attributes (its ``_saved`` ones, ``n_features_in_``, ``feature_names_in_`` and
    ``privacy_``) onto it; returns ``estimator``.

    ``strategy``:

    * ``"select"``: random stopping over the sizes (:func:`select_size`); ``privacy_`` is the
      selection's.
    * ``"prune"``: ONE fit at the largest size spending the whole (ε, δ), whose released model
      keeps only the components the fit's noisy counts resolve (the model's own dead-component
      rule, post-processing); the number kept is the choice.  No budget goes to the choice
      itself; ``privacy_`` is the one fit's.  ``overrides``: parameters of that fit (e.g. the
      private start).

    ``groups``: a person-level fit's groups (``fit``'s argument), passed on.
    """
    max_size = getattr(estimator, max_param)
    if isinstance(max_size, (bool, np.bool_)) or not isinstance(max_size, numbers.Integral) or max_size < 1:
        raise ValueError(f"{max_param} must be a positive integer, got {max_size!r}")
    eps = estimator.epsilon
    if isinstance(eps, numbers.Real) and not isinstance(eps, (bool, np.bool_)) and math.isinf(eps) and eps > 0:
        raise ValueError(f"{size_param}='auto' selects privately: it needs a finite epsilon")
    if strategy == "select":
        best = select_size(estimator, size_param, max_size, X, groups=groups).best_estimator_
    elif strategy == "prune":
        best = clone(estimator).set_params(**{size_param: int(max_size), **(overrides or {})})
        best.budget = estimator.budget          # the caller's ledger itself, not a copy
        best._choosing_k = True                 # dropping components is the choice, not a failure
        best.fit(X) if groups is None else best.fit(X, groups=groups)
    else:
        raise ValueError(f"strategy must be 'select' or 'prune', got {strategy!r}")
    names = tuple(type(estimator)._saved) + ("n_features_in_", "feature_names_in_", "privacy_")
    if strategy == "prune":     # the one fit's own diagnostics (never saved; not private)
        names += ("diagnostics_", "n_iter_")
    for name in names:
        if name in vars(best):
            setattr(estimator, name, getattr(best, name))
    return estimator
