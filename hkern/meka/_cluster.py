"""MEKA step 1: k-means on a subsample, then every point to its nearest centroid (doc/specs/meka.md,
section 2)."""
from __future__ import annotations

import math
import warnings

import numpy as np

from . import _meka

__all__ = ["DISTANCE_SAFE_RANGE", "assign", "cluster", "distance_exponent", "drop_empty"]

# Data whose largest magnitude lies outside this range are clustered after an exact rescaling
# (see distance_exponent); inside it, squared distances of n <= 2^40 points in d <= 2^40
# dimensions can neither overflow nor lose their leading digits to underflow.
DISTANCE_SAFE_RANGE = (2.0**-100, 2.0**100)


def drop_empty(centroids, labels):
    """Remove the clusters no point was assigned to and renumber the labels 0..c'-1."""
    counts = np.bincount(labels, minlength=centroids.shape[0])
    keep = np.flatnonzero(counts > 0)                  # doc/specs/meka.md, section 7, item 7
    remap = np.full(centroids.shape[0], -1, dtype=np.intp)
    remap[keep] = np.arange(len(keep))
    return np.ascontiguousarray(centroids[keep]), remap[labels]


def distance_exponent(*arrays):
    """k such that 2^k brings the largest magnitude of ``arrays`` into [0.5, 1), or 0 when it is
    already inside DISTANCE_SAFE_RANGE.

    k-means and nearest-centroid assignment depend only on the order of squared distances.
    Near the input bound (1e150) those overflow: scipy's kmeans2 then divides inf by inf in
    k-means++ and its vq step leaves labels unset when every distance is infinite, which made
    ``update_cluster_means`` write out of bounds (the segfault of issue 16, defect 3).  Below
    ~1e-154 they underflow to 0 and every point looks like every other.  Multiplying by a power
    of two is exact, so the clustering of 2^k X is that of X, bit for bit, with finite
    distances.  Normal data (k = 0) are not touched.
    """
    top = 0.0
    for A in arrays:
        if A.size:
            top = max(top, float(A.max()), -float(A.min()))   # no |A| temporary
    if top == 0.0 or DISTANCE_SAFE_RANGE[0] <= top <= DISTANCE_SAFE_RANGE[1]:
        return 0
    return max(-1022, min(1023, -math.frexp(top)[1]))      # 2^k must itself be finite


def assign(X, centroids, n_threads):
    """Nearest-centroid labels of the rows of X, with distances computed at a safe scale."""
    labels = np.empty(X.shape[0], dtype=np.intp)
    scale = math.ldexp(1.0, distance_exponent(X, centroids))
    _meka.assign_nearest(X, centroids, labels, n_threads, scale)
    return labels


def cluster(X, n_clusters, kmeans_sample, kmeans_iter, rng, n_threads):
    """k-means++ / Lloyd (scipy kmeans2) on a uniform subsample, then nearest-centroid labels.

    k-means runs on the sample times 2^k (see distance_exponent), so that its squared
    distances are finite and not underflowed for every accepted input.  Fewer distinct sample
    points than clusters would leave k-means++ without candidates: the number of clusters is
    then reduced to the number of distinct (scaled) points.  Returns (centroids, labels) with
    the empty clusters dropped.
    """
    from scipy.cluster.vq import kmeans2

    n = X.shape[0]
    sample = X if n <= kmeans_sample else X[np.sort(rng.choice(n, kmeans_sample, replace=False))]
    k = distance_exponent(sample)
    if k:
        sample = np.ldexp(sample, k)
    if n_clusters > 1:
        n_clusters = min(n_clusters, len(np.unique(sample, axis=0)))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        # An empty k-means cluster only warns in kmeans2; it is dropped below.  Distinct points
        # whose squared distances underflow to 0 make k-means++ divide 0 by 0: it then picks
        # the first point again, which is harmless (an empty cluster).
        warnings.simplefilter("ignore", UserWarning)
        centroids, _ = kmeans2(sample, n_clusters, iter=kmeans_iter, minit="++", seed=rng)
    centroids = np.ascontiguousarray(centroids, dtype=np.float64)
    if k:
        centroids = np.ldexp(centroids, -k)
    return drop_empty(centroids, assign(X, centroids, n_threads))
