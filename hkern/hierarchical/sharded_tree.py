"""The HCK partition tree and landmarks built from rows sharded over MPI ranks, equal to the
serial tree of the concatenated rows (hkern/hierarchical/_tree.pyx) bit for bit.

The serial tree is canonical: the data are centred on the middle of their bounding box, and a
node with m points sends to its left child the floor(m/2) points first in the order of
(projection, row), each child keeping its points in ascending row order.  So:

* the centre is a maximum and a minimum over ranks (exact);
* the top L = ceil(log2 P) levels are split collectively: each rank projects its points of the
  node with the serial ``project``, the ranks find the node's median item (projection, global
  row) by a distributed selection (:func:`distributed_kth`: weighted median of the ranks'
  medians, O(log m) allgathers of a few numbers), and the largest left projection is a maximum
  over ranks, which gives the serial threshold;
* the 2^L nodes of level L ("subtrees") then go whole to their ranks (:func:`subtree_owner`):
  one alltoallv of the rows, which arrive by ascending global row (source ranks in order), the
  order in which the serial build splits them; each rank builds its subtrees with the serial
  core, with the split directions of their nodes taken from the serial draw;
* landmarks are drawn from each node's global range of positions with the serial uniforms.

A node's tree positions, directions, thresholds and landmarks are therefore the serial ones;
each rank holds the top nodes and its own subtrees.  "pca" splitting at the top levels would
need sums over the ranks in the serial order and is not supported with several ranks.
"""
from __future__ import annotations

import math

import numpy as np

from .._mpi import Agreed, get_mpi
from . import _tree
from .plan import PCA_ITERATIONS, tree_centre

__all__ = ["ShardedTree", "build_sharded_tree", "distributed_kth", "rank_levels",
           "subtree_owner"]

# Rows of landmark uniforms drawn at a time (the serial fit draws them all at once: same values).
UNIFORM_CHUNK = 4096


def rank_levels(depth, size):
    """L, the levels split collectively: ceil(log2 size), at most the tree's depth."""
    return min(depth, max(0, math.ceil(math.log2(size)))) if size > 1 else 0


def subtree_owner(s, levels, size):
    """The rank that owns subtree s (node 2^L - 1 + s) of the 2^L: contiguous, balanced."""
    return (s * size) >> levels


def subtree_node(g, local):
    """Global heap id of the node with heap id ``local`` in the subtree rooted at global node g
    (vectorised over ``local``)."""
    local = np.asarray(local, dtype=np.int64)
    t = np.floor(np.log2(local + 1)).astype(np.int64)
    return (g + 1) * (1 << t) - 1 + (local - ((1 << t) - 1))


# ------------------------------------------------------------------ distributed selection


def _position(K, I, lo, hi, key, ident):
    """Items of the (key, id)-sorted window K[lo:hi], I[lo:hi] before (key, ident)."""
    a = lo + int(np.searchsorted(K[lo:hi], key, side="left"))
    b = lo + int(np.searchsorted(K[lo:hi], key, side="right"))
    return a + int(np.searchsorted(I[a:b], ident, side="left"))


def distributed_kth(comm, keys, ids, k):
    """The k-th smallest (0-based) of every rank's (key, id) items, ordered by key then id (ids
    distinct over all ranks), as (key, id) on every rank.

    Each round every rank offers the median of its window of candidates; the ranks take the
    weighted median of these (weights: window sizes), count the candidates before it, and keep
    the side that holds the k-th item: at least a quarter of the candidates go each round.
    """
    order = np.lexsort((ids, keys))
    K, I = np.asarray(keys)[order], np.asarray(ids)[order]
    lo, hi = 0, len(K)
    while True:
        count = hi - lo
        median = (float(K[lo + count // 2]), int(I[lo + count // 2])) if count else None
        offers = sorted((m, c) for c, m in comm.allgather((count, median)) if c)
        total = sum(c for _, c in offers)
        if total == 0 or not 0 <= k < total:
            raise RuntimeError(f"distributed_kth: rank {k} of {total} candidates")
        weight, pivot = 0, offers[-1][0]
        for m, c in offers:
            weight += c
            if 2 * weight >= total:
                pivot = m
                break
        before = _position(K, I, lo, hi, *pivot)
        holds = before < hi and K[before] == pivot[0] and I[before] == pivot[1]
        below = comm.allreduce(before - lo)
        if k < below:
            hi = before
        elif k == below:
            return pivot
        else:
            k -= below + 1
            lo = before + int(holds)


# ------------------------------------------------------------------ the tree


class ShardedTree:
    """One rank's part of the HCK tree (module docstring).

    Attributes
    ----------
    depth, levels : int
        J and L (the levels above the ranks' subtrees).
    centre : ndarray (d,)
    start, count : ndarray (2^(J+1) - 1,)
        Every node's global range of tree positions.
    directions, thresholds : ndarray
        Every node's split (2^J - 1 rows); filled for the top nodes and this rank's subtrees.
    subtrees : range
        This rank's subtrees (s, its root node 2^L - 1 + s).
    row0, rows : int
        This rank's tree positions row0 .. row0 + rows - 1.
    X_tree, Y_tree : ndarray
        The centred points and targets at those positions.
    perm : ndarray (rows,)
        The global row (index into the concatenated shards) at each of those positions.
    landmarks : dict
        Global landmark positions of the top nodes and this rank's non-leaf nodes, by node.
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def owns(self, node):
        """Whether the node is a top node or in this rank's subtrees."""
        t = int(math.floor(math.log2(node + 1)))
        if t < self.levels:
            return True
        g = (node + 1) // (1 << (t - self.levels)) - 1       # its ancestor at level L
        return (g - ((1 << self.levels) - 1)) in self.subtrees


def build_sharded_tree(state, X_local, Y_local, offsets, r, depth, partition, rng, n_threads):
    """This rank's :class:`ShardedTree` (module docstring).  A collective: every rank calls it
    with its checked rows, the agreed sizes and the same generator state."""
    comm, rank, size = state.comm, state.rank, state.size
    n, d = int(offsets[-1]), X_local.shape[1]
    levels = rank_levels(depth, size)
    if partition == "pca" and levels > 0:
        raise Agreed(ValueError("partition='pca' needs the scatter matrix of every node's points "
                                "summed in the serial order, which a sharded fit does not do "
                                "at the levels split over ranks: use partition='random'"))
    MPI = get_mpi()
    upper = np.full(d, -np.inf) if len(X_local) == 0 else X_local.max(axis=0)
    lower = np.full(d, np.inf) if len(X_local) == 0 else X_local.min(axis=0)
    comm.Allreduce(MPI.IN_PLACE, upper, op=MPI.MAX)
    comm.Allreduce(MPI.IN_PLACE, lower, op=MPI.MIN)
    centre = tree_centre(upper, lower)
    Xc = np.ascontiguousarray(X_local - centre)
    start, count = _tree.node_ranges(n, depth)
    n_nonleaf = (1 << depth) - 1
    start_vectors = np.ascontiguousarray(rng.standard_normal((n_nonleaf, d)))
    directions = np.zeros((n_nonleaf, d))
    thresholds = np.zeros(n_nonleaf)
    gidx = int(offsets[rank]) + np.arange(len(X_local), dtype=np.int64)

    # The top levels, collectively.
    members = {0: np.arange(len(X_local), dtype=np.int64)}
    for i in range((1 << levels) - 1):
        rows = members.pop(i)
        v = start_vectors[i]
        directions[i] = v
        keys = _tree.project_rows(np.ascontiguousarray(Xc[rows]), v)
        h = int(count[i]) // 2
        if h == 0:
            thresholds[i] = -np.inf
            left = np.zeros(len(rows), dtype=bool)
        else:
            key, ident = distributed_kth(comm, keys, gidx[rows], h)
            left = (keys < key) | ((keys == key) & (gidx[rows] < ident))
            lo_max = comm.allreduce(float(keys[left].max()) if left.any() else -np.inf,
                                    op=MPI.MAX)
            thresholds[i] = _tree.threshold_between(lo_max, key)
        members[2 * i + 1], members[2 * i + 2] = rows[left], rows[~left]

    # Subtrees to their owners: one alltoallv of (point, targets, global row).
    k = Y_local.shape[1]
    width = d + k + 1
    first_sub = (1 << levels) - 1
    owners = [subtree_owner(s, levels, size) for s in range(1 << levels)]
    send, send_counts = [], np.zeros(size, dtype=np.int64)
    for s in range(1 << levels):
        rows = members[first_sub + s]
        block = np.empty((len(rows), width))
        block[:, :d], block[:, d:d + k], block[:, -1] = Xc[rows], Y_local[rows], gidx[rows]
        send.append(block.reshape(-1))
        send_counts[owners[s]] += block.size
    mine = [s for s in range(1 << levels) if owners[s] == rank]
    counts = np.array([[len(members[first_sub + s]) for s in range(1 << levels)]])
    counts = np.concatenate(comm.allgather(counts))             # (size, 2^L): rows per subtree
    recv_counts = np.array([counts[p, mine].sum() * width for p in range(size)], dtype=np.int64)
    received = np.empty(int(recv_counts.sum()))
    comm.Alltoallv([np.concatenate(send) if send else np.empty(0), send_counts],
                   [received, recv_counts])
    del members, Xc, send
    # From source rank p come its rows of each of my subtrees in order: regroup by subtree.
    parts, at = {s: [] for s in mine}, 0
    for p in range(size):
        for s in mine:
            m = int(counts[p, s])
            parts[s].append(received[at: at + m * width].reshape(m, width))
            at += m * width
    del received

    # Each subtree with the serial core; positions row0 .. from the first subtree's start.
    sub_depth = depth - levels
    sub_nonleaf = (1 << sub_depth) - 1
    local_ids = np.arange(sub_nonleaf)
    X_tree, Y_tree, perm = [], [], []
    needed = list(range(first_sub))
    for s in mine:
        g = first_sub + s
        block = np.concatenate(parts.pop(s)) if parts[s] else np.empty((0, width))
        Xs = np.ascontiguousarray(block[:, :d])
        nodes = subtree_node(g, local_ids) if sub_nonleaf else np.empty(0, dtype=np.int64)
        local_perm, dirs, thr = _tree.build_tree(
            Xs, sub_depth, np.ascontiguousarray(start_vectors[nodes].reshape(sub_nonleaf, d)),
            _tree.PARTITIONS[partition], PCA_ITERATIONS, n_threads)
        directions[nodes], thresholds[nodes] = dirs, thr
        X_tree.append(Xs[local_perm])
        Y_tree.append(block[local_perm, d:d + k])
        perm.append(block[local_perm, -1].astype(np.int64))
        needed.extend(nodes.tolist())
    landmarks = _landmarks(rng, start, count, r, depth, sorted(needed))
    row0 = int(start[first_sub + mine[0]]) if mine else 0
    return ShardedTree(
        depth=depth, levels=levels, centre=centre, start=start, count=count,
        directions=directions, thresholds=thresholds,
        subtrees=range(mine[0], mine[-1] + 1) if mine else range(0),
        row0=row0, rows=sum(len(p) for p in perm),
        X_tree=np.ascontiguousarray(np.concatenate(X_tree)) if X_tree else np.empty((0, d)),
        Y_tree=np.ascontiguousarray(np.concatenate(Y_tree)) if Y_tree else np.empty((0, k)),
        perm=np.concatenate(perm) if perm else np.empty(0, dtype=np.int64),
        landmarks=landmarks)


def _landmarks(rng, start, count, r, depth, nodes):
    """Global landmark positions of the given non-leaf nodes (sorted), from the serial draw of
    (2^J - 1, r) uniforms, generated in chunks and kept for these nodes only."""
    n_nonleaf = (1 << depth) - 1
    out, at = {}, 0
    for first in range(0, n_nonleaf, UNIFORM_CHUNK):
        rows = min(UNIFORM_CHUNK, n_nonleaf - first)
        U = rng.random((rows, r))
        while at < len(nodes) and nodes[at] < first + rows:
            i = nodes[at]
            one = np.array([start[i]]), np.array([count[i]])
            off, lm = _tree.select_landmarks(one[0], one[1], 1, r, U[i - first: i - first + 1],
                                             1)
            out[i] = lm
            at += 1
    return out

