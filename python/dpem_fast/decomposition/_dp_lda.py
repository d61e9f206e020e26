"""Private latent Dirichlet allocation: online variational Bayes (SVI) with moment perturbation."""
from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .. import accounting as acc
from .._rng import derive_key, make_key
from .._threads import effective_n_threads
from .._validation import ARRAY_LIKE, interval, options, validate_table
from .._engine import NOT_PRIVATE, PrivateEstimator, PrivateRun, make_plan
from .._engine._groups import Grouping, bound_mask, bounding_key, check_groups
from .._engine._sources._dask import is_dask_array
from .._progress import Progress, plan_spent
from .._kernels.lda import estep_csr as _estep_csr
from .._kernels.lda_docs import _cap_documents, _check_count_chunk, _check_counts, _DaskDocs, _MemoryDocs
from ._lda_math import (approx_bound, exp_dirichlet_expectation, plugin_log_likelihood, shrink_to_fallback,
                        unigram_distribution)
from ._lda_svi import _ACCOUNTANTS, _SVIPlan, _SVIState

__all__ = ["DPLatentDirichletAllocation"]

#: the record's name of the release each ``partial_fit`` call makes, and its mechanism text
_PARTIAL = "topic_word_partial"
_PARTIAL_MECHANISM = "DP-SVI for LDA, partial_fit (no subsampling)"


class DPLatentDirichletAllocation(TransformerMixin, _SVIPlan, PrivateEstimator):
    """Latent Dirichlet allocation by private stochastic variational inference.

    Online variational Bayes for LDA (Hoffman, Blei & Bach 2010) made private as in Park,
    Foulds, Chaudhuri & Welling (2016, "Private topic modeling", Algorithm 1): each
    iteration draws a Poisson minibatch, runs the per-document E-step, releases the
    minibatch's K x V expected sufficient statistic with Gaussian noise through the
    engine's release layer, and takes the natural-gradient step on the noisy statistic.

    .. versionadded:: 0.1 (issue 13)

    Parameters
    ----------
    n_components : int, default=10
        Number of topics K.
    epsilon : float or None, default=None
        Target ε of the whole fit; the noise multiplier is calibrated to it.
        ``numpy.inf`` fits without privacy (no token cap, no clipping, no noise; fixed
        minibatches in order, as scikit-learn's online LDA).  Give exactly one of
        ``epsilon`` and ``noise_multiplier``.
    noise_multiplier : float or None, default=None
        σ of the paper: the noise standard deviation in units of the sensitivity.  The ε
        the fit spends at ``delta`` is then recorded in ``privacy_``.
    delta : float, default=1e-5
    batch_size : int, default=128
        Expected minibatch size S; documents are drawn by Poisson sampling with rate
        q = S / D_pub (``D_pub = total_samples``, the declared public document count).
    max_doc_length : int, default=500
        N: each document is capped at N tokens, sampled without replacement at random
        (data-independent randomness), once per fit.  Declare it near the length of your
        documents (e.g. 64 for short texts): the default clip norm follows it.
    clip_fraction : float in (0, 1] or None, default=None
        a: each document's statistic is clipped to Frobenius norm C = a N.  ``None``: the
        public default ``C = N / sqrt(min(N, V))`` (``a = 1 / sqrt(N)`` for N ≤ V; derivation in
        :func:`~dpem_fast.decomposition._lda_math.default_clip_norm`): a document whose tokens
        are spread over distinct terms is never clipped, whatever its topic assignment.
        (The paper's a = 0.1 gives C = 50 at N = 500, about six times the norm of a short text.)
    unigram_share : float in [0, 1) or "auto", default="auto"
        Share of the budget spent on one release of the corpus's word counts (each document's
        count vector clipped to norm C), the utility floor: the topics are shrunk towards
        this private unigram distribution (see "Post-processing").  The share is in
        Gaussian-DP units: the release's noise multiplier is ``z(ε, δ) / sqrt(share)`` with
        ``z(ε, δ)`` that of one Gaussian release spending the whole budget; the SVI releases
        are calibrated to the rest (the accountant composes both exactly).  With
        ``noise_multiplier`` instead of ``epsilon``: ``z_eq sqrt((1 - share) / share)``, ``z_eq``
        the single-release multiplier with the SVI part's ε.  0: no unigram release (the
        topics fall back to the uniform distribution).  ``"auto"``: 0.75, or 0.99 where the
        plan predicts from public quantities (``total_samples``, ``max_doc_length``, V, K, ε,
        δ and the SVI's noise) that no topic word can clear the noise threshold: the fit is
        then the private unigram model at nearly the whole budget (rule and derivation:
        ``_SVIPlan._outlook``; the record's notes say which; with ``noise_multiplier``,
        0.75).  A numeric share with such a plan warns before the charge
        (:class:`~dpem_fast.NoiseDominatedWarning`).  Why most of the budget: a topic-word
        statistic has K V entries that each get the full noise (0.75 cost a few per cent of
        perplexity against the full-budget unigram on 3,000-15,000 documents, 0.5 about
        twice that: ``bench/lda_floor.py``).

        .. versionchanged:: 0.1 (issue 40): default ``"auto"`` (was 0.75).
    doc_topic_prior, topic_word_prior : float or None, default=None
        α and η (``None``: 1 / n_components, as scikit-learn).
    learning_offset, learning_decay : float, default=10.0, 0.7
        τ₀ and κ of the step ρ_t = (τ₀ + t)^(-κ), t = 1, 2, ...
    n_epochs : int, default=1
        Passes: the fit runs T = n_epochs · round(D_pub / S) iterations (fixed, public).
    max_doc_update_iter : int, default=100
    mean_change_tol : float, default=1e-3
        Per-document stopping of the E-step's fixed point (inside the privacy wall: each
        document's statistic is clipped whatever its iteration count).
    accountant : {"rdp", "strong"}, default="rdp"
        ``"rdp"``: Rényi DP of the Poisson-subsampled Gaussian (the moments accountant);
        ``"strong"``: the paper's baseline, each step's (ε_i, δ_i) (analytic Gaussian at
        δ_i = 1e-8) amplified by Poisson sampling (Balle, Barthe & Gaboardi 2018, Thm 8)
        and composed by the advanced composition theorem.
    vocabulary : sequence of str or None, default=None
        The public vocabulary the columns of X index (e.g.
        :func:`dpem_fast.datasets.public_vocabulary`).  A vocabulary built from the
        private corpus leaks its rare words; without one a private fit warns
        (:class:`~dpem_fast.PrivacyLeakWarning`).
    total_samples : int or None, default=None
        D_pub, the **public** number of documents of the corpus (scikit-learn's name).  Under
        add/remove the true count D is private, so a private fit never reads it: the
        sampling rate q = S / D_pub, the number of iterations and the step's scale 1/q all
        come from ``total_samples``, which a private ``fit`` and ``partial_fit`` require
        (a ``ValueError`` names it otherwise; declare a count known without looking at the
        corpus, e.g. the size of a published collection, or a noisy count you released
        and accounted for yourself).  The guarantee holds whatever the true D; the
        expected minibatch size is S·D/D_pub.  ``epsilon=inf``: ``fit`` uses the true D
        and ignores it; ``partial_fit`` scales by ``total_samples / batch size``
        (default 1e6, as scikit-learn).
    budget : BudgetLedger or None, default=None
        Ledger (``neighbouring="add_remove"``) charged before any statistic is computed.
    random_state : int, Generator or None
    n_threads : int or None
        OpenMP threads of the E-step; results do not depend on it.
    verbose : int, default=0
        ``>= 1``: a progress bar over the T iterations on stderr (tqdm, ``pip install
        dpem_fast[progress]``; plain lines without it) with the seconds of the last
        iteration and the ε spent so far (public; nothing computed from the documents is
        shown).  0: silent.

    max_rows_per_group : int or None, default=None
        Author-level privacy with ``fit(X, groups=authors)``: at most this many documents per
        author, and authors are the sampled unit ("Person-level" on the model page).
        Required with ``groups``; None: document-level privacy.

        .. versionadded:: 0.1 (issue 27)

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        λ, the variational Dirichlet parameters of the topics.
    unigram_distribution_ : ndarray of shape (n_features,)
        The word distribution the topics are shrunk towards: the private unigram release
        (post-processed, :func:`~dpem_fast.decomposition.private_unigram`'s rule), uniform
        when ``unigram_share=0``; the exact word frequencies for ``epsilon=inf``.
    noise_dominance_ : float or None
        Private fits: the fraction of the released topic-word mass (last step's running
        statistic) that did *not* clear the noise threshold (public: computed from the
        releases and the plan's noise scale).  1.0: no deviation from the unigram was kept
        and every topic is the private unigram model (a statement, not a warning: the fit is
        then the unigram released with ``unigram_share`` of the budget; the record's notes say
        it too).
    exp_dirichlet_component_ : ndarray of shape (n_components, n_features)
        exp(E[log β]).
    privacy_ : PrivacyRecord or None
    diagnostics_ : dict
        Not private: minibatch sizes, documents clipped, empty documents, capped documents.
    n_batch_iter_ : int
        Iterations done plus one (the next step uses ``t = n_batch_iter_``); public: it
        follows from ``total_samples``, ``batch_size``, ``n_epochs`` and the number of
        ``partial_fit`` calls.
    n_iter_ : int
        Epochs.

    Privacy
    -------
    Neighbouring relation: **add/remove one document** (required by the Poisson
    amplification; the (ε, δ) is with respect to it).

    Released statistics: once, before the loop (``unigram_share > 0``), the unigram statistic
    ``u = Σ_d clip_C(c_d)`` (V,) on the whole corpus; once per iteration the Poisson minibatch's
    ``S_t = Σ_{d ∈ B_t} clip(s_d)`` (K x V), each document's expected sufficient statistic
    clipped to Frobenius norm ``C = a N`` (``clip_fraction`` a) or by default
    ``C = N / sqrt(min(N, V))``, with Gaussian noise ``N(0, (σ C)²)`` (``N(0, (z_u C)²)`` on
    u) through the release layer.  Sensitivity: **Δ₂ = C under add/remove** for both (√2 C
    under replace, recorded for completeness), widened by the proven float64 rounding factor
    at the public cap ``ROUNDING_ROW_CAP`` (2³²) documents.  The paper clips the *aggregate*
    and claims that bound; a document can move a projected sum by √2 C, so this estimator
    clips per document.  Events: ``ComposedEvent([GaussianEvent(z_u),
    SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(σ)), T)])`` tagged add/remove,
    with q and T from the declared ``total_samples`` (the private document count is never
    read).  Post-processing: the SVI recursion runs on the signed statistic and the topics
    keep only entries above the universal threshold times their public noise sd, the rest
    going back as the private unigram distribution.  Initialisation and stopping are
    data-independent.  ``fit(X, groups=authors)``: add/remove one author's documents (at
    most ``max_rows_per_group`` m, sensitivity m C; authors are the sampled unit).  A dask
    array of counts is E-stepped on the workers (inside the trust boundary) and noised once
    on the client.  The derivations (each sensitivity, where the paper is loose, rounding,
    post-processing, person-level, dask) are on the model's documentation page ("Privacy
    analysis in full").
    """

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line
    _cli_name = "lda"
    _input = "documents"
    _relations = ("add_remove",)          # Poisson amplification is stated for add/remove
    _loop = "minibatch"
    _saved = ("components_", "exp_dirichlet_component_", "unigram_distribution_", "n_batch_iter_", "n_iter_",
              "n_features_in_")
    _not_saved = ("noise_dominance_",)    # a diagnostic of the fit (public, but not part of the model)
    _parameter_constraints = {
        **{name: [interval("int", 1)] for name in ("n_components", "batch_size", "max_doc_length", "n_epochs",
                                                   "max_doc_update_iter")},
        "epsilon": [None, interval("real", 0, math.inf, "right", hint="epsilon=inf fits without privacy")],
        **{name: [None, interval("real", 0, None, "neither")]
           for name in ("noise_multiplier", "doc_topic_prior", "topic_word_prior", "total_samples")},
        "clip_fraction": [None, interval("real", 0, 1, "right")],
        "unigram_share": [interval("real", 0, 1, "left"), options("auto")],
        "learning_offset": [interval("real", 0)],
        "learning_decay": [interval("real", 0, 1, "right")],
        "mean_change_tol": [interval("real", 0)],
        "accountant": [options(*_ACCOUNTANTS)],
        "vocabulary": [None, ARRAY_LIKE],
    }

    def __init__(self, n_components=10, *, epsilon=None, noise_multiplier=None, delta=1e-5, batch_size=128,
                 max_doc_length=500, clip_fraction=None, unigram_share="auto", doc_topic_prior=None,
                 topic_word_prior=None,
                 learning_offset=10.0, learning_decay=0.7, n_epochs=1, max_doc_update_iter=100,
                 mean_change_tol=1e-3, accountant="rdp", vocabulary=None, total_samples=None, budget=None,
                 random_state=None, n_threads=None, verbose=0, max_rows_per_group=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.noise_multiplier = noise_multiplier
        self.delta = delta
        self.batch_size = batch_size
        self.max_doc_length = max_doc_length
        self.clip_fraction = clip_fraction
        self.unigram_share = unigram_share
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.learning_offset = learning_offset
        self.learning_decay = learning_decay
        self.n_epochs = n_epochs
        self.max_doc_update_iter = max_doc_update_iter
        self.mean_change_tol = mean_change_tol
        self.accountant = accountant
        self.vocabulary = vocabulary
        self.total_samples = total_samples
        self.budget = budget
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose
        self.max_rows_per_group = max_rows_per_group

    # ------------------------------------------------------------ checks
    def _is_private(self):
        return self.epsilon is None or not math.isinf(self.epsilon)     # None: noise_multiplier is given

    def _check_params(self):
        """The declared constraints and the common checks (:meth:`_validate_params`), then the
        joint ones; returns ``(n_components, private)``."""
        if self.epsilon is not None and self.noise_multiplier is not None:
            raise ValueError("give exactly one of epsilon and noise_multiplier, got both")
        if self.epsilon is None and self.noise_multiplier is None:
            raise ValueError("give epsilon (numpy.inf for a non-private fit) or noise_multiplier")
        private = self._validate_params()
        if private:
            if self.total_samples is None:
                raise ValueError(
                    "total_samples: a private fit needs the public number of documents D_pub (the sampling "
                    "rate is batch_size / D_pub); under add/remove the corpus size is private and is never "
                    "read from X.  Declare a count known without looking at the corpus (e.g. the size of a "
                    "published collection) or a noisy count you released and accounted for")
            if int(self.batch_size) > float(self.total_samples):
                raise ValueError(f"batch_size={self.batch_size} exceeds total_samples={self.total_samples} "
                                 "(the sampling rate batch_size / total_samples must be at most 1)")
        return int(self.n_components), private

    def _priors(self, K):
        alpha = 1.0 / K if self.doc_topic_prior is None else float(self.doc_topic_prior)
        eta = 1.0 / K if self.topic_word_prior is None else float(self.topic_word_prior)
        return alpha, eta

    def _check_vocabulary(self, V, private):
        if self.vocabulary is not None:
            if len(self.vocabulary) != V:       # not a str: refused by its constraint
                raise ValueError(f"vocabulary has {len(self.vocabulary)} terms but X has {V} columns")
        elif private:
            warnings.warn("vocabulary=None: the columns of X must index a public vocabulary (e.g. "
                          "dpem_fast.datasets.public_vocabulary()); a vocabulary built from the private "
                          "corpus reveals its rare words", acc.PrivacyLeakWarning, stacklevel=3)

    def _check_X(self, X, reset=True):
        """X as CSR float64 of integer counts, sorted indices; scikit-learn's messages for the
        shape, dtype and feature-count checks (``validate_data``: ``reset`` sets
        ``n_features_in_``, else X must have that many columns), then the counts' own."""
        if not sp.issparse(X):
            arr = np.asarray(X) if not hasattr(X, "dtype") or isinstance(X, np.ndarray) else X
            if getattr(arr, "dtype", None) is not None and arr.dtype.kind in "USV":
                raise TypeError(f"X must be a numeric document-term count matrix, got dtype {arr.dtype}")
        X = validate_table(self, X, accept_sparse="csr", dtype=np.float64, reset=reset)
        X = sp.csr_matrix(X, dtype=np.float64, copy=True)
        n, V = X.shape
        if n == 0:
            raise ValueError("X: no documents (0 rows)")
        d = X.data
        if not np.all(np.isfinite(d)):
            raise ValueError("X: counts must be finite (found NaN or inf)")
        _check_counts(d)
        X.eliminate_zeros()
        X.sort_indices()
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        tags.input_tags.categorical = True     # counts: scikit-learn's checks then pass integers
        tags.non_deterministic = self.random_state is None
        return tags

    # ----------------------------------------------------------- helpers
    def _estep(self, X, eb, gamma0, alpha, clip, n_threads, want_stats=True):
        return _estep_csr(X, np.ascontiguousarray(eb.T), gamma0, alpha, self.max_doc_update_iter,
                          self.mean_change_tol, clip, n_threads, want_stats)

    def _cap_tokens(self, X, key):
        """Each document down to max_doc_length tokens drawn without replacement (random,
        data-independent: document d's draw comes from ``derive_key(key, "lda", "cap")`` and d
        only; see :func:`_cap_documents`)."""
        return _cap_documents(X, derive_key(key, "lda", "cap"), int(self.max_doc_length))

    def _set_components(self, lam):
        self.components_ = lam
        self.exp_dirichlet_component_ = exp_dirichlet_expectation(lam)

    # --------------------------------------------------------------- fit
    def fit(self, X, y=None, groups=None):
        """Fit with ``n_epochs`` passes of private SVI; returns ``self``.

        Parameters
        ----------
        X : sparse matrix, array-like or dask array of shape (n_documents, n_terms)
            Term counts over a public vocabulary.  A ``dask.array.Array`` (dense chunks, rows
            = documents) is never gathered: see "Dask" on the model page.
        y : ignored
        groups : array-like of shape (n_documents,) or None
            Author-level privacy (with ``max_rows_per_group``): the author of each document.
            See "Person-level" on the model page.  In-memory documents only.

            .. versionadded:: 0.1 (issue 27)
        """
        K, private = self._check_params()
        X, groups = self._resolve_groups(X, groups, private)
        n_threads = effective_n_threads(self.n_threads)
        alpha, eta = self._priors(K)
        if is_dask_array(X) and groups is not None:
            raise TypeError("groups: an author-level (grouped) LDA fit takes in-memory documents; a dask array "
                            "of documents is fitted per document only")
        grouping = None
        if is_dask_array(X):
            from .._engine._sources._dask import dask_rows

            docs = _DaskDocs(dask_rows(X, True, prepare=_check_count_chunk), self, alpha, n_threads)
            V = docs.rows.n_features
            self.n_features_in_ = V
        else:
            X = self._check_X(X)
            grouping = check_groups(groups, X.shape[0]) if groups is not None else None
            docs = _MemoryDocs(X, self, alpha, n_threads)
            V = X.shape[1]
        self._check_vocabulary(V, private)
        key = make_key(self.random_state)
        lam = self._initial_topics(key, K, V)
        n_empty, _ = docs.counts()
        diag = {"status": NOT_PRIVATE, "n_empty_documents": n_empty, "batch_sizes": [], "n_clipped": []}
        if not private:
            lam = self._fit_exact(docs, lam, eta, key, diag)
            self.privacy_ = None
            self.unigram_distribution_ = unigram_distribution(docs.unigram(np.inf), 0.0, eta)
            self.noise_dominance_ = None
        else:
            lam = self._fit_private(docs, lam, eta, key, n_threads, diag, grouping)
        self._set_components(lam)
        self.n_iter_ = int(self.n_epochs)
        self.diagnostics_ = diag
        self.n_features_in_ = V
        return self

    def _fit_private(self, docs, lam, eta, key, n_threads, diag, grouping=None):
        """The private SVI loop.  ``docs.n_docs`` (the private D) sizes the per-document
        draws only: q, T, the step's scale and the record use the public ``total_samples``.
        ``grouping``: an author-level fit's authors (each author's documents bounded to
        ``max_rows_per_group``, then authors sampled)."""
        V, K = lam.shape[1], lam.shape[0]
        plan, T, q, outlook = self._planned(K, V)
        self._warn_outlook(outlook)           # public quantities only, before the charge
        # the whole plan, before any statistic of the data (the private D checked against the cap first)
        loop = PrivateRun.of(self, plan, key, n_threads, private_count=docs.n_docs)
        if grouping is not None:            # at most m documents per author, from here on
            keep = bound_mask(grouping, bounding_key(key), plan.max_rows_per_group, n_threads)
            docs.keep(keep)
            grouping = Grouping(grouping.codes[keep], grouping.streams)
        diag["n_capped_documents"] = docs.cap_tokens(derive_key(key, "lda", "cap"))
        clip = self._clip_norm(V)
        if "unigram" in plan.releases:       # the floor: one release of the clipped word counts
            noisy_u = loop.layer.release({"unigram": docs.unigram(clip)}, 0)["unigram"]
            fallback = unigram_distribution(noisy_u, plan.releases["unigram"].noise_scale, eta)
        else:
            fallback = np.full(V, 1.0 / V)
        self.unigram_distribution_ = fallback
        state = _SVIState(lam, fallback)

        def statistic(t, batch_idx):
            g_rng = np.random.Generator(np.random.PCG64(derive_key(key, "lda", "gamma", t)))
            gamma0 = g_rng.gamma(100.0, 0.01, (batch_idx.size, K))
            sstats, clipped = docs.minibatch(batch_idx, gamma0,
                                             np.ascontiguousarray(exp_dirichlet_expectation(state.lam).T), clip)
            diag["batch_sizes"].append(int(batch_idx.size))
            diag["n_clipped"].append(int(clipped))
            return sstats

        # the engine's minibatch loop: Poisson batches at the public rate q from the client's key
        # (author-level: each author kept with probability q, with all its bounded documents)
        loop.minibatches("topic_word", docs.n_docs, q, T, statistic,
                         lambda noisy, ctx: self._svi_step(state, noisy, eta, ctx),
                         Progress(self.verbose, T, type(self).__name__, plan_spent(plan, T, self.delta), self.delta),
                         tag=("lda", "batch"), grouping=grouping)
        self.n_batch_iter_ = T + 1
        self.noise_dominance_ = 1.0 - state.retained
        r = plan.releases["topic_word"]
        self.privacy_ = loop.record(
            mechanism="DP-SVI for LDA (Park et al. 2016), Poisson minibatches, per-document clipping",
            epsilon=self.epsilon, n_iter=T,
            data_domain={"source": "token cap N and per-document clip C", "radius": r.sensitivity},
            notes=(f"sampling rate q = {q:.6g} (batch_size / total_samples, the declared public "
                   + ("document count" if grouping is None else "number of authors, each sampled with its documents")
                   + "; the true count is never read)",
                   f"noise multiplier sigma = {r.noise_multiplier:.6g}, clip norm C = {clip:.6g}",
                   *((f"unigram floor: one release at multiplier {plan.releases['unigram'].noise_multiplier:.6g} "
                      f"(unigram_share = {outlook.share:g})",) if "unigram" in plan.releases else ()),
                   outlook.text(), _kept_text(state.retained)))
        return state.lam

    def partial_fit(self, X, y=None):
        """One update with all of X as the minibatch (expected size ``batch_size``).

        Private: the whole of X is used (no subsampling amplification), so each call is one
        ``GaussianEvent(σ)`` under add/remove (σ = ``noise_multiplier``, or calibrated so that
        one call spends ``epsilon``), charged to ``budget`` before any statistic is computed;
        ``privacy_`` composes every release so far (after a ``fit``, the fit's plan and then
        each call: ``partial_fit`` continues a fitted model).  The step is
        ``λ ← (1 − ρ) λ + ρ (η + total_samples / batch_size · shrink(S̃))``, with the declared
        public ``total_samples`` (required for a private call); ``shrink`` soft-thresholds the
        call's release at the universal threshold times its noise sd (each call's result stays
        in λ for good, so an entry noise pushes over the threshold keeps only its excess) and
        spreads each topic's remaining mass as the current topic (no clamp-then-scale bias;
        see "Post-processing" on the model page).  ``partial_fit`` makes no unigram
        release (``unigram_share`` applies to ``fit``).

        Keys: each call draws its noise from a key made for that call and then forgotten —
        fresh OS entropy with ``random_state=None``, or derived from the seed and the public
        call index ``t = n_batch_iter_`` when a seed is given (then the seed determines the
        noise: keep it secret).  No key is kept on the estimator, so a pickle of the model
        cannot regenerate any call's noise.
        """
        K, private = self._check_params()
        if self._max_rows_per_group() is not None:
            raise ValueError("max_rows_per_group: partial_fit is per document (each call's minibatch is one "
                             "release on its documents); author-level privacy is fit(X, groups=...) only")
        if is_dask_array(X):
            raise TypeError("partial_fit: X is a dask array; partial_fit takes one in-memory minibatch "
                            "(fit takes a dask array of the whole corpus without gathering it)")
        first = not hasattr(self, "components_")
        X = self._check_X(X, reset=first)
        n_docs, V = X.shape
        self._check_vocabulary(V, private)
        alpha, eta = self._priors(K)
        n_threads = effective_n_threads(self.n_threads)
        base = make_key(self.random_state)       # this call's; never stored
        if first:
            self._set_components(self._initial_topics(base, K, V))
            self.n_batch_iter_ = 1
            self.n_features_in_ = V
            self.privacy_ = None
        t = int(self.n_batch_iter_)
        g_rng = np.random.Generator(np.random.PCG64(derive_key(base, "lda", "gamma", t)))
        gamma0 = g_rng.gamma(100.0, 0.01, (n_docs, K))
        lam = self.components_
        rho = self._step_size(t)
        if not private:
            _, sstats, _ = self._estep(X, self.exp_dirichlet_component_, gamma0, alpha, np.inf, n_threads)
            scale = (1e6 if self.total_samples is None else float(self.total_samples)) / n_docs
            lam = (1.0 - rho) * lam + rho * (eta + scale * sstats)
        else:
            plan = make_plan([self._spec(K, V)], 1, epsilon=self.epsilon, delta=self.delta, neighbouring="add_remove",
                             accountant=_ACCOUNTANTS[self.accountant], noise_multiplier=self.noise_multiplier)
            call_key = derive_key(base, "lda", "partial", t)
            call = PrivateRun.of(self, plan, call_key, n_threads, what="partial_fit", private_count=n_docs)
            Xc, _ = self._cap_tokens(X, call_key)
            _, sstats, _ = self._estep(Xc, self.exp_dirichlet_component_, gamma0, alpha, self._clip_norm(V),
                                       n_threads)
            # privacy_: the previous record (a fit's, or earlier calls') composed with this call's
            noisy, self.privacy_ = call.once(
                {"topic_word": sstats}, chain=(self.privacy_, _PARTIAL), mechanism=_PARTIAL_MECHANISM,
                data_domain={"source": "token cap N and per-document clip C",
                             "radius": plan.releases["topic_word"].sensitivity})
            del call_key, base, call
            # no clamp-then-scale bias: the call's noise (sd σC, public) is thresholded at the
            # universal threshold and each topic's removed mass spread as the current (released)
            # topic: post-processing of earlier releases and the data-independent initialisation
            noisy, _ = shrink_to_fallback(noisy["topic_word"], plan.releases["topic_word"].noise_scale,
                                          lam / lam.sum(axis=1, keepdims=True), soft=True)
            lam = (1.0 - rho) * lam + rho * (eta + float(self.total_samples) / int(self.batch_size) * noisy)
        self._set_components(lam)
        self.n_batch_iter_ = t + 1
        return self

    # ------------------------------------------------------- inference
    def _unnormalized_transform(self, X):
        check_is_fitted(self, "components_")
        X = self._check_X(X, reset=False)
        K = self.components_.shape[0]
        alpha, _ = self._priors(K)
        gamma, _, _ = self._estep(X, self.exp_dirichlet_component_, np.ones((X.shape[0], K)), alpha, np.inf,
                                  effective_n_threads(self.n_threads), want_stats=False)
        return X, gamma

    def transform(self, X):
        """Document-topic distributions (rows of γ normalised), shape (n_documents, n_components)."""
        _, gamma = self._unnormalized_transform(X)
        return gamma / gamma.sum(axis=1, keepdims=True)

    def score(self, X, y=None):
        """The approximate variational bound of ``log p(X)``: scikit-learn's
        ``LatentDirichletAllocation.score`` (:func:`~dpem_fast.decomposition._lda_math.approx_bound`,
        Hoffman et al. 2010, Eq. 3), with each document's γ from the E-step of :meth:`transform`.

        It includes the global topic-word term ``E[log p(β|η) − log q(β|λ)]``, which does not
        shrink with the test set and is large for noisy λ: to compare held-out fits, or a fit
        with the private unigram model, use :meth:`plugin_score` / :meth:`plugin_perplexity`.

        .. versionchanged:: 0.1 (issue 39)
           Again scikit-learn's bound; the plug-in log-likelihood it returned is :meth:`plugin_score`.
        """
        X, gamma = self._unnormalized_transform(X)
        return approx_bound(X, gamma, self.components_, *self._priors(self.components_.shape[0]))

    def perplexity(self, X):
        """scikit-learn's perplexity: ``exp(-score(X) / number of tokens of X)``, the per-token
        perplexity bound.  It grows as the test set shrinks (the bound's global term is divided
        by fewer tokens); :meth:`plugin_perplexity` does not.

        .. versionchanged:: 0.1 (issue 39)
           Again scikit-learn's quantity; the plug-in perplexity it returned is :meth:`plugin_perplexity`.
        """
        X, gamma = self._unnormalized_transform(X)
        return float(np.exp(-approx_bound(X, gamma, self.components_, *self._priors(gamma.shape[1])) / _tokens(X)))

    def plugin_score(self, X):
        """Plug-in held-out log-likelihood of X: ``Σ_d Σ_v c_dv log Σ_k θ̂_dk β̂_kv`` with the
        expected topics ``β̂_k = λ_k / Σ_v λ_kv`` and each document's expected proportions
        ``θ̂_d = γ_d / Σ_k γ_dk`` from the E-step on X
        (:func:`~dpem_fast.decomposition._lda_math.plugin_log_likelihood`).

        A sum over the tokens of X and nothing else: unlike :meth:`score` (scikit-learn's
        variational bound), it has no global topic-word term ``E[log p(β|η) − log q(β|λ)]``,
        which does not shrink with the test set and explodes for noisy λ.  With one topic it is
        the unigram log-likelihood of E[β].

        .. versionadded:: 0.1 (issue 39): what ``score`` returned before.
        """
        X, gamma = self._unnormalized_transform(X)
        return float(plugin_log_likelihood(X, gamma, self.components_).sum())

    def plugin_perplexity(self, X):
        """Per-token plug-in held-out perplexity ``exp(-plugin_score(X) / number of tokens of X)``:
        comparable across test sets of any size, and with :meth:`PrivateUnigram.perplexity
        <dpem_fast.decomposition.PrivateUnigram.perplexity>` (the same quantity for the
        trivial model).

        .. versionadded:: 0.1 (issue 39): what ``perplexity`` returned before.
        """
        X, gamma = self._unnormalized_transform(X)
        return float(np.exp(-plugin_log_likelihood(X, gamma, self.components_).sum() / _tokens(X)))


def _kept_text(retained):
    """The record's post-fit statement on the topics (a function of the releases: public)."""
    if retained <= 0:
        return "topics: no deviation from the unigram cleared the noise threshold; every topic is the private unigram"
    return f"topics: the kept deviations from the unigram are {retained:.2%} of the topic-word mass"


def _tokens(X):
    """The number of tokens of the count matrix X (CSR), refusing none (perplexity is per token)."""
    n = X.data.sum()
    if n <= 0:
        raise ValueError("X: no tokens (perplexity is per token)")
    return n
