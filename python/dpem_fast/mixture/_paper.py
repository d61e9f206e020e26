"""The DP-EM paper's privacy plan for Gaussian mixtures (Park et al. 2017).

Kept apart from :mod:`dpem_fast.accounting`, which knows mechanisms, not
models: this plan is the paper's 2K + 1 releases per iteration, whose
count the accounting noise table composes (``python -m dpem_fast.accounting``;
its tests check the table is this plan's) and the reference for a
paper-faithful baseline.  :class:`DPGaussianMixture`
itself releases three joint statistics per iteration instead.
"""
from ..accounting import (ComposedEvent, GaussianEvent, LaplaceEvent,
                          SelfComposedEvent)
from ..accounting._dp_composition import classic_gaussian_epsilon
from ..accounting._validation import (check_choice, check_int,
                                      check_open_unit, check_positive)

__all__ = ["dpem_plan"]


def dpem_plan(scenario, n_components, n_iter, parameter=1.0, *,
              delta_per_release=1e-8):
    """Composed event of DP-EM for a mixture of Gaussians (Park et al. 2017, Sec. 4-5).

    Parameters
    ----------
    scenario : {"GGG", "LLG"}
        ``"GGG"``: Gaussian mechanism for mixing weights (once), means and
        covariances (K times each) per iteration: ``J (2K + 1)`` Gaussian
        releases, each with noise multiplier ``parameter`` relative to its
        own sensitivity (Eq. 12, 14, 17).  ``"LLG"``: Laplace with
        ``eps_i = parameter`` for weights and means (``J (K + 1)``
        releases) and ``J K`` Gaussian releases for covariances calibrated
        by the paper's ``sigma = sqrt(2 log(1.25/delta_i)) Delta / eps_i``,
        i.e. noise multiplier ``sqrt(2 log(1.25/delta_i)) / eps_i``.
    n_components : int
        K.
    n_iter : int
        J.
    parameter : float
        Noise multiplier (GGG) or per-release epsilon (LLG).
    delta_per_release : float
        delta_i of the LLG covariance releases (paper: 1e-6 or 1e-8).

    Returns
    -------
    ComposedEvent
    """
    scenario = check_choice("scenario", scenario, ("GGG", "LLG"))
    k = check_int("n_components", n_components)
    j = check_int("n_iter", n_iter)
    parameter = check_positive("parameter", parameter)
    if scenario == "GGG":
        g = GaussianEvent(parameter)
        one_iter = ComposedEvent([g, SelfComposedEvent(g, k),
                                  SelfComposedEvent(g, k)])
    else:
        d = check_open_unit("delta_per_release", delta_per_release)
        lap = LaplaceEvent(parameter)
        gauss = GaussianEvent(classic_gaussian_epsilon(1.0, d) / parameter)
        one_iter = ComposedEvent([lap, SelfComposedEvent(lap, k),
                                  SelfComposedEvent(gauss, k)])
    return ComposedEvent([SelfComposedEvent(one_iter, j)])
