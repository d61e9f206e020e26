"""What an audit needs of an estimator: its calibrated plan, canary candidates on the boundary
of its domain, and the exact statistics of its releases on a neighbouring pair.

One target per loop of the engine:

* :class:`EMTarget` — the full-pass EM models (:class:`~dpem_fast._engine._base.PrivateEM`):
  rows; a declared domain's boundary (the working unit sphere, a declared box's corners) or,
  for a model with a fixed domain of its own (Bernoulli, Poisson, gradient EM), its
  ``_extreme_rows``; statistics from the model's own kernel at fixed public parameters (the
  model's data-independent initialisation, sharpened for a mixture: see :func:`_sharpened`).
* :class:`LDATarget` — private LDA's minibatch loop: documents; the canaries are documents
  of ``max_doc_length`` tokens of one word (their clipped statistic has norm ``C``, the
  declared sensitivity, whenever ``K ≤ min(N, V)``); statistics from the compiled E-step at
  the fit's data-independent initial topics.
* :class:`SEPTarget` — DP-SEP's sequential loop: rows in the declared (or the prior's) box;
  a release is one batch's update of the shared factor, computed by the compiled step itself.

A person-level plan (``max_rows_per_group`` m, issue 27) is audited with a canary *person*:
m copies of the canary row (against m copies of ``x′`` under replace; the base rows are each
their own group), the worst case of a group's bounded contribution: LDA's canary author has
m copies of the canary document, DP-SEP's canary person m copies of the canary row in one
batch.

Every statistic is computed at fixed public parameters, and the statistics are additive over
rows (documents), so ``f(D′) − f(D)`` is the difference of the canaries' own contributions:
an audit's result does not depend on the values of the base rows (only their count and
width), and reveals nothing of them.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from .._engine._sources._memory import validated_rows
from .._preprocess import cube_corners
from .._rng import derive_key

__all__ = ["EMTarget", "LDATarget", "SEPTarget"]

_N_BASE = 1000          # rows of the synthetic base dataset (documents: _N_DOCS)
_N_DOCS = 100
_N_RANDOM = 32          # random boundary directions among a declared domain's canary candidates
_N_WORDS = 64           # one-word documents among LDA's canary candidates (all words for V <= 64)
_SHARP = 1e4            # precision (working units) of the sharpened audit parameters


def _generator(key, *tag):
    """A numpy generator for the audit's public randomness (canaries, base data)."""
    return np.random.default_rng(np.frombuffer(derive_key(key, "audit", *tag).tobytes(), dtype=np.uint32))


def _ball_candidates(domain, params_means, d, key):
    """Boundary points of a declared domain (the working unit sphere; a declared box's
    corners), in user units."""
    eye = np.eye(d)
    pts = [eye, -eye]
    if domain.bounds is not None:
        pts.append(cube_corners(d, key) / math.sqrt(d))
    if params_means is not None:
        m = np.asarray(params_means, dtype=np.float64).reshape(-1, d)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        m = m[norms[:, 0] > 0] / norms[norms[:, 0] > 0]
        pts += [m, -m]
    r = _generator(key, "canaries").standard_normal((_N_RANDOM, d))
    pts.append(r / np.linalg.norm(r, axis=1, keepdims=True))
    raw = domain.center + domain.scale * np.concatenate(pts)
    if domain.bounds is not None:
        raw = np.clip(raw, domain.bounds[0], domain.bounds[1])
    return raw


def _sharpened(est, domain, d, key):
    """A copy of ``est`` whose public initial parameters make its posteriors nearly one-hot
    at boundary canaries, or None.  A release's declared sensitivity holds for every
    parameter value the iteration may see (the parameters are public: under adaptive
    composition the adversary may as well have chosen them), so the auditor picks ones at
    which the sensitivity is attained: means on the domain's unit sphere (±e_j, then seeded
    random directions; a declared box's corners) and precisions ``SHARP / scale²``.  Only for
    a mixture with no user-given means (``means_init`` None or the private start, which only
    chooses initial parameters) and no ``precisions_init``; the caller checks that the
    statistics are unchanged."""
    params = est.get_params()
    means_init = params.get("means_init", 0)
    if "precisions_init" not in params or not (means_init is None or isinstance(means_init, str)) \
            or params["precisions_init"] is not None \
            or not isinstance(params.get("n_components"), (int, np.integer)):
        return None
    K, ct = int(est.n_components), params.get("covariance_type", "full")
    eye = np.eye(d)
    if domain.bounds is not None:       # a box: its corners are the points of largest norm
        c = cube_corners(d, key) / math.sqrt(d)
        dirs = [v for pair in zip(c, -c) for v in pair]
    else:
        dirs = [v for j in range(d) for v in (eye[j], -eye[j])]
    if K > len(dirs):
        r = _generator(key, "means").standard_normal((K - len(dirs), d))
        dirs += list(r / np.linalg.norm(r, axis=1, keepdims=True))
    means = domain.center + domain.scale * np.array(dirs[:K])
    p = _SHARP / domain.scale ** 2
    prec = {"full": np.broadcast_to(np.diag(p), (K, d, d)).copy(), "tied": np.diag(p),
            "diag": np.broadcast_to(p, (K, d)).copy(), "spherical": np.full(K, _SHARP / domain.scale[0] ** 2)}
    if ct not in prec:
        return None
    sharp = clone(est).set_params(means_init=means, precisions_init=prec[ct])
    sharp.random_state = est.random_state
    return sharp


def _sharpened_binary(est, d, key):
    """A Bernoulli mixture's sharpened copy (as :func:`_sharpened`): means at distinct rows of
    {0, 1}^d (all ones first, then all zeros, then the others), moved ``1e-4`` inside (0, 1), so
    that a canary at one of them belongs to it alone; or None when ``means_init`` is set.  For a
    model that declares its means live on binary rows (``_audit_sharpening = "binary_rows"``:
    the Bernoulli mixture); the audit reads that declaration, never the model's class."""
    if getattr(est, "_audit_sharpening", None) != "binary_rows" or est.means_init is not None:
        return None
    rows = np.unique(np.asarray(est._extreme_rows(d, key)), axis=0)[::-1]     # all ones first
    if rows.shape[0] < int(est.n_components):
        return None
    sharp = clone(est).set_params(means_init=np.clip(rows[:int(est.n_components)], 1e-4, 1.0 - 1e-4))
    sharp.random_state = est.random_state
    return sharp


def _domain_columns(est, d):
    """The columns a ball model's domain maps (all of them unless the model says otherwise)."""
    cols = est._domain_columns(d)
    return np.arange(d) if cols is None else np.asarray(cols, dtype=np.intp)


def _with_free_columns(points, cols, values, d):
    """Full rows from boundary points of the domain's columns ``cols``: the other columns
    (a mixed table's categorical codes, ``values``: column -> its public values) take every
    value in turn, each point twice with the codes shifted by one (so that two canaries may
    differ in their codes too)."""
    if cols.size == d:
        return points
    rows = np.zeros((2 * points.shape[0], d))
    rows[:, cols] = np.vstack([points, points])
    idx = np.arange(rows.shape[0])
    for j, v in values.items():
        v = np.asarray(v, dtype=np.float64)
        rows[:, j] = v[(idx + (idx >= points.shape[0])) % v.size]
    return rows


class EMTarget:
    """A full-pass EM estimator's audit target (module docstring)."""

    sampled = False

    def __init__(self, est, X, key, n_features):
        est = self.est = self._resolved(est)
        if X is None:
            X = self._base(est, key, 2 if n_features is None else int(n_features))
        rows = validated_rows(est, X, True)
        n, d = rows.n_rows, rows.n_features
        est.n_features_in_ = d
        self.relation = est.neighbouring
        n_public = est._public_rows(n)
        est._check_model_params(n_public, d)
        # person-level (max_rows_per_group m, issue 27): the canary is a person of m copies of
        # the canary row, the worst case of a group's bounded contribution, against the plan's
        # group-level noise; the base rows are each their own group (already bounded)
        self.m_rows = est._max_rows_per_group() or 1
        plan, specs, _, domain = est._private_plan(n_public, d)
        self.iteration = tuple(s.name for s in specs)
        self.one_off = ()                          # the domain estimate's and a start's: other code paths
        self.rounds = est._n_release_rounds()
        self.notes = ()
        if est._domain_kind == "ball":
            domain = est._working_domain(domain)
        else:
            domain = None
        sharp = _sharpened(est, domain, d, key) if domain is not None else _sharpened_binary(est, d, key)
        if sharp is not None:
            sharp.n_features_in_ = d
            sharp._check_model_params(n_public, d)
            # the sharpened copy lends its public parameters only: same statistics and kernel
            if tuple(sharp._iteration_specs(d, np.float64, n_public)) == tuple(specs):
                est = self.est = sharp
                self.notes = ("audited at sharpened public initial parameters (means at the domain's "
                              "boundary, posteriors one-hot there): the sensitivity holds for every parameter",)
        self.plan, self.domain, self.d = plan, domain, d
        self.params = est._initial_parameters(rows.summary, domain, key, True)   # data-independent
        if domain is not None:
            cols = _domain_columns(est, d)
            means = self.params[1] if isinstance(self.params, tuple) and len(self.params) > 1 else None
            ok = np.ndim(means) == 2 and np.shape(means)[-1] == cols.size
            self.candidates = _with_free_columns(_ball_candidates(domain, means if ok else None, cols.size, key),
                                                 cols, est._column_values(d), d)
        else:
            self.candidates = np.asarray(est._extreme_rows(d, key), dtype=np.float64)
        self.base = np.asarray(est._prepare_rows(np.asarray(X, dtype=np.float64)), dtype=np.float64)

    @staticmethod
    def _resolved(est):
        """The estimator whose plan a fit runs: a mixture's ``n_components="auto"`` is one fit
        at ``max_components`` (its pruning is post-processing); a size chosen by a private
        selection over candidate fits is refused (audit a candidate)."""
        params = est.get_params()
        for size in ("n_components", "n_clusters"):
            if isinstance(params.get(size), str):
                if not hasattr(est, "_auto_overrides"):
                    raise ValueError(f"estimator: {size}={params[size]!r} selects among candidate fits "
                                     f"privately; audit a candidate (an integer {size})")
                resolved = clone(est).set_params(n_components=int(est.max_components), **est._auto_overrides())
                resolved.random_state = est.random_state
                return resolved
        return est

    @staticmethod
    def _base(est, key, d):
        """The default base data: n rows uniform in the half-radius ball of a declared domain,
        or drawn among a fixed domain's extreme rows."""
        rng = _generator(key, "base")
        if est._domain_kind != "ball":
            rows = np.asarray(est._extreme_rows(d, key), dtype=np.float64)
            return rows[rng.integers(rows.shape[0], size=_N_BASE)]
        cols = _domain_columns(est, d)
        w = rng.standard_normal((_N_BASE, cols.size))
        w *= (0.5 * rng.uniform(size=(_N_BASE, 1)) ** (1.0 / max(cols.size, 1))) \
            / np.linalg.norm(w, axis=1, keepdims=True)
        decl = est._declared_domain(cols.size)
        X = np.zeros((_N_BASE, d))
        X[:, cols] = decl.center + decl.scale * w
        for j, values in est._column_values(d).items():
            X[:, j] = rng.choice(np.asarray(values, dtype=np.float64), size=_N_BASE)
        return X

    def _stats(self, block, names):
        block = np.ascontiguousarray(self.est._prepare_rows(np.asarray(block, dtype=np.float64)))
        s = self.est._statistics(block, self.params, self.domain, 1)
        return {g: np.asarray(s[g], dtype=np.float64) for g in names}

    def contribution(self, i, names):
        """Candidate ``i``'s own statistics (a block of ``m_rows`` copies: a canary person)."""
        return self._stats(np.repeat(self.candidates[i][None, :], self.m_rows, axis=0), names)

    def datasets(self, i, j):
        """``(D, D′)``: replace — the first ``m_rows`` rows of the base set to candidate i on D,
        to j on D′; add/remove — the base with ``m_rows`` copies of candidate i appended on D,
        the base on D′ (``m_rows`` = 1 for a row-level plan)."""
        m = self.m_rows
        if self.relation == "replace":
            D, D2 = self.base.copy(), self.base.copy()
            D[:m], D2[:m] = self.candidates[i], self.candidates[j]
            return D, D2
        return np.vstack([self.base, np.repeat(self.candidates[i][None, :], m, axis=0)]), self.base

    def exact(self, dataset, names):
        return self._stats(dataset, names)

    def canary(self, i):
        """Candidate ``i`` as the estimator takes it (one row)."""
        return self.candidates[i][None, :]

    def describe(self, i):
        return self.candidates[i].copy()


class LDATarget:
    """Private LDA's audit target (module docstring).  Relation: add/remove one document."""

    def __init__(self, est, X, key, n_features):
        from .._kernels.lda_docs import _cap_documents, _clipped_count_sum
        from .._kernels.lda import exp_dirichlet_expectation

        self.est = est
        K, _ = est._check_params()
        N = int(est.max_doc_length)
        if X is None:
            V = len(est.vocabulary) if est.vocabulary is not None else (20 if n_features is None
                                                                         else int(n_features))
            rng = _generator(key, "base")
            counts = np.zeros((_N_DOCS, V))
            for r in range(_N_DOCS):
                np.add.at(counts[r], rng.integers(V, size=int(rng.integers(1, N + 1))), 1.0)
            X = sp.csr_matrix(counts)
        X = est._check_X(X)
        V = X.shape[1]
        if est.vocabulary is not None and len(est.vocabulary) != V:
            raise ValueError(f"vocabulary has {len(est.vocabulary)} terms but X has {V} columns")
        self.relation, self.d = "add_remove", V
        self.m_rows = est._max_rows_per_group() or 1        # an author of m canary documents
        self.plan, self.rounds, q = est._private_plan(K, V)
        self.sampled = q < 1.0
        self.iteration = ("topic_word",)
        self.one_off = tuple(n for n in self.plan.releases if n != "topic_word")
        self.notes = ("one release with the canary document in the minibatch: the claim is the release's "
                      "own Gaussian mechanism, without the amplification by Poisson sampling",)
        alpha, _ = est._priors(K)
        self._clip = est._clip_norm(V)
        lam = est._initial_topics(key, K, V)
        self._eb_t = np.ascontiguousarray(exp_dirichlet_expectation(lam).T)
        self._alpha = alpha
        self._gamma0 = _generator(key, "gamma").gamma(100.0, 0.01, (X.shape[0] + self.m_rows, K))
        self.base, _ = _cap_documents(X, derive_key(key, "lda", "cap"), N)
        words = np.arange(V) if V <= _N_WORDS else np.sort(_generator(key, "words").choice(V, _N_WORDS, replace=False))
        self.candidates = sp.csr_matrix((np.full(words.size, float(N)), (np.arange(words.size), words)),
                                        shape=(words.size, V))
        self._unigram = _clipped_count_sum

    def _stats(self, docs, names, gamma0):
        from .._kernels.lda import estep_csr

        out = {}
        if "topic_word" in names:
            e = self.est
            out["topic_word"] = estep_csr(docs, self._eb_t, gamma0, self._alpha, int(e.max_doc_update_iter),
                                          float(e.mean_change_tol), self._clip, 1)[1]
        if "unigram" in names:
            out["unigram"] = self._unigram(docs, self._clip)
        return out

    def _canary_docs(self, i):
        return sp.vstack([self.candidates[i]] * self.m_rows, format="csr")

    def contribution(self, i, names):
        return self._stats(self._canary_docs(i), names, self._gamma0[-self.m_rows:])

    def datasets(self, i, j):
        return sp.vstack([self.base, self._canary_docs(i)], format="csr"), self.base

    def exact(self, dataset, names):
        return self._stats(dataset, names, self._gamma0[:dataset.shape[0]])

    def canary(self, i):
        return self.candidates[i]

    def describe(self, i):
        return self.candidates[i].toarray().ravel()


class SEPTarget:
    """DP-SEP's audit target (module docstring).  Relation: replace one row (N is public).

    A release is one batch's factor update ``θ_f ← (1 − b γ/N) θ_f + (γ/N) Σ_n clip_C(f_n) +
    noise``; its cavity is the factor at the batch's start, so a row's share of the update does
    not depend on the other rows of the batch, and the pair differs by ``(γ/N) (clip_C(f(x)) −
    clip_C(f(x′)))`` (norm ≤ the declared ``2 γ C / N``).  The exact update is the compiled
    step itself (one step, no noise, no projection) at a public factor with one component per
    corner of the box (:meth:`_sharpened`), projected as the fit projects its initial factor.
    Canaries: the box's corners and the centres of its faces.  The declared sensitivity (the
    paper's Prop. 1: two clipped sites of norm C in opposite directions) is a sup the sites'
    structure may not reach: the audit's canaries attain 0.8–0.9 of it (bench), so its bound
    stays below the claim by that much.  Under
    ``sampling="shuffle"`` a row is in exactly T releases (one per epoch): the fit scope
    audits those T; ``"uniform"`` is subsampled (no fit scope).
    """

    def __init__(self, est, X, key, n_features):
        from .._kernels import sep as _sep

        self.est, self._sep = est, _sep
        if X is None:
            d = 2 if n_features is None else int(n_features)
            lo, hi = est._check_params(d)[-1]
            X = lo + (hi - lo) * _generator(key, "base").uniform(size=(_N_BASE, d))
        X = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
        if X.ndim != 2 or not np.all(np.isfinite(X)):
            raise ValueError("X must be a finite 2-d array of rows")
        n, d = X.shape
        m = self.m_rows = est._max_rows_per_group() or 1
        if m > 1 and est.sampling != "shuffle":
            raise ValueError("sampling: a person-level DP-SEP fit takes sampling='shuffle'")
        # person-level: the base rows are each their own group, so the loop runs over n m slots
        st = self._st = est._setup(n, d, key, None if est._max_rows_per_group() is None else n * m)
        n = st.n
        sizes = est._batch_sizes(n, st.T, st.B)
        self.plan = est._calibrated_plan(n, st.T, st.B, sizes, st.J, d + d * d, d, st.eps, st.delta, st.C, st.gamma,
                                         st.acct, est._max_rows_per_group())
        self.relation, self.d, self.n = "replace", d, n
        self.iteration, self.one_off = ("factor",), ()
        self.rounds = st.T
        self.sampled = est.sampling == "uniform"
        self.notes = ("one release: a batch's factor update at the fit's initial factor; the canary's share "
                      "of it does not depend on the batch's other rows (one cavity per batch)",)
        corners = cube_corners(d, key)
        self._theta = self._sharpened(st, corners, n, d)
        _sep.project_factor(self._theta, d, st.C, st.lo_u, st.hi_u)          # as the fit, before its loop
        eye = np.eye(d)
        half = (st.hi - st.lo) / 2.0
        self.candidates = np.vstack([st.centre + half * corners, st.centre + half * eye, st.centre - half * eye])

    @staticmethod
    def _sharpened(st, corners, n, d):
        """The audit's public factor (as :func:`_sharpened` for a mixture): component j's mean at
        the box's corner j (working units), precision ``SHARP / N`` per row, so that the cavity
        puts a canary at a corner in its own component alone (the fit's initial factor when
        there are more components than corners)."""
        J = st.J
        if J > corners.shape[0]:
            return st.theta_f.copy()
        means = st.lo_u + (st.hi_u - st.lo_u) * (corners[:J] + 1.0) / 2.0
        lam = np.eye(d) * (_SHARP / n)
        return np.ascontiguousarray(np.concatenate([means @ lam, np.tile(lam.ravel(), (J, 1))], axis=1))

    def _update(self, row):
        """The release of one batch holding the canary person's ``m_rows`` copies of ``row`` (one
        row at the row level): the compiled step, no noise, no projection."""
        st, m = self._st, self.m_rows
        theta = self._theta.copy()
        self._sep.sep_loop(st.working(row[None, :]), np.zeros(m, dtype=np.int64), theta, st.theta0, st.log_w,
                           st.s2u, float(self.n), st.gamma / self.n, st.C, None, m, None, None)
        return {"factor": theta}

    def contribution(self, i, names):
        return self._update(self.candidates[i])

    def datasets(self, i, j):
        return self.candidates[i], self.candidates[j]

    def exact(self, dataset, names):
        return self._update(dataset)

    def canary(self, i):
        return self.candidates[i][None, :]

    def describe(self, i):
        return self.candidates[i].copy()
