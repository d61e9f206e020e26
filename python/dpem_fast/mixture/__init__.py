"""Private Gaussian mixtures."""
from ._dp_gmm import DPGaussianMixture
from ._paper import dpem_plan

__all__ = ["DPGaussianMixture", "dpem_plan"]
