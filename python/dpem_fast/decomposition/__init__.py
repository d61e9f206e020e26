"""Private matrix decompositions and topic models."""
from ._dp_fa import DPFactorAnalysis
from ._dp_lda import DPLatentDirichletAllocation

__all__ = ["DPFactorAnalysis", "DPLatentDirichletAllocation"]
