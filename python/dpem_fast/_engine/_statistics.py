"""Named, additive sufficient statistics and their specifications.

DP-EM's claim (Park et al. 2017, Sec. 3) is that moment perturbation works for any
exponential-family model: the E-step reduces the data to expected sufficient statistics,
sums over rows, and the M-step needs nothing else.  Here that is the architecture: a model
declares its statistics (:class:`StatSpec`), its kernel returns them by name
(:class:`Statistics`), and the engine releases each one with noise calibrated to the
sensitivity its spec declares.

Statistics are sums over rows, so they are additive: the statistics of two disjoint sets
of rows add, and :meth:`Statistics.zeros` is the neutral element.  Summing over kernel
blocks, memmap chunks or cluster partitions is the same operation.  Nothing here is
private; noise is added only by :mod:`dpem_fast._engine._release`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..accounting._validation import NEIGHBOURING_RELATIONS
from ._operator import RowProducts

__all__ = ["StatSpec", "Statistics", "StatisticsSum"]


def _check_sensitivities(name, value, what, required):
    if value is None:
        if required:
            raise ValueError(f"statistic {name!r}: {what} sensitivities are required")
        return None
    if not isinstance(value, Mapping) or set(value) != set(NEIGHBOURING_RELATIONS):
        raise ValueError(f"statistic {name!r}: {what} must map each of {NEIGHBOURING_RELATIONS} "
                         f"to a sensitivity, got {value!r}")
    out = {}
    for rel in NEIGHBOURING_RELATIONS:
        v = float(value[rel])
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"statistic {name!r}: {what}[{rel!r}] must be finite and > 0, got {v!r}")
        out[rel] = v
    return out


@dataclass(frozen=True)
class StatSpec:
    """What one released statistic is and how much one row can change it.

    Parameters
    ----------
    name : str
        Key of the statistic in :class:`Statistics` and in the privacy record.
    shape : tuple of int
        Shape of the statistic.
    l2 : mapping {"add_remove": float, "replace": float}
        ℓ2 sensitivity under each neighbouring relation, in the engine's working units
        (rows mapped into the model's declared domain).  For a ``symmetric`` statistic it is
        the sensitivity of the upper triangle (diagonal included), which is what receives
        noise.  The model's docstring derives each value.
    l1 : mapping or None
        ℓ1 sensitivity under each relation, needed only for Laplace releases.
    symmetric : bool, default=False
        The last two axes form symmetric matrices: noise is drawn on the upper triangle
        and mirrored, so the release stays symmetric (Gaussian: σ on the diagonal and σ/√2
        above it, :mod:`~dpem_fast._engine._release`).
    integer : bool, default=False
        The statistic is integer-valued (e.g. a histogram): an exact discrete release needs
        no rounding onto a lattice (:mod:`dpem_fast._engine._lattice`).
    """

    name: str
    shape: tuple
    l2: Mapping
    l1: Mapping | None = None
    symmetric: bool = False
    integer: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"statistic name must be a non-empty str, got {self.name!r}")
        shape = tuple(int(s) for s in self.shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"statistic {self.name!r}: negative dimension in shape {shape}")
        if self.symmetric and (len(shape) < 2 or shape[-1] != shape[-2]):
            raise ValueError(f"statistic {self.name!r}: symmetric needs square last axes, got {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "l2", _check_sensitivities(self.name, self.l2, "l2", True))
        object.__setattr__(self, "l1", _check_sensitivities(self.name, self.l1, "l1", False))

    def sensitivity(self, norm: str, neighbouring: str) -> float:
        """The ``"l2"`` or ``"l1"`` sensitivity under ``neighbouring``."""
        table = self.l2 if norm == "l2" else self.l1
        if table is None:
            raise ValueError(f"statistic {self.name!r} declares no {norm} sensitivity")
        return table[neighbouring]


@dataclass(frozen=True, eq=False)
class Statistics(Mapping):
    """Statistics of some rows, by name, plus diagnostics that are *not private*.

    A read-only mapping ``name -> ndarray``.  ``+`` adds two sets of statistics of
    disjoint rows (same names and shapes); :meth:`zeros` is the neutral element.

    Attributes
    ----------
    arrays : dict of str to ndarray
    n_rows : int
        Rows summed (a diagnostic: the row count is not private under add/remove).
    loglik : float
        ``sum_i log p(x_i)`` under the parameters used (a diagnostic, not private).
    n_clipped : int
        Rows clipped into the declared domain (a diagnostic, not private).
    owned : bool
        The arrays were allocated for this object alone (a kernel's fresh output, no buffer it
        reuses): a :class:`StatisticsSum` may hold them without a copy (issue 41: the copy of a
        d x d second moment at d = 4096 was a third of FA's private pass).
    """

    arrays: dict
    n_rows: int = 0
    loglik: float = 0.0
    n_clipped: int = field(default=0)
    owned: bool = field(default=False, repr=False)

    def __getitem__(self, name):
        return self.arrays[name]

    def __iter__(self):
        return iter(self.arrays)

    def __len__(self):
        return len(self.arrays)

    def __add__(self, other):
        if not isinstance(other, Statistics):
            return NotImplemented
        if list(self.arrays) != list(other.arrays):
            raise ValueError(f"cannot add statistics named {list(self.arrays)} and {list(other.arrays)}")
        summed = {}
        for name, a in self.arrays.items():
            b = other.arrays[name]
            if a.shape != b.shape:
                raise ValueError(f"cannot add statistic {name!r} of shapes {a.shape} and {b.shape}")
            summed[name] = a + b
        return Statistics(summed, self.n_rows + other.n_rows, self.loglik + other.loglik,
                          self.n_clipped + other.n_clipped)

    @classmethod
    def zeros(cls, specs) -> "Statistics":
        """The neutral element for ``+`` over the statistics ``specs`` declare."""
        return cls({s.name: np.zeros(s.shape) for s in specs})


def _two_sum(hi, x):
    """TwoSum: ``(t, q)`` with ``t = fl(hi + x)`` and ``hi + x = t + q`` exactly (Knuth)."""
    with np.errstate(invalid="ignore", over="ignore"):
        t = hi + x
        bp = t - hi
        q = (hi - (t - bp)) + (x - bp)
    return t, q


def _collapse(hi, lo):
    with np.errstate(invalid="ignore"):
        v = hi + lo
    return np.where(np.isnan(lo) & ~np.isnan(hi), hi, v)     # an infinity leaves a NaN error term


def _held(v, owned=False):
    """A part's statistic as the sum holds it: a float64 copy (the array itself where the part
    ``owned`` it and it is float64 already), or the rows of a :class:`~._operator.RowProducts`
    (joined, never summed)."""
    if isinstance(v, RowProducts):
        return v
    return np.asarray(v, dtype=np.float64) if owned else np.array(v, dtype=np.float64)


def _own_float64(arrays):
    """True when an owned part's arrays may be held as they are: float64 ndarrays (or rows, joined,
    never summed)."""
    for v in arrays.values():
        if not (type(v) is np.ndarray and v.dtype == np.float64) and not isinstance(v, RowProducts):
            return False
    return True


class StatisticsSum:
    """The sum of the statistics of consecutive row sets (superblocks, Dask chunks), added one at a
    time by Ogita–Rump–Oishi's Sum2 ("Accurate sum and dot product", 2005, Alg. 4.4): TwoSum
    keeps every addition's rounding error, the errors are summed apart and added once at the end.
    The result is within ``u |S| + γ_{J−1}² Σ_j |S_j|`` of the exact sum ``S`` of the ``J`` parts
    (their Prop. 4.5; ``u = 2⁻⁵³``), per entry, whatever their magnitudes, so the rounding of this
    level does not grow with the number of parts (the sensitivity bound,
    :mod:`~dpem_fast._engine._specs`, "Rounding", (g)).  Deterministic: the same parts in the same
    order give the same bits.  One part is returned as it is (``+0.0`` for ``-0.0``).

    Parts are :class:`Statistics` (their diagnostics ``n_rows``, ``loglik``, ``n_clipped`` added
    plainly), float arrays (Sum2 as well), or anything else ``+`` adds (integers, tuples of
    counts: added plainly).  A statistic held as its rows (:class:`~._operator.RowProducts`)
    is joined, not summed."""

    def __init__(self):
        self._kind = None          # "stats", "array" or "plain"
        self._hi = self._lo = self._meta = None
        self._first = None         # the only part so far (Sum2's state is set up by a second)

    @staticmethod
    def _arrays(part):
        """``{name: array}`` of a part (a float array is the one entry ``None``)."""
        return part.arrays if isinstance(part, Statistics) else {None: part}

    def add(self, part):
        """Add ``part`` (of rows disjoint from those added before); None is skipped."""
        if part is None:
            return
        if self._kind is None and self._first is None:
            if isinstance(part, Statistics) or (isinstance(part, np.ndarray) and part.dtype.kind == "f"):
                # one part (the common case: one superblock) needs no Sum2; copied now, as Sum2's
                # state would be (a caller may reuse the part's arrays), unless the part owns them
                owned = isinstance(part, Statistics) and part.owned
                if owned and _own_float64(part.arrays):
                    self._first = part      # held as it is: its arrays are the sum's own already
                    return
                one = {k: _held(v, owned) for k, v in self._arrays(part).items()}
                self._first = (Statistics(one, part.n_rows, part.loglik, part.n_clipped)
                               if isinstance(part, Statistics) else one[None])
            else:
                self._kind, self._hi = "plain", part
            return
        if self._first is not None:     # a second part: Sum2's state from the first (held as a copy)
            first, self._first = self._first, None
            self._kind = "stats" if isinstance(first, Statistics) else "array"
            if self._kind == "stats":
                self._meta = [first.n_rows, first.loglik, first.n_clipped]
            self._hi = dict(self._arrays(first))
            self._lo = {k: np.zeros_like(v) for k, v in self._hi.items() if not isinstance(v, RowProducts)}
        if self._kind == "plain":
            self._hi = self._hi + part
            return
        if (self._kind == "stats") != isinstance(part, Statistics) or list(self._hi) != list(self._arrays(part)):
            raise ValueError(f"cannot add statistics named {list(self._hi)} and "
                             f"{list(getattr(part, 'arrays', {None: 0}))}")
        for name, x in self._arrays(part).items():
            if isinstance(x, RowProducts):          # a statistic held as its rows: they are joined
                self._hi[name] = self._hi[name] + x
                continue
            x, hi = np.asarray(x, dtype=np.float64), self._hi[name]
            if x.shape != hi.shape:
                what = "arrays" if name is None else f"statistic {name!r}"
                raise ValueError(f"cannot add {what} of shapes {hi.shape} and {x.shape}")
            self._hi[name], q = _two_sum(hi, x)
            self._lo[name] += q
        if self._kind == "stats":
            self._meta = [self._meta[0] + part.n_rows, self._meta[1] + part.loglik, self._meta[2] + part.n_clipped]

    def result(self):
        """The sum, or None when nothing was added."""
        if self._first is not None:         # Sum2 of one part: the part, +0.0 for -0.0
            # in place: the held arrays are this sum's own (copies, or an owned part's); a later
            # call returns them again
            for v in self._arrays(self._first).values():
                if not isinstance(v, RowProducts):
                    np.add(v, 0.0, out=v)
            return self._first
        if self._kind is None:
            return None
        if self._kind == "plain":
            return self._hi
        out = {k: hi if k not in self._lo else _collapse(hi, self._lo[k]) for k, hi in self._hi.items()}
        return out[None] if self._kind == "array" else Statistics(out, *self._meta)
