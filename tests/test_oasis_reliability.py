"""oASIS and the column selectors on hard inputs (issue 16): read-only and memory-mapped
arrays (defect 6)."""

import numpy as np
import pytest

import hkern

METHODS = ("oasis", "greedy", "rpcholesky", "uniform")
ATTRS = ("indices", "C", "W_inv", "scores", "F")


def assert_same(a, b):
    for attr in ATTRS:
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(3).normal(size=(300, 3))


@pytest.fixture(scope="module")
def gram(points):
    return hkern.kernel_matrix(points, sigma=0.7)


# ------------------------------------------------------------------ read-only inputs (defect 6)


def read_only(a):
    a = a.copy()
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("method", METHODS)
def test_memory_mapped_points(tmp_path, points, method):
    """BUG (issue 16, defect 6): np.load(..., mmap_mode="r") X gave "buffer source array is
    read-only" in the compiled core (oasis, greedy, rpcholesky)."""
    np.save(tmp_path / "X.npy", points)
    X = np.load(tmp_path / "X.npy", mmap_mode="r")
    ref = hkern.select_columns(points, 25, method=method, sigma=0.7, seed=1)
    assert_same(hkern.select_columns(X, 25, method=method, sigma=0.7, seed=1), ref)
    assert_same(hkern.select_columns(read_only(points), 25, method=method, sigma=0.7, seed=1),
                ref)


@pytest.mark.parametrize("method", METHODS)
def test_memory_mapped_precomputed(tmp_path, gram, method):
    np.save(tmp_path / "G.npy", gram)
    G = np.load(tmp_path / "G.npy", mmap_mode="r")
    ref = hkern.select_columns(gram, 25, method=method, kernel="precomputed", seed=1)
    assert_same(hkern.select_columns(G, 25, method=method, kernel="precomputed", seed=1), ref)
    assert_same(hkern.select_columns(read_only(gram), 25, method=method, kernel="precomputed",
                                     seed=1), ref)


def test_read_only_one_by_one_precomputed():
    """n = 1: the diagonal of a 1 x 1 read-only matrix is itself contiguous and read-only."""
    sel = hkern.select_columns(read_only(np.array([[4.0]])), 1, method="greedy",
                               kernel="precomputed")
    assert sel.indices.tolist() == [0] and sel.W_inv.tolist() == [[0.25]]


def test_read_only_non_contiguous_and_float32(points):
    ref = hkern.oasis(points, 20, sigma=0.7, seed=2)
    wide = np.zeros((300, 6))
    wide[:, ::2] = points
    strided = read_only(wide)[:, ::2]
    assert_same(hkern.oasis(strided, 20, sigma=0.7, seed=2), ref)
    f32 = read_only(points.astype(np.float32))
    sel = hkern.oasis(f32, 20, sigma=0.7, seed=2)
    assert_same(sel, hkern.oasis(f32.astype(np.float64), 20, sigma=0.7, seed=2))


def test_read_only_points_in_oasis_mpi(points):
    """oASIS-P in one process (no mpiexec) reads its block of rows through the same core."""
    pytest.importorskip("mpi4py", reason="oASIS-P needs the optional extra hkern[mpi]")
    from hkern.oasis.parallel import oasis_mpi
    assert_same(oasis_mpi(read_only(points), 20, sigma=0.7, seed=2),
                hkern.oasis(points, 20, sigma=0.7, seed=2))
