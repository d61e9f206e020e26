"""Private model selection: choose among candidate models within one accounted (ε, δ)."""
from ._selection import PrivateModelSelection, auto_mean, fit_auto, select_size

__all__ = ["PrivateModelSelection", "select_size", "fit_auto", "auto_mean"]
