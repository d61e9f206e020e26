"""The selection loop: private selection by random stopping (Papernot & Steinke, ICLR 2022).

A trial — a uniformly drawn candidate, fitted privately, and a Gaussian noisy score of it — runs
T times, T secret from a public law, and only the best trial is released.  :class:`SelectionLoop`
owns the privacy path: the random-stopping event and its calibration (μ per trial, the fixed
work T_max, δ_tail), the plan of the scores and the one charge before any trial reads a row,
the secret T and the max(T, T_max) trials whose scores go through the release layer (a trial
that raises is fatal after every trial ran: :data:`TRIAL_FAILED`), and the record.
:class:`~dpem_fast.model_selection.PrivateModelSelection` supplies the candidates, each trial's
fit and its exact score.  The proof: :doc:`/model_selection`, "Privacy analysis in full".
"""
from __future__ import annotations

import math

import numpy as np

from .. import accounting as acc
from .._dpcore import _rng as _core_rng
from .._rng import derive_key
from ..accounting import _calibration
from . import _specs
from ._plan import EventRelease, make_event_plan
from ._loops import PrivateRun

__all__ = ["SelectionLoop", "random_stopping_event", "SCORE", "TAIL_SHARE", "TRIAL_FAILED"]

#: The selection's score statistic, as the release layer names it.
SCORE = "selection_score"
#: Share of δ that covers the wall time of the rare runs with more than T_max trials.
TAIL_SHARE = 0.01
#: Relative tolerance of the calibration of the per-trial noise (on the multiplier).
_XTOL = 1e-7
#: The one message of a selection in which some candidate's fit raised (docs/model_selection.rst,
#: "Failures"): fixed text, raised after every trial ran, never chained to the cause.
TRIAL_FAILED = ("a candidate's fit raised inside the private selection, so nothing is released; the "
                "error itself is not shown (its type and text may depend on the data). Fit the "
                "candidates on their own (outside the selection) to find the cause, or report it")


def random_stopping_event(neighbouring, unit, mean, shape):
    """The event factory ``z -> event`` of random stopping over trials of ``GaussianEvent(z)``
    (μ = 1/z), T of law ``(mean, shape)``, tagged with the relation and the privacy unit."""
    return lambda z: acc.NeighbouringEvent(
        neighbouring, acc.RepeatAndSelectEvent(acc.GaussianEvent(z), mean, shape), unit)


def _draw_count(key, shape, mean, t_max):
    """The secret repetition count T ~ ``RepeatAndSelectEvent(., mean, shape)``'s law, from one
    uniform of the key's stream by inversion of the cdf, **not truncated at t_max**: the cdf is
    tabulated up to the first k whose tail is below 2⁻⁶⁰ (finer than a double uniform resolves),
    so values of T above t_max are drawn with their own probabilities."""
    u = np.empty(1)
    _core_rng.fill_uniform(derive_key(key, "selection", "count"), 0, u, 1)
    k_hi = max(int(t_max), 1)
    while acc.repetition_tail(shape, mean, k_hi) > 2.0 ** -60:
        k_hi *= 2
    cdf = np.cumsum(acc.repetition_pmf(shape, mean, k_hi))
    return int(min(np.searchsorted(cdf, u[0], side="right"), k_hi))


class SelectionLoop:
    """The privacy path of one selection by ``est`` (a
    :class:`~dpem_fast._engine._estimator.PrivateEstimator`: its ε, δ, relation, unit and
    ledger), T of law ``(mean, shape)``.  ``mu`` (each trial's μ-GDP bound, which every
    candidate's plan must meet) and ``t_max`` are public, known before any row is read."""

    def __init__(self, est, mean, shape):
        self.est, self.mean, self.shape = est, mean, shape
        eps, delta = float(est.epsilon), float(est.delta)
        self.tail = TAIL_SHARE * delta
        self.make_event = random_stopping_event(est._relation(), est._privacy_unit(), mean, shape)
        self.z = _calibration._calibrate_noise_multiplier(self.make_event, eps, delta - self.tail, "rdp", xtol=_XTOL)
        self.mu = 1.0 / self.z
        # the wall time tells T > T_max apart only: P(T > T_max) <= tail / (1 + e^eps)
        bound = self.tail / (1.0 + math.exp(eps))
        t_max = max(1, int(math.ceil(mean)))
        while acc.repetition_tail(shape, mean, t_max) > bound:
            t_max += max(1, t_max // 16)
        while t_max > 1 and acc.repetition_tail(shape, mean, t_max - 1) <= bound:
            t_max -= 1
        self.t_max, self.run_ = t_max, None

    def plan(self, score_range, n_public):
        """The selection's plan, charging nothing: the random-stopping event and the score
        releases.  A score: the exact sum over the hold-out rows of row scores clipped to
        ``score_range`` = [L, U] and centred (Δ = U - L under replace, (U - L)/2 under add/remove,
        m times it per group), widened by its float rounding at ``n_public`` rows where the
        count is public, else at the public cap."""
        est = self.est
        rel, m = est._relation(), est._max_rows_per_group()
        lo, hi = score_range
        sens = (hi - lo) if rel == "replace" else (hi - lo) / 2.0
        if m is not None:
            sens *= m                           # at most m hold-out rows per group (padded pairs)
        sens *= _specs.float64_exact_sum_factor(n_public)
        # the layer may release one score per trial, max(T, T_max) of them (T secret: the event
        # accounts for it, ``open_ended``); the record shows the public T_max
        return make_event_plan(
            self.make_event, [EventRelease(SCORE, sens, (), self.t_max, 1, lambda p: sens / (1.0 / p))],
            epsilon=est.epsilon, delta=est.delta, neighbouring=rel, accountant="rdp", max_rows_per_group=m,
            noise_multiplier=self.z, delta_tail=self.tail, open_ended=(SCORE,))

    def charge_plan(self, score_range, n, key, n_threads):
        """Plan the score releases (:meth:`plan`, at ``n`` rows where the count is public, else at
        the public cap: more refused) and charge the whole selection to the estimator's ledger
        (its :class:`~dpem_fast._engine._loops.PrivateRun`, releasing with ``key``), before any
        statistic of the data is computed."""
        n_public = self.est._public_rows(n)
        plan = self.plan(score_range, n_public)
        # the chance T > T_max is outside the event: the ledger holds it as δ_tail (the run
        # refuses a private n above the rounding bound's cap first); trials release only once charged
        self.run_ = PrivateRun.of(self.est, plan, key, n_threads, private_count=None if n_public is not None else n)

    def run(self, key, n_candidates, trial, parsimony=0.0, sizes=None):
        """The max(T, T_max) trials; the best of the first T.  ``trial(c, seed)`` fits candidate
        ``c`` with the trial's key ``seed`` and returns ``(value, kept)``: the exact score (a
        function of public values, the fit's own releases and the hold-out rows) and what the
        caller keeps of the trial.  Trials are ranked by the noisy score minus ``parsimony`` ×
        σ × ``sizes[c]`` (σ: the score's public noise sd).  Returns ``(c, kept, noisy score)``
        of the best trial, or raises one of the two fixed RuntimeErrors (T = 0; some trial
        raised)."""
        if self.run_ is None:
            raise RuntimeError("the selection loop runs no trial before its charge (charge_plan)")
        layer = self.run_.layer
        T = _draw_count(key, self.shape, self.mean, self.t_max)
        n_trials = max(T, self.t_max)
        u = np.empty(n_trials)          # each trial's candidate: uniform, public coins independent of T
        _core_rng.fill_uniform(derive_key(key, "selection", "candidates"), 0, u, 1)
        choice = np.minimum((u * n_candidates).astype(np.int64), n_candidates - 1)
        sigma = layer.releases[SCORE].noise_scale
        best, best_rank, failed = None, -math.inf, False
        for t in range(n_trials):
            c, seed = int(choice[t]), np.random.SeedSequence([int(w) for w in derive_key(key, "selection", "trial", t)])
            try:
                value, kept = trial(c, seed)
            except Exception:       # noqa: BLE001 - fatal, after every trial (docs/model_selection.rst, "Failures")
                failed, value, kept = True, 0.0, None
            # every trial draws its noise, failed or not: the same work and the same streams
            noisy = float(layer.release({SCORE: np.array(value)}, t)[SCORE])
            rank = noisy - (parsimony * sigma * sizes[c] if parsimony else 0.0)
            if t < T and rank > best_rank:
                best, best_rank = (c, kept, noisy), rank
        if failed:                  # outside the handler: no cause, no context, no traceback of it
            raise RuntimeError(TRIAL_FAILED) from None
        if best is None:
            raise RuntimeError("the private selection released no model (this can happen by chance); "
                               "fit again with another random_state")
        return best

    def record(self, n_candidates, model):
        """The selection's :class:`~dpem_fast._engine._record.PrivacyRecord` (``model``: the
        candidates' estimator, by name)."""
        eps, shape, mean, t_max = self.est.epsilon, self.shape, self.mean, self.t_max
        return self.run_.record(
            mechanism=("private selection by random stopping (Papernot & Steinke 2022): each trial fits "
                                  f"a uniformly drawn candidate of {model} on a training part and releases a "
                                  "Gaussian noisy clipped hold-out score; only the best trial is released"),
            epsilon=eps, n_iter=t_max, data_domain={"source": "declared", "scale": None},
            notes=(f"{n_candidates} candidates; T ~ {'Poisson' if shape is None else f'TNB(eta={shape:g})'} "
                   f"with mean {mean:g}; max(T, {t_max}) trials run, only the first T count",
                   f"every trial is {self.mu:.6g}-GDP (its fit and its score, parallel composition)",
                   f"delta_tail {self.tail:.3g}: P(T > {t_max}) <= {self.tail / (1.0 + math.exp(eps)):.3g} "
                   "(the wall time of runs with more trials)"))
