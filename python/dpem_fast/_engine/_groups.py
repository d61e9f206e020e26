"""Person-level privacy: many rows per person, bounded per person, and the group-level
sensitivities every plan derives from the row-level ones (issue 27).

A fit with ``groups`` (one id per row: a person, an author, an aircraft) protects a whole
group of rows instead of one row.  Three things make that so, each in one place:

1. **Contribution bounding** (:func:`bound_mask`): each group keeps at most ``m =
   max_rows_per_group`` rows, the m chosen uniformly at random.  The choice is made once per
   fit, after the budget is charged, and every statistic, release and pass of the fit (the
   private domain estimate, the private start, every iteration) reads the bounded rows only.
2. **Group-level sensitivities** (:func:`group_spec`): every released statistic's row-level
   sensitivities (the model's :class:`~dpem_fast._engine._statistics.StatSpec`) are scaled
   once, inside :func:`~dpem_fast._engine._plan.make_plan`, so that the calibration, the
   release records and the events all use them; no model restates them.
3. **The relation** travels with the plan: the event's tags say ``privacy_unit="group"``
   (:class:`~dpem_fast.accounting.NeighbouringEvent`), the record says the unit and m, and an
   accountant or :class:`~dpem_fast.accounting.BudgetLedger` refuses to mix row-level and
   group-level events.

The relation
------------
Datasets are multisets of (group id, row).  **Add/remove one group**: D' = D plus all the rows
of one group P absent from D (any number of rows).  **Replace one group**: D' is D with all
the rows of one group P replaced by the rows of P' (any number of rows on either side; the
number of groups is the same).  The fit's ``neighbouring`` chooses between the two, as for
rows.  Neither the number of groups nor their sizes is public: under both relations the
bounded row count changes between neighbours (by up to m), so a grouped fit never reads it
(``n_public`` is None, the models release a noisy count where they need one).

The bounding
------------
Group g with n_g rows keeps all of them if n_g ≤ m; otherwise the m rows of smallest
priority, the priority of its j-th row (0-based, in row order within the group) being the
64-bit word j of the ChaCha20 stream ``s(g)`` of the key ``derive_key(fit key, "groups",
"bound")`` (:func:`~dpem_fast._dpcore._rng.fill_keyed_words`), where ``s(g)`` is computed from
the group's id alone (:func:`group_streams`: the id itself for integer ids, a hash of its
typed bytes otherwise).  The priorities of a group are i.i.d. uniform, so the kept m are a
uniform random m-subset of its rows.  The map B (dataset → bounded dataset) reads a group's
rows, its id and the key, nothing else: for **every** key,
``B(D ∪ P) = B(D) ∪ B(P)`` with ``|B(P)| ≤ min(|P|, m)``.  So group-level neighbours map to
bounded datasets that differ in at most m rows of one group: privacy holds conditionally on
the bounding key (no averaging over it is needed), and the key's sub-key may travel to Dask
workers (below) without weakening anything.  No row order across groups, no block or chunk
boundary and no thread count enters the choice.

Sensitivities (``StatSpec`` → :func:`group_spec`)
-------------------------------------------------
Every released statistic is a sum ``S = Σ_{x ∈ B(D)} f(x)`` whose per-row term f depends on
the row and on released (public) parameters only; Δ_ar = sup ‖f(x)‖ and Δ_rep = sup
‖f(x) − f(x')‖ are the model's row-level sensitivities (its docstring derives them).

* add/remove: ``S(D') − S(D) = Σ_{x ∈ B(P)} f(x)``, at most m terms, so by the triangle
  inequality ``‖·‖ ≤ m Δ_ar``; attained by m copies of the row attaining Δ_ar.
* replace: pair the rows of B(P) and B(P') in any order, padding the shorter side with
  "no row" (f = 0 there): ``S(D') − S(D) = Σ_{i ≤ m} (f(x'_i) − f(x_i))``; a pair of two rows
  is a row-level replacement (≤ Δ_rep), a pair with one empty side a row-level addition or
  removal (≤ Δ_ar).  So ``‖·‖ ≤ m max(Δ_rep, Δ_ar)`` (= m Δ_rep for every statistic here);
  attained by m copies of the row-level worst pair.

The same holds for the ℓ1 sensitivities, for integer statistics (the domain estimate's
histograms: a group's m rows add at most m to d bins each, ℓ2 ≤ m √d; the private start's
cell counts) and for the exact discrete releases (the lattice is built from the scaled Δ).
The noise multipliers z = σ/Δ — hence the accounting — do not change: σ grows by m.

**Joint accounting** (an iteration's Gaussian releases as one mechanism).  With σ_r the
noise and δ_{r,i} the change of statistic r due to pair i, Cauchy–Schwarz gives
``‖Σ_i δ_{r,i}‖² ≤ m Σ_i ‖δ_{r,i}‖²``, so ``Σ_r ‖Σ_i δ_{r,i}‖²/σ_r² ≤ m Σ_i Σ_r
‖δ_{r,i}‖²/σ_r² ≤ m² sup_pair Σ_r ‖δ_r‖²/σ_r²``.  The model's row-level bound J(a) (a_r =
Δ_r²/σ_r²) is homogeneous of degree one, so ``m² J(a_row) = J(m² a_row) = J(a_group)``: the
model's own bound evaluated at the group-level a_r is the group-level bound, attained by m
copies of the row-level worst pair.  Under replace a padded pair is an addition, whose joint
change is the row-level add/remove bound at the same σ, ``J_ar(a · (Δ_ar/Δ_rep)²)``; the
engine checks that it does not exceed ``J_rep(a)`` for every plan it builds (it holds for
every model here: a replacement contains a removal's worst case) and refuses otherwise
(:meth:`~dpem_fast._engine._base.PrivateEM._joint_bound`).

**Poisson minibatches** (private LDA): the sampled unit is the group — each group is kept
independently with the public probability q (:func:`group_batches`), so the amplification
theorems apply with the group as the record.

Sampling or weighting, or clipping each group's sum?
----------------------------------------------------
Two alternatives bound a group's contribution without dropping rows:

* **weighting** every row of group g by ``w_g = min(1, m/n_g)``: the group adds
  ``w_g Σ_{x ∈ g} f(x)``, of norm ≤ w_g n_g Δ_ar ≤ m Δ_ar (add/remove) and, under replace,
  ≤ m Δ_rep for every statistic here (for the sums of vectors ``2 m Δ_ar = m Δ_rep``; for the
  counts, PSD second moments and nonnegative squares the cross term of ‖A − B‖² is ≥ 0, so
  ``√2 m Δ_ar = m Δ_rep``): the **same sensitivities** as sampling.  Its statistic is the
  conditional expectation of the sampled one (each row of g is kept with probability
  min(1, m/n_g)), so it has the same mean and lower variance (Rao–Blackwell): per statistic,
  weighting is never worse than sampling.
* **clipping each group's summed contribution** to statistic r at ``C_r = m Δ_r``: the same
  sensitivity again, and a per-group factor ``min(1, m Δ_r / ‖Σ_{x∈g} f_r(x)‖) ≥ min(1, m/n_g)``,
  so each statistic alone is distorted least of the three; but the factor differs between
  the statistics of one iteration (counts against moments), so the M-step's ratios (a mean
  ``S1_k / N_k``) are biased in a way a common per-row weight is not, and it needs per-group
  sums inside every kernel.

The default, and the only form implemented, is **sampling**: it is kernel-agnostic (the
kernels take no row weights), keeps every statistic consistent across releases and keeps the
histograms integer (their exact discrete releases need integer counts).  Weighting — the
lower-variance form of the same estimand — is the follow-up once the kernels take row
weights.

Row sources
-----------
* In memory and ``numpy.memmap``: the kept rows are gathered (in memory) or streamed (a
  memmap, never copied whole) into the standard superblocks, so a memmap, a block source
  and the array give the same fit bit for bit.
* Block sources (:mod:`dpem_fast.io`): ``groups`` is an in-memory array of one id per row, in
  the order the source yields its rows; the rows of a group need not be contiguous.
* Dask: ``groups`` is a 1-D dask array chunked like X's rows, and **every group's rows must
  lie in one chunk** (a shuffle by group on the cluster, e.g. a dask DataFrame
  ``shuffle``/``set_index`` on the group column before ``to_dask_array(lengths=True)``).  Each
  worker bounds its own chunk with the bounding sub-key (safe to send: see "The bounding");
  the validation pass checks that no group id appears in two chunks and refuses otherwise.
  The kept rows are those of the in-memory fit, whatever the chunking.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import numbers
import struct

import numpy as np

from .._dpcore import _rng as _core_rng
from .._rng import derive_key
from .._validation import interval, validate_params

__all__ = ["Grouping", "check_max_rows_per_group", "split_groups", "check_groups", "group_streams",
           "bounding_key", "bound_mask", "group_spec", "group_batches", "BOUND_TAG"]

#: The bounding's stream tag (its sub-key: ``derive_key(key, *BOUND_TAG)``).
BOUND_TAG = ("groups", "bound")
_MISSING = "groups: missing group ids (NaN or None); give every row the id of its group"


def check_max_rows_per_group(m):
    """``max_rows_per_group``: None or an int >= 1 (``TypeError``/``ValueError`` naming it)."""
    if m is None:        # a row-level fit: read every iteration (the fast path of validate_params)
        return None
    validate_params({"max_rows_per_group": [None, interval("int", 1)]}, {"max_rows_per_group": m})
    return None if m is None else int(m)


def split_groups(X, groups):
    """``(X, groups)`` with a column name resolved: ``groups`` a str names a column of a pandas
    DataFrame X, which is then dropped from the features."""
    if isinstance(groups, str):
        columns = getattr(X, "columns", None)
        if columns is None or not hasattr(X, "drop"):
            raise ValueError("groups: a column name needs X as a pandas DataFrame; pass an array of one "
                             "group id per row otherwise")
        if groups not in columns:
            raise ValueError(f"groups: X has no column {groups!r}")
        return X.drop(columns=[groups]), X[groups].to_numpy()
    return X, groups


@dataclasses.dataclass(frozen=True, eq=False)
class Grouping:
    """The validated groups of a fit (private: never stored on an estimator).

    ``codes``: int64 (n,), the group of each row (any numbering: nothing depends on it);
    ``streams``: uint64 (G,), each group's stream id, from its id alone."""

    codes: np.ndarray
    streams: np.ndarray

    @property
    def n_rows(self):
        return int(self.codes.size)


def _missing(v):
    if v is None:
        return True
    if isinstance(v, (float, np.floating)):
        return math.isnan(v)
    return type(v).__name__ in ("NAType", "NaTType")


def _object_stream(v):
    """The stream id of one id that is not an integer array entry (typed bytes, hashed)."""
    if isinstance(v, (bool, np.bool_)):
        v = int(v)
    if isinstance(v, (numbers.Integral, np.integer)):
        v = int(v)
        if -2 ** 63 <= v < 2 ** 64:
            return v % 2 ** 64               # the same stream as in an integer array
        data = b"i" + str(v).encode()
    elif isinstance(v, (float, np.floating)):
        f = float(v)
        if f == int(f) and abs(f) < 2 ** 63:
            return int(f) % 2 ** 64           # an integral float: its integer's stream
        data = b"f" + struct.pack("<d", f + 0.0)
    elif isinstance(v, str):
        data = b"s" + v.encode("utf-8", "surrogatepass")
    elif isinstance(v, bytes):
        data = b"b" + v
    else:
        raise TypeError(f"groups: ids must be integers, strings, bytes or finite floats, got "
                        f"{type(v).__name__}")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=b"dpem.group").digest(), "little")


def group_streams(values):
    """The stream id of each group id in ``values`` (1-D): the id itself (as uint64) for
    integers, a 64-bit BLAKE2b of its typed bytes otherwise (two ids sharing a stream, with
    probability about G²/2^65, only correlate their two groups' choices)."""
    values = np.asarray(values)
    if values.dtype.kind == "u":
        return values.astype(np.uint64)
    if values.dtype.kind in "ib":
        return values.astype(np.int64).view(np.uint64)
    return np.fromiter((_object_stream(v) for v in values.ravel()), dtype=np.uint64, count=values.size)


def _factorize(values):
    """(codes, uniques) of a 1-D array: pandas' hash factorisation when it is installed (fast on
    strings), else numpy's sort; the numbering differs, and nothing depends on it."""
    try:
        import pandas as pd
    except ImportError:                                          # pragma: no cover - pandas ships with [data]
        pd = None
    if pd is not None:
        # None, NaN, NaT and pd.NA get the sentinel -1: the missing ids
        codes, uniques = pd.factorize(values, sort=False, use_na_sentinel=True)
        if (codes < 0).any():
            raise ValueError(_MISSING)
        uniques = np.asarray(uniques, dtype=values.dtype if values.dtype.kind != "O" else object)
        if values.dtype.kind == "O" and any(_missing(v) for v in uniques):
            raise ValueError(_MISSING)
        return codes.astype(np.int64), uniques
    if values.dtype.kind == "O":
        table, codes = {}, np.empty(values.size, dtype=np.int64)
        for i, v in enumerate(values):
            if _missing(v):
                raise ValueError(_MISSING)
            codes[i] = table.setdefault(v, len(table))
        uniques = np.empty(len(table), dtype=object)
        for v, c in table.items():
            uniques[c] = v
        return codes, uniques
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64), uniques


def check_groups(groups, n_rows):
    """Validate ``groups`` (one id per row of X) into a :class:`Grouping`.

    Errors name ``groups`` and never quote a count or an id of the data: a 1-D array-like of
    length ``n_rows``; ids integers, strings, bytes or finite floats; no NaN / None."""
    if groups is None:
        return None
    if hasattr(groups, "to_numpy"):
        groups = groups.to_numpy()
    try:
        values = np.asarray(groups)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"groups must be array-like of one group id per row ({exc})") from None
    if values.ndim != 1:
        raise ValueError(f"groups must be 1-D (one id per row of X), got {values.ndim} dimension(s)")
    if values.shape[0] != int(n_rows):
        raise ValueError("groups must have one entry per row of X (its length differs from X's)")
    kind = values.dtype.kind
    if kind in "cmMV":
        raise TypeError(f"groups: ids must be integers, strings, bytes or finite floats, got dtype {values.dtype}")
    if kind == "f":
        if not np.all(np.isfinite(values)):
            raise ValueError(_MISSING if np.isnan(values).any() else "groups: infinite group ids")
        as_int = values.astype(np.int64) if np.all(np.abs(values) < 2.0 ** 63) else None
        if as_int is not None and np.array_equal(as_int, values):
            values = as_int                   # integral floats (an id column with NaN read as float)
    elif kind in "US":
        values = values.astype(object)
    codes, uniques = _factorize(values)
    return Grouping(codes, group_streams(uniques))


def bounding_key(key):
    """The bounding's sub-key ``derive_key(key, *BOUND_TAG)``: what :func:`bound_mask` reads of
    the fit's key (a Dask worker gets this, never the fit's key)."""
    return derive_key(key, *BOUND_TAG)


def bound_mask(grouping, bkey, m, n_threads=1):
    """Which rows the bounding keeps (bool (n,)): every row of a group of at most ``m`` rows,
    and the ``m`` of smallest priority of a larger group (module docstring, "The bounding");
    ``bkey``: :func:`bounding_key` of the fit's key."""
    codes, streams = grouping.codes, grouping.streams
    sizes = np.bincount(codes, minlength=streams.size)
    keep = sizes[codes] <= int(m)
    rows = np.flatnonzero(~keep)
    if not rows.size:
        return keep
    c = codes[rows]
    order = np.argsort(c, kind="stable")          # by group, row order within a group
    cs = c[order]
    starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, cs.size]))
    within = np.arange(cs.size) - first             # j: the row's rank within its group
    pri = np.empty(cs.size, dtype=np.uint64)
    _core_rng.fill_keyed_words(np.ascontiguousarray(bkey, dtype=np.uint32), np.ascontiguousarray(streams[cs]),
                               within.astype(np.uint64), pri, int(n_threads))
    # one sort by (group, top 32 bits of the priority); groups stay where they are, and equal top
    # bits (probability about n_g² 2^-33 in a group) fall back to row order: still a function of
    # the group's own rows, uniform up to that probability
    by_priority = np.argsort((cs.astype(np.uint64) << np.uint64(32)) | (pri >> np.uint64(32)), kind="stable")
    rank = np.empty(cs.size, dtype=np.int64)
    rank[by_priority] = within                      # position within the group, by priority
    keep[rows[order[rank < int(m)]]] = True
    return keep


def group_batches(key, grouping, q, n_rounds, tag, start=0, n_threads=1):
    """The minibatch loop's sampling at the group level: for each round ``t``, the sorted row
    indices of the groups kept, each group independently with probability ``q`` (public) —
    group g in round t iff word t of its stream ``s(g)`` under ``derive_key(key, *tag)`` is
    below ``q 2^64``: independent of the other groups, the row order and the thread count."""
    sub = derive_key(key, *tag)
    G = grouping.streams.size
    q = float(q)
    words = np.empty(G, dtype=np.uint64)
    order = np.argsort(grouping.codes, kind="stable")
    bounds = np.searchsorted(grouping.codes[order], np.arange(G + 1))
    for t in range(int(start), int(start) + int(n_rounds)):
        _core_rng.fill_keyed_words(sub, grouping.streams, np.full(G, t, dtype=np.uint64), words, int(n_threads))
        chosen = np.arange(G) if q >= 1.0 else np.flatnonzero(words < np.uint64(int(q * 2.0 ** 64)))
        idx = np.concatenate([order[bounds[g]:bounds[g + 1]] for g in chosen]) if chosen.size else \
            np.empty(0, dtype=np.int64)
        yield t, np.sort(idx)


def _scaled(table, m):
    if table is None:
        return None
    return {"add_remove": m * table["add_remove"], "replace": m * max(table["replace"], table["add_remove"])}


def group_spec(spec, m):
    """The group-level :class:`StatSpec` of a row-level one, for at most ``m`` rows per group:
    ℓ2 and ℓ1 ``m Δ_ar`` under add/remove, ``m max(Δ_rep, Δ_ar)`` under replace (module
    docstring, "Sensitivities")."""
    m = int(m)
    return dataclasses.replace(spec, l2=_scaled(spec.l2, m), l1=_scaled(spec.l1, m))
