# Partition tree of the hierarchically compositional kernel (HCK), nogil API
# (cimport hkern.hierarchical._tree).
#
# The tree is a complete binary tree of depth J stored in heap order: node 0 is the root, the
# children of node i are 2i+1 (left) and 2i+2 (right), its parent is (i-1)//2, level t holds nodes
# 2^t-1 .. 2^(t+1)-2 and the 2^J leaves are the nodes of level J.  Leaf number l (0 .. 2^J-1) is
# heap node l + 2^J - 1.  The training data are permuted into tree order so that every node owns
# a contiguous range of positions: the root owns [0, n), and a node owning m positions gives the
# first floor(m/2) of them to its left child and the last ceil(m/2) to its right child.
#
# Nonleaf node i splits along a direction v_i (row i of a (2^J-1) x d row-major array) at a
# threshold t_i (entry i of a length 2^J-1 array): a point x goes to the left child iff
# project(x, v_i, d) <= t_i.

from libc.stdint cimport int64_t

cdef enum Partition:
    PARTITION_RANDOM = 0
    PARTITION_PCA = 1

# v . x, summed in index order 0..d-1.  The one projection used to build the tree and to route
# points through it, so training splits and routing see bitwise the same numbers.
cdef double project(const double* x, const double* v, Py_ssize_t d) noexcept nogil

# Leaf number (0 .. 2^depth-1) of the point x (length d) descending from the root; directions is
# the (2^depth-1) x d row-major array of split directions, thresholds its 2^depth-1 thresholds.
cdef Py_ssize_t route_one(const double* x, const double* directions, const double* thresholds,
                          int depth, Py_ssize_t d) noexcept nogil

# start[i], count[i] for the 2^(depth+1)-1 nodes of the tree of n points (arrays of that length).
cdef void fill_node_ranges(Py_ssize_t n, int depth, int64_t* start, int64_t* count) noexcept nogil
