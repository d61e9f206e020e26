"""Privacy-loss-distribution (PLD) accountant, native numpy (private module).

Definitions
-----------
For a pair of distributions ``(P, Q)`` the privacy loss of an outcome ``o``
is ``L(o) = log(P(o) / Q(o))`` and its distribution under ``o ~ P`` is the
PLD ``omega``.  The hockey-stick divergence (the smallest delta at a given
epsilon) is

    ``delta(eps) = omega({+inf}) + E_omega[(1 - exp(eps - L))_+]``.

A pair ``(P, Q)`` *dominates* a mechanism ``M`` when, for every ordered
pair of neighbours ``(D, D')``, ``H_a(M(D) || M(D')) <= H_a(P || Q)`` for
every ``a = e^eps >= 0`` (Zhu, Dong & Wang 2022, "Optimal accounting of
differential privacy via characteristic function").  The adaptive
composition of mechanisms is dominated by the product of their dominating
pairs, whose PLD is the convolution of their PLDs (Zhu, Dong & Wang 2022;
Koskela, Jaelkoe & Honkela 2020; Sommer, Meiser & Mohammadi 2019).

The accountant
--------------
Each leaf event contributes the discretised PLDs of its dominating pair
(:mod:`dpem_fast.accounting._pld_pairs`); compositions are convolutions and
``k``-fold self-compositions one FFT power on the grid ``h Z``
(:mod:`dpem_fast.accounting._pld_grid`, which also states the theorem: the
pessimistic "connect the dots" discretisation dominates, so the reported
epsilon is an upper bound on the smallest epsilon).  Under ``"add_remove"``
a removal PLD and an addition PLD are composed side by side and the worse of
the two is reported.

Plain (not subsampled) Gaussian releases are composed in closed form first
(``mu^2`` adds up) and their product is discretised once; a plan of plain
Gaussian releases only is answered from the exact curve of its product
(Balle & Wang 2018), as :class:`~dpem_fast.accounting.GDPAccountant` does.

This module holds the accountant and its composition state.  It re-exports
the private names of the two modules above, so that every name it held
before they were split off is still reached from here; a re-exported
constant is a copy of the binding, so a test that changes one (``_Z_TAIL``)
sets it on the module that reads it (``_pld_pairs``).
"""
import math

import numpy as np

from ._base import PrivacyAccountant, untag
from ._events import (GaussianEvent, NeighbouringEvent, PoissonSampledEvent,
                      SampledWithoutReplacementEvent)
from ._pld_grid import (_EPS, _MAX_GRID, _TRIM, _WINDOW_TOL,  # noqa: F401
                        _combine_inf, _convolve, _discretise, _identity,
                        _int_power, _is_identity, _log_mgf, _Pld, _power,
                        _roundoff, _trim)
from ._pld_pairs import (_TAIL, _Z_TAIL, _add_pair, _base_of,  # noqa: F401
                         _discrete_gaussian_table, _DiscreteGaussianBase,
                         _GaussianBase, _gaussian_delta, _gaussian_epsilon,
                         _gaussian_pld, _LaplaceBase, _leaf_plds, _loss_of_r,
                         _r_of_loss, _Refused, _remove_pair, _replace_wor_pair)
from ._validation import check_positive

__all__ = ["PLDAccountant"]


# ------------------------------------------------------ accountant --
class _State:
    """PLDs of the removal and addition directions (the same object when
    every composed event is symmetric), and ``mu2``: the sum of ``1/z^2``
    of the plain Gaussian releases, composed in closed form (their product
    pair is ``(N(mu, 1), N(0, 1))`` with ``mu^2`` the sum: Dong, Roth & Su
    2019, Cor. 2.3) and discretised once, when a query needs it."""

    __slots__ = ("remove", "add", "mu2", "_final")

    def __init__(self, remove, add, mu2=0.0):
        self.remove, self.add, self.mu2 = remove, add, float(mu2)
        self._final = None

    def gaussian_only(self):
        return (self.mu2 > 0.0 and _is_identity(self.remove)
                and _is_identity(self.add))

    def pairs(self, h, pessimistic):
        """The PLDs to query (memoised; the state is immutable)."""
        if self._final is None:
            remove, add = self.remove, self.add
            if self.mu2 > 0.0:
                gauss = _gaussian_pld(math.sqrt(self.mu2), h, pessimistic)
                same = add is remove
                remove = _convolve(remove, gauss)
                add = remove if same else _convolve(add, gauss)
            self._final = (remove,) if add is remove else (remove, add)
        return self._final


class PLDAccountant(PrivacyAccountant):
    """Privacy-loss-distribution accountant (native; numpy FFTs).

    Parameters
    ----------
    neighbouring : {"add_remove", "replace"}
        Relation under which the events' noise parameters are expressed.
    value_discretization : float, default 1e-3
        Grid step ``h`` of the privacy losses (finite, > 0).  The reported
        epsilon is an upper bound for every ``h``; its excess over the exact
        value shrinks like ``k h^2`` after ``k`` composed events.
    pessimistic : bool, default True
        ``True``: "connect the dots" discretisation, an upper bound (use
        this for privacy claims).  ``False``: losses rounded down, a lower
        bound (for checks only).

    Notes
    -----
    Theorem, constructions and references: see the module docstrings of
    :mod:`dpem_fast.accounting._pld`, ``_pld_grid`` (the discretisation
    and the theorem) and ``_pld_pairs`` (the mechanisms and relations)
    (Koskela, Jaelkoe & Honkela 2020; Koskela et al. 2021; Gopi, Lee &
    Wutschitz 2021; Doroshenko et al. 2022 "Connect the dots"; Zhu, Dong &
    Wang 2022; Balle, Barthe & Gaboardi 2018).  In short: each event's PLD is discretised pessimistically
    (it dominates the true pair), compositions are convolutions computed
    with FFTs (``SelfComposedEvent`` and ``compose(event, count)``: one FFT
    power), and every truncation moves mass towards larger losses or to
    ``+inf``.  Under ``"add_remove"`` the removal and the addition PLDs are
    composed side by side and the worse one is reported.

    Supported: ``GaussianEvent``, ``LaplaceEvent``, ``DiscreteGaussianEvent``
    (integer sensitivity, scalar), their Poisson-sampled versions under
    ``"add_remove"``, their sampled-without-replacement versions under
    ``"replace"``, and compositions.  ``dp_accounting`` is not needed (it is
    a test-only cross-check).
    """

    def __init__(self, *, neighbouring="add_remove", value_discretization=1e-3,
                 pessimistic=True):
        self._h = check_positive("value_discretization", value_discretization)
        if not isinstance(pessimistic, (bool, np.bool_)):
            raise TypeError(f"pessimistic must be a bool, got {pessimistic!r}")
        self._pessimistic = bool(pessimistic)
        super().__init__(neighbouring=neighbouring)

    @property
    def value_discretization(self):
        return self._h

    @property
    def pessimistic(self):
        return self._pessimistic

    def __repr__(self):
        return (f"PLDAccountant(neighbouring={self._neighbouring!r}, "
                f"value_discretization={self._h!r}, "
                f"pessimistic={self._pessimistic!r}, "
                f"n_entries={len(self._ledger)})")

    # -- hooks ---------------------------------------------------------
    def _zero(self):
        one = _identity(getattr(self, "_h", 1e-3),
                        getattr(self, "_pessimistic", True))
        return _State(one, one)

    def _leaf(self, event):
        # sampling everything is the base event, whatever it is
        if ((isinstance(event, PoissonSampledEvent)
             and event.sampling_probability == 1.0)
                or (isinstance(event, SampledWithoutReplacementEvent)
                    and event.sample_size == event.population_size)):
            return self._contribution(event.event)
        base = event
        while isinstance(base, NeighbouringEvent):
            base = untag(base, self._neighbouring, type(self).__name__)
        if isinstance(base, GaussianEvent):
            one = _identity(self._h, self._pessimistic)
            return _State(one, one, base.noise_multiplier ** -2)
        try:
            remove, add = _leaf_plds(event, self._neighbouring, self._h,
                                     self._pessimistic)
        except _Refused as exc:
            self._unsupported(event, exc.args[0])
        return _State(remove, add)

    def _scale(self, contrib, count):
        if count == 1:
            return contrib
        remove = _power(contrib.remove, count)
        add = (remove if contrib.add is contrib.remove
               else _power(contrib.add, count))
        return _State(remove, add, contrib.mu2 * count)

    def _add(self, a, b):
        remove = _convolve(a.remove, b.remove)
        if a.add is a.remove and b.add is b.remove:
            add = remove
        else:
            add = _convolve(a.add, b.add)
        return _State(remove, add, a.mu2 + b.mu2)

    def _pairs(self):
        return self._state.pairs(self._h, self._pessimistic)

    def _epsilon(self, delta):
        if self._state.gaussian_only():
            return _gaussian_epsilon(math.sqrt(self._state.mu2), delta)
        return max(p.epsilon(delta) for p in self._pairs())

    def _delta(self, epsilon):
        if self._state.gaussian_only():
            return _gaussian_delta(math.sqrt(self._state.mu2), epsilon)
        return max(p.delta(epsilon) for p in self._pairs())
