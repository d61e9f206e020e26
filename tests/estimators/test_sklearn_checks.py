"""scikit-learn's estimator checks on the private estimator (and the non-private mode).

No check needs an exception: a fixed ``random_state`` makes the randomised
private fit deterministic, a declared ``data_norm`` avoids the data-derived
bound (and its PrivacyLeakWarning), and the fixed iteration count never warns.
"""
from sklearn.utils.estimator_checks import parametrize_with_checks

from dpem_fast import DPGaussianMixture


@parametrize_with_checks(
    [
        DPGaussianMixture(2, epsilon=1.0, data_norm=50.0, max_iter=3, random_state=0),
        DPGaussianMixture(2, epsilon=float("inf"), max_iter=3, random_state=0),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
