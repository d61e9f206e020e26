"""Differentially private EM for Gaussian mixtures (DP-EM, Park et al. 2017) on the private-EM engine.

The estimator: its parameters, privacy analysis, statistic specs and engine hooks.  The M-step it calls
(noisy statistics to parameters: projections, eigenvalue floors, MAP prior) is
:mod:`dpem_fast.mixture._gmm_mstep`.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from scipy import linalg
from sklearn.utils.validation import check_is_fitted

from .._dpcore import _contract
from .._dpcore import _rng as _core_rng
from .._engine import PrivateEM
from .._preprocess import box_domain, project_into_domain
from .._engine._specs import (diagonal_second_moments, moments_joint_bound, second_moments, soft_counts,
                               squared_norms, weighted_sums)
from .._engine._start import private_start, start_specs
from .._rng import derive_key
from .._threads import effective_n_threads
from .._validation import check_nonnegative_real, check_positive_int
from ._common import GAUSSIAN_MERGE_REASON, MixtureInferenceMixin, as_frame, check_counts_resolvable, live_components
from ._gmm_mstep import PRIOR_KEYS, warn_if_covariances_unresolved, covariance_from_precision_cholesky, exact_m_step, map_prior, private_m_step
from ._gmm_mstep import full_covariances, precision_cholesky_full, private_full_step
from ._gmm_mstep import compute_precision_cholesky as _compute_precision_cholesky
from .._kernels.gmm import (COUNTS, COVARIANCE_TYPES, FIRST, SECOND, compute_stats, compute_stats_diag, predict_log_resp,
                            predict_log_resp_diag)

__all__ = ["DPGaussianMixture", "start_variances"]


def _gmm_statistics(X, params, domain, n_threads, covariance_type="full", single=False):
    """The E-step statistics kernel (a Dask task's: the current parameters and the public
    covariance type only).  Full and tied run the full kernel (tied: the pooled second moment,
    summed exactly from every component's block partials); diag and spherical run the diagonal
    kernel (O(n K d): counts, first moments and squared sums; spherical: their row sums, summed
    exactly from every feature's block partials), so that each type releases only its own
    second moments, each entry rounded once (:mod:`~dpem_fast._engine._specs`, "Rounding").
    ``single``: float32 rows run the kernels' float32 path (the estimator's ``_float32_path``,
    which widens the plan's sensitivities to match)."""
    weights, means, _, prec_chol = params
    if covariance_type in ("diag", "spherical"):
        prec_diag = np.diagonal(prec_chol, axis1=1, axis2=2)      # the factors are diagonal
        return compute_stats_diag(X, weights, means, prec_diag, n_threads=n_threads, domain=domain,
                                  single=single, second=covariance_type)
    return compute_stats(X, weights, means, prec_chol, n_threads=n_threads, domain=domain, single=single,
                         second=covariance_type)


def start_variances(means):
    """Variances ``v_k`` of isotropic initial covariances ``v_k I`` (working units) for centres
    from the private start: ``v_k = (ρ_k / 4)²`` with ρ_k the distance from centre k to the
    nearest other centre, clipped to ``[v₀ / 100, v₀]``, ``v₀ = 1 / (4d)`` the data-independent
    start's variance.  Post-processing of the released centres and public d.

    Why: the data-independent variance v₀ (a standard deviation of a quarter of the ball's
    radius) makes components seeded on distinct clusters overlap, and the first E-steps merge
    neighbouring clusters under one component before the noisy M-steps can separate them
    (measured on bench/model_selection.py: pairs of clusters of weight 0.125 ended as one
    component of weight 0.25).  A standard deviation of a quarter of the distance to the
    nearest other centre leaves neighbouring components two standard deviations apart
    each, so a row between two seeded clusters is shared, not absorbed."""
    K, d = means.shape
    v0 = 1.0 / (4.0 * d)
    if K == 1:
        return np.full(1, v0)
    dist = np.sqrt(((means[:, None, :] - means[None, :, :]) ** 2).sum(axis=2))
    np.fill_diagonal(dist, np.inf)
    return np.clip((dist.min(axis=1) / 4.0) ** 2, v0 / 100.0, v0)


class DPGaussianMixture(MixtureInferenceMixin, PrivateEM):
    """Gaussian mixture fitted by differentially private EM (moment perturbation).

    Each EM iteration computes the expected sufficient statistics of a
    full-covariance Gaussian mixture in one fused pass over the data (Cython,
    OpenMP), releases them with calibrated noise, and maps the noisy
    statistics to parameters.  Everything after the release is
    post-processing of noisy statistics and public constants.

    Parameters
    ----------
    n_components : int or "auto", default=1
        Number of mixture components K.  ``"auto"``: chosen privately among 1 ..
        ``max_components`` within this fit's (ε, δ) by over-provisioning: one fit with
        ``max_components`` components on the whole budget (means from the private start,
        ``means_init="private"``, unless ``means_init`` is given), whose released model keeps
        only the components its noisy counts resolve (the dead-component rule below;
        post-processing, no budget spent on the choice); ``n_components_`` tells how many.
        Measured against a random-stopping selection over 1 .. ``max_components``
        (:class:`dpem_fast.model_selection.PrivateModelSelection`, which divides the budget
        among its trials) on ``bench/model_selection.py``: more often the right K and a better
        held-out likelihood (docs/model_selection.rst).
    covariance_type : {"full", "diag", "tied", "spherical"}, default="full"
        scikit-learn's covariance structures: one full matrix per component, one diagonal per
        component, one full matrix shared by all components, or one variance per component.
        Each type releases only the second moments it needs (see Privacy); ``covariances_``,
        ``precisions_`` and ``precisions_cholesky_`` take scikit-learn's shapes.  ``"spherical"``
        maps every feature with one scale (the largest of the domain's, a public coarsening),
        so that its covariances are spherical in the original units.

        .. versionadded:: 0.1 (issue 24)
    epsilon : float, default=1.0
        Total privacy budget ε of the whole fit (all iterations).  ``inf``
        fits the non-private EM (no clipping, no noise), which reproduces
        scikit-learn's ``GaussianMixture`` given the same initial parameters.
    delta : float, default=1e-5
        Total δ, in (0, 1).
    max_iter : int, default=20
        Number of EM iterations J.  In private mode exactly J iterations run
        (no data-dependent early stopping).
    scenario : {"GGG", "LLG"}, default="GGG"
        Noise for (counts, first moments, second moments): all Gaussian
        (GGG), or Laplace, Laplace, Gaussian (LLG) (DP-EM Sec. 4.2).
    accountant : {"gdp", "rdp", "zcdp", "moments", "advanced", "linear", "pld"} or None
        Composition used to calibrate the noise to the total (ε, δ).  ``None``
        picks the tightest available: exact Gaussian DP (``"gdp"``) for GGG,
        Rényi DP over a fine grid of orders for LLG, zCDP with the tight
        conversion for ``noise="discrete_gaussian"``.  ``"moments"`` is the
        paper's integer-order moments accountant, ``"zcdp"`` its zCDP
        composition; ``"pld"`` is the native privacy-loss-distribution
        accountant (tight numerical composition, an upper bound).
    noise : {"gaussian", "discrete_gaussian"}, default="gaussian"
        ``"discrete_gaussian"`` releases every statistic as exact discrete
        Gaussian integers on a lattice of step γ (a power of two, at most
        Δ/(100√m) for m noised coordinates): ``γ (round(s/γ) + Z)``.  No
        floating point enters the noise (Mironov 2012's attack surface is
        gone); rounding widens each sensitivity to Δ + γ√m (at most 1 %; see
        :mod:`dpem_fast._engine._lattice`), and the plan is accounted with the
        discrete Gaussian's ρ-zCDP bound (CKS 2020, Thm 4), by default with
        ``accountant="zcdp"`` (``"gdp"``, an exact curve for the continuous
        Gaussian only, is refused).  Needs ``scenario="GGG"``.
    estimator : {"mle", "map"}, default="mle"
        M-step on noisy statistics: maximum likelihood, or the posterior mode
        under a Dirichlet / Normal-inverse-Wishart prior (DP-EM footnotes 7-8).
    prior : dict or None
        MAP hyperparameters in the scaled units (rows in the unit ball):
        ``alpha`` (Dirichlet, default 1), ``kappa0`` (default 1), ``mean0``
        (default 0), ``nu0`` (default n_features + 2), ``psi0`` (scale matrix,
        default ``0.01 * I``).  Public constants: they do not touch the data.
    data_norm : float or None
        Declared bound on the Euclidean norm of a row (after centring at the
        middle of ``bounds`` if those are given).  Rows beyond it are clipped.
    bounds : tuple (lower, upper), "from_data" or None
        Declared per-feature box; rows are clipped to it, centred at its
        middle and each feature divided by ``sqrt(n_features)`` times its
        half-width (the box becomes a cube inside the unit ball; with
        ``data_norm`` every feature is divided by ``data_norm`` instead).
        Released means end inside the box; covariance floors are per feature
        (``s_i²`` times the floor in the scaled units).  With neither ``data_norm`` nor ``bounds`` (the default) the
        box is **estimated privately** from two noisy histograms on
        ``DOMAIN_SHARE`` (10 %) of the budget, accounted in ``privacy_.event``
        (see :mod:`dpem_fast._engine._domain`); declared bounds leave the whole
        budget to the mixture and are usually tighter.  ``"from_data"`` uses
        the data's exact bounding box: an explicit opt-in that is **not
        private** — it raises a ``PrivacyLeakWarning``, ``privacy_.private``
        is False and no ``budget`` ledger is accepted.
    neighbouring : {"replace", "add_remove"}, default="replace"
        Neighbouring relation: datasets differing by replacing one row, or by
        adding/removing one row.  Every sensitivity below is derived under it.
    budget_split : "auto" or tuple of 3 positive floats, default="auto"
        Relative share of the per-iteration privacy loss given to counts,
        first moments and second moments (shares of ρ = 1/(2 z²) for Gaussian
        releases; of ε for Laplace releases).  ``"auto"`` gives the three
        releases shares ∝ √m_r, with m_r = K, Kd and Kd(d+1)/2 noised
        coordinates (second moments: Kd(d+1)/2 full, Kd diag, K spherical,
        d(d+1)/2 tied): the split that minimises the total noise variance in
        units of each statistic's sensitivity, Σ_r m_r (σ_r/Δ_r)², at a fixed
        privacy loss (σ_r/Δ_r = s/√w_r, so minimise Σ_r m_r/w_r subject to
        Σ_r w_r = 1: w_r ∝ √m_r, Lagrange).  Public quantities only (K, d).
        With LLG, whose Laplace shares are of ε, ``"auto"`` is the equal split.
        ``(1, 1, 1)`` is the paper's equal split.
    averaging : {"tail", "none"}, default="tail"
        ``"tail"``: each of the last ``max_iter // 2`` M-steps uses the mean of
        the noisy statistics released since the tail began (a Polyak–Ruppert
        average of the noisy EM iteration; post-processing, no privacy cost).
        Near the fixed point consecutive statistics differ little while their
        noises are independent, so the final parameters see about
        ``2 / max_iter`` of one release's noise variance.  ``"none"``: every
        M-step uses its own iteration's release (the paper's method).
    weights_init, means_init, precisions_init : array-like or None
        Initial parameters in the original units (public; scikit-learn's
        conventions).  Without them the initialisation is data-independent:
        uniform weights, means drawn uniformly from the ball of radius 1/2 of
        the declared domain (with the fit's own random stream) and moved into
        the box's image, and isotropic covariances ``I / (4 n_features)`` in
        the scaled units (``diag(s_i²) / (4 n_features)`` in original units).
        ``means_init="private"``: the means from k-means's private start
        (:mod:`dpem_fast._engine._start`: noisy random-hyperplane cell counts and
        cell sums, two releases in the fit's plan on 20 % of it, sensitivities
        derived there under both relations; the rest as without initial
        parameters); the non-private fit treats it as None.
    reg_covar : float, default=1e-6
        Added to the diagonal of covariances (non-private mode, as
        scikit-learn) and lower bound of covariance eigenvalues (private mode).
    n_threads : int or None
        OpenMP threads for the E-step and the noise (``None``: all cores or
        ``OMP_NUM_THREADS``).  Results do not depend on it.
    random_state : None, int, SeedSequence or Generator
        Key of the fit's noise streams.  ``None`` (default) uses OS entropy.
        A fixed seed is for tests and research only: anyone who knows it can
        recompute and subtract the noise, and **every fit with the same seed
        draws identical noise** — cross-validation folds, ``clone`` copies and
        refits on other data then share their noise, so differences between
        such fits are noise-free differences of the data.  Never fix the seed
        of fits whose outputs are published together.
    budget : dpem_fast.accounting.BudgetLedger or None
        If given, the fit's whole plan is charged to it after the arguments
        are validated and before any statistic of the data is computed; a fit
        that would exceed it raises ``BudgetExceededError``.  The ledger must
        account under the fit's ``neighbouring`` relation; ``epsilon=inf`` and
        ``bounds="from_data"`` fits refuse a ledger (they are not private).
        The charge declares the plan's accountant (``privacy_.accountant``),
        which the ledger bounds its spends with too, so a fit of (ε, δ) fits a
        ledger of (ε, δ).  ``clone`` keeps the very ledger; an unfitted
        estimator holding one cannot be pickled (use ``n_jobs=1``).
    verbose : int, default=0
        ``>= 1``: a progress bar on stderr (tqdm, ``pip install dpem_fast[progress]``; plain
        lines without it) with the seconds of the last iteration and the ε spent so far;
        nothing computed from the data is shown.  0: silent.
    max_components : int, default=10
        Largest K tried by ``n_components="auto"`` (unused otherwise).

    max_rows_per_group : int or None, default=None
        Person-level privacy (issue 27): with ``fit(X, groups=...)`` (one group id per row, e.g.
        a person, or a DataFrame column name) each group keeps at most this many rows, chosen
        uniformly at random with the fit's key, every sensitivity is m times a row's (derived in
        :mod:`dpem_fast._engine._groups`) and the guarantee is for adding/removing or replacing
        one group's rows.  Required with ``groups``; None: row-level privacy.  A public
        constant: choose it near or below the typical number of rows per group (docs: "Person-level
        privacy").

        .. versionadded:: 0.1 (issue 27)

    Attributes
    ----------
    weights_ : ndarray of shape ``(n_components_,)``
    means_ : ndarray of shape ``(n_components_, n_features)``
    covariances_ : ndarray
        Shape ``(n_components_, n_features, n_features)`` for full, ``(n_components_,
        n_features)`` for diag, ``(n_features, n_features)`` for tied, ``(n_components_,)``
        for spherical.
    precisions_cholesky_ : ndarray of the shape of ``covariances_``
    precisions_ : ndarray of the shape of ``covariances_``
    n_components_ : int
        Components of the released model: ``n_components`` less those a private
        fit dropped as dead (see Privacy); the arrays above have this length.
    n_iter_ : int
    converged_ : bool
        Always False in private mode (no convergence test is run on private data).
    n_features_in_ : int
    privacy_ : PrivacyRecord or None
        Mechanism, neighbouring relation, accountant, (ε, δ), per-release
        sensitivities and noise scales and the plan as events.
    diagnostics_ : dict
        Rows clipped and training log-likelihood per iteration.  **Computed
        from the private data: not private, do not publish.**

    Privacy
    -------
    Neighbouring relation: ``neighbouring`` (replace one row, or add/remove
    one row); every sensitivity is derived under both and the plan's events
    are tagged with the one used.  Rows are mapped into the unit ball
    ``‖x‖ ≤ 1`` by the declared (or privately estimated) domain (DP-EM
    Sec. 3's assumption, enforced by clipping inside the kernel; a finite row
    of any size is clipped along its own direction).  The map is per feature:
    with a box (no ``data_norm``) feature i is divided by √d times its
    half-width, so the box becomes the cube [−1/√d, 1/√d]^d, a subset of the
    ball: every sensitivity below, a sup over rows in the ball, holds
    unchanged under both relations (on the cube some sups are smaller; the
    ball's are kept).  Responsibilities
    γ_ik of a row depend only on that row and on parameters already released,
    so one row changes the statistics only through its own term.  Writing γ
    for its responsibility vector (γ_k ≥ 0, Σγ_k = 1):

    - counts ``N_k = Σ_i γ_ik`` (Eq. 12–13): add/remove changes N by γ, with
      ‖γ‖₂ ≤ ‖γ‖₁ = 1; replace by γ − γ', ‖γ − γ'‖₂ ≤ √2 (ℓ1: 1 and 2).
      The paper's ℓ2 value 2/N for π is loose by √2 (and it is used for the
      normalised π, whose denominator is itself private under add/remove).
    - first moments ``S1_k = Σ_i γ_ik x_i`` (Eq. 14–15), released jointly for
      all K components: ‖(γ_k x)_k‖_F = ‖γ‖₂‖x‖ ≤ 1 (add/remove) and ≤ 2
      (replace, triangle inequality, attained with x' = −x).  ℓ1 (LLG):
      Σ_k γ_k‖x‖₁ ≤ √d and 2√d.  The paper perturbs each normalised mean
      μ_k with a sensitivity 2√d/Ñ_k; dividing by the noisy count after the
      release (post-processing) is the sound form of the same idea, and one
      joint release replaces K releases.
    - second moments ``S2_k = Σ_i γ_ik x_i x_iᵀ`` (Eq. 16–18), symmetric
      Analyze-Gauss noise on the upper triangle: ‖upper(xxᵀ)‖₂ ≤ ‖xxᵀ‖_F =
      ‖x‖² ≤ 1 (add/remove); for replace, Σ_k‖γ_k A − γ'_k B‖²_F ≤ Σγ_k² +
      Σγ'_k² ≤ 2 since ⟨A, B⟩ ≥ 0 for PSD A, B, so √2 (the paper: 2/Ñ_k per
      component on the normalised covariance, K releases).
    - the other covariance types release less (declared once in
      :mod:`dpem_fast._engine._specs`, derived there): ``"diag"`` the diagonals
      ``Σ_i γ_ik x_i²`` (K×d), ``"spherical"`` the traces ``Σ_i γ_ik ‖x_i‖²`` (K),
      ``"tied"`` the one pooled ``Σ_i x_i x_iᵀ`` (d×d; ``Σ_k γ_ik = 1``, so the tied
      covariance is ``(S2 − Σ_k S1_k S1_kᵀ/N_k)/N``).  add/remove: ``‖γ‖₂‖x²‖₂ ≤ ‖x‖² ≤ 1``,
      ``‖γ‖₂‖x‖² ≤ 1`` and ``‖xxᵀ‖_F ≤ 1``; replace-one: √2 for each (every entry of
      ``γ x²`` and ``γ‖x‖²`` is nonnegative, so the cross term of ``‖A − B‖²`` is ≥ 0;
      ``‖xxᵀ − x'x'ᵀ‖²_F = ‖x‖⁴ + ‖x'‖⁴ − 2(xᵀx')² ≤ 2``).  Full and tied run the
      full kernel (tied pools its second moments); diag and spherical the diagonal kernel
      (squared sums only, O(n K d); spherical sums them over features); each keeps only its
      type's statistics before the release, so the released quantities and their
      sensitivities are unchanged.

    **Joint accounting** (GGG with continuous noise).  The three releases of
    an iteration are one Gaussian mechanism on the stacked statistic; its
    privacy loss is μ² = sup Σ_r ‖δ_r‖²/σ_r² over neighbours, which the
    separate composition bounds by Σ_r a_r with a_r = Δ_r²/σ_r², attained
    only if all three worst cases coincide.  They do not under replace-one.
    Per component k, the row's contribution to Σ_r ‖δ_r‖²/σ_r² is
    ‖γ_k u − γ'_k u'‖² with the stacked vector u = (√(a_c/2), √a_1 x/2,
    √(a_2/2) xxᵀ) (Δ = √2, 2, √2), so the sum Σ_k ‖γ_k u − γ'_k u'‖² is
    jointly convex in (γ, γ') and its maximum over the two simplices is at
    vertices: γ = e_i, γ' = e_j.  For i ≠ j it is ‖u‖² + ‖u'‖² ≤ a_c +
    a_1/2 + a_2 (‖x‖ ≤ 1).  For i = j it is ‖u − u'‖² = a_1‖x − x'‖²/4 +
    a_2‖xxᵀ − x'x'ᵀ‖²_F/2; writing p = ‖x‖², q = ‖x'‖², t the cosine of
    their angle and v = √(pq)·(−t), this is a_1(p + q)/4 + a_2(p² + q²)/2 +
    a_1 v/2 − a_2 v², and max over t of the last two terms is
    φ(√(pq)) = max_{0 ≤ v ≤ √(pq)} (a_1 v/2 − a_2 v²), nondecreasing in p
    and q; so the maximum is at p = q = 1: a_1/2 + a_2 + φ(1), with φ(1) =
    a_1²/(16 a_2) if a_1 ≤ 4a_2 else a_1/2 − a_2.  Hence
    sup = a_1/2 + a_2 + max(a_c, φ(1)); with an equal split (a_r = a) it is
    2.5a instead of 3a: the same (ε, δ) with 9 % less noise.  (The released
    upper triangle has ‖upper(δ₂)‖ ≤ ‖δ₂‖_F, so the bound holds for it.)
    Under add/remove the sum is Σ_k γ_k²‖u‖² ≤ ‖u‖² = Σ_r a_r (γ one-hot,
    ‖x‖ = 1): no gain, and the plan composes separately.  Per covariance type
    (:func:`~dpem_fast._engine._specs.moments_joint_bound`, derived in its module):
    diag and tied have the same bound (diag: ``‖diag M‖ ≤ ‖M‖_F``, attained by
    ``x = (a, b)``, ``x' = (−b, −a)``; tied: the vertex argument without the
    per-component split), spherical ``max(a_c + a_1/2 + a_2, a_1)``; all attained,
    and checked by the conformance suite's adversarial search for every type.  Laplace and lattice
    releases are always composed separately.

    **Float32 rows** (issue 26).  Under replace-one, float32 ``X`` runs the kernels' float32 path:
    each row is clipped into the ball in float64, then rounded to float, and the E-step and the
    moments run in single precision (SIMD width doubled) with float64 accumulation, a float
    lane never summing more than 128 rows.  Its rounding is bounded row by row, so every
    sensitivity above (and the joint bound) is multiplied by ``1 + 2⁻⁸`` (the derivation,
    ``Δ̃ ≤ Δ (1 + κ)(1 + u)² (1 + 2 m γ_{m+5}) = Δ (1 + 2.03·10⁻³)`` with ``u = 2⁻²⁴``, ``m = 128``,
    is in :mod:`dpem_fast._engine._specs`, "Float32 rows"): the noise grows by 0.4 % at the same
    (ε, δ), and ``privacy_`` records the widened values with a note.  Under add/remove a removed
    row moves every later row to another float lane, so the rounding of the change grows with n:
    float32 rows are computed in float64 there, with the sensitivities above, and in a
    person-level fit (``max_rows_per_group``), where a replaced group may hold another number
    of rows.

    Per iteration there are 3 releases (GGG: 3 Gaussian; LLG: 2 Laplace + 1
    Gaussian) instead of the paper's 2K+1.  The accountant composes
    ``SelfComposedEvent(ComposedEvent([...3 releases]), max_iter)`` (or, with
    joint accounting, ``SelfComposedEvent(GaussianEvent(z_joint), max_iter)``,
    ``privacy_.joint_multiplier = z_joint``) and the
    noise is the smallest that meets the total (ε, δ) (``privacy_.event``
    holds this plan).  For LLG the Gaussian release is tied to the Laplace
    ε_i as in the paper, σ = √(2 ln(1.25/δ_i)) Δ/ε_i with δ_i = 1e-8.

    Without a declared domain, two Gaussian histogram releases before the
    loop estimate it (ℓ2 sensitivity √d add/remove, √(2d) replace; one count
    per feature per row) on 10 % of the plan.

    **Dead components** (post-processing).  After the last iteration, a
    component whose (tail-averaged) noisy count is at most max(1, 3σ_N), σ_N
    the public noise standard deviation of that count, is indistinguishable
    from an empty one: its mean and covariance are noise, so it is dropped
    from the released model (``n_components_`` components remain; if none
    is live the largest is kept) with a ``NoiseDominatedWarning`` when most
    or all are dead.  Under replace-one, where n is public, a fit with
    n ≤ max(1, 3σ_N) (not even all rows in one component could be told from
    noise) is refused before the budget is charged.

    Initialisation is data-independent (or the user's public parameters);
    the iteration count is fixed (no early stopping on private data).  What
    is read from the data after a release (training log-likelihood,
    clipped-row count) goes to ``diagnostics_`` only.  Every release goes
    through the engine's release layer (:mod:`dpem_fast._engine._release`);
    the M-step sees only the noisy statistics and the plan's public noise
    scales.

    Noise is drawn from ChaCha20 streams addressed by (release index,
    statistic), as floating-point Gaussian/Laplace values.

    Examples
    --------
    >>> import numpy as np
    >>> from dpem_fast import DPGaussianMixture
    >>> X = np.random.default_rng(0).normal(size=(20000, 2)).clip(-4, 4)
    >>> gm = DPGaussianMixture(2, epsilon=1.0, delta=1e-5, bounds=(-4, 4),
    ...                        random_state=0).fit(X)
    >>> gm.means_.shape
    (2, 2)
    """

    #: registry (see :mod:`dpem_fast._registry`): what leaves a fit, and the command line
    _cli_name = "gmm"
    _saved = ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_", "converged_",
              "n_iter_", "n_features_in_")

    def __init__(
        self,
        n_components=1,
        *,
        covariance_type="full",
        epsilon=1.0,
        delta=1e-5,
        max_iter=20,
        scenario="GGG",
        accountant=None,
        noise="gaussian",
        estimator="mle",
        prior=None,
        data_norm=None,
        bounds=None,
        neighbouring="replace",
        budget_split="auto",
        averaging="tail",
        weights_init=None,
        means_init=None,
        precisions_init=None,
        reg_covar=1e-6,
        n_threads=None,
        random_state=None,
        budget=None,
        verbose=0,
        max_components=10,
        max_rows_per_group=None,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.epsilon = epsilon
        self.delta = delta
        self.max_iter = max_iter
        self.scenario = scenario
        self.accountant = accountant
        self.noise = noise
        self.estimator = estimator
        self.prior = prior
        self.data_norm = data_norm
        self.bounds = bounds
        self.neighbouring = neighbouring
        self.budget_split = budget_split
        self.averaging = averaging
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.reg_covar = reg_covar
        self.n_threads = n_threads
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose
        self.max_components = max_components
        self.max_rows_per_group = max_rows_per_group

    def fit(self, X, y=None, groups=None):
        """Fit the mixture (see :meth:`PrivateEM.fit`); ``n_components="auto"``: one fit with
        ``max_components`` components, pruned (:func:`dpem_fast.model_selection.fit_auto`,
        ``strategy="prune"``)."""
        if isinstance(self.n_components, str) and self.n_components == "auto":
            from ..model_selection import fit_auto
            return fit_auto(self, "n_components", "max_components", X, strategy="prune",
                            overrides=self._auto_overrides(), groups=groups)
        return super().fit(X, y, groups)

    def _auto_overrides(self):
        """The parameters of the one fit behind ``n_components="auto"`` besides its size
        (``max_components``): the private start unless the user gave means."""
        return {"means_init": "private"} if self.means_init is None else {}

    # ------------------------------------------------------------ model hooks
    def _check_model_params(self, n_samples, n_features):
        K, d = check_positive_int(self.n_components, "n_components"), n_features
        if not isinstance(self.covariance_type, str) or self.covariance_type not in COVARIANCE_TYPES:
            raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}")
        if n_samples is not None and n_samples < K:     # None: the count is private
            raise ValueError(f"n_samples={n_samples} should be >= n_components={K}")
        if self.scenario not in ("GGG", "LLG"):
            raise ValueError(f"scenario must be 'GGG' or 'LLG', got {self.scenario!r}")
        if self.averaging not in ("tail", "none"):
            raise ValueError(f"averaging must be 'tail' or 'none', got {self.averaging!r}")
        if self.estimator not in ("mle", "map"):
            raise ValueError(f"estimator must be 'mle' or 'map', got {self.estimator!r}")
        if self.estimator == "map" and self.covariance_type not in ("full", "diag"):
            raise ValueError(f"estimator='map' supports covariance_type 'full' and 'diag' only (no prior is "
                             f"derived for {self.covariance_type!r}); use estimator='mle'")
        check_nonnegative_real(self.reg_covar, "reg_covar")
        if not (isinstance(self.budget_split, str) and self.budget_split == "auto"):
            split = np.asarray(self.budget_split, dtype=np.float64) if not isinstance(self.budget_split, str) else None
            if split is None or split.shape != (3,) or not np.all(np.isfinite(split)) or np.any(split <= 0):
                raise ValueError(f"budget_split must be 'auto' or 3 positive finite numbers, got {self.budget_split!r}")
        if self.prior is not None and not isinstance(self.prior, dict):
            raise TypeError(f"prior must be a dict or None, got {type(self.prior).__name__}")
        if self.prior is not None and set(self.prior) - PRIOR_KEYS:
            raise ValueError(f"prior has unknown keys {sorted(set(self.prior) - PRIOR_KEYS)}")
        self._check_initial_parameters(K, d)

    def _statistic_specs(self, n_features):
        """Counts, first moments and the covariance type's second moments, with the
        sensitivities of the class docstring."""
        K, d = self.n_components, n_features
        second = {"full": lambda: second_moments(SECOND, (K, d, d)),
                  "diag": lambda: diagonal_second_moments(SECOND, (K, d)),
                  "spherical": lambda: squared_norms(SECOND, K),
                  "tied": lambda: second_moments(SECOND, (d, d))}[self.covariance_type]()
        return (soft_counts(COUNTS, K), weighted_sums(FIRST, (K, d), d), second)

    def _mechanisms(self):
        if self.scenario == "GGG":
            return None
        return {COUNTS: "laplace", FIRST: "laplace", SECOND: "gaussian"}

    def _shares(self):
        return dict(zip((COUNTS, FIRST, SECOND), map(float, self._split())))

    def _split(self):
        """The budget split; ``"auto"``: ∝ √(noised coordinates) (see ``budget_split``)."""
        if isinstance(self.budget_split, str) and self.scenario == "LLG":
            return (1.0, 1.0, 1.0)
        if isinstance(self.budget_split, str):
            K, d = self.n_components, self.n_features_in_
            m2 = {"full": K * d * (d + 1) / 2, "diag": K * d, "spherical": K, "tied": d * (d + 1) / 2}
            return (math.sqrt(K), math.sqrt(K * d), math.sqrt(m2[self.covariance_type]))
        return tuple(self.budget_split)

    def _n_averaged(self, n_iter):
        return n_iter // 2 if self.averaging == "tail" else 0

    def _joint_sensitivity(self, a, neighbouring):
        """sup over neighbours of Σ_r ‖δ_r‖²/σ_r² for one iteration's three releases, given
        ``a[r] = Δ_r²/σ_r²`` (derivation in the class docstring, "Joint accounting")."""
        return moments_joint_bound(a[FIRST], a[SECOND], a[COUNTS], neighbouring=neighbouring,
                                   second=self.covariance_type)

    def _public_means(self):
        """The user's public ``means_init`` array, or None (also for ``"private"``)."""
        return None if isinstance(self.means_init, str) else self.means_init

    def _start_specs(self, n_features):
        """The private start's two releases when ``means_init="private"``."""
        if isinstance(self.means_init, str) and self.means_init == "private":
            return start_specs(self.n_components, n_features)
        return ()

    def _private_start(self, rows, layer, domain, key, n_threads):
        """The data-independent (or user-given) weights, the means from the private start
        (:func:`~dpem_fast._engine._start.private_start`; the data-independent means fill in for
        missing candidates) and, unless ``precisions_init`` is given, covariances scaled to the
        start's centres (:meth:`_start_covariances`)."""
        weights, means, covs, prec_chol = self._initial_parameters(rows.summary, domain, key, True)
        means = private_start(rows, layer, domain, key, self.n_components, means)
        if self.precisions_init is None:
            covs, prec_chol = self._start_covariances(means)
        return weights, means, covs, prec_chol

    def _typed_covariances(self, prec_chol):
        """Covariances in the type's shape (working units) from (K, d, d) precision Cholesky
        factors: full (K, d, d), diag (K, d), spherical (K,) the mean variance, tied the first."""
        covs = covariance_from_precision_cholesky(prec_chol)
        ct = self.covariance_type
        if ct == "diag":
            return np.diagonal(covs, axis1=1, axis2=2).copy()
        if ct == "spherical":
            return np.diagonal(covs, axis1=1, axis2=2).mean(axis=1)
        if ct == "tied":
            return covs[0]
        return covs

    def _start_covariances(self, means):
        """Isotropic initial covariances ``v_k I`` (working units) for the private start's means,
        ``v_k`` from :func:`start_variances` (tied: their mean).  Post-processing of the
        released centres and public d."""
        v = start_variances(means)
        if self.covariance_type == "tied":
            v = np.full(v.shape, v.mean())
        prec_chol = np.stack([np.eye(means.shape[1]) / math.sqrt(vk) for vk in v])
        covs = self._typed_covariances(prec_chol)
        return covs, prec_chol

    def _describe(self):
        init = ("private start of the means (noisy random-hyperplane cell counts and sums, 20 % of the plan)"
                if isinstance(self.means_init, str) else "user-supplied public parameters"
                if self.means_init is not None
                else "data-independent (random draw in the domain from the fit's own stream)")
        return (f"DP-EM moment perturbation (Park et al. 2017), scenario {self.scenario}, "
                f"{self.estimator.upper()} M-step"
                + ("" if self.covariance_type == "full" else f", covariance_type={self.covariance_type!r}"),
                ("initialisation: " + init,))

    def _float32_statistics(self):
        """The E-step kernels have a float32 path (every covariance type); the engine's
        :meth:`_float32_path` says where a fit may use it (row-level replace-one)."""
        return True

    def _block_rows(self, n_rows, d):
        """Rows per block of the E-step kernels (``_estep.block_count``: partials of K (d² + d + 1)
        doubles a block; ``_estep_diag``: K (2d + 1)) for a call on at most ``n_rows`` rows."""
        if not isinstance(self.n_components, (int, np.integer)):     # "auto": the default bound
            return super()._block_rows(n_rows, d)
        K = int(self.n_components)
        per = K * (d * d + d + 1) if self.covariance_type == "full" else K * (2 * d + 1)
        return _contract.max_block_rows(int(n_rows), per)

    def _statistics_task(self):
        kw = {}
        if self.covariance_type != "full":
            kw["covariance_type"] = str(self.covariance_type)
        if self._float32_path():
            kw["single"] = True
        return functools.partial(_gmm_statistics, **kw) if kw else _gmm_statistics

    def _working_domain(self, domain):
        """Spherical covariances need one scale for every feature (a spherical covariance in
        per-feature working units is not spherical in the original ones): the largest scale,
        public post-processing of the domain (every clipped row stays in the unit ball, a box's
        image shrinks to ``half-width / max scale``).  Other types: unchanged."""
        if self.covariance_type != "spherical":
            return domain
        return dataclasses.replace(domain, scale=np.full(domain.scale.shape, float(np.max(domain.scale))))

    def _update(self, noisy, params, ctx):
        if self.covariance_type == "full" and self.estimator == "mle":
            # the same M-step and factors, compiled (the serial part of an iteration; issue 26)
            return private_full_step(noisy[COUNTS], noisy[FIRST], noisy[SECOND], ctx.releases, self.reg_covar,
                                     ctx.domain)
        weights, means, covs = self._private_m_step(noisy[COUNTS], noisy[FIRST], noisy[SECOND], ctx.releases,
                                                    ctx.domain, ctx.n_public)
        return weights, means, covs, self._precision_cholesky(covs, means.shape)

    def _precision_cholesky(self, covs, shape):
        return precision_cholesky_full(covs, self.covariance_type, *shape)

    def _check_plan(self, plan, n_public, rounds):
        check_counts_resolvable(n_public, plan.releases[COUNTS], self._n_averaged(rounds), type(self).__name__)

    def _finish(self, params, noisy, ctx):
        """Drop the components whose noisy counts are indistinguishable from zero
        (:func:`~dpem_fast.mixture._common.live_components`; post-processing)."""
        live = live_components(noisy[COUNTS], ctx.releases[COUNTS], type(self).__name__,
                               choosing=getattr(self, "_choosing_k", False), n_public=ctx.n_public,
                               resolution=GAUSSIAN_MERGE_REASON)
        tied = self.covariance_type == "tied"     # one covariance for all K: estimated from all counts
        warn_if_covariances_unresolved(noisy[COUNTS] if tied else noisy[COUNTS][live], ctx.releases, ctx.domain,
                                       type(self).__name__, self.covariance_type, ctx.n_public)
        weights, means, covs, prec_chol = params
        return weights[live] / weights[live].sum(), means[live], covs if tied else covs[live], prec_chol[live]

    def _exact_update(self, stats, params):
        weights, means, covs = self._exact_m_step(stats)
        return weights, means, covs, self._precision_cholesky(covs, means.shape)

    def _set_fitted(self, params, domain, dtype):
        """Parameters back to the original units (post-processing): x = c + diag(s) z, so means
        ``c + s * mu``, covariances ``diag(s) S diag(s)`` and precision Cholesky factors
        ``diag(1/s) P`` (``P Pᵀ`` the working precision)."""
        weights, means, covs, prec_chol = params
        s = domain.scale
        self.weights_ = weights
        self.means_ = domain.to_original(means).astype(dtype, copy=False)
        ct = self.covariance_type
        # a huge or tiny (privately estimated) scale saturates to inf, as the one radius did
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if ct == "full":
                self.covariances_ = (covs * (s[:, None] * s[None, :])).astype(dtype, copy=False)
                self.precisions_cholesky_ = (prec_chol / s[None, :, None]).astype(dtype, copy=False)
                self.precisions_ = np.einsum("kij,klj->kil", self.precisions_cholesky_, self.precisions_cholesky_)
            elif ct == "tied":
                self.covariances_ = (covs * (s[:, None] * s[None, :])).astype(dtype, copy=False)
                self.precisions_cholesky_ = (prec_chol[0] / s[:, None]).astype(dtype, copy=False)
                self.precisions_ = self.precisions_cholesky_ @ self.precisions_cholesky_.T
            elif ct == "diag":
                self.covariances_ = (covs * s * s).astype(dtype, copy=False)
                self.precisions_cholesky_ = (np.diagonal(prec_chol, axis1=1, axis2=2) / s).astype(dtype, copy=False)
                self.precisions_ = self.precisions_cholesky_ ** 2
            else:   # spherical: one scale for every feature (_working_domain)
                self.covariances_ = (covs * s[0] * s[0]).astype(dtype, copy=False)
                self.precisions_cholesky_ = (prec_chol[:, 0, 0] / s[0]).astype(dtype, copy=False)
                self.precisions_ = self.precisions_cholesky_ ** 2
        self.converged_ = False

    # -------------------------------------------------------- initialisation
    def _check_initial_parameters(self, K, d):
        """Shapes, finiteness and definiteness of user-supplied (public) initial parameters."""
        if self.weights_init is not None:
            weights = np.asarray(self.weights_init, dtype=np.float64)
            if (weights.shape != (K,) or not np.all(np.isfinite(weights)) or np.any(weights < 0)
                    or not np.isclose(weights.sum(), 1.0)):
                raise ValueError("weights_init must have shape (n_components,), be >= 0 and sum to 1")
        if isinstance(self.means_init, str):
            if self.means_init != "private":
                raise ValueError(f"means_init must be None, 'private' or an array of shape ({K}, {d}), "
                                 f"got {self.means_init!r}")
        elif self.means_init is not None:
            means = np.asarray(self.means_init, dtype=np.float64)
            if means.shape != (K, d):
                raise ValueError(f"means_init must have shape ({K}, {d}), got {means.shape}")
            if not np.all(np.isfinite(means)):
                raise ValueError("means_init must be finite")
        if self.precisions_init is not None:
            prec = np.asarray(self.precisions_init, dtype=np.float64)
            shape = {"full": (K, d, d), "tied": (d, d), "diag": (K, d), "spherical": (K,)}[self.covariance_type]
            if prec.shape != shape:
                raise ValueError(f"precisions_init must have shape {shape} for covariance_type="
                                 f"{self.covariance_type!r}, got {prec.shape}")
            if self.covariance_type in ("diag", "spherical"):
                if not np.all(np.isfinite(prec)) or np.any(prec <= 0):
                    raise ValueError("precisions_init must be finite and > 0")
                return
            if not np.all(np.isfinite(prec)) or not np.allclose(prec, np.swapaxes(prec, -1, -2)):
                raise ValueError("precisions_init must be finite symmetric positive-definite matrices")
            for k, p in enumerate(prec.reshape(-1, d, d)):
                if np.linalg.eigvalsh(p).min() <= 0:
                    raise ValueError(f"precisions_init[{k}] is not positive definite" if prec.ndim == 3
                                     else "precisions_init is not positive definite")

    def _initial_parameters(self, summary, domain, key, private):
        """Initial (weights, means, covariances, precision Cholesky factors) in working units.

        Private mode works in the unit ball of the domain; ``summary`` then holds only the
        shape.  The non-private mode works in the original units; without user-supplied
        parameters it starts from the same kind of random draw, placed in the data's
        bounding box (``summary.column_min`` / ``column_max``: reading the data is allowed
        there) mapped per feature as a declared box would be.  The draw: means uniform in
        the ball of radius 1/2 of that geometry, moved into the box's image
        (:func:`~dpem_fast._preprocess.project_into_domain`), covariances ``I / (4 d)`` in
        its units (``diag(s_i²) / (4 d)`` in the original units).
        """
        K, d = self.n_components, summary.n_features
        if not private and (self._public_means() is None or self.precisions_init is None):
            lo, hi = summary.column_min, summary.column_max
            hi = np.where(hi > lo, hi, lo + 1.0)
            init_dom = box_domain(lo, hi)
        else:
            init_dom = domain
        if self.weights_init is not None:
            weights = np.asarray(self.weights_init, dtype=np.float64)
        else:
            weights = np.full(K, 1.0 / K)
        if self._public_means() is not None:
            means = domain.to_scaled(self.means_init)
        else:
            means = project_into_domain(self._random_means(K, d, key), init_dom)
            if init_dom is not domain:
                means = domain.to_scaled(init_dom.to_original(means))
        ct = self.covariance_type
        if self.precisions_init is not None:
            prec = np.asarray(self.precisions_init, dtype=np.float64)
            s = domain.scale
            if ct in ("full", "tied"):
                ss = np.outer(s, s)
                prec = np.broadcast_to(prec, (K, d, d))
                prec_chol = np.stack([linalg.cholesky(prec[k] * ss, lower=True) for k in range(K)])
            else:   # scikit-learn's diag / spherical precisions: 1 / variances
                var_inv = prec * s * s if ct == "diag" else prec * s[0] * s[0]
                prec_chol = full_covariances(np.sqrt(var_inv), ct, K, d)
        else:
            ratio = domain.scale / init_dom.scale       # maps the init geometry -> working units
            diag = math.sqrt(4.0 * d) * ratio
            if ct == "spherical":      # one variance: the mean of the per-feature ones
                diag = np.full(d, 1.0 / math.sqrt(np.mean(1.0 / diag ** 2)))
            prec_chol = np.broadcast_to(np.diag(diag), (K, d, d)).copy()
        covs = self._typed_covariances(prec_chol)
        return weights, means, covs, prec_chol

    @staticmethod
    def _random_means(K, d, key):
        """K points uniform in the ball of radius 1/2 (data-independent).

        The directions and the radii are separate draws, each from its own derived key
        (a draw of n values uses streams 0 .. n / SAMPLER_BLOCK of its key, so two draws
        must never share a key).
        """
        g = np.empty(K * d)
        _core_rng.fill_normal(derive_key(key, "init", "means"), 0, 1.0, g, 1)
        u = np.empty(K)
        _core_rng.fill_uniform(derive_key(key, "init", "radii"), 0, u, 1)
        g = g.reshape(K, d)
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        return 0.5 * g * u[:, None] ** (1.0 / d)

    # --------------------------------------------------------------- M-steps
    def _private_m_step(self, nk, s1, s2, releases, domain=None, n_public=None):
        """Parameters from noisy statistics: MLE or MAP (:mod:`dpem_fast.mixture._gmm_mstep`),
        means moved into the image of ``domain`` (its box, else the unit ball)."""
        prior = map_prior(self.prior, s1.shape[1]) if self.estimator == "map" else None
        return private_m_step(nk, s1, s2, releases, self.reg_covar, prior, domain, self.covariance_type, n_public)

    def _exact_m_step(self, stats):
        """Non-private M-step, numerically as scikit-learn's (Eq. 11)."""
        return exact_m_step(stats, self.reg_covar, self.covariance_type)

    # ------------------------------------------------------------- inference
    def _log_resp(self, X):
        X = self._check_X(X)
        means = np.asarray(self.means_, dtype=np.float64)
        ct = getattr(self, "covariance_type", "full")
        if ct in ("diag", "spherical"):   # the diagonal kernel, O(n K d)
            prec = np.asarray(self.precisions_cholesky_, dtype=np.float64)
            prec = np.broadcast_to(prec[:, None] if ct == "spherical" else prec, means.shape)
            return predict_log_resp_diag(X, self.weights_, means, prec, n_threads=effective_n_threads(self.n_threads))
        # the full kernel takes (K, d, d) factors: a tied factor expanded (inference only)
        prec_chol = full_covariances(np.asarray(self.precisions_cholesky_, dtype=np.float64), ct, *means.shape)
        return predict_log_resp(X, self.weights_, means, prec_chol, n_threads=effective_n_threads(self.n_threads))

    def sample(self, n_samples=1, *, shuffle=True, random_state=None):
        """Synthetic data from the fitted (private) model: post-processing, no extra privacy cost.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features), or a pandas DataFrame with the fitted
            column names when the model was fitted on a DataFrame
        y : ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "means_")
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = np.random.default_rng(random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        ct = getattr(self, "covariance_type", "full")
        if ct in ("full", "tied"):
            covs = self.covariances_ if ct == "full" else [self.covariances_] * len(counts)
            X = np.vstack([rng.multivariate_normal(m, c, size=int(k)) for m, c, k in zip(self.means_, covs, counts)])
        else:   # independent coordinates (scikit-learn's sampling for diag / spherical)
            sd = np.sqrt(self.covariances_)
            X = np.vstack([m + rng.standard_normal((int(k), m.size)) * s
                           for m, s, k in zip(self.means_, sd, counts)])
        y = np.repeat(np.arange(self.n_components_), counts)
        if shuffle:
            perm = rng.permutation(n_samples)
            X, y = X[perm], y[perm]
        return as_frame(self, X), y

    def _n_parameters(self):
        K, d = self.means_.shape
        cov = {"full": K * d * (d + 1) / 2, "diag": K * d, "tied": d * (d + 1) / 2,
               "spherical": K}[getattr(self, "covariance_type", "full")]
        return int(cov + K * d + K - 1)

    def bic(self, X):
        """Bayesian information criterion on X (lower is better)."""
        X = self._check_X(X)
        return -2 * self.score(X) * X.shape[0] + self._n_parameters() * np.log(X.shape[0])

    def aic(self, X):
        """Akaike information criterion on X (lower is better)."""
        X = self._check_X(X)
        return -2 * self.score(X) * X.shape[0] + 2 * self._n_parameters()
