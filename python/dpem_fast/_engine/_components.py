"""Components shared by the clustering and mixture models: where they start without data, and
which of them a private fit releases.

- :func:`random_means` / :func:`initial_means`: K points uniform in the ball of radius 1/2 of the
  domain, drawn from the fit's key and nothing else (data-independent), moved into the image of
  the domain's box.  The non-private fits draw the same kind of points in the data's bounding box
  (:func:`data_box`; reading the data is allowed there).
- :func:`live_components` and :func:`check_counts_resolvable`: the one rule for the components a
  private fit releases (a noisy count above ``max(1, 3σ_N)``) and the refusal, before the charge,
  of a fit whose counts cannot be told from noise.  Released values and public scales only.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .._dpcore import _rng as _core_rng
from .._preprocess import box_domain, project_into_domain
from .._rng import derive_key
from ..accounting import NoiseDominatedWarning

__all__ = ["random_means", "initial_means", "data_box", "noise_std", "count_threshold", "counts_resolve_components",
           "live_components", "check_counts_resolvable", "LIVE_Z", "COUNT_REMEDY", "MERGE_REASON", "MERGE_REMEDY"]

#: A noisy count is indistinguishable from zero when it is at most this many noise standard
#: deviations of its release (the same 3σ as the count floor of the M-steps): a component whose
#: true count is 0 clears it with probability 0.13 % (one-sided normal tail).
LIVE_Z = 3.0

#: What the user can do about noisy counts that cannot be told from zero: the noise of a count
#: does not depend on the declared bounds, so only ε, the rows and the components per row help.
COUNT_REMEDY = "raise epsilon, fit on more rows, or ask for fewer components"

#: Why components empty during a fit whose counts could resolve them, by default (a model that
#: knows better passes its own ``resolution`` to :func:`live_components`).
MERGE_REASON = ("what told them apart is within the noise of the released statistics, so the "
                "iterations moved their rows to the other components")

#: What resolves more components once they merge for that reason.
MERGE_REMEDY = ("to resolve more, fit on more rows or declare tighter bounds (the floor falls with a "
                "component's rows and with each numeric column's declared range), or raise epsilon "
                "(the floor falls only in proportion to it)")


def random_means(K, d, key):
    """K points uniform in the ball of radius 1/2 (data-independent).

    The directions and the radii are separate draws, each from its own derived key
    (a draw of n values uses streams 0 .. n / SAMPLER_BLOCK of its key, so two draws
    must never share a key).
    """
    g = np.empty(K * d)
    _core_rng.fill_normal(derive_key(key, "init", "means"), 0, 1.0, g, 1)
    u = np.empty(K)
    _core_rng.fill_uniform(derive_key(key, "init", "radii"), 0, u, 1)
    g = g.reshape(K, d)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return 0.5 * g * u[:, None] ** (1.0 / d)


def data_box(lo, hi):
    """The non-private fits' start geometry: the box of the data's column minima ``lo`` and
    maxima ``hi`` (a constant column widened to ``[lo, lo + 1]``), mapped per feature."""
    return box_domain(lo, np.where(hi > lo, hi, lo + 1.0))


def initial_means(K, d, key, domain, box=None):
    """:func:`random_means` in the geometry of ``box`` (a domain; default ``domain``), moved into
    the image of its box (:func:`~dpem_fast._preprocess.project_into_domain`) and given in the
    working units of ``domain``."""
    init = domain if box is None else box
    means = project_into_domain(random_means(K, d, key), init)
    return means if init is domain else domain.to_scaled(init.to_original(means))


def noise_std(release):
    """Standard deviation of one noise entry of ``release`` (Laplace(b): √2 b)."""
    return release.noise_scale * (math.sqrt(2.0) if release.mechanism == "laplace" else 1.0)


def count_threshold(counts_release):
    """τ = max(1, :data:`LIVE_Z` σ_N): the public level at or below which a noisy count is
    indistinguishable from zero (σ_N the standard deviation of one noisy count of
    ``counts_release``: the plan's per-release scale, or a tail average's)."""
    return max(1.0, LIVE_Z * noise_std(counts_release))


def counts_resolve_components(counts, counts_release, n_public=None):
    """True when a component holding its share of the rows, n/K, would have a noisy count above
    the live threshold τ by two noise standard deviations (it passes with probability ≥ 97.7 %):
    then components that end dead were emptied by the fit, not hidden by the counts' noise.

    ``n`` is the public row count ``n_public`` (replace-one), else the noisy total count (the
    sum of the released counts, post-processing).  Released values and public scales only."""
    counts = np.asarray(counts, dtype=np.float64)
    K = counts.shape[0]
    n = float(n_public) if n_public is not None else max(float(counts.sum()), 0.0)
    return n / K > count_threshold(counts_release) + 2.0 * noise_std(counts_release)


def live_components(counts, counts_release, what="components", *, choosing=False, n_public=None,
                    resolution=None):
    """Which components of a private fit are released as live (post-processing).

    Rule: component k is live iff its noisy count (the last update's, tail-averaged where the
    model averages) exceeds τ = :func:`count_threshold` of its release.  A dead component's
    mean is noise over a count indistinguishable from zero, so it is dropped from the model.
    If no component is live, the one with the largest noisy count is kept (the model degenerates
    to the one-component model) and a :class:`~dpem_fast.NoiseDominatedWarning` is raised; it
    is also raised when fewer than half of the K components are live (K ≥ 3), or when the
    noisy total count is within τ√K of zero (its noise standard deviation is √K σ_N).
    ``choosing=True`` (a fit over-provisioned on purpose, whose live count is the choice of K:
    ``n_components="auto"``) leaves out the fewer-than-half warning only.

    The fewer-than-half warning says why.  Where the counts could resolve a component of average
    size (:func:`counts_resolve_components`, from ``n_public`` or the noisy total), the
    components were emptied by the fit — ``resolution`` (the model's reason, default
    :data:`MERGE_REASON`) — and the message says that ``n_components=<live count>`` is what the
    budget resolves and what would resolve more (:data:`MERGE_REMEDY`); else the counts' noise
    hid them and it names :data:`COUNT_REMEDY` (more rows, fewer components, a larger ε; not
    bounds, which the counts' noise does not depend on).

    Reads only released values and the release's public noise scale; the warnings name K and
    the live count (itself post-processing) and the remedies, nothing of the data.

    Returns
    -------
    ndarray of bool, shape (K,), at least one True.
    """
    counts = np.asarray(counts, dtype=np.float64)
    K = counts.shape[0]
    tau = count_threshold(counts_release)
    live = counts > tau
    if not live.any():
        live = np.zeros(K, dtype=bool)
        live[int(np.argmax(counts))] = True
        warnings.warn(f"{what}: no noisy count of the {K} component(s) is distinguishable from its noise, "
                      "so the released model keeps only the largest one (the one-component model) and it "
                      f"is dominated by noise; {COUNT_REMEDY}", NoiseDominatedWarning, stacklevel=5)
    elif 2 * int(live.sum()) < K and not choosing:
        n_live = int(live.sum())
        if counts_resolve_components(counts, counts_release, n_public):
            warnings.warn(f"{what}: only {n_live} of the {K} components kept rows (n_components_); the "
                          "others were emptied during the fit, not hidden by the counts' noise: "
                          f"{resolution or MERGE_REASON}.  n_components={n_live} is what this budget "
                          f"resolves on these rows; {MERGE_REMEDY}", NoiseDominatedWarning, stacklevel=5)
        else:
            warnings.warn(f"{what}: only {n_live} of the {K} components has a noisy count distinguishable "
                          "from its noise; the others were dropped (n_components_ says how many are left); "
                          f"{COUNT_REMEDY}", NoiseDominatedWarning, stacklevel=5)
    elif counts.sum() <= tau * math.sqrt(K):
        warnings.warn(f"{what}: the noisy total count is not distinguishable from its noise; {COUNT_REMEDY}",
                      NoiseDominatedWarning, stacklevel=5)
    return live


def check_counts_resolvable(n_public, counts_release, n_averaged, what):
    """Refuse, before anything is charged, a fit whose counts cannot be told from noise.

    Under replace-one the row count ``n_public`` is public; ``counts_release`` is the plan's
    (public) count release and ``n_averaged`` the number of final updates averaged (the last
    update's count noise is σ_N/√m for m > 1).  Rule: if n ≤ τ = max(1, 3 σ_N/√m), even a
    component holding every row would not have a noisy count above the live threshold τ in
    expectation (:func:`live_components`), so the fit is hopeless whatever the data: a
    ``ValueError`` naming the remedies.  Under add/remove (``n_public`` None) nothing is
    decided here; the fit warns afterwards instead.  Public quantities only.
    """
    if n_public is None:
        return
    sd = noise_std(counts_release)
    m = int(n_averaged)
    if m > 1:
        sd /= math.sqrt(m)
    tau = max(1.0, LIVE_Z * sd)
    if n_public <= tau:
        raise ValueError(f"n_samples={n_public} is too few rows for this privacy budget: every released "
                         f"count of {what} has noise of standard deviation {sd:.3g}, so even all rows in "
                         f"one component could not be told from noise (needs more than {tau:.3g} rows); "
                         f"{COUNT_REMEDY}")
