"""Private mixture models on the private-EM engine, and the DP-EM paper's own plan."""
from ._dp_bernoulli import DPBernoulliMixture
from ._dg_em import DPGradientEM
from ._dp_gmm import DPGaussianMixture
from ._dp_mixed import DPMixedMixture
from ._dp_poisson import DPPoissonMixture
from ._dp_sep import DPStochasticEP
from ._paper import dpem_plan

__all__ = ["DPGaussianMixture", "DPMixedMixture", "DPBernoulliMixture", "DPPoissonMixture", "DPGradientEM", "DPStochasticEP", "dpem_plan"]
