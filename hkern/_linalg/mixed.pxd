# Mixed precision: a float32 triangle solved against float64 right-hand sides in double
# arithmetic (FALKON's mixed-precision preconditioner), polled for Ctrl-C between row blocks.
from hkern._linalg.interrupt cimport Interrupt

# op(A) X = B for a float32 triangle and double B, in double arithmetic, A's diagonal from diag.
cdef void trsm_left_rows_mixed(bint lower, bint trans, int m, int n, const float* A, int lda,
                               const double* diag, double* B, int ldb, int n_threads,
                               Interrupt* it) noexcept nogil
