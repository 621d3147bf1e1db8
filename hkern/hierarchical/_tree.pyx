"""Partition tree of the hierarchically compositional kernel (HCK): build, landmarks, routing.

Layout (see _tree.pxd): a complete binary tree of depth J in heap order, nodes 0 .. 2^(J+1)-2,
nonleaf nodes 0 .. 2^J-2, leaves 2^J-1 .. 2^(J+1)-2 (leaf number = heap id - (2^J - 1)).  The
data are permuted into tree order; node i owns positions [start[i], start[i] + count[i]), the
root owns [0, n) and a node of m points gives its first floor(m/2) positions to its left child
and its last ceil(m/2) positions to its right child.  Halving is balanced, so every leaf is at
depth J and holds floor(n/2^J) or ceil(n/2^J) points.

Splitting rule (hck.md section 6).  Nonleaf node i projects its points on a direction v_i,
p = v_i . x (the one nogil function ``project``), puts the floor(m/2) points that come first in
the order of (projection, row of X) -- ties of projections broken by the row -- in its left
child and the others in its right child, each child keeping its points in the order of the
node (so every node is split with its points in ascending row order, and every leaf lists them
so: the tree order is canonical, a function of the data and the directions only, which an MPI
build on sharded rows reproduces),
and stores the threshold t_i = midpoint of the largest left projection and the smallest
right projection (t_i = the largest left projection when the midpoint rounds up to the smallest
right one, i.e. when the two are adjacent doubles; t_i = -inf when the left child is empty).  A
point x goes left iff project(x, v_i) <= t_i.  Every training point therefore routes to the leaf
whose range holds it, **except exact ties**: when the largest left and the smallest right
projection of a node are equal, right-range points with that projection route left.  Ties have
probability zero for continuous data and random directions; they do happen for repeated rows or
when all points of a node project to the same value (e.g. identical points).

The directions are v_i = start_vectors[i] ("random", N(0, I_d) draws by the caller) or the
principal direction of the node's centred points by power iteration from start_vectors[i]
("pca").  Power iteration multiplies by the node's d x d scatter matrix formed once when that is
cheaper (d + 2 <= 5 * pca_iters), otherwise matrix-free, two passes over the points per
iteration; the choice depends on (d, pca_iters) only.

Determinism: every node is processed by one thread, with the same operations whatever the thread
count (the order of the points in a node's range is fixed by the levels above), so perm,
directions, thresholds, landmarks and routes are bitwise identical for any n_threads.

The ``def`` functions trust their inputs beyond cheap shape checks: the Python face validates
dtypes, contiguity and values.
"""
from cython.parallel cimport prange
from libc.math cimport sqrt, floor, HUGE_VAL
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memcpy

import numpy as np

# Partition rule name -> the `partition` code of build_tree (the Partition enum of _tree.pxd).
PARTITIONS = {"random": PARTITION_RANDOM, "pca": PARTITION_PCA}

cdef enum:
    # Ranges this short are finished by insertion sort in the introselect.
    SELECT_SMALL = 16


cdef struct Item:
    double key
    int64_t idx


# ----------------------------------------------------------------------------------------------
# Shared nogil core (declared in _tree.pxd).
# ----------------------------------------------------------------------------------------------

cdef double project(const double* x, const double* v, Py_ssize_t d) noexcept nogil:
    """v . x summed in index order (no FMA contraction, no reassociation: see meson.build)."""
    cdef Py_ssize_t k
    cdef double acc = 0.0
    for k in range(d):
        acc = acc + v[k] * x[k]
    return acc


cdef Py_ssize_t route_one(const double* x, const double* directions, const double* thresholds,
                          int depth, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t node = 0
    cdef int t
    for t in range(depth):
        if project(x, directions + node * d, d) <= thresholds[node]:
            node = 2 * node + 1
        else:
            node = 2 * node + 2
    return node - (((<Py_ssize_t>1) << depth) - 1)


cdef void fill_node_ranges(Py_ssize_t n, int depth, int64_t* start, int64_t* count) noexcept nogil:
    cdef Py_ssize_t i, n_nonleaf = ((<Py_ssize_t>1) << depth) - 1
    cdef int64_t h
    start[0] = 0
    count[0] = n
    for i in range(n_nonleaf):
        h = count[i] // 2
        start[2 * i + 1] = start[i]
        count[2 * i + 1] = h
        start[2 * i + 2] = start[i] + h
        count[2 * i + 2] = count[i] - h


# ----------------------------------------------------------------------------------------------
# Selection: introselect on (projection, row) items.  Median-of-three pivot and a three-way
# partition (runs of equal keys, e.g. repeated rows, cost O(m), not O(m^2)); after
# 2 log2(m) + 4 rounds without finishing, the remaining range is heap-sorted, so the worst case
# is O(m log m).  Deterministic: the result depends only on the input order.
# ----------------------------------------------------------------------------------------------

cdef inline bint item_less(Item a, Item b) noexcept nogil:
    """The order of (key, idx) pairs: by key, ties by idx."""
    return a.key < b.key or (a.key == b.key and a.idx < b.idx)


cdef inline void swap_items(Item* a, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    cdef Item t = a[i]
    a[i] = a[j]
    a[j] = t


cdef inline Item median3(Item a, Item b, Item c) noexcept nogil:
    if item_less(a, b):
        if item_less(b, c):
            return b
        return c if item_less(a, c) else a
    if item_less(a, c):
        return a
    return c if item_less(b, c) else b


cdef void insertion_sort(Item* a, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef Item t
    for i in range(lo + 1, hi):
        t = a[i]
        j = i
        while j > lo and item_less(t, a[j - 1]):
            a[j] = a[j - 1]
            j -= 1
        a[j] = t


cdef void sift_down(Item* a, Py_ssize_t root, Py_ssize_t size) noexcept nogil:
    cdef Py_ssize_t child
    while True:
        child = 2 * root + 1
        if child >= size:
            return
        if child + 1 < size and item_less(a[child], a[child + 1]):
            child += 1
        if item_less(a[root], a[child]):
            swap_items(a, root, child)
            root = child
        else:
            return


cdef void heap_sort(Item* a, Py_ssize_t size) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(size // 2 - 1, -1, -1):
        sift_down(a, i, size)
    for i in range(size - 1, 0, -1):
        swap_items(a, 0, i)
        sift_down(a, 0, i)


cdef void select_kth(Item* a, Py_ssize_t m, Py_ssize_t k) noexcept nogil:
    """Reorder a[0:m] so that a[k] has rank k in the (key, idx) order: a[:k] < a[k] < a[k+1:]
    (idx are distinct, so the order is total), 0 <= k < m."""
    cdef Py_ssize_t lo = 0, hi = m, i, store, budget = 4
    cdef Py_ssize_t size = m
    cdef Item pivot
    while size > 1:
        budget += 2
        size >>= 1
    while hi - lo > SELECT_SMALL:
        if budget == 0:
            heap_sort(a + lo, hi - lo)
            return
        budget -= 1
        pivot = median3(a[lo], a[lo + (hi - lo) // 2], a[hi - 1])
        # Lomuto around the pivot item (distinct items: only the pivot equals it), which is
        # moved to its final place `store`.
        for i in range(lo, hi):
            if a[i].idx == pivot.idx:
                swap_items(a, i, hi - 1)
                break
        store = lo
        for i in range(lo, hi - 1):
            if item_less(a[i], pivot):
                swap_items(a, store, i)
                store += 1
        swap_items(a, store, hi - 1)
        if k < store:
            hi = store
        elif k > store:
            lo = store + 1
        else:
            return
    insertion_sort(a, lo, hi)


# ----------------------------------------------------------------------------------------------
# Splitting one node.
# ----------------------------------------------------------------------------------------------

cdef inline bint pca_uses_scatter(Py_ssize_t d, int iters) noexcept nogil:
    # Forming the scatter matrix costs about d^2 + d flops per point, once; a matrix-free power
    # iteration about 5d flops per point per iteration.
    return iters > 0 and d + 2 <= 5 * <Py_ssize_t>iters


cdef inline bint normalize_into(const double* w, double* v, Py_ssize_t d) noexcept nogil:
    """v = w / ||w||; leave v untouched (return False) when ||w|| is zero or not finite."""
    cdef Py_ssize_t k
    cdef double nrm = 0.0
    for k in range(d):
        nrm = nrm + w[k] * w[k]
    nrm = sqrt(nrm)
    if not (nrm > 0.0 and nrm < HUGE_VAL):
        return False
    for k in range(d):
        v[k] = w[k] / nrm
    return True


cdef int pca_direction(const double* X, Py_ssize_t d, const int64_t* rows, Py_ssize_t m,
                       const double* s, int iters, double* v) noexcept nogil:
    """v = principal direction of the centred points X[rows[0:m]] by `iters` power iterations
    started from s (normalised).  An iterate that vanishes (all points equal) keeps the previous
    vector.  Returns 0, or -1 when scratch memory cannot be allocated.

    Centring is shifted: y = (x - x0) - mean(x - x0) with x0 the node's first point, so equal
    points give exactly y = 0 (a plain x - mean(x) leaves rounding noise whose "principal
    direction" would be arbitrary), and data far from the origin lose no accuracy."""
    cdef bint scatter = pca_uses_scatter(d, iters)
    cdef Py_ssize_t k, a, b, it
    cdef double* mu
    cdef double* y
    cdef double* w
    cdef double* C
    cdef const double* x
    cdef const double* x0
    cdef double ya, acc
    memcpy(v, s, d * sizeof(double))
    normalize_into(s, v, d)
    if iters <= 0 or m == 0:
        return 0
    x0 = X + rows[0] * d
    mu = <double*>malloc((3 * d + (d * d if scatter else 0)) * sizeof(double))
    if mu == NULL:
        return -1
    y = mu + d
    w = y + d
    C = w + d
    for a in range(d):
        mu[a] = 0.0
    for k in range(m):
        x = X + rows[k] * d
        for a in range(d):
            mu[a] = mu[a] + (x[a] - x0[a])
    for a in range(d):
        mu[a] = mu[a] / <double>m
    if scatter:
        # Lower triangle of the scatter matrix C = sum_k y_k y_k^T, then mirrored.
        for a in range(d * d):
            C[a] = 0.0
        for k in range(m):
            x = X + rows[k] * d
            for a in range(d):
                y[a] = (x[a] - x0[a]) - mu[a]
            for a in range(d):
                ya = y[a]
                for b in range(a + 1):
                    C[a * d + b] = C[a * d + b] + ya * y[b]
        for a in range(d):
            for b in range(a):
                C[b * d + a] = C[a * d + b]
        for it in range(iters):
            for a in range(d):
                acc = 0.0
                for b in range(d):
                    acc = acc + C[a * d + b] * v[b]
                w[a] = acc
            if not normalize_into(w, v, d):
                break
    else:
        for it in range(iters):
            for a in range(d):
                w[a] = 0.0
            for k in range(m):
                x = X + rows[k] * d
                acc = 0.0
                for a in range(d):
                    y[a] = (x[a] - x0[a]) - mu[a]
                    acc = acc + y[a] * v[a]
                for a in range(d):
                    w[a] = w[a] + acc * y[a]
            if not normalize_into(w, v, d):
                break
    free(mu)
    return 0


cdef inline double split_threshold(double lo_max, double hi_min) noexcept nogil:
    """A threshold t with lo_max <= t, and t < hi_min unless lo_max == hi_min."""
    cdef double t
    if lo_max == hi_min:
        return lo_max
    t = 0.5 * (lo_max + hi_min)
    if not (t < hi_min):      # rounded up to hi_min (adjacent doubles), overflow or NaN
        t = lo_max
    return t


cdef int split_node(const double* X, Py_ssize_t d, int64_t* rows, Py_ssize_t m,
                    const double* start_vector, int partition, int pca_iters,
                    double* direction, double* threshold) noexcept nogil:
    """Split the node whose range of `perm` is rows[0:m]: choose its direction, reorder rows so
    that the floor(m/2) smallest projections come first, and set its threshold.  Returns 0, or
    -1 when scratch memory cannot be allocated."""
    cdef Py_ssize_t h = m // 2, k, left, right
    cdef double lo_max
    cdef Item* items
    cdef Item pivot, item
    if partition == PARTITION_PCA:
        if pca_direction(X, d, rows, m, start_vector, pca_iters, direction) != 0:
            return -1
    else:
        memcpy(direction, start_vector, d * sizeof(double))
    if h == 0:
        threshold[0] = -HUGE_VAL       # empty left child: everything goes right
        return 0
    items = <Item*>malloc(m * sizeof(Item))
    if items == NULL:
        return -1
    for k in range(m):
        items[k].idx = rows[k]
        items[k].key = project(X + rows[k] * d, direction, d)
    select_kth(items, m, h)
    pivot = items[h]
    # Stable partition of rows: the items before the pivot go left in their order, the others
    # right (collected in the items buffer, free now); the keys are projected again, the same
    # numbers.
    left = 0
    right = 0
    lo_max = -HUGE_VAL
    for k in range(m):
        item.idx = rows[k]
        item.key = project(X + rows[k] * d, direction, d)
        if item_less(item, pivot):
            rows[left] = item.idx
            left += 1
            if item.key > lo_max:
                lo_max = item.key
        else:
            items[right].idx = item.idx
            right += 1
    for k in range(right):
        rows[left + k] = items[k].idx
    threshold[0] = split_threshold(lo_max, pivot.key)
    free(items)
    return 0


# ----------------------------------------------------------------------------------------------
# Landmarks.
# ----------------------------------------------------------------------------------------------

cdef int cmp_int64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0], y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef int sample_node(int64_t first, int64_t c, Py_ssize_t r, const double* u,
                     int64_t* out) noexcept nogil:
    """out[0:r] = r distinct positions of [first, first + c) chosen uniformly without
    replacement by a partial Fisher-Yates shuffle driven by u[0:r], sorted ascending (r <= c).
    Returns 0, or -1 when scratch memory cannot be allocated."""
    cdef int64_t t, j, tmp
    cdef int64_t* pool
    if r == 0:
        return 0
    pool = <int64_t*>malloc(c * sizeof(int64_t))
    if pool == NULL:
        return -1
    for t in range(c):
        pool[t] = t
    for t in range(r):
        j = t + <int64_t>floor(u[t] * <double>(c - t))
        if j > c - 1:
            j = c - 1
        tmp = pool[t]
        pool[t] = pool[j]
        pool[j] = tmp
        out[t] = first + pool[t]
    free(pool)
    qsort(out, r, sizeof(int64_t), cmp_int64)
    return 0


# ----------------------------------------------------------------------------------------------
# Python entry points.
# ----------------------------------------------------------------------------------------------

def n_nonleaf_nodes(int depth):
    """Number of nonleaf nodes, 2^depth - 1."""
    return (1 << depth) - 1


def pca_uses_scatter_matrix(Py_ssize_t d, int pca_iters):
    """Whether "pca" power iteration multiplies by the d x d scatter matrix (else matrix-free)."""
    return bool(pca_uses_scatter(d, pca_iters))


def node_ranges(Py_ssize_t n, int depth):
    """Position ranges of the nodes of the tree of n points and depth `depth`.

    Returns (start, count), int64 arrays of length 2^(depth+1) - 1 in heap order: node i owns
    the positions start[i] .. start[i] + count[i] - 1 of the tree order.  count[0] = n; a node of
    m points gives floor(m/2) to its left child 2i+1 (first) and ceil(m/2) to its right child.
    """
    if n < 0 or depth < 0 or depth > 40:
        raise ValueError(f"need n >= 0 and 0 <= depth <= 40, got n={n}, depth={depth}")
    cdef Py_ssize_t n_nodes = ((<Py_ssize_t>1) << (depth + 1)) - 1
    start = np.empty(n_nodes, dtype=np.int64)
    count = np.empty(n_nodes, dtype=np.int64)
    cdef int64_t[::1] s = start, c = count
    with nogil:
        fill_node_ranges(n, depth, &s[0], &c[0])
    return start, count


def build_tree(const double[:, ::1] X, int depth, const double[:, ::1] start_vectors,
               int partition, int pca_iters, int n_threads):
    """Build the partition tree of the rows of X.

    Parameters
    ----------
    X : float64 (n, d), C-contiguous, n >= 1, d >= 1.
    depth : int, J >= 0; the tree has 2^J leaves (empty ones if 2^J > n).
    start_vectors : float64 (2^J - 1, d), one row per nonleaf node in heap order (N(0, I_d)).
    partition : 0 ("random": v_i = start_vectors[i]) or 1 ("pca": principal direction of the
        node's centred points by pca_iters power iterations from start_vectors[i]).
    pca_iters : int >= 0, power iterations for "pca" (ignored for "random").
    n_threads : int >= 1, OpenMP threads (the nodes of one level run in parallel).

    Returns
    -------
    perm : int64 (n,), perm[position] = row of X at that position of the tree order.
    directions : float64 (2^J - 1, d), the split directions used.
    thresholds : float64 (2^J - 1,), x goes left at node i iff project(x, v_i) <= t_i.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    if n < 1 or d < 1:
        raise ValueError(f"X must have at least one row and one column, got shape ({n}, {d})")
    if depth < 0 or depth > 40:
        raise ValueError(f"depth must be in 0..40, got {depth}")
    if partition != PARTITION_RANDOM and partition != PARTITION_PCA:
        raise ValueError(f"partition must be 0 (random) or 1 (pca), got {partition}")
    cdef Py_ssize_t n_nonleaf = ((<Py_ssize_t>1) << depth) - 1
    if start_vectors.shape[0] != n_nonleaf or start_vectors.shape[1] != d:
        raise ValueError(f"start_vectors must have shape ({n_nonleaf}, {d}), got "
                         f"({start_vectors.shape[0]}, {start_vectors.shape[1]})")
    start, count = node_ranges(n, depth)
    perm = np.arange(n, dtype=np.int64)
    directions = np.empty((n_nonleaf, d))
    thresholds = np.empty(n_nonleaf)
    if n_nonleaf == 0:
        return perm, directions, thresholds
    cdef const int64_t[::1] st = start, ct = count
    cdef int64_t[::1] p = perm
    cdef double[:, ::1] dirs = directions
    cdef double[::1] thr = thresholds
    cdef const double* Xp = &X[0, 0]
    cdef const double* S = &start_vectors[0, 0]
    cdef Py_ssize_t first, k, i
    cdef int t, failed = 0
    with nogil:
        for t in range(depth):
            first = ((<Py_ssize_t>1) << t) - 1
            for k in prange(first + 1, num_threads=max(n_threads, 1), schedule="dynamic"):
                i = first + k
                failed += split_node(Xp, d, &p[0] + st[i], ct[i], S + i * d, partition,
                                     pca_iters, &dirs[0, 0] + i * d, &thr[0] + i)
            if failed:
                break
    if failed:
        raise MemoryError("build_tree: could not allocate per-node scratch memory")
    return perm, directions, thresholds


def select_landmarks(const int64_t[::1] start, const int64_t[::1] count, int depth,
                     Py_ssize_t r, const double[:, ::1] uniforms, int n_threads):
    """Landmark positions (tree order) of every nonleaf node.

    Node i (heap order 0 .. 2^J - 2) gets r_i = min(r, count[i]) distinct positions of its range
    [start[i], start[i] + count[i]) chosen uniformly without replacement: a partial
    Fisher-Yates shuffle of the range driven by uniforms[i, 0:r_i] (float64 in [0, 1), shape
    (2^J - 1, r)): step t swaps entry t with entry j = t + floor(u * (count - t)) (clamped to
    count - 1).  The chosen positions are sorted ascending.

    Returns (lm_offsets, lm): int64 arrays; node i's landmarks are lm[lm_offsets[i]:lm_offsets[i+1]].
    """
    if depth < 0 or depth > 40 or r < 0:
        raise ValueError(f"need 0 <= depth <= 40 and r >= 0, got depth={depth}, r={r}")
    cdef Py_ssize_t n_nonleaf = ((<Py_ssize_t>1) << depth) - 1, i
    if start.shape[0] < n_nonleaf or count.shape[0] < n_nonleaf:
        raise ValueError(f"start and count need at least {n_nonleaf} entries")
    if uniforms.shape[0] != n_nonleaf or uniforms.shape[1] != r:
        raise ValueError(f"uniforms must have shape ({n_nonleaf}, {r}), got "
                         f"({uniforms.shape[0]}, {uniforms.shape[1]})")
    offsets = np.zeros(n_nonleaf + 1, dtype=np.int64)
    cdef int64_t[::1] off = offsets
    for i in range(n_nonleaf):
        off[i + 1] = off[i] + min(r, count[i])
    lm = np.empty(off[n_nonleaf], dtype=np.int64)
    if off[n_nonleaf] == 0:
        return offsets, lm
    cdef int64_t[::1] out = lm
    cdef const double* U = &uniforms[0, 0]
    cdef int failed = 0
    for i in prange(n_nonleaf, nogil=True, num_threads=max(n_threads, 1), schedule="dynamic"):
        failed += sample_node(start[i], count[i], off[i + 1] - off[i], U + i * r,
                              &out[0] + off[i])
    if failed:
        raise MemoryError("select_landmarks: could not allocate scratch memory")
    return offsets, lm


def route(const double[:, ::1] Xq, const double[:, ::1] directions,
          const double[::1] thresholds, int depth, int n_threads):
    """Leaf number (0 .. 2^depth - 1) of every row of Xq (m, d), by descent from the root:
    x goes left at node i iff project(x, directions[i]) <= thresholds[i]."""
    cdef Py_ssize_t m = Xq.shape[0], d = Xq.shape[1], q
    if depth < 0 or depth > 40:
        raise ValueError(f"depth must be in 0..40, got {depth}")
    cdef Py_ssize_t n_nonleaf = ((<Py_ssize_t>1) << depth) - 1
    if (directions.shape[0] != n_nonleaf or thresholds.shape[0] != n_nonleaf
            or (n_nonleaf > 0 and directions.shape[1] != d)):
        raise ValueError(f"directions ({n_nonleaf}, {d}) and thresholds ({n_nonleaf},) expected")
    leaves = np.zeros(m, dtype=np.int64)
    if m == 0 or n_nonleaf == 0:
        return leaves
    cdef int64_t[::1] out = leaves
    cdef const double* V = &directions[0, 0]
    cdef const double* T = &thresholds[0]
    for q in prange(m, nogil=True, num_threads=max(n_threads, 1), schedule="static"):
        out[q] = route_one(&Xq[q, 0], V, T, depth, d)
    return leaves


def project_rows(const double[:, ::1] X, const double[::1] v):
    """project(x, v) of every row x of X: the projections build_tree and route use, bit for
    bit (for the MPI tree build, hkern/hierarchical/sharded_tree.py)."""
    cdef Py_ssize_t m = X.shape[0], d = X.shape[1], q
    if v.shape[0] != d:
        raise ValueError(f"v must have {d} entries, got {v.shape[0]}")
    out = np.empty(m)
    cdef double[::1] o = out
    if m == 0:
        return out
    with nogil:
        for q in range(m):
            o[q] = project(&X[q, 0], &v[0], d)
    return out


def threshold_between(double lo_max, double hi_min):
    """The threshold build_tree stores between the largest left projection and the smallest
    right one (split_threshold)."""
    return split_threshold(lo_max, hi_min)
