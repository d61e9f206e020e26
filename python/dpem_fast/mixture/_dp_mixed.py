"""Differentially private EM for mixed tables: a latent-class mixture whose components are a
Gaussian over the numeric columns times one categorical distribution per discrete column, on
the private-EM engine (DP-EM's moment perturbation for this exponential-family mixture)."""
from __future__ import annotations

import functools
import math

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _contract
from .._dpcore import _rng as _core_rng
from .._engine import PrivateEM, StatSpec
from .._engine._components import check_counts_resolvable, data_box, initial_means, live_components, noise_std
from .._engine._groups import split_groups
from .._engine._start import private_start, start_specs
from .._engine._specs import moments_joint_bound, soft_counts, weighted_sums
from .._kernels.gmm import COUNTS, FIRST, SECOND
from .._kernels.mixed import CATEGORIES, mixed_log_resp, mixed_stats
from .._preprocess import DataDomain, resolve_domain
from .._rng import derive_key
from .._threads import effective_n_threads
from .._validation import ARRAY_LIKE, instance_of, interval, options, positive_numbers
from ._common import MixtureInferenceMixin, floored_counts, shrunk_means, weights_from_counts
from ._gaussian_block import (COVARIANCES, GAUSSIAN_MERGE_REASON, isotropic_factors, set_fitted_gaussian,
                              start_covariances, typed_covariances)
from ._gmm_mstep import exact_m_step, private_m_step, warn_if_covariances_unresolved
from ._calibrate import CalibrationMixin
from ._marginals import MarginalsMixin, clipped_before, copula_domain, to_model_space
from ._tables import TableSchema, is_frame, table_schema

__all__ = ["DPMixedMixture"]

#: category probabilities of a private fit are at least this (log θ stays finite)
PROB_FLOOR = 1e-10
_TYPES = ("full", "diag")


def _mixed_statistics(X, params, domain, n_threads, layout=None, covariance_type="full", marginals=None):
    """The E-step statistics kernel (a Dask task's: the released parameters, the public layout
    and covariance type, the released marginals: the numeric columns in the copula's space)."""
    weights, means, _, prec_chol, theta = params
    Z = to_model_space(X, layout, marginals)
    diagonal = COVARIANCES[covariance_type].diagonal
    prec = np.ascontiguousarray(np.diagonal(prec_chol, axis1=1, axis2=2)) if diagonal else prec_chol
    with np.errstate(divide="ignore"):
        log_theta = np.log(theta)
    stats = mixed_stats(Z, layout, weights, means, prec, log_theta, covariance_type, n_threads, domain)
    return stats if Z is X else clipped_before(stats, X, layout, marginals)


def _slot_ranges(layout):
    off = layout.offset
    return [slice(int(off[j]), int(off[j + 1])) for j in range(len(layout.cat_cols))]


def category_probabilities(T, nk, releases):
    """Per-component category probabilities (K, M) from the noisy category sums ``T`` and
    counts ``nk`` (post-processing, public constants only), one column's slots at a time.

    Each column's sums are divided by the floored noisy counts, shrunk towards the pooled
    distribution of all components (itself shrunk towards uniform) by
    :func:`~dpem_fast.mixture._common.shrunk_means` with the variance of one coordinate of a
    uniform (flat Dirichlet) distribution on the column's m slots, ``(m − 1)/(m²(m + 1))``, as
    the prior's; then floored at ``σ_T/Ñ_k`` (the noise of one probability; at least
    :data:`PROB_FLOOR`, at most ``1/(2m)``) and renormalised.  A noise-dominated column thus
    approaches the one-component model's distribution, not noise.
    """
    return _probabilities(T, nk, releases, None)


def _probabilities(T, nk, releases, layout):
    K, M = T.shape
    out = np.empty((K, M))
    nk_f = floored_counts(nk, releases[COUNTS])
    sd = noise_std(releases[CATEGORIES])
    for sl in _slot_ranges(layout):
        m = sl.stop - sl.start
        prior_var = (m - 1.0) / (m * m * (m + 1.0)) if m > 1 else 1.0
        p = shrunk_means(T[:, sl], nk, releases[COUNTS], releases[CATEGORIES], np.full(m, 1.0 / m), prior_var)
        lo = np.clip(sd / nk_f, PROB_FLOOR, 0.5 / m)[:, None]
        p = np.maximum(p, lo)
        out[:, sl] = p / p.sum(axis=1, keepdims=True)
    return out


class DPMixedMixture(CalibrationMixin, MarginalsMixin, MixtureInferenceMixin, PrivateEM):
    """Private synthetic-data model for tables with numeric and categorical columns.

    A latent-class mixture fitted by differentially private EM: component k draws the numeric
    columns from a Gaussian ``N(μ_k, Σ_k)`` and each categorical column j, independently given
    k, from its own distribution ``θ_{k,j}``:

        p(x) = Σ_k π_k N(x_num | μ_k, Σ_k) Π_j θ_{k, j}(x_j).

    Mixing over components lets the model carry dependence between every pair of columns —
    numeric-numeric (within and across components), categorical-categorical and
    numeric-categorical — which a product of marginals cannot.  ``fit`` takes a pandas
    DataFrame (or an array whose categorical columns hold codes); ``sample`` returns a table of
    the same columns and dtypes.

    Parameters
    ----------
    n_components : int, default=1
        Number of latent classes K.
    epsilon : float, default=1.0
        Total ε of the fit (all iterations; ``inf``: non-private EM).
    delta : float, default=1e-5
    bounds : dict, tuple (lower, upper), "from_data" or None
        The numeric columns' public domain: a dict ``{column: (lo, hi)}`` naming every numeric
        column (an array's columns are named ``x0, x1, ...``), or the engine's pair of scalars or
        arrays over the numeric columns in order.  Rows are clipped to it and mapped into the
        unit ball as :class:`DPGaussianMixture` does.  ``None`` (default): estimated privately
        from two noisy histograms of the numeric columns only, on 10 % of the budget.
        ``"from_data"``: the data's box, **not private** (explicit opt-in, flagged).
        ``sample`` clips the numeric columns to this box (declared or released: public).
    categories : dict or None
        ``{column: labels}`` for the categorical columns (a list of labels, or for an array's
        code columns the number of categories).  In a DataFrame a column of ``category`` dtype
        takes its dtype's categories and a ``bool`` column ``[False, True]`` unless named here;
        a text column that is neither is refused (see Privacy).  Every categorical column also
        has an **"other"** slot: a value outside its declared list (or missing) counts there;
        ``sample`` draws declared categories only unless asked for it (``other="missing"``).
    dtypes : dict or None
        ``{numeric column: dtype name}``: the declared dtype of a data frame's numeric column in
        ``dtypes_`` and every sample (an integer dtype rounds the sampled values; its integers are
        the marginals' cells where few).  Others: numeric ``float64``, categorical ``category``
        over the declared labels (text labels not in a ``category`` dtype: pandas' text dtype, or
        an explicit ``string``): never the frame's own dtypes, which one value can decide
        (``read_csv`` makes an int column float with one 30.5, a bool column object with a NaN).
    covariance_type : {"full", "diag"}, default="full"
        One full covariance of the numeric columns per component, or a diagonal one.
    data_norm : float or None
        Alternatively, a norm bound of the centred numeric block (the engine's ball).
    max_iter : int, default=20
        EM iterations J (a fixed count in private mode).
    neighbouring : {"replace", "add_remove"}, default="replace"
    accountant : str or None
        As :class:`DPGaussianMixture` (default: exact Gaussian DP).
    noise : {"gaussian", "discrete_gaussian"}, default="gaussian"
    budget_split : "auto" or tuple of positive floats
        Shares of each iteration's privacy loss for counts, first moments, second moments and
        category sums (the releases the table has, in that order).  ``"auto"``: ∝ √m_r, the
        number of noised coordinates (as :class:`DPGaussianMixture`).
    averaging : {"tail", "none"}, default="tail"
        Polyak–Ruppert averaging of the last ``max_iter // 2`` releases (post-processing).
    means_init : None or "private", default=None
        The start.  None: data-independent (uniform weights, means drawn in the domain, random
        category probabilities, all from the fit's own stream).  ``"private"``: the numeric means
        from the private start of :class:`DPGaussianMixture` (noisy random-hyperplane cell counts
        and cell sums of the numeric columns, two releases in the fit's plan on 20 % of it),
        isotropic covariances a quarter of the distance to the nearest other start centre,
        uniform weights and category probabilities.  It keeps well-separated clusters apart but
        scores lower on real tables without such clusters (measured in the model's
        documentation), so it is not the default.  A table without numeric columns starts
        data-independently either way.

        .. versionadded:: 0.1 (issue 35)
    reg_covar : float, default=1e-6
    n_threads : int or None
    random_state : None, int, SeedSequence or Generator
    budget : BudgetLedger or None
    verbose : int
        As :class:`DPGaussianMixture`.
    max_rows_per_group : int or None, default=None
        Person-level privacy (issue 27), as :class:`DPGaussianMixture`: with ``fit(X,
        groups=...)`` each group keeps at most this many rows and every sensitivity above is m
        times a row's (set in the plan, :mod:`dpem_fast._engine._groups`).
    marginals : {"auto", "copula", None}, default="auto"
        Marginals first (issue 37).  ``"copula"``: every column's 1-way histogram (64 public bins
        of a numeric column's box, atoms exactly at its edges and at 0 where 0 is inside it, or
        one cell per integer of a column declared an integer dtype with at most 68; a categorical
        column's categories and "other") is released
        once before EM, on a third of the plan; the mixture's numeric block is fitted to each
        value's Gaussian score under its column's released distribution, and ``sample`` maps
        back through the released marginals, so each synthetic column has its released 1-way
        distribution (point masses included).  ``"auto"``: ``"copula"`` unless the numeric
        domain is a ball without a box (``data_norm`` alone); None: the mixture on the values.

        .. versionadded:: 0.1 (issue 37)
    calibrate : {"auto", "pairs", None}, default="auto"
        ``"pairs"`` (needs the marginals): the 2-way tables of column pairs on public cells (16
        bins of a numeric column's box, a categorical column's categories and "other") are
        released once before EM on a third of the plan, and ``sample`` resamples the model's
        rows by raking weights towards them (:mod:`dpem_fast.mixture._calibrate`).  ``"auto"``:
        ``"pairs"`` whenever the fit releases the marginals (measured ahead on 2-way fidelity and
        TSTR on three real tables at every ε tried, ``bench/synth_mixed.py``); None: no pair
        tables (sampling skips the raking factors' one-off fit and the weights' lookup).

        .. versionadded:: 0.1 (issue 37)

    Attributes
    ----------
    weights_ : ndarray of shape ``(n_components_,)``
    means_ : ndarray of shape ``(n_components_, n_numeric)``
    covariances_ : ndarray of shape ``(n_components_, n_numeric, n_numeric)`` or ``(n_components_, n_numeric)``
    precisions_ : ndarray of the shape of ``covariances_``
    precisions_cholesky_ : ndarray of the shape of ``covariances_``
        With marginals the Gaussian block (means, covariances, precisions, and ``score_samples``)
        is in the copula's space: each numeric value as ``Φ⁻¹`` of its released CDF.
    category_probs_ : list of ndarray of shape ``(n_components_, n_categories_j + 1)``
        θ_{k,j} per categorical column, over its declared categories and "other" (last).
    categorical_columns_ : ndarray of int
        Positions of the categorical columns.
    categories_ : list of ndarray
        Their declared labels.
    dtypes_ : ndarray of str or None
        The released dtypes of the fitted DataFrame's columns, from the declarations (``dtypes``,
        ``categories``) only (None when fitted on an array).
    bounds_ : ndarray of shape ``(2, n_numeric)`` or None
        The numeric box (declared, or released by the private estimate).
    marginal_cdf_ : ndarray of shape ``(n_numeric, 69)`` or None
        Each numeric column's released CDF on its 68 public cells (``bounds_[0]`` exactly, 64 bins,
        one split at an atom at 0, ``bounds_[1]`` exactly, unused last; or its integers), or None.
    pair_tables_ : list of ndarray or None
        Calibrated: the released pair tables, post-processed (probabilities).
    n_components_ : int
        Components of the released model: ``n_components`` less those dropped as dead.
    n_iter_ : int
    converged_ : bool
        Always False in private mode.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The fitted DataFrame's column names.
    privacy_ : PrivacyRecord or None
    diagnostics_ : dict
        Rows clipped and training log-likelihood per iteration: **not private**.

    Privacy
    -------
    The numeric block ``z`` of a row is clipped to the declared (or privately estimated) box and
    mapped into the unit ball; each categorical value is one of its column's public categories
    (declared in ``categories`` or by a pandas ``category`` dtype — **if that list was inferred
    from the private data**, ``astype("category")``, the values that occur are released with the
    model) or "other".  Per iteration, for all K components at once: counts, the numeric block's
    first and second moments (the Gaussian mixture's statistics and sensitivities,
    :mod:`dpem_fast._engine._specs`) and the category sums ``T_k[s] = Σ_i γ_ik [s ∈ {s_j(x_i)}]``
    over all J columns' slots, ℓ2 sensitivity √J (add/remove) and √(2J) (replace).  Under
    replace-one they are accounted as one Gaussian mechanism, ``μ² = a_1/2 + a_2 + a_T +
    max(a_c, φ)`` (attained).  Derivations: the documentation page ("Privacy analysis in full").

    Post-processing only after the releases: the Gaussian mixture's M-step, the category
    probabilities of :func:`category_probabilities`, tail averaging and the dead-component rule
    (``n_components_``); under replace-one a fit whose counts could not be told from noise is
    refused before the charge.  The start is data-independent or, with ``means_init="private"``,
    the private start on the numeric block; the iteration count is fixed.  With marginals one
    more one-off release: the stacked 1-way histograms of the D columns, ℓ2 √D (add/remove),
    √(2D) (replace) (:mod:`dpem_fast.mixture._marginals`); calibrated, the stacked tables of
    the P column pairs, ℓ2 √P and √(2P) (:mod:`dpem_fast.mixture._calibrate`); the copula's map of a row is a
    function of that row and the released values, into the public box the mixture's numeric
    domain is.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from dpem_fast import DPMixedMixture
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=5000).clip(-4, 4),
    ...                    "c": rng.choice(["a", "b"], 5000)})
    >>> m = DPMixedMixture(2, epsilon=1.0, bounds={"x": (-4, 4)},
    ...                    categories={"c": ["a", "b"]}, random_state=0).fit(df)
    >>> list(m.sample(3)[0].columns)
    ['x', 'c']
    """

    _cli_name = "mixed"
    _saved = ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_", "category_probs_",
              "categorical_columns_", "categories_", "dtypes_", "bounds_", "marginal_cdf_", "pair_tables_", "converged_", "n_iter_",
              "n_features_in_")
    _not_saved = ("_layout", "_frame_schema", "_fit_marginals", "_fit_box")
    #: the refusal of missing values (:func:`~dpem_fast._validation.missing_values_message`) adds
    _MISSING_NOTE = (" (a data frame's categorical column counts its missing values as its 'other' category, "
                     "code -1 in an array: only numeric columns must be complete)")
    _parameter_constraints = {
        "n_components": [interval("int", 1)],
        "bounds": [None, options("from_data"), ARRAY_LIKE, instance_of(dict)],
        "categories": [instance_of(dict), None],
        "dtypes": [instance_of(dict), None],
        "covariance_type": [options(*_TYPES)],
        "budget_split": [options("auto"), positive_numbers()],
        "averaging": [options("tail", "none")],
        "means_init": [None, options("private")],
        "reg_covar": [interval("real", 0)],
        "marginals": [None, options("auto", "copula")],
        "calibrate": [None, options("auto", "pairs")],
    }

    def __init__(self, n_components=1, *, epsilon=1.0, delta=1e-5, bounds=None, categories=None, dtypes=None,
                 covariance_type="full", data_norm=None, max_iter=20, neighbouring="replace", accountant=None,
                 noise="gaussian", budget_split="auto", averaging="tail", means_init=None, reg_covar=1e-6,
                 n_threads=None, random_state=None, budget=None, verbose=0, max_rows_per_group=None,
                 marginals="auto", calibrate="auto"):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.categories = categories
        self.dtypes = dtypes
        self.covariance_type = covariance_type
        self.data_norm = data_norm
        self.max_iter = max_iter
        self.neighbouring = neighbouring
        self.accountant = accountant
        self.noise = noise
        self.budget_split = budget_split
        self.averaging = averaging
        self.means_init = means_init
        self.reg_covar = reg_covar
        self.n_threads = n_threads
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group
        self.marginals = marginals
        self.calibrate = calibrate

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, groups=None):
        """Fit the mixture on a DataFrame (numeric and categorical columns) or on rows whose
        categorical columns hold codes (an array, memory map, block source or dask array);
        see :meth:`PrivateEM.fit`.  ``groups``: person-level privacy with
        ``max_rows_per_group`` (one id per row, or the name of a DataFrame column, which is
        then not a column of the table)."""
        X, groups = split_groups(X, groups)
        if not is_frame(X) and isinstance(self.dtypes, dict):     # else refused by its constraint
            raise ValueError("dtypes: declared output dtypes apply to a data frame; an array's rows are "
                             "released as an array")
        self._frame_schema = table_schema(X, self.categories, None, self.dtypes) if is_frame(X) else None
        Xe = self._frame_schema.encode(X) if self._frame_schema is not None else X
        super().fit(Xe, y, groups)
        schema = self._schema()
        self.categorical_columns_ = np.asarray(schema.cat_cols, dtype=np.intp)
        self.categories_ = [np.asarray(c) for c in schema.categories]
        self.dtypes_ = None if schema.dtypes is None else np.array(schema.dtypes, dtype=object)
        return self

    def _schema(self):
        """The fit's schema: the data frame's, else the array's from ``categories``."""
        if getattr(self, "_frame_schema", None) is not None:
            return self._frame_schema
        return table_schema(None, self.categories, self.n_features_in_)

    def _fitted_schema(self):
        """The schema of the fitted (or loaded) model, from its saved attributes."""
        check_is_fitted(self, "category_probs_")
        names = getattr(self, "feature_names_in_", None)
        names = tuple(str(c) for c in names) if names is not None else tuple(f"x{i}" for i in range(self.n_features_in_))
        dtypes = None if self.dtypes_ is None else tuple(str(t) for t in self.dtypes_)
        return TableSchema(names, tuple(int(c) for c in self.categorical_columns_),
                           tuple(np.asarray(c) for c in self.categories_), dtypes)

    # ------------------------------------------------------------ model hooks
    def _check_model_params(self, n_samples, n_features):
        super()._check_model_params(n_samples, n_features)     # n_samples >= K where public
        schema = self._schema()
        if len(schema.names) != n_features:
            raise ValueError(f"X has {n_features} columns, the schema {len(schema.names)}")
        self._layout = schema.layout
        n = len(self._release_names())
        if not isinstance(self.budget_split, str) and len(self.budget_split) != n:
            raise ValueError(f"budget_split must be 'auto' or {n} positive finite numbers (one per release "
                             f"{self._release_names()}), got {self.budget_split!r}")
        if isinstance(self.bounds, dict):
            self._bounds_arrays(schema)
        self._check_marginals()

    def _bounds_arrays(self, schema):
        """(lo, hi) over the numeric columns, in order, from a ``bounds`` dict naming each."""
        names = schema.numeric_names
        missing = [n for n in names if n not in self.bounds]
        extra = sorted(str(k) for k in set(self.bounds) - set(names))
        if missing or extra:
            raise ValueError(f"bounds: a dict must name every numeric column and nothing else (missing "
                             f"{missing}, not numeric columns {extra}); or leave bounds=None to estimate them "
                             "privately")
        pairs = [self.bounds[n] for n in names]
        if not all(np.shape(p) == (2,) for p in pairs):
            raise ValueError("bounds: each entry must be a pair (lo, hi)")
        try:
            lo, hi = (np.array([float(p[i]) for p in pairs]) for i in (0, 1))
        except (TypeError, ValueError):
            raise TypeError("bounds: each entry must be a pair of numbers (lo, hi)") from None
        return lo, hi

    def _block_rows(self, n_rows, d):
        """Rows per block of the mixed E-step (``_mixed.block_count``: partials of
        K (1 + d + d or d² + M) doubles a block) for a call on at most ``n_rows`` rows: the ``b`` of
        the float64 rounding bound (:mod:`~dpem_fast._engine._specs`, "Rounding")."""
        lay = self._lay(d)
        K, dn = int(self.n_components), lay.d
        per = K * (1 + dn + (dn if self._ctype.diagonal else dn * dn) + lay.n_slots)
        return _contract.max_block_rows(int(n_rows), per)

    def _lay(self, n_features):
        """The layout of rows of ``n_features`` columns: the fit's, or (an unfitted model, an
        array) the one ``categories`` declares."""
        lay = getattr(self, "_layout", None)
        if lay is not None and lay.d + len(lay.cat_cols) == n_features:
            return lay
        return table_schema(None, self.categories, n_features).layout

    def _domain_columns(self, n_features):
        return np.asarray(self._lay(n_features).num_cols, dtype=np.intp)

    def _column_values(self, n_features):
        """The codes of each categorical column: ``0 .. C_j - 1`` and -1 ("other")."""
        lay = self._lay(n_features)
        return {int(j): np.arange(-1, int(c)) for j, c in zip(lay.cat_cols, lay.n_categories)}

    def _declared_domain(self, n_domain):
        if isinstance(self.bounds, dict):
            return resolve_domain(n_domain, self.data_norm, self._bounds_arrays(self._schema()))
        return resolve_domain(n_domain, self.data_norm, self.bounds)

    def _release_names(self):
        lay = self._lay(self.n_features_in_)      # the plan's (public) layout, also before a fit
        return ((COUNTS,) + ((FIRST, SECOND) if lay.d else ()) + ((CATEGORIES,) if lay.cat_cols else ()))

    def _statistic_specs(self, n_features):
        """Counts, first and second moments of the numeric block (if any) and the category sums
        (if any), with the sensitivities of the class docstring."""
        K, lay = self.n_components, self._lay(n_features)
        d, J = lay.d, len(lay.cat_cols)
        specs = [soft_counts(COUNTS, K)]
        if d:
            specs += [weighted_sums(FIRST, (K, d), d), self._ctype.second_moments(K, d)]
        if J:
            specs.append(StatSpec(CATEGORIES, (K, lay.n_slots),
                                  l2={"add_remove": math.sqrt(J), "replace": math.sqrt(2.0 * J)},
                                  l1={"add_remove": float(J), "replace": 2.0 * J}))
        return tuple(specs)

    def _shares(self):
        names = self._release_names()
        if not isinstance(self.budget_split, str):
            return dict(zip(names, map(float, self.budget_split)))
        lay = self._lay(self.n_features_in_)
        K, d, M = self.n_components, lay.d, lay.n_slots
        m = {COUNTS: K, FIRST: K * d, SECOND: self._ctype.n_parameters(K, d), CATEGORIES: K * M}
        return {n: math.sqrt(m[n]) for n in names}

    def _joint_sensitivity(self, a, neighbouring):
        """sup over neighbours of Σ_r ‖δ_r‖²/σ_r² for one iteration's releases, given
        ``a[r] = Δ_r²/σ_r²`` (documentation page, "Privacy analysis in full")."""
        a_t = a.get(CATEGORIES, 0.0)
        if FIRST not in a:
            return a[COUNTS] + a_t
        return moments_joint_bound(a[FIRST], a[SECOND], a[COUNTS], neighbouring=neighbouring,
                                   second=self.covariance_type) + a_t

    def _n_averaged(self, n_iter):
        return n_iter // 2 if self.averaging == "tail" else 0

    def _check_plan(self, plan, n_public, rounds):
        check_counts_resolvable(n_public, plan.releases[COUNTS], self._n_averaged(rounds), type(self).__name__)

    def _statistics_task(self):
        return functools.partial(_mixed_statistics, layout=self._layout, covariance_type=str(self.covariance_type),
                                 marginals=getattr(self, "_fit_marginals", None))

    def _describe(self):
        init = ("private start of the numeric means (noisy random-hyperplane cell counts and sums, 20 % of "
                "the plan)" if self._start_specs(self.n_features_in_)
                else "data-independent (random draw in the domain from the fit's own stream)")
        return (f"DP-EM moment perturbation for a mixed latent-class mixture (Gaussian x categorical), "
                f"covariance_type={self.covariance_type!r}", ("initialisation: " + init,) + self._components_note())

    def _start_specs(self, n_features):
        """The private start's two releases (``means_init="private"`` on a table with numeric
        columns: the start reads those only)."""
        lay = self._lay(n_features)
        if isinstance(self.means_init, str) and self.means_init == "private" and lay.d:
            return start_specs(self.n_components, lay.d)
        return ()

    def _private_start(self, rows, layer, domain, key, n_threads):
        """The numeric means from the private start on the numeric columns (the data-independent
        means fill in), the Gaussian block's start covariances, uniform weights and category
        probabilities (the first E-step follows the numeric start alone).  Post-processing."""
        K, lay = self.n_components, self._layout
        rows = self._release_marginals(rows, layer)     # the marginals' one-off release, if any
        if not (isinstance(self.means_init, str) and self.means_init == "private" and lay.d):
            return self._initial_parameters(rows.summary, domain, key, True)
        weights, means, _, _, theta = self._initial_parameters(rows.summary, domain, key, True)
        means = private_start(rows, layer, domain, key, K, means, columns=lay.num_cols)
        covs, prec_chol = start_covariances(self._ctype, means)
        theta = np.empty_like(theta)
        for sl in _slot_ranges(lay):
            theta[:, sl] = 1.0 / (sl.stop - sl.start)
        return weights, means, covs, prec_chol, theta

    # -------------------------------------------------------- initialisation
    def _initial_parameters(self, summary, domain, key, private):
        """Uniform weights; means uniform in the ball of radius 1/2 of the domain (of the data's
        box of the numeric columns in the non-private fit), moved into the box's image;
        covariances ``I / (4 d)`` in its units; category probabilities ∝ 1 + u (u uniform),
        all from the fit's own stream (data-independent in private mode)."""
        K, lay = self.n_components, self._layout
        d = lay.d
        weights = np.full(K, 1.0 / K)
        init_dom = domain
        if not private and d:
            num = list(lay.num_cols)
            init_dom = (copula_domain(d) if getattr(self, "_fit_marginals", None) is not None else
                        data_box(summary.column_min[num], summary.column_max[num]))
        means = np.zeros((K, d))
        prec_chol = np.zeros((K, d, d))
        if d:
            means = initial_means(K, d, key, domain, init_dom)
            prec_chol = isotropic_factors(self._ctype, math.sqrt(4.0 * d) * domain.scale / init_dom.scale, K)
        covs = typed_covariances(self._ctype, prec_chol)
        u = np.empty(K * lay.n_slots)
        _core_rng.fill_uniform(derive_key(key, "init", "categories"), 0, u, 1)
        theta = 1.0 + u.reshape(K, lay.n_slots)
        for sl in _slot_ranges(lay):
            theta[:, sl] /= theta[:, sl].sum(axis=1, keepdims=True)
        return weights, means, covs, prec_chol, theta

    @property
    def _ctype(self):
        """The covariance type's entry of the Gaussian block's table."""
        return COVARIANCES[self.covariance_type]

    # --------------------------------------------------------------- updates
    def _update(self, noisy, params, ctx):
        K, lay = self.n_components, self._layout
        nk = noisy[COUNTS]
        if lay.d:
            weights, means, covs = private_m_step(nk, noisy[FIRST], noisy[SECOND], ctx.releases, self.reg_covar,
                                                  None, ctx.domain, self.covariance_type, ctx.n_public)
            prec_chol = self._ctype.precision_cholesky(covs, K, lay.d)
        else:
            weights, means, covs, prec_chol = weights_from_counts(nk), params[1], params[2], params[3]
        theta = _probabilities(noisy[CATEGORIES], nk, ctx.releases, lay) if lay.cat_cols else params[4]
        return weights, means, covs, prec_chol, theta

    def _finish(self, params, noisy, ctx):
        """Drop the components whose noisy counts are indistinguishable from zero
        (:func:`~dpem_fast._engine._components.live_components`; post-processing)."""
        live = self._keep_live(live_components(noisy[COUNTS], ctx.releases[COUNTS], type(self).__name__,
                                               n_public=ctx.n_public,
                                               resolution=GAUSSIAN_MERGE_REASON if self._layout.d else None))
        if self._layout.d:
            warn_if_covariances_unresolved(noisy[COUNTS][live], ctx.releases, ctx.domain, type(self).__name__,
                                           self.covariance_type, ctx.n_public)
        weights, means, covs, prec_chol, theta = params
        return weights[live] / weights[live].sum(), means[live], covs[live], prec_chol[live], theta[live]

    def _exact_update(self, stats, params):
        K, lay = self.n_components, self._layout
        if lay.d:
            weights, means, covs = exact_m_step(stats, self.reg_covar, self.covariance_type)
            prec_chol = self._ctype.precision_cholesky(covs, K, lay.d)
        else:
            nk = stats[COUNTS] + 10 * np.finfo(np.float64).eps
            weights, means, covs, prec_chol = nk / nk.sum(), params[1], params[2], params[3]
        theta = params[4]
        if lay.cat_cols:
            theta = stats[CATEGORIES] + 10 * np.finfo(np.float64).eps
            for sl in _slot_ranges(lay):
                theta[:, sl] /= theta[:, sl].sum(axis=1, keepdims=True)
        return weights, means, covs, prec_chol, theta

    def _set_fitted(self, params, domain, dtype):
        """Parameters back to the original units (post-processing): the Gaussian block's back-map
        for the numeric block; the category probabilities split per column; the numeric box kept
        for ``sample``."""
        weights, means, covs, prec_chol, theta = params
        if domain is None:              # no numeric column: nothing to map back
            domain = DataDomain(np.zeros(0), np.ones(0), None, False)
        set_fitted_gaussian(self, self._ctype, weights, means, covs, prec_chol, domain, dtype)
        self.category_probs_ = [theta[:, sl].copy() for sl in _slot_ranges(self._layout)]
        box = domain.bounds
        self.bounds_ = None if box is None else np.stack([box[0], box[1]]).astype(np.float64)
        self.converged_ = False
        self._set_marginals()           # with marginals: their box and CDFs, the raked categories

    # ------------------------------------------------------------- inference
    def _model_arrays(self):
        lay = self._fitted_schema().layout
        prec = np.asarray(self.precisions_cholesky_, dtype=np.float64)
        theta = (np.concatenate([np.asarray(p, dtype=np.float64) for p in self.category_probs_], axis=1)
                 if self.category_probs_ else np.zeros((self.n_components_, 0)))
        with np.errstate(divide="ignore"):
            log_theta = np.log(theta)
        return lay, np.asarray(self.means_, dtype=np.float64), prec, log_theta

    def _log_resp(self, X):
        schema = self._fitted_schema()
        X = self._check_X(schema.encode(X) if is_frame(X) else X)
        lay, means, prec, log_theta = self._model_arrays()
        X = to_model_space(X, lay, self._fitted_marginals())
        return mixed_log_resp(X, lay, self.weights_, means, prec, log_theta, self.covariance_type,
                              n_threads=effective_n_threads(self.n_threads))

    def _n_parameters(self):
        K, d = self.n_components_, self._fitted_schema().layout.d
        cats = sum(K * (p.shape[1] - 1) for p in self.category_probs_)
        return int(self._ctype.n_parameters(K, d) + K * d + K - 1 + cats)
