"""dpem_fast: fast, exact and accounted differentially private EM on multicore CPUs."""
__version__ = "0.1.0.dev0"

from . import accounting, io, random  # noqa: E402
from ._config import show_config  # noqa: E402
from .accounting import BudgetExceededError, PrivacyLeakWarning  # noqa: E402
from .mixture import DPBernoulliMixture, DPGaussianMixture  # noqa: E402
from .decomposition import DPFactorAnalysis  # noqa: E402
from . import decomposition  # noqa: E402

__all__ = [
    "DPGaussianMixture",
    "DPBernoulliMixture",
    "DPFactorAnalysis",
    "decomposition",
    "PrivacyLeakWarning",
    "BudgetExceededError",
    "accounting",
    "io",
    "random",
    "show_config",
    "__version__",
]
