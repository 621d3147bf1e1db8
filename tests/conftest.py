"""Shared fixtures.  The tests import the *installed* hkern (see pyproject's pytest options)."""
import os

import numpy as np
import pytest


def pytest_collection_modifyitems(config, items):
    """scikit-learn's array-API dispatch checks can only run where SCIPY_ARRAY_API=1 was set
    before SciPy was imported; elsewhere they would skip.  test_sklearn_checks runs them in a
    fresh interpreter with it set, so here they are deselected rather than reported skipped."""
    if os.environ.get("SCIPY_ARRAY_API") == "1":
        return
    dispatch = [item for item in items
                if item.originalname == "test_sklearn_check" and "check_array_api" in item.name]
    if dispatch:
        config.hook.pytest_deselected(items=dispatch)
        chosen = set(dispatch)
        items[:] = [item for item in items if item not in chosen]


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="module")
def single_threaded_reference_blas():
    """Run the NumPy/SciPy references on one BLAS thread: threaded OpenBLAS spin-waits, and on a
    busy 2-core machine a 600 x 600 numpy.linalg.cholesky then takes a second instead of ms.
    (hkern's own routines set their BLAS thread counts themselves.)  A module opts in with
    ``pytestmark = pytest.mark.usefixtures("single_threaded_reference_blas")``."""
    import scipy.linalg  # noqa: F401  (load SciPy's BLAS before threadpoolctl scans)
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield
