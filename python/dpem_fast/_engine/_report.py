"""The privacy report: one renderer for ``str(model.privacy_)``, :func:`dpem_fast.privacy_report`
and the command line's ``report`` (issue 39).

It shows only what a fit released or declared: the record's own fields (the plan, the noise of
each release, the box and the released share of rows outside it) and, for a model, its public
hyperparameters and the number of live components (post-processing of released counts).  It
never shows a diagnostic (a training likelihood, a count of clipped rows): those are computed
from the raw data and are not released.

Noise is quoted in the data's own units where the record holds the map from the data to the
model's working units (``data_domain['center']`` and ``['scale']``: a row ``x`` is worked on as
``(x - center) / scale``, column by column).  A noise of standard deviation σ added to a sum of
working-unit rows is then ``σ · scale_j`` on the sum of column j in its own units, and
``σ · scale_j²`` on the sum of its squares; counts and histograms are in rows whatever the map.
Where the record holds no such map (a model whose domain is fixed, or a copula space) the noise
is quoted in the model's working units, and the report says so.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["record_lines", "privacy_report", "GLOSSES"]

#: release name -> (what it is, in words; its unit: "rows" (counts), "sum" (sums of rows, per
#: column), "square" (sums of squares and products), "words" (word counts) or "working")
GLOSSES = {
    "domain_scale": ("the private box, step 1: a histogram of each column's order of magnitude "
                     "({cols} x {bins} power-of-two bins)", "rows"),
    "domain_refine": ("the private box, step 2: a {bins}-bin histogram of each column inside step 1's box "
                      "({cols})", "rows"),
    "domain_outside": ("the private box, step 3: the rows outside the bulk box, outside the tight box, "
                       "and all rows (3 counts)", "rows"),
    "domain_radius": ("the private radius: a histogram of the rows' norms inside the declared box "
                      "({n} bins); the fit works in the smallest ball that leaves at most a few % of "
                      "the rows outside (they are projected onto it)", "rows"),
    "start_counts": ("the private start: rows in each of {n} random-hyperplane cells", "rows"),
    "start_sums": ("the private start: the sum of the rows of each of {k} cells", "sum"),
    "counts": ("rows per component or cluster ({n})", "rows"),
    "first_moments": ("each component's sum of its rows", "sum"),
    "sums": ("each component's sum of its rows", "sum"),
    "second_moments": ("each component's sums of squares and cross-products (its spread)", "square"),
    "category_counts": ("rows of each component in each category of the categorical columns", "rows"),
    "marginals": ("one histogram per column ({n} cells in all), for the synthetic data's marginals", "rows"),
    "pairs": ("two-way tables of column pairs ({n} cells in all), for the synthetic data's dependence", "rows"),
    "sum": ("the sum of the rows", "sum"),
    "second_moment": ("the sum of the rows' squares and cross-products", "square"),
    "count": ("the number of rows", "rows"),
    "grad": ("the log-likelihood's gradient, summed over the rows", "working"),
    "factor": ("one batch's update of the shared factor (clipped natural parameters)", "working"),
    "unigram": ("word counts over the vocabulary (each document clipped)", "words"),
    "topic_word": ("each topic's expected word counts in one minibatch (each document clipped)", "words"),
    "selection_score": ("one trial's score of a candidate on the hold-out rows", "working"),
    "baseline": ("one histogram per column ({n} cells in all)", "rows"),
}

_SHOWN = 12          # columns listed by name in the box and in a per-column noise
_NOISE_SHOWN = 4


def _num(x):
    """Three significant digits, thousands separated (``351,000``; ``0.0123``; ``2.1e+09``)."""
    x = float(x)
    if x != x or math.isinf(x):
        return str(x)
    if 1000 <= abs(x) < 1e9:
        return f"{float(f'{x:.3g}'):,.0f}"
    return f"{x:.3g}"


def _names(columns, d):
    """The names of the domain's d columns: ``columns`` when it names d of them, else ``[j]``."""
    if columns is not None and len(columns) == d:
        return [str(c) for c in columns]
    return [f"[{j}]" for j in range(d)]


def _domain_columns(model, columns):
    """The names of the columns the model's domain maps: every column, or (a table with
    categorical columns, ``categorical_columns_``) its numeric ones."""
    if columns is None:
        names = getattr(model, "feature_names_in_", None)
        n = getattr(model, "n_features_in_", None)
        columns = ([str(c) for c in names] if names is not None else
                   [f"x{i}" for i in range(n)] if isinstance(n, (int, np.integer)) else None)
    cat = getattr(model, "categorical_columns_", None)
    if columns is not None and cat is not None:
        drop = {int(c) for c in np.ravel(cat)}
        columns = [c for i, c in enumerate(columns) if i not in drop]
    return columns


def _gloss(r):
    text, unit = GLOSSES.get(r.name, ("(no description: see the model's docs)", "working"))
    shape = tuple(r.shape)
    n = int(np.prod(shape)) if shape else 1
    fill = {"n": n, "k": shape[0] if shape else 1,
            "cols": f"{shape[0]} column{'s' if shape and shape[0] != 1 else ''}" if shape else "1 column",
            "bins": shape[-1] if shape else 1}
    if r.name == "second_moments" and len(shape) == 1:     # spherical: squared norms, no column units
        text, unit = "each component's sum of squared distances from the box's centre", "working"
    elif r.name == "second_moments" and len(shape) == 2 and shape[0] != shape[1]:
        text = "each component's sums of squares, per column"
    return text.format(**fill), unit


def _sd(r):
    """Standard deviation of one noised coordinate (a Laplace scale b has sd b √2)."""
    return float(r.noise_scale) * (math.sqrt(2.0) if r.mechanism == "laplace" else 1.0)


def _noise(r, unit, scale, names):
    text = _noise_sd(r, unit, scale, names)
    if r.symmetric and r.offdiagonal_sd != r.noise_scale:
        text += "; off the diagonal 1/√2 of it"
    return text


def _noise_sd(r, unit, scale, names):
    sd = _sd(r)
    if unit == "rows":
        return f"noise sd {_num(sd)} rows"
    if unit == "words":
        return f"noise sd {_num(sd)} words"
    if unit in ("sum", "square") and scale is not None:
        per = sd * scale ** (1 if unit == "sum" else 2)
        what = "the column's units" if unit == "sum" else "its units squared"
        if np.allclose(per, per[0], rtol=1e-9):
            return f"noise sd {_num(per[0])} ({what}; every column)"
        shown = ", ".join(f"{n} {_num(v)}" for n, v in list(zip(names, per))[:_NOISE_SHOWN])
        more = f", ... ({len(per) - _NOISE_SHOWN} more)" if len(per) > _NOISE_SHOWN else ""
        return f"noise sd {shown}{more} ({what})"
    return f"noise sd {_num(sd)} (working units)"


def _scale(dom):
    """The per-column scale of the map to the working units, or None where it does not apply."""
    scale = dom.get("scale") if dom else None
    if scale is None or dom.get("model_space") or np.ndim(scale) != 1:
        return None
    return np.asarray(scale, dtype=np.float64)


def record_lines(record, columns=None, skip_note=None):
    """The lines of a privacy record, releases in plan order (the order of ``record.releases``);
    notes starting with ``skip_note`` left out (the report's own line says them)."""
    dom = record.data_domain or {}
    scale = _scale(dom)
    names = _names(columns, len(scale)) if scale is not None else []
    lines = [
        f"mechanism     : {record.mechanism}",
        f"neighbouring  : {record.neighbouring}"
        + (f" of one group's rows (person-level; at most {record.max_rows_per_group} rows per group, "
           "sampled uniformly with the fit's key)" if record.privacy_unit == "group" else ""),
        f"accountant    : {record.accountant}",
        f"target        : (epsilon={record.epsilon:g}, delta={record.delta:g})",
        f"spent         : epsilon={record.epsilon_spent:.6g} at delta={record.delta:g}"
        + (f" (the event at delta={record.event_delta:g}, plus {record.delta_tail:g} outside it)"
           if record.delta_tail else ""),
        f"iterations    : {record.n_iter} (fixed; no data-dependent stopping)",
        f"noise         : {record.noise}"
        + (" (exact integers on a lattice; no floating point in the noise)"
           if record.noise == "discrete_gaussian" else ""),
        "releases, in plan order (what was released, how many times, the noise's standard deviation):",
    ]
    rel = list(record.releases.values())
    width = max(len(r.name) for r in rel)
    for r in rel:
        text, unit = _gloss(r)
        lines.append(f"  {r.name:<{width}} x{r.count:<3} {text}; {_noise(r, unit, scale, names)}")
    lines.append(_units_line(scale, names, dom))
    lines.append("accounting detail (working units):")
    for r in rel:
        lines.append(
            f"  {r.name:<{width}} {r.mechanism:<8} {r.norm}-sensitivity={r.sensitivity:.4g} "
            f"noise={r.noise_scale:.4g} (multiplier {r.noise_multiplier:.4g}) shape={tuple(r.shape)}"
            + (f" lattice={r.granularity:.4g}" if r.granularity is not None else ""))
    if record.joint_multiplier is not None:
        lines.append(f"  each iteration's releases accounted jointly: one Gaussian mechanism, "
                     f"multiplier {record.joint_multiplier:.4g}")
    lines.extend(_domain_lines(dom, columns))
    if not record.private:
        lines.append("guarantee     : NONE - the data domain was computed from the raw data")
    lines.extend(f"note          : {n}" for n in record.notes if not (skip_note and n.startswith(skip_note)))
    return lines


def _units_line(scale, names, dom):
    if scale is None:
        where = (" (a copula space)" if dom.get("model_space") else
                 " (fixed by the model)" if dom.get("source") == "the model's fixed domain" else "")
        return (f"units         : counts in rows; other noise in the model's working units{where}, "
                "as the record holds no map back to the data's units")
    shown = ", ".join(f"{n} {_num(s)}" for n, s in list(zip(names, scale))[:_NOISE_SHOWN])
    more = ", ..." if len(scale) > _NOISE_SHOWN else ""
    return ("units         : the model works on each row as (x - centre) / scale, per column (scale: "
            f"{shown}{more}); the noise on a sum of rows is quoted times the scale, in the column's own units "
            "(on a mean over n rows it is that divided by n)")


def _estimate_how():
    """The private box's method, in words (module docstring of :mod:`dpem_fast._engine._domain`)."""
    from ._domain import CORE_FRACTION, DOMAIN_SHARE, REFINE_BINS, TAIL

    return (f"a power-of-two range per column, cut into {REFINE_BINS} equal bins, then trimmed at each end "
            f"of at most about {100 * TAIL:g} % of the column's rows (the bulk box; the tighter core box when "
            f"its released share of rows outside is under {100 * CORE_FRACTION:g} %): deliberately coarse "
            f"edges, on {100 * DOMAIN_SHARE:g} % of the budget; declare bounds= (--bounds, --bounds-file) "
            "from public knowledge to use known ranges instead")


def _domain_lines(dom, columns):
    if not dom:
        return []
    src = dom.get("source")
    bounds = dom.get("bounds")
    if src == "private estimate":
        how = "privately estimated (the releases domain_*)"
    elif src == "declared":
        how = "declared (public; costs no budget)"
    else:
        how = str(src)
    if bounds is None:
        scale = dom.get("scale", dom.get("radius"))
        extra = ""
        if scale is not None and np.ndim(scale) == 1 and dom.get("center") is not None:
            extra = (f"; rows are clipped into the ball of radius {_num(np.max(scale))} around the centre "
                     "(data_norm; how many were clipped is not released)")
        elif scale is not None and np.ndim(scale) == 0:
            extra = f", radius={float(scale):.6g}"
        return [f"data domain   : {how}{extra}"]
    lo, hi = bounds
    d = len(lo)
    names = _names(columns, d)
    lines = [f"box           : {how}; rows outside it are clipped to it"]
    if dom.get("radius") is not None and float(dom["radius"]) < 1.0:
        lines.append(f"  radius      : released (domain_radius): rows are worked on in the ball of radius "
                     f"{_num(float(dom['radius']))} x the box's half-diagonal around its centre (the units "
                     "line's scales); rows beyond it are projected onto it (how many is not released)")
    if src == "private estimate":
        lines.append(f"  how         : {_estimate_how()}")
    cov = dom.get("coverage")
    if cov:
        lines.append(f"  rows outside the box (released): ~{100 * float(cov['outside_fraction']):.1f} % "
                     f"({float(cov['outside_released']):.0f} of {float(cov['rows_released']):.0f} released rows, "
                     f"noise {float(cov['outside_noise']):.3g} rows per count; the {cov['box']} box)")
        lines.append("  box per feature (released values: post-processing of the domain estimate's releases):")
    else:
        lines.append("  box per feature (how many rows were clipped is not released):")
    w = max(len(n) for n in names[:_SHOWN])
    for j in range(min(d, _SHOWN)):
        line = f"    {names[j]:<{w}} {float(lo[j]):.6g} .. {float(hi[j]):.6g}"
        if cov and j in cov.get("placeholder", ()):
            line += "   (unresolved: public placeholder box)"
        elif cov and j in cov.get("unresolved", ()):
            line += "   (coarse: resolved only by summed bins)"
        lines.append(line)
    if d > _SHOWN:
        lines.append(f"    ... {d - _SHOWN} more features (all of them in data_domain['bounds'])")
    if dom.get("model_space"):
        lines.append(f"  the mixture works in: {dom['model_space']}")
    return lines


def _live(model):
    """``(asked, live, what)`` of a model with components or clusters, else None: the live
    count is post-processing of released counts (public)."""
    for asked, live, what in (("n_components", "n_components_", "components"),
                              ("n_clusters", "n_clusters_", "clusters")):
        a, n = getattr(model, asked, None), getattr(model, live, None)
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool):
            return (a if isinstance(a, (int, np.integer)) and not isinstance(a, bool) else None), int(n), what
    return None


def privacy_report(model, columns=None):
    """The privacy report of a fitted private model, as text (what ``dpem-fast report`` prints).

    One line per release in plan order, with its noise in the data's own units where the model
    works on rescaled rows; the box the rows were clipped to and whether it was declared or
    estimated privately (with the released share of rows outside it); the live components.
    Only released or public quantities appear: no diagnostic computed from the raw data.

    Parameters
    ----------
    model : fitted estimator of dpem_fast
    columns : list of str, optional
        The names of the columns the model was fitted on (default: ``feature_names_in_`` when
        fitted on a DataFrame, else x0, x1, ...; the command line's are the file's).

    .. versionadded:: 0.1 (issue 39)
    """
    columns = _domain_columns(model, None if columns is None else [str(c) for c in columns])
    lines = [f"privacy report: {type(model).__name__}"]
    live = _live(model)
    if live is not None:
        asked, n, what = live
        if asked is not None and asked != n:
            lines.append(f"{what:<14}: {n} live of {asked} asked ({asked - n} dropped: a released count not above "
                         "its noise threshold; post-processing)")
        else:
            lines.append(f"{what:<14}: {n}")
    record = getattr(model, "privacy_", None)
    if record is None:
        lines.append("guarantee     : NONE - fitted without privacy (epsilon=inf): no noise was added; "
                     "do not publish this model")
        return "\n".join(lines)
    # the live count is the line above; the record's own note of it (str(model.privacy_)) is not repeated
    attribute = None if live is None else {"components": "n_components_", "clusters": "n_clusters_"}[live[2]]
    lines.extend(record_lines(record, columns, skip_note=None if live is None else f"{attribute} = "))
    return "\n".join(lines)
