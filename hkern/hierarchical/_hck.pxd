# The compiled HCK operator: factors of A = K_hier' + (lam - lam') I on a complete binary tree in
# heap order, with A b (Algorithm 1), A^{-1} b and out-of-sample evaluation (Algorithm 3).
#
# Other Cython code can cimport HCKOperator and call matvec_into / solve_into without the GIL on
# tree-ordered, C-contiguous (n, k) arrays (with BLAS limited to one thread by the caller, as
# hkern._threads.blas_threads(1) does).

from hkern._linalg.interrupt cimport Interrupt

# Heap order: node i's parent (the root is 0).
cdef inline Py_ssize_t parent_of(Py_ssize_t i) noexcept nogil:
    return (i - 1) // 2


# Per-thread scratch of the factorisation (allocated in _hck.pyx).
cdef struct Work:
    double* Z1
    double* z1sq
    double* Z2
    double* z2sq
    double* S
    double* M
    double* T
    int* ipiv
    double* V
    double* stack


# The per-node vectors of one pass over the tree with k right-hand sides (_new_tree_vectors):
# the offsets of the c vectors (sized by the parent's rank) and of the g vectors (by the node's
# own), c, a second array (g for a solve, d for a product), the scratch sv and, for a solve,
# an n x k buffer.
cdef struct TreeVectors:
    Py_ssize_t* c_off
    Py_ssize_t* g_off
    double* c
    double* second
    double* sv
    double* tmp


cdef class HCKOperator:
    cdef readonly int n, d, depth, first_leaf, n_nodes, kind
    cdef readonly double sigma, lam, jitter
    cdef readonly int r_max, leaf_max
    # const: the operator only reads its data, and the factors once they are built (the
    # construction writes them through _mutable), so read-only arrays (a model unpickled from
    # read-only buffers, a memory-mapped X) are accepted.
    cdef const double[:, ::1] X
    cdef const double[::1] xsq
    cdef const Py_ssize_t[::1] start, count, rank
    cdef const Py_ssize_t[::1] lm_off, lm
    cdef const Py_ssize_t[::1] sq_off, w_off, u_off, b_off
    cdef const double[::1] L, St, W, Wt, U, LB
    cdef const double[::1] logdet_parts
    cdef readonly double logdet_value
    # A part of the tree (one MPI rank's: hkern/hierarchical/sharded.py): the nodes of the top
    # `levels` levels and of the subtrees rooted at level `levels` that this part holds, listed
    # level by level in level_nodes[level_off[t]:level_off[t + 1]] (every node when whole).
    # X holds the tree positions row0 .. row0 + n - 1; the landmark points of the top nodes are
    # rows ztop_off[i] .. of Ztop (their positions may lie in other parts).
    cdef readonly Py_ssize_t row0
    cdef readonly int levels, n_top
    cdef const Py_ssize_t[::1] level_off, level_nodes
    cdef const double[:, ::1] Ztop
    cdef const double[::1] ztop_sq
    cdef const Py_ssize_t[::1] ztop_off
    # Wall seconds of the construction: [instantiation (kernel blocks), inversion (arithmetic)].
    cdef double phase_seconds[2]

    cdef int matvec_into(self, const double* B, double* Y, int k, int n_threads) noexcept nogil
    cdef int solve_into(self, const double* B, double* Y, int k, int n_threads) noexcept nogil

    # internals
    cdef void _gather(self, Py_ssize_t i, double* Z, double* zsq) noexcept nogil
    cdef void _instantiate(self, Py_ssize_t i, Work* w) noexcept nogil
    cdef int _sigma_factor(self, Py_ssize_t i, Interrupt* it) noexcept nogil
    cdef int _leaf_up(self, Py_ssize_t i, double* theta, Work* w, Interrupt* it) noexcept nogil
    cdef int _nonleaf_up(self, Py_ssize_t i, double* xi, double* theta, Work* w,
                         Interrupt* it) noexcept nogil
    cdef int _up_subtree(self, Py_ssize_t i, double* theta, Work* w, int level,
                         Interrupt* it) noexcept nogil
    cdef int _factorize_below(self, int n_threads, int* failed_node, double* theta,
                              int split, Interrupt* it) noexcept nogil
    cdef int _factorize_above(self, int n_threads, int* failed_node, double* theta,
                              Interrupt* it) noexcept nogil
    cdef int _nonleaf_level(self, int t, int n_threads, double* theta, int* node_status,
                            int* failed_node, Interrupt* it) noexcept nogil
    cdef void _solve_up(self, const double* B, double* Y, double* c, double* g, double* sv,
                        const Py_ssize_t* c_off, const Py_ssize_t* g_off, int k, int t_from,
                        int t_to, int n_threads) noexcept nogil
    cdef void _solve_down(self, double* Y, double* g, double* tmp, const Py_ssize_t* g_off,
                          int k, int t_from, int t_to, int n_threads) noexcept nogil
    cdef void _up_levels(self, const double* B, double* c, double* sv, const Py_ssize_t* c_off,
                         const Py_ssize_t* g_off, int k, int t_from, int t_to,
                         int n_threads) noexcept nogil
    cdef void _siblings(self, const double* c, double* dv, const Py_ssize_t* c_off, int k,
                        int n_threads) noexcept nogil
    cdef int _matvec_down(self, const double* B, double* Y, double* dv, const Py_ssize_t* c_off,
                          int k, int n_threads) noexcept nogil
    cdef void _vector_offsets(self, int k, Py_ssize_t* c_off, Py_ssize_t* g_off) noexcept nogil
    cdef int _new_tree_vectors(self, int k, bint solve, TreeVectors* v) noexcept nogil
    cdef int _up_exchange(self, const double* B, double* c, double* dv, double* sv,
                          const Py_ssize_t* c_off, const Py_ssize_t* g_off, int k,
                          int n_threads) noexcept nogil
    cdef int _predict_leaf(self, Py_ssize_t leaf, const double[:, ::1] Xq,
                           const double[::1] qsq, const Py_ssize_t[::1] leaf_start,
                           const double[:, ::1] Wts, const double[::1] dv,
                           const Py_ssize_t[::1] c_off, double[:, ::1] F, int k) noexcept nogil
