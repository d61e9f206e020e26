"""Fidelity of a synthetic table against real rows held out: :func:`synth_report`.

**Not private.**  Every number here is computed from the real rows passed in (a hold-out set
the user keeps; it must not be published with the synthetic data).  Use it to choose a model
or a budget on data you hold, not as a release.

The grid is public: numeric columns are binned on equal-width bins between declared bounds
(a fitted :class:`~dpem_fast.DPMixedMixture` gives its public ``bounds_`` and categories),
categorical columns on their declared categories plus one cell for everything else (unknown
or missing).  Values beyond the bounds fall in the outer bins.

The **trivial synthesizer** (:func:`independent_baseline`, issue 37) is the reference every
model must beat: noisy 1-way histograms on the same grid at the same (ε, δ), each column
sampled independently.  ``synth_report(..., baseline_epsilon=ε, real_train=...)`` scores it
next to the model and warns when the model's mean 2-way distance is not below it.  That check
reads the real rows (training and hold-out): it is part of this non-private report, not of a
fit — a fit cannot judge 2-way fidelity from its released values alone.

.. versionadded:: 0.1 (issue 28)
"""
from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SynthReport", "synth_report", "table_grid", "independent_baseline"]


@dataclass
class SynthReport:
    """What :func:`synth_report` measured (computed from real hold-out rows: NOT private).

    Attributes
    ----------
    column_tvd : dict of str to float
        Total variation distance of each column's distribution on the grid (0: equal, 1: disjoint).
    pair_tvd : dict of (str, str) to float
        Total variation distance of every pair's joint distribution on the grid.
    mean_column_tvd, mean_pair_tvd, max_pair_tvd : float
    corr_error : float or None
        Mean absolute difference of the pairwise Pearson correlations of the numeric columns
        (off-diagonal entries; None with fewer than two numeric columns).
    corr_real, corr_synthetic : ndarray or None
        The two correlation matrices (numeric columns, in order).
    target : str or None
    tstr_accuracy : float or None
        Accuracy on the real hold-out rows of a classifier trained on the synthetic rows to
        predict ``target`` (train on synthetic, test on real).
    trtr_accuracy : float or None
        The same classifier trained on ``real_train`` (when given): what real data reaches.
    majority_accuracy : float or None
        Accuracy of always predicting the synthetic rows' most frequent class.
    """

    column_tvd: dict
    pair_tvd: dict
    corr_error: float | None
    corr_real: np.ndarray | None
    corr_synthetic: np.ndarray | None
    numeric: list
    target: str | None = None
    tstr_accuracy: float | None = None
    trtr_accuracy: float | None = None
    majority_accuracy: float | None = None
    private: bool = field(default=False, repr=False)
    baseline: "SynthReport | None" = field(default=None, repr=False)

    @property
    def mean_column_tvd(self):
        return float(np.mean(list(self.column_tvd.values())))

    @property
    def mean_pair_tvd(self):
        return float(np.mean(list(self.pair_tvd.values()))) if self.pair_tvd else float("nan")

    @property
    def max_pair_tvd(self):
        return float(np.max(list(self.pair_tvd.values()))) if self.pair_tvd else float("nan")

    def summary(self):
        """The headline numbers as a dict."""
        out = {"mean_column_tvd": self.mean_column_tvd, "mean_pair_tvd": self.mean_pair_tvd,
               "max_pair_tvd": self.max_pair_tvd, "corr_error": self.corr_error,
               "tstr_accuracy": self.tstr_accuracy, "trtr_accuracy": self.trtr_accuracy,
               "majority_accuracy": self.majority_accuracy}
        if self.baseline is not None:       # the trivial synthesizer at the same epsilon
            b = self.baseline
            out.update(baseline_column_tvd=b.mean_column_tvd, baseline_pair_tvd=b.mean_pair_tvd,
                       baseline_corr_error=b.corr_error, baseline_tstr_accuracy=b.tstr_accuracy)
        return out

    def __str__(self):
        lines = ["synthetic-data fidelity (computed on real hold-out rows: NOT private, do not publish)"]
        for k, v in self.summary().items():
            if v is not None:
                lines.append(f"  {k:<18} {v:.4f}")
        worst = sorted(self.pair_tvd.items(), key=lambda kv: -kv[1])[:3]
        if worst:
            lines.append("  worst pairs        " + ", ".join(f"{a}×{b} {v:.3f}" for (a, b), v in worst))
        return "\n".join(lines)


def _is_frame(X):
    return hasattr(X, "columns") and hasattr(X, "iloc")


def table_grid(model, bins=16):
    """The public grid of a fitted :class:`~dpem_fast.DPMixedMixture`: ``bins`` equal-width bins
    between its ``bounds_`` for each numeric column, its declared categories for each
    categorical one (``{column: edges or labels}``)."""
    names = getattr(model, "feature_names_in_", None)
    names = list(names) if names is not None else [f"x{i}" for i in range(model.n_features_in_)]
    cats = {int(c): list(v) for c, v in zip(model.categorical_columns_, model.categories_)}
    if model.bounds_ is None and len(cats) < len(names):
        raise ValueError("grid: the model has no box for its numeric columns (fitted with data_norm only); "
                         "give a dict {column: bin edges}")
    grid, j = {}, 0
    for i, name in enumerate(names):
        if i in cats:
            grid[name] = cats[i]
        else:
            grid[name] = np.linspace(model.bounds_[0][j], model.bounds_[1][j], int(bins) + 1)
            j += 1
    return grid


def _is_edges(spec):
    """A numeric column's spec: an ndarray of float bin edges (a list is a list of labels)."""
    return isinstance(spec, np.ndarray) and spec.dtype.kind == "f"


def _cells(col, spec):
    """Integer cell of each value: bin edges bin it, values beyond the outer edges in the outer
    bins; a label list gives the label's position, anything else (unknown, missing) the last
    cell.  Returns (cells, number of cells)."""
    if _is_edges(spec):
        v = np.asarray(col, dtype=np.float64)
        c = np.clip(np.searchsorted(spec, v, side="right") - 1, 0, spec.size - 2)
        return c, spec.size - 1
    labels = list(spec)
    index = {lab: i for i, lab in enumerate(labels)}
    c = np.fromiter((index.get(v, len(labels)) for v in np.asarray(col, dtype=object).tolist()), dtype=np.int64,
                    count=len(col))
    return c, len(labels) + 1


def _tvd(a, b, size):
    p = np.bincount(a, minlength=size) / max(a.size, 1)
    q = np.bincount(b, minlength=size) / max(b.size, 1)
    return 0.5 * float(np.abs(p - q).sum())


def _features(df, grid, target):
    """Numeric columns as they are, categorical ones one-hot on their declared labels (a fixed
    design: the same columns for the synthetic and the real rows)."""
    parts = []
    for name, spec in grid.items():
        if name == target:
            continue
        if _is_edges(spec):
            parts.append(np.asarray(df[name], dtype=np.float64)[:, None])
        else:
            c, size = _cells(df[name], spec)
            parts.append(np.eye(size)[c])
    return np.hstack(parts) if parts else np.zeros((len(df), 0))


def _grid_cells(df, grid):
    """The column codes of ``df`` on ``grid`` and each column's number of cells."""
    return [_cells(df[c], spec) for c, spec in grid.items()]


def independent_baseline(real_train, grid, epsilon, delta=1e-5, *, neighbouring="add_remove", n_samples=None,
                         random_state=0):
    """The trivial synthesizer: every column's histogram on the public ``grid`` released with
    Gaussian noise at (``epsilon``, ``delta``), then each column sampled independently (a
    numeric bin uniformly within it, a categorical cell as its label; the last cell, "other",
    is never drawn).

    One release of the stacked histograms (:func:`~dpem_fast._engine._specs.column_histograms`:
    ℓ2 √D under add/remove, √(2D) under replace), calibrated by the engine's plan and drawn by its
    release layer (a ledger-less run); each column's noisy counts are projected onto the simplex (the mixture's
    marginals' post-processing).  A reference for :func:`synth_report`, computed here from the
    rows passed in: no budget ledger is charged and no privacy record is kept.

    Parameters
    ----------
    real_train : pandas DataFrame
    grid : dict
        ``{column: bin edges (float ndarray) or labels}`` (public; as :func:`synth_report`'s).
    epsilon, delta : float
    neighbouring : {"add_remove", "replace"}
    n_samples : int or None
        Rows to draw (default: as many as ``real_train``).
    random_state : int
    """
    import pandas as pd

    from ._engine._loops import PrivateRun
    from ._engine._plan import make_plan
    from ._engine._specs import column_histograms
    from ._rng import make_key
    from .mixture._marginals import _simplex

    cols = list(grid)
    cells = _grid_cells(real_train, grid)
    counts = np.concatenate([np.bincount(c, minlength=m) for c, m in cells]).astype(np.float64)
    spec = column_histograms("baseline", len(cols), counts.size)
    plan = make_plan((), 1, epsilon=float(epsilon), delta=float(delta), neighbouring=neighbouring,
                     accountant="gdp", one_off_specs=(spec,), one_off_share=0.5)
    noisy, _ = PrivateRun(plan, make_key(random_state), delta=float(delta)).once(        # no ledger: a reference
        {"baseline": counts}, mechanism="independent noisy 1-way histograms", data_domain={"source": "declared grid"})
    noisy = noisy["baseline"]
    parts = np.split(noisy, np.cumsum([m for _, m in cells])[:-1])
    total = max(float(np.mean([p.sum() for p in parts])), 1.0)
    n = len(real_train) if n_samples is None else int(n_samples)
    rng = np.random.default_rng(random_state)
    out = {}
    for c, part in zip(cols, parts):
        spec_c = grid[c]
        p = _simplex(part, total)
        if not _is_edges(spec_c):
            p = p[:-1]                  # declared labels only
        p = p / p.sum() if p.sum() > 0 else np.full(p.size, 1.0 / p.size)
        k = rng.choice(p.size, size=n, p=p)
        if _is_edges(spec_c):
            out[c] = spec_c[k] + rng.random(n) * (spec_c[k + 1] - spec_c[k])
        else:
            out[c] = np.array(list(spec_c), dtype=object)[k]
    return pd.DataFrame(out)[cols]


def _refuse_missing_numbers(**frames):
    """Refuse an empty table, and missing or infinite values in a numeric column, of any of
    ``frames`` (named by their keyword), naming the columns, never a value or a count: the
    report's errors would otherwise be computed on fewer rows, or an infinite value would pass
    into an outer bin and turn the correlations into NaN (then 0), without a word.  A
    categorical column's missing values are its "other" cell (as :meth:`DPMixedMixture.sample`
    writes them)."""
    import pandas as pd

    for name, frame in frames.items():
        if frame is None:
            continue
        if len(frame) == 0:
            raise ValueError(f"{name}: no rows; the report compares tables of at least one row each")
        numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
                   and not pd.api.types.is_bool_dtype(frame[c])]
        holes = [str(c) for c in numeric if frame[c].isna().any()]
        if holes:
            raise ValueError(f"{name}: Input contains NaN (missing values) in numeric column(s) "
                             f"{', '.join(map(repr, holes))}: drop or impute those rows before the report "
                             "(a categorical column's missing values are its 'other' category)")
        infinite = [str(c) for c in numeric if np.isinf(np.asarray(frame[c], dtype=np.float64)).any()]
        if infinite:
            raise ValueError(f"{name}: infinite values in numeric column(s) {', '.join(map(repr, infinite))}: drop "
                             "or clip those rows before the report (they would leave the bins' range and "
                             "void the correlations)")


def synth_report(real_holdout, synthetic, target=None, *, grid=None, bins=16, real_train=None, classifier=None,
                 random_state=0, baseline_epsilon=None, baseline_delta=1e-5, baseline_neighbouring="add_remove"):
    """Marginal, pairwise, correlation and train-on-synthetic fidelity of ``synthetic`` against
    ``real_holdout`` (pandas DataFrames with the same columns).  **Not private**: computed from
    the real rows passed in, a hold-out set the user keeps.

    Parameters
    ----------
    real_holdout, synthetic : pandas DataFrame
    target : str or None
        Column to predict for the train-on-synthetic / test-on-real accuracy (categorical, or
        numeric binned on the grid).
    grid : dict, fitted DPMixedMixture or None
        The public grid: ``{column: bin edges (a float ndarray, numeric columns) or a list of
        labels (categorical columns)}``, or a fitted
        :class:`~dpem_fast.DPMixedMixture` (:func:`table_grid`: ``bins`` bins between its public
        bounds, its declared categories).  ``None``: numeric columns on ``bins`` equal-width bins
        over the hold-out's range and categorical (non-numeric dtype) columns on the hold-out's
        values — a grid read from the real rows (fine for a report, which is not private).
    bins : int, default=16
    real_train : pandas DataFrame or None
        Real training rows: adds the train-on-real accuracy of the same classifier for reference.
    classifier : scikit-learn classifier or None
        Default ``HistGradientBoostingClassifier(early_stopping=False, random_state=random_state)``.
    baseline_epsilon : float or None
        With ``real_train``: also score the trivial synthesizer (:func:`independent_baseline`
        on ``real_train`` at this ε, ``baseline_delta`` and ``baseline_neighbouring``, as many
        rows as ``synthetic``) in ``report.baseline`` and the ``baseline_*`` entries of
        ``summary()``; warn (``UserWarning``) when ``synthetic``'s mean 2-way distance is not
        below the baseline's.

    Returns
    -------
    SynthReport
    """
    if not (_is_frame(real_holdout) and _is_frame(synthetic)):
        raise TypeError("real_holdout and synthetic must be pandas DataFrames")
    cols = [str(c) for c in real_holdout.columns]
    if [str(c) for c in synthetic.columns] != cols:
        raise ValueError(f"synthetic has columns {list(synthetic.columns)}, real_holdout {cols}")
    if target is not None and target not in cols:
        raise ValueError(f"target: no column {target!r}")
    _refuse_missing_numbers(real_holdout=real_holdout, synthetic=synthetic, real_train=real_train)
    if grid is not None and not isinstance(grid, dict):
        grid = table_grid(grid, bins)
    if grid is None:
        import pandas as pd
        grid = {}
        for c in cols:
            if pd.api.types.is_numeric_dtype(real_holdout[c]) and not pd.api.types.is_bool_dtype(real_holdout[c]):
                v = np.asarray(real_holdout[c], dtype=np.float64)
                lo, hi = float(v.min()), float(v.max())
                if not hi > lo:                  # a constant column: bins around its one value
                    lo, hi = lo - 0.5 * max(abs(lo), 1.0), hi + 0.5 * max(abs(hi), 1.0)
                grid[c] = np.linspace(lo, hi, int(bins) + 1)
            else:
                grid[c] = sorted(set(real_holdout[c].dropna().tolist()), key=str)
    missing = [c for c in cols if c not in grid]
    if missing:
        raise ValueError(f"grid: no cells for column(s) {missing}")
    grid = {c: grid[c] if _is_edges(grid[c]) else list(grid[c]) for c in cols}
    for c, spec in grid.items():
        if _is_edges(spec) and (spec.ndim != 1 or spec.size < 2 or not np.all(np.diff(spec) > 0)):
            raise ValueError(f"grid[{c!r}]: bin edges must be an increasing float array of at least 2 values")
    cells = {c: (_cells(real_holdout[c], grid[c]), _cells(synthetic[c], grid[c])) for c in cols}
    column_tvd = {c: _tvd(r[0], s[0], r[1]) for c, (r, s) in cells.items()}
    pair_tvd = {}
    for a, b in itertools.combinations(cols, 2):
        (ra, na), (sa, _) = cells[a]
        (rb, nb), (sb, _) = cells[b]
        pair_tvd[(a, b)] = _tvd(ra * nb + rb, sa * nb + sb, na * nb)
    numeric = [c for c in cols if _is_edges(grid[c])]
    corr_real = corr_syn = corr_error = None
    if len(numeric) >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            corr_real = np.corrcoef(np.asarray(real_holdout[numeric], dtype=np.float64), rowvar=False)
            corr_syn = np.corrcoef(np.asarray(synthetic[numeric], dtype=np.float64), rowvar=False)
        corr_real, corr_syn = np.nan_to_num(corr_real), np.nan_to_num(corr_syn)
        off = ~np.eye(len(numeric), dtype=bool)
        corr_error = float(np.mean(np.abs(corr_real - corr_syn)[off]))
    report = SynthReport(column_tvd, pair_tvd, corr_error, corr_real, corr_syn, numeric, target)
    if target is not None:
        from sklearn.base import clone
        from sklearn.ensemble import HistGradientBoostingClassifier

        clf = classifier if classifier is not None else HistGradientBoostingClassifier(early_stopping=False,
                                                                                      random_state=random_state)
        y_syn, y_real = cells[target][1][0], cells[target][0][0]
        X_syn, X_real = _features(synthetic, grid, target), _features(real_holdout, grid, target)
        classes = np.unique(y_syn)
        report.majority_accuracy = float(np.mean(y_real == np.bincount(y_syn).argmax()))
        if classes.size < 2:
            report.tstr_accuracy = report.majority_accuracy
        else:
            report.tstr_accuracy = float(np.mean(clone(clf).fit(X_syn, y_syn).predict(X_real) == y_real))
        if real_train is not None:
            y_tr = _cells(real_train[target], grid[target])[0]
            report.trtr_accuracy = float(np.mean(clone(clf).fit(_features(real_train, grid, target), y_tr)
                                                 .predict(X_real) == y_real))
    if baseline_epsilon is not None:
        if real_train is None:
            raise ValueError("baseline_epsilon: the trivial synthesizer is fitted on real_train; pass it")
        base = independent_baseline(real_train, grid, baseline_epsilon, baseline_delta,
                                    neighbouring=baseline_neighbouring, n_samples=len(synthetic),
                                    random_state=random_state)
        report.baseline = synth_report(real_holdout, base, target, grid=grid, classifier=classifier,
                                       random_state=random_state)
        if not report.mean_pair_tvd < report.baseline.mean_pair_tvd:
            warnings.warn(f"the synthetic table's mean 2-way TVD {report.mean_pair_tvd:.4f} is not below the "
                          f"trivial synthesizer's {report.baseline.mean_pair_tvd:.4f} (independent noisy 1-way "
                          f"histograms at epsilon={baseline_epsilon}); measured on the hold-out rows (not private)",
                          UserWarning, stacklevel=2)
    return report
