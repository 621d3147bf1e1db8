# Kernel families of hkern, evaluable from nogil code (cimport hkern.kernels._kernels).
#
# One parametrisation everywhere: a bandwidth/lengthscale sigma > 0 and k(x, x) = 1.
# Each kernel is defined once, in kernel_from_scaled(), as a function of the *scaled distance*
#     s = ||x - y||_2^2 / sigma^2   for the Euclidean kernels (Gaussian, IMQ, Matern), and
#     s = ||x - y||_1   / sigma     for the Laplace kernel.
# Everything else (pairs, blocks, tiles) computes s and calls that one definition.

from hkern._linalg.interrupt cimport Interrupt

cdef enum KernelKind:
    GAUSSIAN = 0
    LAPLACE = 1
    IMQ = 2
    MATERN12 = 3
    MATERN32 = 4
    MATERN52 = 5

cdef double kernel_from_scaled(int kind, double s) noexcept nogil
cdef double scaled_distance(int kind, const double* x, const double* y, Py_ssize_t d,
                            double sigma) noexcept nogil
cdef double kernel_pair(int kind, const double* x, const double* y, Py_ssize_t d,
                        double sigma) noexcept nogil
cdef void sqnorms(Py_ssize_t n, Py_ssize_t d, const double* X, double* out) noexcept nogil
cdef void kernel_block(int kind, double sigma, int m, int n, int d,
                       const double* X, const double* xsq, const double* Y, const double* ysq,
                       double* out, int ldo) noexcept nogil
cdef void kernel_block_lower(int kind, double sigma, int m, int d, const double* X,
                             const double* xsq, double* out, int ldo) noexcept nogil
cdef void kernel_tiles(int kind, double sigma, int m, int n, int d,
                       const double* X, const double* xsq, const double* Y, const double* ysq,
                       double* out, int ldo, int n_threads, Interrupt* it) noexcept nogil
cdef int kernel_times(int kind, double sigma, int m, int n, int d,
                      const double* X, const double* xsq, const double* Y, const double* ysq,
                      const double* V, int k, double* out, int n_threads,
                      Interrupt* it) noexcept nogil
cdef int kernel_normal_times(int kind, double sigma, int n, int m, int d,
                             const double* X, const double* xsq, const double* Z,
                             const double* zsq, const double* U, const double* V, int k,
                             double* out, int n_threads, Interrupt* it) noexcept nogil
