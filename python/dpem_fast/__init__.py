"""dpem_fast: fast, exact and accounted differentially private EM on multicore CPUs."""
__version__ = "0.1.0.dev0"

from . import accounting, cluster, decomposition, io, random  # noqa: E402
from ._config import show_config  # noqa: E402
from ._persist import ModelFormatError, load  # noqa: E402
from .accounting import BudgetExceededError, PrivacyLeakWarning  # noqa: E402
from .cluster import DPKMeans  # noqa: E402
from .decomposition import DPFactorAnalysis, DPLatentDirichletAllocation  # noqa: E402
from .mixture import DPBernoulliMixture, DPGaussianMixture, DPGradientEM, DPStochasticEP  # noqa: E402

__all__ = [
    "DPGaussianMixture",
    "DPBernoulliMixture",
    "DPStochasticEP",
    "DPKMeans",
    "DPFactorAnalysis",
    "DPGradientEM",
    "DPLatentDirichletAllocation",
    "decomposition",
    "PrivacyLeakWarning",
    "BudgetExceededError",
    "accounting",
    "cluster",
    "io",
    "random",
    "show_config",
    "load",
    "ModelFormatError",
    "__version__",
]
