"""scikit-learn's own estimator checks (``check_estimator``) on every hkern.sklearn estimator.

The few checks an estimator fails for a stated reason are listed, with the reason, by its
``_expected_failed_checks`` (read through the ``_xfail_checks`` tag before scikit-learn 1.6).
"""
import inspect
import os

import sklearn
from fresh_python import run_python
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn_cases import ESTIMATORS, check_instances

# scikit-learn 1.6 moved expected failures from a tag to an argument.
if "expected_failed_checks" in inspect.signature(parametrize_with_checks).parameters:
    checks = parametrize_with_checks(
        check_instances(), expected_failed_checks=lambda est: est._expected_failed_checks())
else:
    checks = parametrize_with_checks(check_instances())


@checks
def test_sklearn_check(estimator, check):
    check(estimator)


# With their defaults, as a new user constructs them (issue 33: the default r exceeded the
# checks' 10 to 200 samples; r above n is now reduced with a warning, as scikit-learn's Nystroem
# reduces n_components).  GP-GRIEF too: with r reduced to n its default fit takes about 0.1 s
# on the checks' data, where its 1000 basis functions made them take minutes.
DEFAULTS = [cls() for cls in ESTIMATORS]
if "expected_failed_checks" in inspect.signature(parametrize_with_checks).parameters:
    defaults_checks = parametrize_with_checks(
        DEFAULTS, expected_failed_checks=lambda est: est._expected_failed_checks())
else:
    defaults_checks = parametrize_with_checks(DEFAULTS)


@defaults_checks
def test_sklearn_check_with_defaults(estimator, check):
    check(estimator)


def test_a_supported_scikit_learn():
    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    assert (major, minor) >= (1, 3)


def test_dispatch_checks_in_a_process_with_scipy_array_api():
    """Recent scikit-learn checks that array API dispatch with NumPy inputs changes no result,
    but only where SCIPY_ARRAY_API=1 was set before SciPy was imported; in this process those
    checks skip.  They run here in a fresh interpreter with it set (none are selected, exit
    code 5, on the versions without them)."""
    out = run_python(f"""
        import sys, pytest
        sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", {os.path.basename(__file__)!r},
                              "-k", "check_array_api"]))
    """, env={"SCIPY_ARRAY_API": "1"}, timeout=600)
    assert out.returncode in (0, 5), out.stdout + out.stderr
    assert "skipped" not in out.stdout and "failed" not in out.stdout, out.stdout
