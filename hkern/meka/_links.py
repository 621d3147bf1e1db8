"""MEKA step 3: which cluster pairs are linked, and the rows each link block is fitted on
(doc/specs/meka.md, section 2; the least squares themselves run in the compiled core)."""
from __future__ import annotations

import math

import numpy as np

from ..kernels._api import _kernel_matrix_trusted

__all__ = ["LINK_RCOND", "link_samples", "zeroed_pairs"]

# Default relative singular-value cutoff of the link least squares.  doc/specs/meka.md (section
# 7, item 4) suggested 1e-10 (Corrections 1 there); measured on standardised UCI sets
# (doc/results/meka.md) that lets the sampled rows A = W^(s)[v_s] amplify noise through
# singular values ~1e-6 s_max (a basis column concentrated on points the sample missed):
# relative errors of 10^2..10^5 on protein, pol and elevators at sigma = 1.  1e-2 kept every
# set stable (the authors' pinv(A^T A, 1e-6) is an absolute cutoff of ~1e-3 on A's singular
# values, of the same order).
LINK_RCOND = 1e-2


def zeroed_pairs(kind, sigma, centroids, pairs, threshold, threshold_kind, n_threads):
    """Boolean mask of the pairs whose link block the threshold sets to zero."""
    if len(pairs) == 0 or threshold == 0.0:
        return np.zeros(len(pairs), dtype=bool)
    D = _kernel_matrix_trusted(kind, sigma, centroids, centroids, n_threads)
    values = D[pairs[:, 0], pairs[:, 1]]
    if threshold_kind == "absolute":
        return values <= threshold                     # the paper's K(mu_s, mu_t) <= eps
    n_zero = math.ceil(threshold * len(pairs) - 1e-12)
    mask = np.zeros(len(pairs), dtype=bool)
    mask[np.argsort(values, kind="stable")[:n_zero]] = True
    return mask


def link_samples(starts, ranks, pairs, oversample, rng):
    """Sampled rows of each pair: (1 + rho) k_s of cluster s and (1 + rho) k_t of cluster t."""
    sizes = np.diff(starts)
    want = np.minimum(np.ceil((1.0 + oversample) * ranks - 1e-9).astype(np.intp), sizes)
    chunks, offsets, pos = [], np.zeros((len(pairs), 3), dtype=np.intp), 0
    for p, (s, t) in enumerate(pairs):
        a, b = int(want[s]), int(want[t])
        rows_s = np.arange(starts[s], starts[s + 1]) if a == sizes[s] else \
            np.sort(rng.choice(sizes[s], a, replace=False)) + starts[s]
        rows_t = np.arange(starts[t], starts[t + 1]) if b == sizes[t] else \
            np.sort(rng.choice(sizes[t], b, replace=False)) + starts[t]
        chunks += [rows_s, rows_t]
        offsets[p] = (pos, a, b)
        pos += a + b
    samples = np.concatenate(chunks).astype(np.intp) if chunks else np.zeros(1, dtype=np.intp)
    return np.ascontiguousarray(samples), offsets
