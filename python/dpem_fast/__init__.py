"""dpem_fast: fast, exact and accounted differentially private EM on multicore CPUs."""
from ._version import __version__

# importing the subpackages registers their models
from . import accounting, cluster, decomposition, io, mixture, model_selection, random  # noqa: E402,F401
from . import audit  # noqa: E402,F401  (above the models: imported after them)
from ._config import show_config  # noqa: E402
from ._engine._release import observe_releases  # noqa: E402
from ._engine._report import privacy_report  # noqa: E402
from ._persist import ModelFormatError, load  # noqa: E402
from ._registry import estimators as _estimators  # noqa: E402
from .synth import synth_report  # noqa: E402
from .accounting import (BudgetExceededError, DomainCoverageWarning, LargeDeltaWarning,  # noqa: E402
                         NoiseDominatedWarning, PrivacyLeakWarning)

# every registered estimator by its class name (a model registers when its subpackage imports it)
globals().update(_estimators())

def get_include():
    """Directory of the installed C headers (``dpc_rng.h``, ``dpc_dgauss.h``, ...) that the
    Cython declarations ``dpem_fast._dpcore._rng`` / ``dpc_dgauss`` refer to: add it to the
    C include path of a package that ``cimport``s them (``examples/cimport_consumer``).
    In an editable (development) install the headers are the source tree's ``src/dpcore``."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "_dpcore")
    if os.path.exists(os.path.join(installed, "dpc_rng.h")):
        return installed
    return os.path.join(os.path.dirname(os.path.dirname(here)), "src", "dpcore")


__all__ = [
    *_estimators(),
    "decomposition",
    "PrivacyLeakWarning",
    "NoiseDominatedWarning",
    "DomainCoverageWarning",
    "LargeDeltaWarning",
    "BudgetExceededError",
    "accounting",
    "audit",
    "cluster",
    "io",
    "model_selection",
    "random",
    "show_config",
    "observe_releases",
    "privacy_report",
    "synth_report",
    "get_include",
    "load",
    "ModelFormatError",
    "__version__",
]
