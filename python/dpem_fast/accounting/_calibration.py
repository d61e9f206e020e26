"""Inverse problem: noise (or per-release epsilon) for a target (eps, delta)."""
import math

from scipy import optimize

from ._events import DpEvent
from ._validation import check_open_unit, check_positive

__all__ = ["calibrate_noise_multiplier", "calibrate_epsilon_per_release"]

_BIG = 1e300


def _default_accountant():
    from ._rdp_accountants import RDPAccountant
    return RDPAccountant


def _epsilon_of(make_event, accountant, param, delta):
    event = make_event(param)
    if not isinstance(event, DpEvent):
        raise TypeError(f"make_event must return a DpEvent, got {event!r}")
    return accountant().compose(event).get_epsilon(delta)


def _calibrate(make_event, epsilon, delta, accountant, lo, hi, decreasing,
               name, xtol):
    """Largest (if ``decreasing`` is False) / smallest param meeting target.

    ``f(log p) = eps(p) - epsilon`` is monotone; the result is the bracket
    end on the feasible side, so ``eps(result) <= epsilon`` always holds.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_open_unit("delta", delta)
    if accountant is None:
        accountant = _default_accountant()
    cache = {}

    def eps_at(log_p):
        if log_p not in cache:
            cache[log_p] = _epsilon_of(make_event, accountant,
                                       math.exp(log_p), delta)
        return cache[log_p]

    def feasible(log_p):
        return eps_at(log_p) <= epsilon

    log_lo, log_hi = math.log(lo), math.log(hi)
    # Start at p = 1 (clipped) and expand geometrically (factor 4) towards
    # the other side, so extreme parameters are only tried when needed.
    x = min(max(0.0, log_lo), log_hi)
    step = math.log(4.0)
    toward_feasible = (1.0 if decreasing else -1.0)
    if feasible(x):
        b, a = x, x
        while feasible(a):
            b = a
            a = a - toward_feasible * step
            if not log_lo <= a <= log_hi:
                edge = log_lo if decreasing else log_hi
                if feasible(edge):
                    return math.exp(edge)
                a = edge
                break
    else:
        a, b = x, x
        while not feasible(b):
            a = b
            b = b + toward_feasible * step
            if not log_lo <= b <= log_hi:
                edge = log_hi if decreasing else log_lo
                if not feasible(edge):
                    raise ValueError(
                        f"target (epsilon={epsilon!r}, delta={delta!r}) is "
                        f"unreachable: even {name}={math.exp(edge):.6g} gives"
                        f" epsilon={eps_at(edge):.6g} under "
                        f"{getattr(accountant, '__name__', accountant)}")
                b = edge
                break

    def f(log_p):
        e = eps_at(log_p)
        return min(e, _BIG) - epsilon

    root = optimize.brentq(f, min(a, b), max(a, b), xtol=xtol, rtol=1e-12,
                           maxiter=200)
    # Move to the feasible side of the root (never exceed the target).
    step = xtol
    direction = 1.0 if decreasing else -1.0
    cand = root
    while not feasible(cand):
        cand = root + direction * step
        step *= 2.0
    return math.exp(cand)


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
        Target delta in (0, 1).
    accountant : class or callable, default RDPAccountant
        Factory returning a fresh accountant, e.g. ``ZCDPAccountant`` or
        ``functools.partial(RDPAccountant, conversion="classic")``.
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
    lo, hi = bracket
    lo = check_positive("bracket[0]", lo)
    hi = check_positive("bracket[1]", hi)
    return _calibrate(make_event, epsilon, delta, accountant, lo, hi, False,
                      "epsilon_per_release", xtol)
