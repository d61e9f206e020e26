"""Private Gaussian mixtures."""
from ._dp_gmm import DPGaussianMixture

__all__ = ["DPGaussianMixture"]
