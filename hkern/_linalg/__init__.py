"""hkern's linear algebra over SciPy's BLAS and LAPACK, one job per module.

- ``interrupt``: prompt Ctrl-C for hkern's own long loops (the ``Interrupt`` the cores poll).
- ``shim``: the row-major BLAS/LAPACK shim, each function one BLAS or LAPACK call through
  ``scipy.linalg.cython_blas`` / ``cython_lapack`` (the decompositions are LAPACK's own).
- ``tiled``: deterministic parallel level 3 and Cholesky on a fixed tile grid (bitwise the same
  for any thread count, polled for Ctrl-C).
- ``mixed``: the mixed-precision triangular solve (a float32 triangle, double arithmetic).
- ``segments``: products over a tall matrix's rows a fixed segment at a time, threads over the
  segments (the exact PCG fit's, bitwise the same on MPI shards: hkern._row_span).
- ``api``: the NumPy entry points below, which the Python layer calls.

Other Cython code cimports the nogil core from ``hkern._linalg`` (``__init__.pxd``; see
doc/cython_api.md).
"""
from .api import (
    check_info,
    cho_inverse,
    cho_solve,
    cholesky,
    cholesky_logdet,
    cholesky_pair,
    eigh,
    gram,
    in_place,
    lstsq,
    matmul,
    matvec,
    precision,
    qr,
    solve_triangular,
    solve_triangular_mixed,
    symmetrize,
    triangular_multiply,
)
from .tiled import CHOLESKY_BLOCK_SIZE, INVERSE_TILE_SIZE, SOLVE_BLOCK_SIZE, TILE_SIZE

__all__ = ["CHOLESKY_BLOCK_SIZE", "INVERSE_TILE_SIZE", "SOLVE_BLOCK_SIZE", "TILE_SIZE",
           "check_info", "cho_inverse", "cho_solve", "cholesky", "cholesky_logdet",
           "cholesky_pair", "eigh", "gram", "in_place", "lstsq", "matmul", "matvec", "precision",
           "qr", "solve_triangular", "solve_triangular_mixed", "symmetrize",
           "triangular_multiply"]
