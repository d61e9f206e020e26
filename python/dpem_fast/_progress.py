"""Progress of a long fit, shown only when the user asks (``verbose >= 1``).

One helper for every estimator's loop: with ``verbose >= 1`` a `tqdm
<https://tqdm.github.io>`_ bar on stderr (``pip install dpem_fast[progress]``), or,
without tqdm, plain one-line messages on stderr; with ``verbose=0`` nothing at all.

What is shown is public: the iteration count, the wall-clock seconds of the last
iteration and the privacy budget spent after the rounds released so far — the ε of the
plan's event truncated to those rounds, computed by the plan's own accountant from public
parameters (the noise scales, J, δ).  Nothing computed from the data (no likelihood, no
count of clipped rows) is ever shown.  The seconds are a timing measurement of a
computation on the data; they are printed only because the user asked for progress.

The bar never changes the fit: it draws no randomness and reads no statistic, so a
seeded fit gives the same result for every ``verbose``.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time

from . import accounting as acc

__all__ = ["Progress", "truncated_event", "plan_spent"]

#: Seconds between two plain-text lines (without tqdm).
REFRESH_SECONDS = 0.5
#: The spent ε is recomputed after a round unless its last computation took more than this
#: fraction of the time since then (so that showing it costs at most about 10 % of the fit).
EPSILON_OVERHEAD = 0.1


def truncated_event(event, count, t):
    """``event`` with every ``SelfComposedEvent`` of ``count`` repetitions cut to ``t``.

    A plan's event is ``Neighbouring(relation, Composed(one-offs..., SelfComposed(step, J)))``
    (or without the one-offs); after ``t`` of its ``J`` rounds the mechanism run so far is
    the same tree with ``t`` repetitions of the step.  ``t = 0`` drops the repetition (the
    one-off releases made before the loop remain).  Returns None when nothing is left.
    """
    if isinstance(event, acc.SelfComposedEvent) and event.count == count:
        return dataclasses.replace(event, count=int(t)) if t > 0 else None
    if isinstance(event, acc.NeighbouringEvent):
        inner = truncated_event(event.event, count, t)
        return None if inner is None else dataclasses.replace(event, event=inner)
    if isinstance(event, acc.ComposedEvent):
        parts = [e for e in (truncated_event(e, count, t) for e in event.events) if e is not None]
        return acc.ComposedEvent(parts) if parts else None
    return event


def plan_spent(plan, rounds, delta, count=None):
    """``t -> ε`` spent after ``t`` of the plan's ``rounds`` rounds, at ``delta``; ``count``: the
    repetitions of the plan's repeated step in those rounds, a multiple of ``rounds`` (default
    ``rounds``: one per round).

    Public: the plan's event and accountant only.  ``t = rounds`` is the plan's own
    ``epsilon_spent``.
    """
    factory = acc.get_accountant(plan.accountant, plan.neighbouring)
    count = int(rounds if count is None else count)

    def spent(t):
        if t >= rounds:
            return float(plan.epsilon_spent)
        event = truncated_event(plan.event, count, t * count // rounds)
        return 0.0 if event is None else float(factory().compose(event).get_epsilon(float(delta)))

    return spent


def _tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class Progress:
    """Progress of ``total`` rounds; a no-op unless ``verbose >= 1``.

    Parameters
    ----------
    verbose : int
        0 (or False): silent.  ``>= 1``: a tqdm bar on stderr, or plain lines on stderr
        (at most one every :data:`REFRESH_SECONDS`, and always the last) without tqdm.
    total : int
        Number of rounds.
    desc : str
        Label, e.g. the estimator's name.
    spent : callable or None
        ``t -> ε`` spent after ``t`` rounds (public; :func:`plan_spent`).  None: a
        non-private fit, shown as ``not private``.
    delta : float or None
        The δ of ``spent``, shown beside it.
    unit : str, default="it"
        What a round is called ("it", "epoch").

    Use as a context manager; call :meth:`step` after each round.
    """

    def __init__(self, verbose, total, desc, spent=None, delta=None, unit="it"):
        self.on = bool(verbose) and int(verbose) >= 1
        self.total = int(total)
        self.desc = desc
        self.spent = spent
        self.delta = delta
        self.done = 0
        self._bar = None
        self._last_eps_time = -math.inf
        self._eps_cost = 0.0
        self._last_line_time = -math.inf
        self._eps = None
        self.unit = "iteration" if unit == "it" else unit
        if self.on:
            tqdm = _tqdm()
            if tqdm is not None:
                self._bar = tqdm(total=self.total, desc=desc, unit=unit, file=sys.stderr, leave=True)
        self._t0 = time.perf_counter()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _budget(self, force):
        """The postfix text.  ε after the rounds done so far, recomputed unless that is too
        costly now (EPSILON_OVERHEAD); always for the last round.  A stale value says after
        which round it was computed."""
        if self.spent is None:
            return "not private"
        now = time.perf_counter()
        if force or self._eps_cost <= EPSILON_OVERHEAD * (now - self._last_eps_time):
            self._eps = (self.done, self.spent(self.done))
            self._last_eps_time = time.perf_counter()
            self._eps_cost = self._last_eps_time - now
        t, eps = self._eps
        when = "" if t == self.done else f" after {t}"
        return f"eps={eps:.4g}{when} (delta={self.delta:g})"

    def step(self):
        """One round finished."""
        if not self.on:
            return
        now = time.perf_counter()
        last = now - self._t0
        self._t0 = now
        self.done += 1
        final = self.done >= self.total
        budget = self._budget(final)
        if self._bar is not None:
            self._bar.set_postfix_str(f"last={last:.3g}s {budget}", refresh=False)
            self._bar.update(1)
        elif final or now - self._last_line_time >= REFRESH_SECONDS:
            self._last_line_time = now
            print(f"{self.desc}: {self.unit} {self.done}/{self.total}, last {last:.3g}s, {budget}",
                  file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.refresh()
            self._bar.close()
            self._bar = None
