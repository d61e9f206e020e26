"""Private matrix decompositions on the private-EM engine."""
from ._dp_fa import DPFactorAnalysis

__all__ = ["DPFactorAnalysis"]
