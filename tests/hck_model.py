"""What a fitted HCK model is made of, read back for the dense oracles: the tree-ordered data,
tree and landmarks a fit drew (``reconstruct``), the leaf each new point routes to, and the
moves between tree order and training order.  The oracles themselves (tests/oracles.py) know
nothing of hkern; these helpers are the bridge from a model to their arguments."""
import numpy as np
from oracles import dense_kernel

from hkern.hierarchical import _tree
from hkern.hierarchical import factor as hfactor


def make_kern(kernel, sigma):
    """The base kernel k(A, B) from its definition (empty blocks allowed: empty leaves exist)."""
    def kern(A, B):
        if len(A) == 0 or len(B) == 0:
            return np.zeros((len(A), len(B)))
        return dense_kernel(A, B, kernel=kernel, sigma=sigma)
    return kern


def reconstruct(X, r, seed, leaf_size=None, partition="random"):
    """Tree-ordered centred data, tree dict and landmark position arrays of
    fit_hierarchical(X, ..., r=r, seed=seed, leaf_size=leaf_size, partition=partition).

    api.fit_hierarchical draws from one Generator: first the (2^J - 1, d) start vectors inside
    build_tree, then the (2^J - 1, r) landmark uniforms for _tree.select_landmarks.
    """
    rng = np.random.default_rng(seed)
    X = np.ascontiguousarray(X, dtype=np.float64)
    X_tree, tree = hfactor.build_tree(X, r, leaf_size, partition, rng, 1)
    depth = tree["depth"]
    n_nonleaf = (1 << depth) - 1
    uniforms = np.ascontiguousarray(rng.random((n_nonleaf, r)))
    off, lm = _tree.select_landmarks(tree["start"], tree["count"], depth, r, uniforms, 1)
    landmarks = [lm[off[i]:off[i + 1]].copy() for i in range(n_nonleaf)]
    return X_tree, tree, landmarks


def route(model, Xq):
    """Leaf number of each new point, by the model's stored directions and thresholds."""
    Xc = np.ascontiguousarray(np.asarray(Xq, dtype=float) - model.centre_)
    return _tree.route(Xc, model.directions_, model.thresholds_, model.depth_, 1)


def to_original(M_tree, perm):
    """Rows of a tree-ordered array back in training order."""
    out = np.empty_like(M_tree)
    out[perm] = M_tree
    return out


def matrix_to_original(A_tree, perm):
    """A tree-ordered n x n matrix in training order: A[perm[a], perm[b]] = A_tree[a, b]."""
    out = np.empty_like(A_tree)
    out[np.ix_(perm, perm)] = A_tree
    return out
