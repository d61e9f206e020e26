"""Private mixture models on the private-EM engine."""
from ._dp_bernoulli import DPBernoulliMixture
from ._dp_gmm import DPGaussianMixture

__all__ = ["DPGaussianMixture", "DPBernoulliMixture"]
