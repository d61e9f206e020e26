"""Inverse problem: noise (or per-release epsilon) for a target (eps, delta)."""
import math

import numpy as np

from . import _rdp
from ._base import check_tags
from ._events import (ComposedEvent, DpEvent, NeighbouringEvent,
                      PoissonSampledEvent, SampledWithoutReplacementEvent,
                      SelfComposedEvent)
from ._validation import check_delta, check_open_unit, check_positive

__all__ = ["calibrate_noise_multiplier", "calibrate_epsilon_per_release"]


def _default_accountant():
    from ._rdp_accountants import RDPAccountant
    return RDPAccountant


def _named_accountant(name, make_event, param):
    """Factory for an accountant given by name (see
    :data:`~dpem_fast.accounting.ACCOUNTANTS`), under the relation the plan
    is tagged with (``"add_remove"``, the accountants' default, if the plan
    carries no tag or tags of both relations: the accountant then refuses
    the mismatched part)."""
    from ._events import tagged_relations
    from ._registry import get_accountant
    tags = tagged_relations(_checked_event(make_event, param))
    relation = next(iter(tags)) if len(tags) == 1 else "add_remove"
    return get_accountant(name, relation)


def _epsilon_of(make_event, accountant, param, delta):
    event = _checked_event(make_event, param)
    return accountant().compose(event).get_epsilon(delta)


def _checked_event(make_event, param):
    event = make_event(param)
    if not isinstance(event, DpEvent):
        raise TypeError(f"make_event must return a DpEvent, got {event!r}")
    return event


def _log_ratio(eps, epsilon, log_target):
    """``log(eps / epsilon)``, signed so that ``<= 0`` iff ``eps <= epsilon``
    exactly (rounding in the logarithm never flips feasibility)."""
    if eps <= 0.0:
        return -math.inf
    if not eps <= epsilon:
        if math.isinf(eps) or math.isnan(eps):
            return math.inf
        return max(math.log(eps) - log_target, 5e-324)
    return min(math.log(eps) - log_target, 0.0)


class _Fallback(Exception):
    """The restricted-order search could not conclude: use the generic one."""


# ----------------------------------------------------- root finding --
# The search variable is ``u = +-log(param)``, oriented so that feasibility
# (``g(u) <= 0``) is monotone non-decreasing in ``u``.  ``g`` is
# ``log(eps / target)``, close to linear in ``u`` for every mechanism here
# (eps ~ 1/z .. 1/z^2, or ~ eps_i .. eps_i^2), so secant steps converge in
# a few evaluations; every step keeps a feasible and an infeasible end.

def _bracket(g, u0, g0, ua, ub, tol, unreachable):
    """``(ui, gi, uf, gf)``: ``ui < uf``, ``g(ui) > 0 >= g(uf)``.

    Returns ``(None, None, ua, g(ua))`` when even the lower edge ``ua`` is
    feasible; calls ``unreachable(ub)`` when the upper edge is infeasible.
    """
    feasible = g0 <= 0.0
    d = -1.0 if feasible else 1.0        # walk toward the other side
    u_prev, g_prev = None, None
    u, gu = u0, g0
    step = 0.0
    while True:
        # distance to the root predicted by a secant through the last two
        # points (or slope 1 in |g| per unit of u for the first step)
        pred = None
        if math.isfinite(gu):
            slope = 1.0
            if u_prev is not None and math.isfinite(g_prev) and gu != g_prev:
                slope = (gu - g_prev) / (u - u_prev)   # < 0 expected
                slope = -slope if slope < 0 else None
            if slope:
                pred = abs(gu) / slope
        if pred is None or not math.isfinite(pred):
            new_step = 2.0 * step if step else math.log(4.0)
        else:
            # overshoot a little so that the root is bracketed; never crawl
            new_step = max(1.25 * pred + tol, step)
        step = min(new_step, 16.0)
        u_prev, g_prev = u, gu
        u = u + d * step
        if feasible and u <= ua:
            g_edge = g(ua)
            if g_edge <= 0.0:
                return None, None, ua, g_edge
            return ua, g_edge, u_prev, g_prev
        if not feasible and u >= ub:
            g_edge = g(ub)
            if g_edge > 0.0:
                unreachable(ub)
            return u_prev, g_prev, ub, g_edge
        gu = g(u)
        if (gu <= 0.0) != feasible:
            if feasible:
                return u, gu, u_prev, g_prev
            return u_prev, g_prev, u, gu


def _solve(g, ui, gi, uf, gf, tol):
    """Shrink ``[ui, uf]`` (infeasible, feasible) to width ``<= tol`` by
    safeguarded secant steps; returns the final ``(ui, uf)``.

    Once the secant estimate lies within ``tol`` of an end, the probe goes
    just inside ``tol`` of that end, which closes the bracket when the
    estimate is right; three probes that fail to halve the bracket trigger
    a bisection, so the worst case is bisection's.
    """
    hist = [(ui, gi), (uf, gf)]
    widths = []
    m = 0.999 * tol
    # (a bracket a few ulps wide cannot shrink further)
    while uf - ui > max(tol, 1e-14 * max(1.0, abs(uf))):
        w = uf - ui
        (u1, g1), (u2, g2) = hist[-2], hist[-1]
        r = None
        if math.isfinite(g1) and math.isfinite(g2) and g1 != g2:
            r = u2 - g2 * (u2 - u1) / (g2 - g1)           # secant
        if r is None or not ui < r < uf:
            if math.isfinite(gi) and math.isfinite(gf) and gi != gf:
                r = uf - gf * (uf - ui) / (gf - gi)       # regula falsi
            else:
                r = 0.5 * (ui + uf)
        if len(widths) >= 3 and w > 0.5 * widths[-3]:
            p = 0.5 * (ui + uf)                            # stalled: bisect
        elif uf - r < m:
            p = uf - m          # closes the bracket if r is accurate
        elif r - ui < m:
            p = ui + m
        else:
            p = r
        inner = 1e-3 * min(tol, w)
        p = min(max(p, ui + inner), uf - inner)
        gp = g(p)
        if gp <= 0.0:
            uf, gf = p, gp
        else:
            ui, gi = p, gp
        hist.append((p, gp))
        widths.append(w)
    return ui, uf


def _search(g, u0, ua, ub, tol, unreachable):
    """``(ui, uf)``: ``uf`` feasible, ``ui`` infeasible, ``uf - ui <= tol``;
    ``(None, ua)`` if the edge ``ua`` is feasible."""
    ui, gi, uf, gf = _bracket(g, u0, g(u0), ua, ub, tol, unreachable)
    if ui is None:
        return None, uf
    return _solve(g, ui, gi, uf, gf, tol)


# -------------------------------------- RDP: search on a few orders --
class _OrderEpsilons:
    """Per-order epsilons of ``make_event(param)`` under an RDP accountant,
    computed lazily for the orders asked for and memoised per ``u``.

    Every order's value is itself a valid epsilon, so the minimum over a
    subset is ``>=`` the full-grid epsilon: a point feasible on a subset is
    feasible on the whole grid (the final answer is still re-checked with
    the accountant itself).
    """

    def __init__(self, make_event, acct, delta, sign, epsilon):
        from ._rdp_accountants import _event_rdp
        self._event_rdp = _event_rdp
        self.grid = acct._orders
        self.orders = np.asarray(self.grid, dtype=float)
        if np.any(np.diff(self.orders) < 0):
            self.grid = tuple(sorted(self.grid))
            self.orders = np.asarray(self.grid, dtype=float)
        self.n = self.orders.size
        self.conversion = acct._conversion
        self.neighbouring = acct._neighbouring
        self.make_event = make_event
        self.delta = delta
        self.sign = sign
        self.epsilon = epsilon
        self.log_target = math.log(epsilon)
        self.memo = {}

    def eps(self, u, idx):
        entry = self.memo.get(u)
        if entry is None:
            event = _checked_event(self.make_event, math.exp(self.sign * u))
            if type(event) is DpEvent:   # compose's TypeError, generic path
                raise _Fallback
            entry = self.memo[u] = (event, np.full(self.n, np.nan))
        event, vals = entry
        missing = idx[np.isnan(vals[idx])]
        if missing.size:
            if idx.size == self.n:
                # the whole grid, as the accountant will ask for it (the
                # memoised curve then serves the final certification)
                missing = idx
                sub = self.grid
            else:
                sub = tuple(float(a) for a in self.orders[missing])
            rdp = self._event_rdp(event, sub, self.neighbouring)
            vals[missing] = _rdp.epsilon_per_order(
                self.orders[missing], rdp, self.delta, self.conversion)
        return vals[idx]

    def g_on(self, idx):
        def g(u):
            return _log_ratio(float(np.min(self.eps(u, idx))),
                              self.epsilon, self.log_target)
        return g


class _Window:
    """``g`` on a window of ``2h+1`` consecutive orders that follows the
    minimising order: when the minimum sits on an edge, the window jumps
    ``h - 1`` orders past that edge and looks again."""

    def __init__(self, oe, centre, h=5):
        self.oe, self.h, self.centre = oe, h, centre

    def __call__(self, u):
        n, h = self.oe.n, self.h
        for _ in range(n):
            idx = np.arange(max(self.centre - h, 0),
                            min(self.centre + h, n - 1) + 1)
            vals = self.oe.eps(u, idx)
            j = int(np.argmin(vals))
            centre = self.centre
            # the old edge becomes an inner order of the new window, so
            # a minimum that stays there ends the walk
            if j == 0 and idx[0] > 0:
                centre = max(int(idx[0]) - max(h - 1, 0), 0)
            elif j == idx.size - 1 and idx[-1] < n - 1:
                centre = min(int(idx[-1]) + max(h - 1, 0), n - 1)
            if centre == self.centre:
                break
            self.centre = centre
        return _log_ratio(float(vals[j]), self.oe.epsilon,
                          self.oe.log_target)


def _has_costly_curve(event):
    """Whether the plan has a subsampled event (RDP curve by series / sums
    over the orders, ~ms per grid); plain Gaussian/Laplace plans are cheaper
    to search on the full grid directly.  Tags are transparent (their
    relation is checked by the caller)."""
    if isinstance(event, (SelfComposedEvent, NeighbouringEvent)):
        return _has_costly_curve(event.event)
    if isinstance(event, ComposedEvent):
        return any(_has_costly_curve(e) for e in event.events)
    if isinstance(event, PoissonSampledEvent):
        return event.sampling_probability < 1.0
    if isinstance(event, SampledWithoutReplacementEvent):
        return event.sample_size < event.population_size
    return False


def _rdp_order_limited(event, acct):
    """Whether the RDP accountant's epsilon for ``event`` comes from its
    finite orders only (the restricted-order search knows nothing of the
    pure-DP order infinity, so plans with a finite pure epsilon take the
    generic search)."""
    from ._rdp_accountants import _pure_epsilon
    return not (acct._pure_order and math.isfinite(_pure_epsilon(event)))


def _rdp_instance(accountant):
    """An ``RDPAccountant``/``MomentsAccountant`` made by the factory, else
    None (other accountants, and subclasses that may override the curves,
    use the generic search)."""
    from ._rdp_accountants import MomentsAccountant, RDPAccountant
    try:
        acct = accountant()
    except Exception:  # the generic path reports factory errors
        return None
    if type(acct) in (RDPAccountant, MomentsAccountant):
        return acct
    return None


def _rdp_search(oe, epsilon, u0, ua, ub, xtol):
    """Calibrate on a few orders, then certify with the whole grid.

    1. The minimising order at ``u0`` (a sparse set, then the grid between
       its neighbours) centres a window of 11 consecutive orders that follows
       the minimiser; the search on it gives ``ui < uf``, ``uf - ui <= xtol``,
       ``uf`` feasible (hence feasible on the full grid).
    2. One full-grid evaluation at ``uf`` gives the set ``S`` of orders
       feasible there.  Epsilon at each order is non-increasing in ``u``, so
       an order infeasible at ``uf`` is infeasible at every ``u <= uf``:
       below ``uf`` the full-grid epsilon is the minimum over ``S``.
    3. If every order of ``S`` is infeasible at ``ui``, the full grid is
       too and ``uf`` is the full-grid answer; otherwise the search goes on
       below ``ui`` on ``S`` only, with the same conclusion.
    """
    def unreachable(_u):
        raise _Fallback
    n = oe.n
    sparse = np.unique(np.searchsorted(
        oe.orders, np.geomspace(oe.orders[0], oe.orders[-1], 20)).clip(
            0, n - 1))
    j = int(np.argmin(oe.eps(u0, sparse)))
    lo = sparse[j - 1] if j > 0 else 0
    hi = sparse[j + 1] if j + 1 < sparse.size else n - 1
    between = np.arange(lo, hi + 1)
    if between.size > 48:
        between = np.unique(np.linspace(lo, hi, 48).astype(np.int64))
    centre = int(between[int(np.argmin(oe.eps(u0, between)))])
    ui, uf = _search(_Window(oe, centre), u0, ua, ub, xtol, unreachable)
    cand = np.flatnonzero(oe.eps(uf, np.arange(n)) <= epsilon)
    if cand.size == 0:  # pragma: no cover - subset/full values disagree
        raise _Fallback
    if ui is None or float(np.min(oe.eps(ui, cand))) > epsilon:
        return uf
    return _search(oe.g_on(cand), ui, ua, ub, xtol, unreachable)[1]


def _calibrate(make_event, epsilon, delta, accountant, lo, hi, decreasing,
               name, xtol):
    """Largest (if ``decreasing`` is False) / smallest param meeting target.

    The search runs on ``u = +-log(param)`` (oriented so that larger ``u``
    is more private-budget friendly) and returns the feasible end of a
    bracket of width ``<= xtol``, so ``eps(result) <= epsilon`` always
    holds (re-checked with the accountant itself).
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_open_unit("delta", delta)
    xtol = check_positive("xtol", xtol)
    sign = 1.0 if decreasing else -1.0
    ua, ub = sorted((sign * math.log(lo), sign * math.log(hi)))
    u0 = min(max(0.0, ua), ub)   # start at param = 1 (clipped)
    if accountant is None:
        accountant = _default_accountant()
    elif isinstance(accountant, str):
        accountant = _named_accountant(accountant, make_event,
                                       math.exp(sign * u0))
    log_target = math.log(epsilon)
    cache = {}

    def eps_at(u):
        if u not in cache:
            cache[u] = _epsilon_of(make_event, accountant,
                                   math.exp(sign * u), delta)
        return cache[u]

    acct = _rdp_instance(accountant)
    first = None if acct is None else _checked_event(make_event,
                                                      math.exp(sign * u0))
    if (first is not None and _has_costly_curve(first)
            and _rdp_order_limited(first, acct)):
        # the per-order curves bypass compose: refuse a mismatched plan here
        check_tags(first, acct.neighbouring, type(acct).__name__)
        oe = _OrderEpsilons(make_event, acct, delta, sign, epsilon)
        try:
            u = _rdp_search(oe, epsilon, u0, ua, ub, xtol)
        except _Fallback:
            u = None
        # soundness: the accountant itself must certify the result
        if u is not None and eps_at(u) <= epsilon:
            return math.exp(sign * u)

    def unreachable(u):
        raise ValueError(
            f"target (epsilon={epsilon!r}, delta={delta!r}) is "
            f"unreachable: even {name}={math.exp(sign * u):.6g} gives"
            f" epsilon={eps_at(u):.6g} under "
            f"{getattr(accountant, '__name__', accountant)}")

    def g(u):
        return _log_ratio(eps_at(u), epsilon, log_target)

    u = _search(g, u0, ua, ub, xtol, unreachable)[1]
    if not eps_at(u) <= epsilon:  # pragma: no cover - g <= 0 means feasible
        raise RuntimeError("calibration failed to find a feasible point")
    return math.exp(sign * u)


def calibrate_noise_multiplier(make_event, epsilon, delta, accountant=None, *,
                               bracket=(1e-3, 1e6), xtol=1e-7):
    """Smallest noise multiplier ``z`` whose plan is (epsilon, delta)-DP.

    Parameters
    ----------
    make_event : callable
        ``make_event(z) -> DpEvent``, typically the whole composed plan.
    epsilon : float
        Target epsilon, > 0.
    delta : float
        Target delta in (0, 1), under the public δ policy: refused (``ValueError``)
        above :data:`~dpem_fast.accounting.DELTA_MAX`,
        :class:`~dpem_fast.accounting.LargeDeltaWarning` above
        :data:`~dpem_fast.accounting.DELTA_WARN`.
    accountant : class, callable or str, default RDPAccountant
        Factory returning a fresh accountant, e.g. ``ZCDPAccountant`` or
        ``functools.partial(RDPAccountant, conversion="classic")``, or a
        name of :data:`~dpem_fast.accounting.ACCOUNTANTS` (e.g. ``"pld"``),
        used under the relation the plan is tagged with
        (:class:`NeighbouringEvent`), else ``"add_remove"``.
    bracket : (float, float)
        Search interval for ``z``.
    xtol : float
        Absolute tolerance on ``log z`` (default 1e-7: relative 1e-7 on z).

    Returns
    -------
    float
        ``z`` with ``eps(z) <= epsilon`` (recomputed, exactly), within
        ``xtol`` (in log) of the smallest such ``z``.

    Raises
    ------
    ValueError
        If the target is unreachable within ``bracket``.

    Notes
    -----
    epsilon is non-increasing in ``z`` for every supported mechanism, so
    Brent's method on ``log z`` brackets the boundary; the feasible bracket
    end is returned.
    """
    check_delta("delta", delta)
    return _calibrate_noise_multiplier(make_event, epsilon, delta, accountant, bracket=bracket, xtol=xtol)


def _calibrate_noise_multiplier(make_event, epsilon, delta, accountant=None, *, bracket=(1e-3, 1e6), xtol=1e-7):
    """:func:`calibrate_noise_multiplier` without the δ policy: for the library's own plans,
    whose δ the estimator has checked already (a warning after a ledger charge would break
    "a fit never raises after the charge" under ``-W error``), and for internal shares of
    a δ."""
    lo, hi = bracket
    lo = check_positive("bracket[0]", lo)
    hi = check_positive("bracket[1]", hi)
    return _calibrate(make_event, epsilon, delta, accountant, lo, hi, True,
                      "noise_multiplier", xtol)


def calibrate_epsilon_per_release(make_event, epsilon, delta, accountant=None,
                                  *, bracket=(1e-6, 1e3), xtol=1e-7):
    """Largest per-release epsilon (e.g. DP-EM's eps_i) meeting the target.

    Same contract as :func:`calibrate_noise_multiplier`, for plans whose
    epsilon is non-decreasing in the parameter (``make_event(eps_i)``,
    e.g. the Laplace parts of the LLG plan).
    """
    check_delta("delta", delta)
    return _calibrate_epsilon_per_release(make_event, epsilon, delta, accountant, bracket=bracket, xtol=xtol)


def _calibrate_epsilon_per_release(make_event, epsilon, delta, accountant=None, *, bracket=(1e-6, 1e3), xtol=1e-7):
    """:func:`calibrate_epsilon_per_release` without the δ policy (see :func:`_calibrate_noise_multiplier`)."""
    lo, hi = bracket
    lo = check_positive("bracket[0]", lo)
    hi = check_positive("bracket[1]", hi)
    return _calibrate(make_event, epsilon, delta, accountant, lo, hi, False,
                      "epsilon_per_release", xtol)
