"""The private-EM engine shared by every estimator (see :mod:`dpem_fast._engine._base`)."""
from ._base import PrivateEM
from ._estimator import Context, PrivateEstimator
from ._loops import PrivateRun
from ._domain import DOMAIN_SHARE, domain_specs, estimate_domain
from ._plan import EventRelease, Plan, make_event_plan, make_plan
from ._path import build_record, chain_record, charge
from ._record import NOT_PRIVATE, PrivacyRecord, Release
from ._release import ReleaseLayer, add_noise, release_key
from ._statistics import StatSpec, Statistics

__all__ = [
    "PrivateEM", "PrivateEstimator", "Context", "PrivateRun", "StatSpec", "Statistics", "Plan", "make_plan", "EventRelease", "make_event_plan", "charge", "build_record", "chain_record", "ReleaseLayer", "add_noise",
    "release_key", "Release", "PrivacyRecord", "NOT_PRIVATE", "DOMAIN_SHARE", "domain_specs",
    "estimate_domain",
]
