"""The private SVI of :class:`~dpem_fast.decomposition.DPLatentDirichletAllocation`, from public
quantities and released values only: the released statistic's specification and the plan
(``_SVIPlan``, a mixin of the estimator: the clip norm, the unigram floor's multiplier, the
data-independent start, the step), the recursion split into public and released parts
(``_SVIState``) and the non-private online VB.  Derived on the model page
(``docs/models/lda.rst``, "Privacy analysis in full")."""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

from .. import accounting as acc
from .._engine import StatSpec, make_plan
from .._engine import _specs
from .._engine._specs import float64_rounding_factor
from .._kernels.lda import max_block_documents
from .._progress import Progress
from .._rng import derive_key
from ..accounting import NoiseDominatedWarning, _calibration
from ._dp_unigram import unigram_spec
from ._lda_math import default_clip_norm, exp_dirichlet_expectation, noise_threshold, shrink_to_unigram

_ACCOUNTANTS = {"rdp": "rdp", "strong": "advanced"}
#: ``unigram_share="auto"``: the share when the plan predicts topic words can clear the noise
#: threshold, and the share when it predicts none can (the unigram then gets nearly all of it)
_TOPIC_SHARE, _NULL_SHARE = 0.75, 0.99


class _Outlook(NamedTuple):
    """The plan's public prediction for the topics (:meth:`_SVIPlan._outlook`): the separated-topic
    signal ``D_pub N (1 − 1/K) / V``, the final threshold ``c τ_T``, the share the fit uses."""
    signal: float
    threshold: float
    share: float

    @property
    def hopeless(self):
        return self.signal <= self.threshold

    def text(self):
        """The record's note (public quantities only)."""
        head = (f"topic outlook: separated-topic signal D_pub N (1 - 1/K) / V = {self.signal:.4g} "
                f"{'<=' if self.hopeless else '>'} final noise threshold c tau_T = {self.threshold:.4g}")
        if self.hopeless:
            return head + ("; the plan predicts no topic word clears the noise threshold, so the topics "
                           "are the private unigram model")
        return head


class _SVIState:
    """The private SVI recursion split into public and released parts:
    ``Λ_t = a_t Λ_0 + (1 − a_t) η + M_t`` with ``M_t`` the signed running statistic and ``τ_t``
    its per-entry noise sd (the model page, "Post-processing"); ``lam`` the current topics.
    ``M_t`` is shrunk towards the released unigram ``fallback`` (the null model "every topic is
    the unigram": :func:`~dpem_fast.decomposition._lda_math.shrink_to_unigram`)."""

    def __init__(self, lam0, fallback):
        self.lam0, self.fallback, self.lam = lam0, fallback, lam0
        self.a, self.M, self.var, self.retained = 1.0, np.zeros_like(lam0), 0.0, 1.0

    def step(self, noisy, rho, q, sigma, eta):
        self.a *= 1.0 - rho
        self.M = (1.0 - rho) * self.M + (rho / q) * noisy
        self.var = (1.0 - rho) ** 2 * self.var + (rho * sigma / q) ** 2
        shrunk, self.retained = shrink_to_unigram(self.M, math.sqrt(self.var), self.fallback)
        self.lam = self.a * self.lam0 + (1.0 - self.a) * eta + shrunk
        return self.lam


class _SVIPlan:
    """The plan and the SVI step of the private LDA (a mixin of the estimator; reads no data
    but in :meth:`_fit_exact`, the non-private online VB)."""

    def _step_size(self, t):
        """The SVI step ``ρ_t = (τ₀ + t)^(−κ)`` (``learning_offset``, ``learning_decay``; public)."""
        return (float(self.learning_offset) + t) ** -float(self.learning_decay)

    def _clip_norm(self, V):
        """C: ``clip_fraction · N``, or the public default ``N / sqrt(min(N, V))``."""
        N = int(self.max_doc_length)
        return default_clip_norm(N, V) if self.clip_fraction is None else float(self.clip_fraction) * N

    def _spec(self, K, V):
        """The released K x V statistic: Δ₂ = C under add/remove (√2 C under replace, for
        completeness; derivation on the model page), widened by the float64 rounding of
        its sum (:func:`~dpem_fast._engine._specs.float64_rounding_factor` with the public cap
        ``ROUNDING_ROW_CAP`` on the documents and at most ``max_block_documents()`` = 128
        documents per block; the model page, "Rounding")."""
        C = self._clip_norm(V) * float64_rounding_factor(_specs.ROUNDING_ROW_CAP, max_block_documents(),
                                                          shifts=True, n_components=1)
        return StatSpec("topic_word", (K, V), {"add_remove": C, "replace": math.sqrt(2.0) * C})

    def _unigram_multiplier(self, T, q, f):
        """z_u of the unigram release (share f of the budget in Gaussian-DP units; see
        ``unigram_share``).  Public: ε, δ, f, T, q and the accountant only."""
        f, delta = float(f), float(self.delta)
        factory = acc.get_accountant(_ACCOUNTANTS[self.accountant], "add_remove")

        def single(z):
            return acc.NeighbouringEvent("add_remove", acc.GaussianEvent(z))
        if self.noise_multiplier is None:
            return _calibration._calibrate_noise_multiplier(single, float(self.epsilon), delta, accountant=factory) / math.sqrt(f)
        svi = acc.NeighbouringEvent("add_remove", acc.SelfComposedEvent(
            acc.PoissonSampledEvent(q, acc.GaussianEvent(float(self.noise_multiplier))), T))
        eps_svi = factory().compose(svi).get_epsilon(delta)
        z_eq = _calibration._calibrate_noise_multiplier(single, eps_svi, delta, accountant=factory)
        return z_eq * math.sqrt((1.0 - f) / f)

    def _initial_topics(self, key, K, V):
        """The data-independent initial topics λ (K, V): Gamma(100, 0.01) entries from the
        fit's stream ``derive_key(key, "lda", "init")`` (as scikit-learn's online LDA)."""
        init_rng = np.random.Generator(np.random.PCG64(derive_key(key, "lda", "init")))
        return init_rng.gamma(100.0, 0.01, (K, V))

    def _private_plan(self, K, V):
        """``(plan, T, q)`` of a private fit on a vocabulary of V terms, from public quantities
        only: the rounds ``T = n_epochs · round(total_samples / batch_size)``, the sampling
        rate ``q = batch_size / total_samples`` (the declared public document count; the true
        count is never read) and the unigram share of :meth:`_outlook`.  Reads no data (the
        audit calls it too)."""
        plan, T, q, _ = self._planned(K, V)
        return plan, T, q

    def _planned(self, K, V):
        """``(plan, T, q, outlook)``: :meth:`_private_plan` and its :class:`_Outlook`."""
        S, D_pub = int(self.batch_size), float(self.total_samples)
        q = S / D_pub
        T = int(self.n_epochs) * max(1, int(round(D_pub / S)))
        auto = isinstance(self.unigram_share, str)
        share = _TOPIC_SHARE if auto else float(self.unigram_share)
        plan = self._plan(K, V, T, q, share)
        outlook = self._outlook(plan, K, V, T, q, share)
        if auto and outlook.hopeless and self.noise_multiplier is None:
            plan = self._plan(K, V, T, q, _NULL_SHARE)
            outlook = outlook._replace(share=_NULL_SHARE)
        return plan, T, q, outlook

    def _outlook(self, plan, K, V, T, q, share):
        """Whether the plan lets any topic word clear the noise threshold: public quantities only
        (``total_samples`` D_pub, ``max_doc_length`` N, V, K and the plan's noise), no data.

        The prediction is for the most favourable corpus of the declared size: every document N
        tokens long, K equally frequent topics, each owning V/K equally frequent words.  Topic k's
        row of the running statistic then holds ``D_pub N / K`` tokens on its V/K words, so its
        deviation from the null model ``m_k u`` (:func:`~._lda_math.shrink_to_unigram`) is
        ``D_pub N / V · (1 − 1/K)`` on each of them.  A deviation survives the shrinkage only
        above ``c τ_T`` with ``c = sqrt(2 ln(K V))`` and ``τ_T`` the running statistic's noise sd
        after the T steps (``τ_t² = (1 − ρ_t)² τ_{t−1}² + (ρ_t σ C / q)²``, its smallest value
        on the usual schedules, so again the favourable case).  When the signal is at most the
        threshold the plan predicts no topic word can clear it, and ``unigram_share="auto"``
        gives the unigram release ``_NULL_SHARE`` = 0.99 of the budget instead of
        ``_TOPIC_SHARE`` = 0.75 (Gaussian-DP units: its noise is then ``z / sqrt(0.99)``,
        within 0.5 % of the unigram released with the whole budget), the topics staying the
        null model at the cost of nothing.  Measured (issue 40, ``bench/lda_floor.py``
        corpora, K = 20, V = 4000, q = 0.05): a positive kept mass (``noise_dominance_ < 1``)
        appears only where the ratio signal / threshold exceeds about 1.5; at or below 1 it
        was 0 up to the noise's own false positives (under 0.5 %), on GCIDE subsets of 10k to
        175k documents, fortunes and news at ε = 1, 3, 10.  Author-level fits (``max_rows_per_group``
        m, ``total_samples`` counting authors): ``m D_pub`` documents at most, so m times the
        signal (and m times the noise through the sensitivity).  With ``noise_multiplier`` the SVI's
        noise is the user's and the share is not moved (no budget to move)."""
        var = 0.0
        scale = plan.releases["topic_word"].noise_scale / q
        for t in range(T):
            rho = self._step_size(t + 1)
            var = (1.0 - rho) ** 2 * var + (rho * scale) ** 2
        m = self._max_rows_per_group() or 1          # author-level: D_pub authors of up to m documents
        signal = float(self.total_samples) * m * int(self.max_doc_length) / V * (1.0 - 1.0 / K)
        return _Outlook(signal, noise_threshold(K * V) * math.sqrt(var), share)

    def _warn_outlook(self, outlook):
        """Before the charge: a :class:`~dpem_fast.NoiseDominatedWarning` where the plan predicts no
        topic word clears the threshold and the user fixed the budget's split (a numeric
        ``unigram_share`` or ``noise_multiplier``): the topics' part of the budget buys nothing."""
        if not outlook.hopeless or (isinstance(self.unigram_share, str) and self.noise_multiplier is None):
            return
        warnings.warn(
            f"{type(self).__name__}: the topic-word releases will be noise-dominated: the plan predicts that no "
            f"topic word can clear the noise threshold (even "
            f"for perfectly separated topics, D_pub N (1 - 1/K) / V = {outlook.signal:.3g} <= c tau = "
            f"{outlook.threshold:.3g}), so the topics will be the private unigram model released with "
            f"unigram_share = {outlook.share:g} of the budget.  For topics, declare more documents "
            f"(total_samples = {float(self.total_samples):g}), a larger epsilon (or smaller noise_multiplier), a "
            f"smaller vocabulary or fewer n_components; for the unigram model, epsilon with unigram_share='auto' "
            f"gives it nearly all the budget",
            NoiseDominatedWarning, stacklevel=4)

    def _plan_for(self, V, n_public):
        """The plan of :meth:`~dpem_fast._engine._estimator.PrivateEstimator.privacy_plan` on a
        vocabulary of V terms (the public ``total_samples`` sets q and T; no count is read)."""
        K, _ = self._check_params()
        return self._private_plan(K, V)[0]

    def _plan(self, K, V, T, q, share=_TOPIC_SHARE):
        spec = self._spec(K, V)
        kw = dict(epsilon=self.epsilon, delta=self.delta, neighbouring="add_remove",
                  accountant=_ACCOUNTANTS[self.accountant], sampling_rate=q, noise_multiplier=self.noise_multiplier,
                  max_rows_per_group=self._max_rows_per_group())
        if share == 0:
            return make_plan([spec], T, **kw)
        return make_plan([spec], T, one_off_specs=[unigram_spec(V, self._clip_norm(V))],
                         one_off_multipliers={"unigram": self._unigram_multiplier(T, q, share)}, **kw)

    def _fit_exact(self, docs, lam, eta, key, diag):
        """Non-private online VB: fixed batches in order (one batch of all D documents when
        ``batch_size > D``), doc_ratio = D / |batch|."""
        D, S = docs.n_docs, int(self.batch_size)
        t = 1
        n_batches = -(-D // S)
        progress = Progress(self.verbose, int(self.n_epochs) * n_batches, type(self).__name__)
        for epoch in range(int(self.n_epochs)):
            for start in range(0, D, S):
                idx = np.arange(start, min(D, start + S))
                g_rng = np.random.Generator(np.random.PCG64(derive_key(key, "lda", "gamma", t)))
                gamma0 = g_rng.gamma(100.0, 0.01, (idx.size, lam.shape[0]))
                sstats, _ = docs.minibatch(idx, gamma0, np.ascontiguousarray(exp_dirichlet_expectation(lam).T),
                                           np.inf)
                rho = self._step_size(t)
                lam = (1.0 - rho) * lam + rho * (eta + (D / idx.size) * sstats)
                diag["batch_sizes"].append(int(idx.size))
                t += 1
                progress.step()
        progress.close()
        self.n_batch_iter_ = t
        return lam

    def _svi_step(self, state, noisy, eta, ctx):
        """The update, from the released statistic and public quantities only (``state``:
        :class:`_SVIState`): the paper's ``Λ ← (1 − ρ_t) Λ + ρ_t (η + S̃ / q)`` on the signed
        statistic, ``ρ_t = (τ₀ + t + 1)^(−κ)``, the public q = batch_size / total_samples and
        the noise sd σC of ``ctx.releases``; returns the projected topics λ_t (the
        model page, "Post-processing")."""
        q = int(self.batch_size) / float(self.total_samples)
        rho = self._step_size(ctx.t + 1)
        return state.step(noisy, rho, q, ctx.releases["topic_word"].noise_scale, eta)
