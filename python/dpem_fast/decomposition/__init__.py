"""Private matrix decompositions and topic models."""
from ._dp_fa import DPFactorAnalysis
from ._dp_pca import DPPCA
from ._dp_lda import DPLatentDirichletAllocation
from ._dp_unigram import PrivateUnigram, private_unigram

__all__ = ["DPFactorAnalysis", "DPPCA", "DPLatentDirichletAllocation", "PrivateUnigram", "private_unigram"]
