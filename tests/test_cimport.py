"""The installed .pxd files work for Cython code outside hkern.

A tiny extension that cimports ``hkern.kernels._kernels`` (kernel_pair, the KernelKind enum),
``hkern._linalg`` (gemm) and ``hkern.hierarchical._hck`` (HCKOperator's nogil solve/matvec) is
compiled with Cython + setuptools in a temporary directory, with only
the directory *containing* the hkern package on the Cython include path: no hkern header (in
particular not hkern/kernels/_kernel_defs.h) is handed to the C compiler.  Its results are
compared with NumPy.
"""
import numpy as np
import pytest
from cython_probe import build_probe, drop_probe
from numpy.testing import assert_allclose
from oracles import dense_kernel

import hkern

pytest.importorskip("Cython")
pytest.importorskip("setuptools")

MODULE = "hkern_cimport_probe"

PYX = r'''
# cython: language_level=3
from hkern.kernels._kernels cimport kernel_pair, GAUSSIAN, LAPLACE, MATERN52
from hkern._linalg cimport gemm
from hkern.hierarchical._hck cimport HCKOperator


def hck_apply(HCKOperator op, double[:, ::1] B, double[:, ::1] Y, bint inverse):
    """Y = A^{-1} B or A B through the HCK operator's nogil entry points."""
    cdef int status
    with nogil:
        if inverse:
            status = op.solve_into(&B[0, 0], &Y[0, 0], B.shape[1], 1)
        else:
            status = op.matvec_into(&B[0, 0], &Y[0, 0], B.shape[1], 1)
    return status


def gaussian_pair(double x0, double x1, double y0, double y1, double sigma):
    """k(x, y) for two 2-D points, computed without the GIL."""
    cdef double x[2]
    cdef double y[2]
    cdef double out
    x[0] = x0; x[1] = x1
    y[0] = y0; y[1] = y1
    with nogil:
        out = kernel_pair(GAUSSIAN, x, y, 2, sigma)
    return out


def pair(int kind, double[::1] x, double[::1] y, double sigma):
    """k(x, y) for any kind and dimension, computed without the GIL."""
    cdef double out
    with nogil:
        out = kernel_pair(kind, &x[0], &y[0], x.shape[0], sigma)
    return out


def kinds():
    return GAUSSIAN, LAPLACE, MATERN52


def matmul(double[:, ::1] A, double[:, ::1] B, double[:, ::1] C):
    """C = A @ B through hkern's row-major gemm, without the GIL."""
    with nogil:
        gemm(False, False, A.shape[0], B.shape[1], A.shape[1], 1.0, &A[0, 0], A.shape[1],
             &B[0, 0], B.shape[1], 0.0, &C[0, 0], C.shape[1])


def matmul_tn(double[:, ::1] A, double[:, ::1] B, double[:, ::1] C):
    """C = A^T @ B through gemm(trans_a=True)."""
    with nogil:
        gemm(True, False, A.shape[1], B.shape[1], A.shape[0], 1.0, &A[0, 0], A.shape[1],
             &B[0, 0], B.shape[1], 0.0, &C[0, 0], C.shape[1])
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """Compile the outside module once per test session and import it from its build dir."""
    module, c_source = build_probe(tmp_path_factory.mktemp("cimport"), MODULE, PYX)
    # Outside code must not depend on hkern's private C header.
    assert "_kernel_defs.h" not in c_source
    yield module
    drop_probe(MODULE)


def test_kernel_pair_gaussian(probe):
    got = probe.gaussian_pair(0.5, -1.0, 2.0, 0.25, 1.5)
    ref = dense_kernel([[0.5, -1.0]], [[2.0, 0.25]], sigma=1.5)[0, 0]
    assert_allclose(got, ref, rtol=1e-14, atol=0)
    assert probe.gaussian_pair(0.3, 0.7, 0.3, 0.7, 0.1) == 1.0


def test_kernel_pair_matches_kernel_matrix(probe):
    """The cimported enum values and kernel_pair agree with the Python API."""
    gaussian, laplace, matern52 = probe.kinds()
    assert (gaussian, laplace, matern52) == (
        hkern.kernels.KERNELS["gaussian"], hkern.kernels.KERNELS["laplace"],
        hkern.kernels.KERNELS["matern52"])
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=5), rng.normal(size=5)
    for name, kind in hkern.kernels.KERNELS.items():
        got = probe.pair(kind, x, y, 1.3)
        ref = hkern.kernel_matrix(x[None, :], y[None, :], kernel=name, sigma=1.3)[0, 0]
        assert_allclose(got, ref, rtol=1e-13, atol=0, err_msg=name)
        definition = dense_kernel(x[None, :], y[None, :], kernel=name, sigma=1.3)[0, 0]
        assert_allclose(got, definition, rtol=1e-13, atol=0, err_msg=name)
    ref = dense_kernel(x[None, :], y[None, :], kernel="laplace", sigma=1.3)[0, 0]
    assert_allclose(probe.pair(laplace, x, y, 1.3), ref, rtol=1e-14, atol=0)


def test_gemm(probe):
    A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    B = np.array([[1.0, -1.0], [0.5, 2.0], [-3.0, 0.25]])
    C = np.full((2, 2), np.nan)
    probe.matmul(A, B, C)
    assert_allclose(C, A @ B, rtol=1e-15, atol=0)

    rng = np.random.default_rng(8)
    A, B = rng.normal(size=(4, 3)), rng.normal(size=(4, 5))
    C = np.full((3, 5), np.nan)
    probe.matmul_tn(A, B, C)
    assert_allclose(C, A.T @ B, rtol=1e-13, atol=0)


@pytest.mark.parametrize("inverse", [True, False])
def test_hck_nogil_solve_and_matvec(probe, inverse):
    """Outside Cython code calls the HCK operator's nogil solve/matvec on tree-ordered arrays."""
    from hkern._threads import blas_threads
    rng = np.random.default_rng(0)
    X = rng.normal(size=(700, 3))
    model = hkern.fit_hierarchical(X, np.sin(X[:, 0]), r=32, sigma=0.8, lam=1e-2, seed=0)
    op = model._op
    B = rng.standard_normal((700, 2))
    Y = np.empty_like(B)
    with blas_threads(1):
        assert probe.hck_apply(op, B, Y, inverse) == 0
    expected = op.solve(B) if inverse else op.matvec(B)
    np.testing.assert_array_equal(Y, expected)
