"""Issue 31's bugs, each against its reference: the exact message's key phrase, a dense
computation, or the fit at known-good settings.  (Items on SLKL's scale are in
tests/test_slkl_reliability.py and tests/test_scale_equivariance.py.)
"""
import numpy as np
import pytest

import hkern


@pytest.fixture(scope="module")
def issue_data():
    """The issue's P: n = 60, d = 3."""
    r = np.random.default_rng(0)
    X = r.normal(size=(60, 3))
    y = np.sin(X[:, 0]) + 0.1 * r.normal(size=60)
    return X, y


# ------------------------------------------------------------- bug 2: comm not a communicator

NOT_COMMUNICATORS = ["world", 3, object()]


@pytest.mark.parametrize("comm", NOT_COMMUNICATORS, ids=["str", "int", "object"])
@pytest.mark.parametrize("fit", ["hierarchical", "nystrom_pcg", "oasis_mpi"])
def test_comm_must_be_a_communicator(issue_data, fit, comm):
    """fit_hierarchical(X, y, 8, comm="world") raised AttributeError: 'str' object has no
    attribute 'Get_size'.  Every comm that is not an mpi4py communicator (nor None) is a
    ValueError naming comm."""
    pytest.importorskip("mpi4py")
    from hkern.oasis.parallel import oasis_mpi
    X, y = issue_data
    calls = {
        "hierarchical": lambda: hkern.fit_hierarchical(X, y, 8, comm=comm),
        "nystrom_pcg": lambda: hkern.fit_nystrom(X, y, 8, solver="pcg", comm=comm),
        "oasis_mpi": lambda: oasis_mpi(X, 5, comm=comm),
    }
    with pytest.raises(ValueError, match="comm must be an mpi4py intracommunicator, got "
                                         + type(comm).__name__):
        calls[fit]()


def test_comm_null_is_refused(issue_data):
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    X, y = issue_data
    null = MPI.COMM_SELF.Split(MPI.UNDEFINED)          # what a rank outside a split receives
    assert null == MPI.COMM_NULL
    with pytest.raises(ValueError, match="comm is MPI.COMM_NULL"):
        hkern.fit_hierarchical(X, y, 8, comm=null)


def test_comm_self_still_fits(issue_data):
    """A real communicator passes the check: COMM_SELF gives the serial fit."""
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    X, y = issue_data
    ref = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0)
    model = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0, comm=MPI.COMM_SELF)
    assert np.array_equal(model.predict(X), ref.predict(X))


# ------------------------------------------------------------- bug 3: kernel_pca on shards

def test_kernel_pca_on_shards_says_it_is_not_available(issue_data):
    """ShardedHierarchicalKRR.kernel_pca raised AttributeError; now NotImplementedError saying
    it is not available on shards and what to do, for any arguments.  The serial fit of the
    same data (what the message points to) has it and agrees with the dense reference."""
    pytest.importorskip("mpi4py")
    from mpi4py import MPI
    X, y = issue_data
    sharded = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0, comm=MPI.COMM_SELF)
    for args in [(), (3,), (3, 1), ("bad",)]:
        with pytest.raises(NotImplementedError,
                           match="kernel_pca is not available on a model fitted on shards.*"
                                 "fit there without comm"):
            sharded.kernel_pca(*args)
    serial = hkern.fit_hierarchical(X, y, 8, sigma=1.0, seed=0)
    values, _ = serial.kernel_pca(3)
    n = len(y)
    K = serial.matvec(np.eye(n)) - serial.lam * np.eye(n)
    C = np.eye(n) - 1.0 / n
    ref = np.linalg.eigvalsh(C @ K @ C)[::-1][:3]
    assert np.allclose(values, ref, rtol=1e-8, atol=1e-10 * ref[0])
