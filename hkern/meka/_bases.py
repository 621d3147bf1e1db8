"""MEKA step 2: per cluster s, landmarks Z_s and the Nystrom map F^(s) = U_s Lambda_s^{-1/2}
of K(Z_s, Z_s), whose basis is W^(s) = K(X_s, Z_s) F^(s) (doc/specs/meka.md, section 2)."""
from __future__ import annotations

import numpy as np

from .. import _linalg
from ..kernels._api import _kernel_matrix_trusted

__all__ = ["EIG_RCOND", "landmark_bases", "target_ranks"]

# Eigenvalues of a landmark block K(Z_s, Z_s) at or below this fraction of its largest are
# dropped before Lambda^{-1/2} (doc/specs/meka.md, section 7, item 3): below it the basis
# columns are round-off amplified by up to 1e5.
EIG_RCOND = 1e-10


def target_ranks(rank, sizes, policy):
    """k_s before the landmark step (uniform, proportional); spectral is decided later."""
    c, n = len(sizes), int(sizes.sum())
    if policy == "uniform" or policy == "spectral":
        return np.minimum(rank, sizes)
    # proportional: the total c * rank split as ceil(total n_s / n), surplus taken from the
    # largest clusters so that the total is kept (the authors' code takes it from the last).
    total = rank * c
    k = np.minimum(np.ceil(total * sizes / n).astype(np.intp), sizes)
    k = np.maximum(k, 1)
    surplus = int(k.sum()) - total
    for s in np.argsort(-sizes, kind="stable"):
        if surplus <= 0:
            break
        take = min(surplus, int(k[s]) - 1)
        k[s] -= take
        surplus -= take
    return k


def landmark_bases(kind, sigma, Xs, starts, rank, policy, landmarks_per_cluster, rng, n_threads):
    """Landmarks Z_s, eigenpairs of K(Z_s, Z_s) and the maps F^(s) = U_s Lambda_s^{-1/2}.

    Returns (list of Z_s, list of F^(s), ranks k_s) for the cluster-sorted points Xs.
    """
    sizes = np.diff(starts)
    c = len(sizes)
    target = target_ranks(rank, sizes, policy)
    Z, eig = [], []
    for s in range(c):
        m = landmarks_per_cluster if landmarks_per_cluster is not None else 2 * (
            rank if policy == "spectral" else int(target[s]))
        m_s = int(min(m, sizes[s]))
        idx = np.sort(rng.choice(sizes[s], m_s, replace=False)) + starts[s]
        Zs = np.ascontiguousarray(Xs[idx])
        w, U = _linalg.eigh(_kernel_matrix_trusted(kind, sigma, Zs, Zs, n_threads))
        w, U = w[::-1], U[:, ::-1]
        keep = int(np.sum(w > EIG_RCOND * w[0]))
        Z.append(Zs)
        eig.append((w[:keep], U[:, :keep]))
    if policy == "spectral":
        # Pool every cluster's eigenvalues and keep the global top c * rank (doc/specs/meka.md,
        # section 2, strategy 3); each cluster keeps at least one pair so that every point has
        # a basis.
        pooled = np.concatenate([w for w, _ in eig])
        owner = np.concatenate([np.full(len(w), s) for s, (w, _) in enumerate(eig)])
        top = np.argsort(-pooled, kind="stable")[:rank * c]
        target = np.maximum(np.bincount(owner[top], minlength=c), 1)
    F, ranks = [], []
    for s in range(c):
        w, U = eig[s]
        k_s = int(min(target[s], len(w)))
        F.append(np.ascontiguousarray(U[:, :k_s] / np.sqrt(w[:k_s])))
        ranks.append(k_s)
    return Z, F, np.asarray(ranks, dtype=np.intp)
