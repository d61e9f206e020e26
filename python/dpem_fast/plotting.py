"""Figures of private models and of the benchmark results (matplotlib, optional).

``pip install dpem_fast[plot]``.  matplotlib is imported inside each function, so that
``import dpem_fast.plotting`` works without it; every function returns the
:class:`matplotlib.figure.Figure` (pass ``ax=`` to draw into an existing axes where
offered).  Nothing here reads private data unless the caller passes it: the model figures
draw the released (post-processed) parameters, and :func:`mixture_ellipses` scatters rows
only when ``X`` is given explicitly.

.. versionadded:: 0.1 (issue 15)
"""
from __future__ import annotations

import csv
import math
import os

import numpy as np

__all__ = ["privacy_utility", "mixture_ellipses", "loadings_grid", "top_words", "synth_fidelity"]

#: Utility columns of the benchmark CSVs (bench/*.py), tried in this order.
UTILITY_COLUMNS = ("test_ll", "perplexity", "error")
#: Columns that label a curve (method, accountant, ...), in this order when present.
GROUP_COLUMNS = ("dataset", "scenario", "method", "accountant", "batch_size", "sigma")


def _new_figure(figsize):
    """A new Figure, not registered with pyplot (no global state, no backend chosen):
    ``fig.savefig`` renders it with Agg for raster formats."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("dpem_fast.plotting needs matplotlib: pip install \"dpem_fast[plot]\"") from exc
    return Figure(figsize=figsize, layout="constrained")


def _figure(ax, figsize):
    """(figure, axes): a new figure, or ax's."""
    if ax is not None:
        return ax.figure, ax
    fig = _new_figure(figsize)
    return fig, fig.add_subplot()


# ---------------------------------------------------------------- benchmark curves
def _number(v):
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def _rows(data):
    """List of dicts from a CSV path, a pandas DataFrame or an iterable of mappings."""
    if isinstance(data, (str, os.PathLike)):
        if not os.path.isfile(data):
            raise ValueError(f"data: no such file: {data}")
        with open(data, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    elif hasattr(data, "to_dict") and hasattr(data, "columns"):
        rows = data.to_dict("records")
    else:
        try:
            rows = [dict(r) for r in data]
        except (TypeError, ValueError):
            raise TypeError("data must be a CSV path, a pandas DataFrame or an iterable of mappings, "
                            f"got {type(data).__name__}") from None
    if not rows:
        raise ValueError("data: no rows")
    return [{k: _number(v) for k, v in r.items()} for r in rows]


def privacy_utility(data, *, y=None, x="epsilon", group=None, where=None, ax=None, figsize=(6.4, 4.0),
                    title=None, logx=True):
    """Privacy-utility curves from a benchmark CSV: mean utility against ε, one curve per method.

    Reads what ``bench/dpem_figures.py``, ``bench/gap_closed.py``, ``bench/lda_figure.py`` and
    ``bench/dgem_figures.py`` write: one row per (setting, repeat), an ``epsilon`` column
    (``inf`` for the non-private reference) and a utility column.

    Parameters
    ----------
    data : str, path, pandas.DataFrame or iterable of dict
    y : str, optional
        Utility column; default the first of :data:`UTILITY_COLUMNS` present.
    x : str, default="epsilon"
    group : sequence of str, optional
        Columns whose values label a curve; default those of :data:`GROUP_COLUMNS` present.
    where : dict, optional
        Keep only rows whose column equals the value (e.g. ``{"t": 20}`` for the last
        iteration of ``dgem_errors.csv``).
    ax : matplotlib Axes, optional
    figsize : (float, float)
    title : str, optional
    logx : bool, default=True

    Returns
    -------
    matplotlib.figure.Figure
        One errorbar curve per group (mean ± standard deviation over repeats, x sorted);
        a group whose ``x`` is infinite (the non-private fit) is a dashed horizontal line
        at its mean, labelled "... (no privacy)".
    """
    rows = _rows(data)
    cols = list(rows[0])
    if y is None:
        y = next((c for c in UTILITY_COLUMNS if c in cols), None)
        if y is None:
            raise ValueError(f"y: none of {UTILITY_COLUMNS} is a column of data (columns: {cols}); pass y=")
    for name, col in (("x", x), ("y", y)):
        if col not in cols:
            raise ValueError(f"{name}: no column {col!r} in data (columns: {cols})")
    if group is None:
        group = [c for c in GROUP_COLUMNS if c in cols and c not in (x, y)]
    elif isinstance(group, str):
        group = [group]
    for c in group:
        if c not in cols:
            raise ValueError(f"group: no column {c!r} in data (columns: {cols})")
    if where:
        for c, v in where.items():
            if c not in cols:
                raise ValueError(f"where: no column {c!r} in data (columns: {cols})")
        rows = [r for r in rows if all(r[c] == _number(v) for c, v in where.items())]
        if not rows:
            raise ValueError(f"where={where!r} keeps no rows")
    curves = {}
    for r in rows:
        xv, yv = r[x], r[y]
        if not isinstance(xv, float) or not isinstance(yv, float):
            raise ValueError(f"columns {x!r} and {y!r} must be numeric, got {xv!r}, {yv!r}")
        label = ", ".join(f"{r[c]:g}" if isinstance(r[c], float) else str(r[c]) for c in group) or y
        curves.setdefault(label, {}).setdefault(xv, []).append(yv)

    fig, ax = _figure(ax, figsize)
    i = 0
    for label, points in curves.items():
        finite = sorted(v for v in points if math.isfinite(v))
        for v in points:
            if not math.isfinite(v):
                ax.axhline(float(np.mean(points[v])), color="k", ls="--", lw=1, label=f"{label} (no privacy)")
        if finite:
            mu = [float(np.mean(points[v])) for v in finite]
            sd = [float(np.std(points[v])) for v in finite]
            ax.errorbar(finite, mu, yerr=sd, marker="o", ms=4, capsize=2, color=f"C{i % 10}", label=label)
            i += 1
    if logx and all(v > 0 for pts in curves.values() for v in pts if math.isfinite(v)):
        ax.set_xscale("log")
    ax.set_xlabel("ε" if x == "epsilon" else x)
    ax.set_ylabel(y)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


# ------------------------------------------------------------------------- models
def _fitted(model, attrs, what):
    missing = [a for a in attrs if not hasattr(model, a)]
    if missing:
        raise ValueError(f"model: {type(model).__name__} is not a fitted {what} (no {', '.join(missing)}); "
                         "call fit first")


def mixture_ellipses(model, X=None, *, ax=None, n_std=2.0, figsize=(5.0, 5.0), title=None):
    """The components of a fitted 2-D Gaussian mixture as ellipses of ``n_std`` standard deviations.

    Parameters
    ----------
    model : fitted DPGaussianMixture (``means_``, ``covariances_`` of shape (K, 2, 2), ``weights_``)
    X : array of shape (n_samples, 2), optional
        Rows to scatter underneath.  Only what is passed here is drawn: pass private data only
        if the figure stays private.
    ax, figsize, title : as :func:`privacy_utility`
    n_std : float, default=2.0

    Returns
    -------
    matplotlib.figure.Figure
        One :class:`matplotlib.patches.Ellipse` per component, centred on its mean, with axes
        ``2 n_std sqrt(eigenvalues)`` of its covariance; the mean marked with "+".
    """
    _fitted(model, ("means_", "covariances_"), "Gaussian mixture")
    means = np.asarray(model.means_, dtype=np.float64)
    covs = np.asarray(model.covariances_, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != 2:
        raise ValueError(f"model: mixture_ellipses draws 2-D mixtures, this one has means_ of shape {means.shape}")
    if covs.shape != (means.shape[0], 2, 2):
        raise ValueError(f"model: covariances_ must have shape ({means.shape[0]}, 2, 2) (full covariances), "
                         f"got {covs.shape}")
    if not (isinstance(n_std, (int, float, np.integer, np.floating)) and n_std > 0 and math.isfinite(n_std)):
        raise ValueError(f"n_std must be finite and > 0, got {n_std!r}")
    weights = np.asarray(getattr(model, "weights_", np.full(len(means), 1.0 / len(means))), dtype=np.float64)
    fig, ax = _figure(ax, figsize)
    from matplotlib.patches import Ellipse

    if X is not None:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != 2:
            raise ValueError(f"X must have shape (n_samples, 2), got {X.shape}")
        ax.scatter(X[:, 0], X[:, 1], s=4, color="0.6", alpha=0.5, label="data")
    top = float(weights.max()) if weights.size else 1.0
    for k, (m, c) in enumerate(zip(means, covs)):
        vals, vecs = np.linalg.eigh((c + c.T) / 2)
        vals = np.clip(vals, 0.0, None)
        angle = math.degrees(math.atan2(vecs[1, 1], vecs[0, 1]))     # direction of the larger axis
        e = Ellipse(tuple(m), 2 * n_std * math.sqrt(vals[1]), 2 * n_std * math.sqrt(vals[0]), angle=angle,
                    fill=False, lw=2, color=f"C{k % 10}", alpha=0.3 + 0.7 * float(weights[k]) / top,
                    label=f"component {k} (weight {weights[k]:.2f})")
        ax.add_patch(e)
        ax.plot(m[0], m[1], "+", color=f"C{k % 10}", ms=10)
    ax.autoscale_view()
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title(title or f"{type(model).__name__}: {len(means)} components, {n_std:g} s.d.")
    ax.legend(fontsize=7)
    return fig


def loadings_grid(components, image_shape, *, n_cols=None, cmap="RdBu_r", figsize=None, title=None):
    """Factor loadings (or any rows of image pixels) as a grid of images, one axes per row.

    Parameters
    ----------
    components : array of shape (n_components, n_pixels), or a fitted model with ``components_``
        e.g. :attr:`DPFactorAnalysis.components_` fitted on images.
    image_shape : (int, int)
        Height and width; ``height * width`` must equal ``n_pixels``.
    n_cols : int, optional
        Default ``ceil(sqrt(n_components))``.
    cmap : str, default="RdBu_r"
        Each image has symmetric colour limits ``±max|loading|`` (0 is the middle colour).
    figsize : (float, float), optional
        Default 1.6 inches per image.

    Returns
    -------
    matplotlib.figure.Figure
        Exactly ``n_components`` axes, each an image titled "factor k".
    """
    if hasattr(components, "components_"):
        components = components.components_
    elif not isinstance(components, (np.ndarray, list, tuple)):
        raise TypeError(f"components must be an array or a fitted model with components_, "
                        f"got {type(components).__name__} (is it fitted?)")
    W = np.asarray(components, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] == 0:
        raise ValueError(f"components must be a non-empty 2-D array (n_components, n_pixels), got shape {W.shape}")
    try:
        h, w = (int(s) for s in image_shape)
    except (TypeError, ValueError):
        raise ValueError(f"image_shape must be (height, width), got {image_shape!r}") from None
    if h < 1 or w < 1 or h * w != W.shape[1]:
        raise ValueError(f"image_shape {image_shape!r} has {h * w} pixels but components have {W.shape[1]}")
    if not np.all(np.isfinite(W)):
        raise ValueError("components must be finite")
    n = W.shape[0]
    cols = int(math.ceil(math.sqrt(n))) if n_cols is None else int(n_cols)
    if cols < 1:
        raise ValueError(f"n_cols must be >= 1, got {n_cols!r}")
    rows = int(math.ceil(n / cols))
    fig = _new_figure(figsize or (1.6 * cols, 1.6 * rows + (0.4 if title else 0.0)))
    for k in range(n):
        ax = fig.add_subplot(rows, cols, k + 1)
        lim = float(np.abs(W[k]).max()) or 1.0
        ax.imshow(W[k].reshape(h, w), cmap=cmap, vmin=-lim, vmax=lim, interpolation="nearest")
        ax.set_title(f"factor {k}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title)
    return fig


def top_words(model, vocabulary=None, n_words=10, *, topics=None, n_cols=None, figsize=None, title=None):
    """The ``n_words`` heaviest words of each topic of a fitted topic model, as bar charts.

    Parameters
    ----------
    model : fitted DPLatentDirichletAllocation (``components_`` of shape (K, V))
    vocabulary : sequence of str, optional
        The public vocabulary of the columns; default ``model.vocabulary``.
    n_words : int, default=10
    topics : sequence of int, optional
        Which topics (default all).
    n_cols : int, optional
    figsize : (float, float), optional

    Returns
    -------
    matplotlib.figure.Figure
        One axes per topic, titled "topic k"; its y tick labels are the top words, heaviest
        at the top, and the bars their share of the topic's weight (λ_kv / Σ_v λ_kv).
    """
    from ._text import top_word_indices

    _fitted(model, ("components_",), "topic model")
    lam = np.asarray(model.components_, dtype=np.float64)
    if vocabulary is None:
        vocabulary = getattr(model, "vocabulary", None)
        if vocabulary is None:
            raise ValueError("vocabulary: the model was fitted without one; pass the public vocabulary")
    if isinstance(vocabulary, str) or len(vocabulary) != lam.shape[1]:
        n = "a str" if isinstance(vocabulary, str) else len(vocabulary)
        raise ValueError(f"vocabulary has {n} words but the model has {lam.shape[1]} columns")
    idx = top_word_indices(lam, n_words)
    K = lam.shape[0]
    topics = list(range(K)) if topics is None else [int(k) for k in topics]
    if not topics or any(not 0 <= k < K for k in topics):
        raise ValueError(f"topics must be a non-empty list of indices in [0, {K}), got {topics!r}")
    n = len(topics)
    cols = min(n, 4) if n_cols is None else int(n_cols)
    if cols < 1:
        raise ValueError(f"n_cols must be >= 1, got {n_cols!r}")
    rows = int(math.ceil(n / cols))
    nw = idx.shape[1]
    fig = _new_figure(figsize or (3.0 * cols, (0.25 * nw + 0.8) * rows))
    share = lam / lam.sum(axis=1, keepdims=True)
    for i, k in enumerate(topics):
        ax = fig.add_subplot(rows, cols, i + 1)
        pos = np.arange(nw)[::-1]          # heaviest at the top
        ax.barh(pos, share[k, idx[k]], color=f"C{k % 10}")
        ax.set_yticks(pos, [str(vocabulary[j]) for j in idx[k]], fontsize=8)
        ax.set_title(f"topic {k}", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    if title:
        fig.suptitle(title)
    return fig


# ---------------------------------------------------------------- synthetic tables
def synth_fidelity(report, *, figsize=(11.0, 4.0), title=None):
    """The fidelity of a synthetic table (:func:`dpem_fast.synth_report`): each column's total
    variation distance on the grid, every pair's (a heatmap), and the correlation matrices of the
    numeric columns, real against synthetic.  The report is computed from real hold-out rows:
    **not private** — do not publish the figure with the synthetic data.

    .. versionadded:: 0.1 (issue 28)
    """
    fig = _new_figure(figsize)
    axes = fig.subplots(1, 3)
    names = list(report.column_tvd)
    ax = axes[0]
    ax.barh(range(len(names)), [report.column_tvd[n] for n in names], color="C0")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("column TVD")
    ax.set_xlim(0, max(0.05, max(report.column_tvd.values()) * 1.1))
    M = np.zeros((len(names), len(names)))
    for (a, b), v in report.pair_tvd.items():
        i, j = names.index(a), names.index(b)
        M[i, j] = M[j, i] = v
    im = axes[1].imshow(M, cmap="viridis", vmin=0.0, vmax=max(0.05, float(M.max())))
    axes[1].set_xticks(range(len(names)), names, rotation=90)
    axes[1].set_yticks(range(len(names)), names)
    axes[1].set_title(f"pair TVD (mean {report.mean_pair_tvd:.3f})")
    fig.colorbar(im, ax=axes[1], shrink=0.8)
    ax = axes[2]
    if report.corr_real is not None:
        k = len(report.numeric)
        C = np.where(np.triu(np.ones((k, k), dtype=bool)), report.corr_real, report.corr_synthetic)
        im = ax.imshow(C, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
        ax.set_xticks(range(k), report.numeric, rotation=90)
        ax.set_yticks(range(k), report.numeric)
        ax.set_title(f"corr: real (upper) / synthetic (lower)\nmean abs. error {report.corr_error:.3f}")
        fig.colorbar(im, ax=ax, shrink=0.8)
    else:
        ax.set_axis_off()
    fig.suptitle(title or "synthetic vs real hold-out (not private)")
    return fig
