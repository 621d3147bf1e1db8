"""Shared fixtures.  The tests import the *installed* hkern (see pyproject's pytest options)."""
import numpy as np
import pytest


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
