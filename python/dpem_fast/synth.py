"""Fidelity of a synthetic table against real rows held out: :func:`synth_report`.

**Not private.**  Every number here is computed from the real rows passed in (a hold-out set
the user keeps; it must not be published with the synthetic data).  Use it to choose a model
or a budget on data you hold, not as a release.

The grid is public: numeric columns are binned on equal-width bins between declared bounds
(a fitted :class:`~dpem_fast.DPMixedMixture` gives its public ``bounds_`` and categories),
categorical columns on their declared categories plus one cell for everything else (unknown
or missing).  Values beyond the bounds fall in the outer bins.

.. versionadded:: 0.1 (issue 28)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SynthReport", "synth_report", "table_grid"]


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
        return {"mean_column_tvd": self.mean_column_tvd, "mean_pair_tvd": self.mean_pair_tvd,
                "max_pair_tvd": self.max_pair_tvd, "corr_error": self.corr_error,
                "tstr_accuracy": self.tstr_accuracy, "trtr_accuracy": self.trtr_accuracy,
                "majority_accuracy": self.majority_accuracy}

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


def synth_report(real_holdout, synthetic, target=None, *, grid=None, bins=16, real_train=None, classifier=None,
                 random_state=0):
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
    if grid is not None and not isinstance(grid, dict):
        grid = table_grid(grid, bins)
    if grid is None:
        import pandas as pd
        grid = {}
        for c in cols:
            if pd.api.types.is_numeric_dtype(real_holdout[c]) and not pd.api.types.is_bool_dtype(real_holdout[c]):
                v = np.asarray(real_holdout[c], dtype=np.float64)
                grid[c] = np.linspace(np.nanmin(v), np.nanmax(v), int(bins) + 1)
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
    return report
