# hkern's nogil linear algebra for Cython code, inside hkern or outside it:
#
#     from hkern._linalg cimport gemm, Interrupt, interrupt_init, interrupted, reraise
#
# The names come from the modules that define them (one job each; their .pxd files hold the
# conventions): interrupt.pxd (Ctrl-C), shim.pxd (row-major BLAS/LAPACK, one call each),
# tiled.pxd (deterministic, polled level 3 and Cholesky), mixed.pxd (mixed precision).
# doc/cython_api.md documents them.
from hkern._linalg.interrupt cimport Interrupt, interrupt_init, interrupted, reraise, signal_after_call
from hkern._linalg.shim cimport (
    NON_FINITE, OUT_OF_MEMORY,
    gemm, gemv, ger, syrk, trsm, trmm, dot, axpy,
    potrf, potrs, getrf, getrs, syevd, syevr, gelsd, lstsq_rows, qr_thin,
    all_finite, mirror_triangle, symmetrize_from_lower,
)
from hkern._linalg.tiled cimport (
    TILE, CHOL_BLOCK, INV_TILE, SOLVE_BLOCK, K_SPLIT,
    gemm_tiled, syrk_tiled, trsm_tiled, potrf_tiled, potri_tiled, lauum_upper_to_lower,
)
from hkern._linalg.mixed cimport trsm_left_rows_mixed
