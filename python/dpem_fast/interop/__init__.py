"""A backend other DP libraries can use (issue 38).

Every private fit (and every plan before one) as Google's dp-accounting events
(:mod:`dpem_fast.interop.dp_accounting`), and every private estimator as an OpenDP measurement
(:mod:`dpem_fast.interop.opendp`).  Both libraries are optional:
``pip install "dpem_fast[interop]"`` (dp-accounting 0.6.0, OpenDP 0.16.0); they are imported
only when a function here is called.  The how-to: :doc:`/interop`.
"""
from .dp_accounting import make_accountant, neighboring_relation, to_dp_event
from .opendp import make_measurement

__all__ = ["to_dp_event", "neighboring_relation", "make_accountant", "make_measurement"]
