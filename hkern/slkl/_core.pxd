# Compiled core of SLKL (stochastic low-rank kernel learning; spec doc/specs/slkl.md).
# cimport hkern.slkl._core to drive the coordinate descent from other Cython code.

from hkern._linalg.interrupt cimport Interrupt

cdef enum StepRule:
    STEP_EXACT = 0     # exact coordinate minimisation (doc/specs/slkl.md, 5 A), monotone
    STEP_NEWTON = 1    # Newton step with Prop. 2's second derivative h = 2 lam a^2 b
    STEP_PAPER = 2     # Algorithm 2 as printed, h = lam a^2 b

cdef enum RunStatus:
    RUN_DONE = 0       # every draw consumed
    RUN_STOPPED = 1    # the relative-decrease stopping rule fired
    RUN_GROW = 2       # the active set filled the capacity: grow, then call run again
    RUN_FAILED = 3     # a step failed (the code in last_error, LAPACK info in last_info)

cdef enum StepError:
    # Negative return codes of _step / _set / _refresh (positive codes are the cases 1..4).
    ERR_CHOLESKY = -1  # the Cholesky factorisation of G^{-1} failed (info in last_info)
    ERR_NONFINITE = -2  # a, b, the new weight, F or G is not finite
    ERR_CAPACITY = -3  # a column would be appended with m0 == cap (no room: grow first)
    ERR_INDEX = -4     # a candidate index outside [0, M)
    ERR_INTERRUPTED = -5  # a signal handler raised (Ctrl-C); failed only if G was unfinished


cdef class SlklCore:
    cdef readonly Py_ssize_t n, M, m0, cap, n_updates, n_refreshes
    cdef readonly int step_rule, precomputed, kind, d, refresh_every, last_info, last_error
    cdef readonly double lam, nu, sigma, F, yy, mu_floor
    cdef public int n_threads
    cdef const double[::1] y
    cdef const double[:, ::1] cols
    cdef const double[:, ::1] X
    cdef const double[::1] xsq
    cdef const Py_ssize_t[::1] cand
    cdef const double[::1] scale
    cdef double[::1] yc_all
    cdef double[::1] cc_all
    cdef double[::1] mu
    cdef Py_ssize_t[::1] pos
    cdef Py_ssize_t[::1] act
    cdef double[:, ::1] Ct
    cdef double[:, ::1] G
    cdef double[:, ::1] work
    cdef double[::1] q
    cdef double[::1] w
    cdef double[::1] t
    cdef double[::1] u
    cdef double[::1] g
    cdef double[::1] col
    # The Interrupt of the Python entry point running (NULL outside one): every nogil method
    # checks it between units of work (a step, a kernel column, a tiled BLAS call).  Entry
    # points arm it with _watch() before their nogil block and end with _unwatch().
    cdef Interrupt* it
    cdef Interrupt interrupt

    cdef void _watch(self) noexcept
    cdef int _unwatch(self) except -1
    cdef const double* _column(self, Py_ssize_t m, double* yc, double* cc) noexcept nogil
    cdef void _ab(self, Py_ssize_t m, const double* c, double yc, double cc, double* a,
                  double* b) noexcept nogil
    cdef double _new_weight(self, double mu_old, double a, double b) noexcept nogil
    cdef int _set(self, Py_ssize_t m, const double* c, double yc, double a, double b,
                  double mu_new) noexcept nogil
    cdef int _step(self, Py_ssize_t m) noexcept nogil
    cdef int _refresh(self) noexcept nogil
    cdef int _fail(self, int code) noexcept nogil
    cdef void _update_w(self) noexcept nogil
    cdef double _kkt(self) noexcept nogil
