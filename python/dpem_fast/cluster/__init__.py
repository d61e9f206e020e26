"""Private clustering on the private-EM engine: k-means (DP-EM's and DPLloyd) and its NICV metric."""
from ._dp_kmeans import DPKMeans
from .._kernels.kmeans import nicv

__all__ = ["DPKMeans", "nicv"]
