"""scikit-learn's own estimator checks (``check_estimator``) on every hkern.sklearn estimator.

The few checks an estimator fails for a stated reason are listed, with the reason, by its
``_expected_failed_checks`` (read through the ``_xfail_checks`` tag before scikit-learn 1.6).
"""
import inspect

import sklearn
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn_cases import check_instances

# scikit-learn 1.6 moved expected failures from a tag to an argument.
if "expected_failed_checks" in inspect.signature(parametrize_with_checks).parameters:
    checks = parametrize_with_checks(
        check_instances(), expected_failed_checks=lambda est: est._expected_failed_checks())
else:
    checks = parametrize_with_checks(check_instances())


@checks
def test_sklearn_check(estimator, check):
    check(estimator)


def test_a_supported_scikit_learn():
    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    assert (major, minor) >= (1, 3)
