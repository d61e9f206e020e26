"""An empirical privacy audit: statistically valid lower bounds on ε (issue 25).

:func:`audit` runs an estimator's real release path on a neighbouring pair with a canary at
the domain's boundary and turns the two output distributions into a lower bound on ε at the
estimator's δ.  A lower bound is evidence, not a proof: a bound below the claim does not show
the fit is private; a bound above it (at the stated confidence) shows it is not.
"""
from ._audit import AuditResult, audit
from ._bounds import gdp_epsilon, gdp_lower_bound, threshold_lower_bound

__all__ = ["AuditResult", "audit", "gdp_epsilon", "gdp_lower_bound", "threshold_lower_bound"]
