"""dpem_fast: fast, exact and accounted differentially private EM on multicore CPUs."""
__version__ = "0.1.0.dev0"

from . import random  # noqa: E402
from ._config import show_config  # noqa: E402

__all__ = ["random", "show_config", "__version__"]
