"""The construction of a MEKA approximation: its arguments checked, then the three steps
(clusters, bases, links; doc/specs/meka.md, sections 2-3) and the optional PSD fix."""
from __future__ import annotations

import time

import numpy as np

from .. import _linalg
from .._memory import check_memory
from .._model import prepare_sigma, scaled_copy_bytes
from .._parameters import check_parameter, choices_of
from .._threads import blas_threads, budget_threads
from .._validation import (
    check_array,
    check_rank,
)
from ..kernels._api import _centred_for_accuracy, kernel_kind
from . import _meka
from ._bases import landmark_bases
from ._cluster import cluster
from ._links import link_samples, zeroed_pairs
from .approximation import MekaApproximation

__all__ = ["RANK_POLICIES", "THRESHOLD_KINDS", "build", "check_peak", "check_sizes",
           "checked_arguments"]

RANK_POLICIES = choices_of("rank_policy")
THRESHOLD_KINDS = choices_of("threshold_kind")


def check_status(status, what):
    """Raise for a failed compiled step: MemoryError for its malloc, else the LAPACK info."""
    if status == -1000:
        raise MemoryError(f"MEKA {what}: could not allocate scratch memory")
    _linalg.check_info(status, f"MEKA {what}")


def check_sizes(rank, n_clusters, n):
    """(rank, n_clusters) checked against the n points: each an integer in [1, n]."""
    rank = check_rank(rank, n, "r")
    n_clusters = check_parameter("n_clusters", n_clusters, n=n)
    return rank, n_clusters


def checked_arguments(X, rank, n_clusters, *, kernel, sigma, oversample, landmarks_per_cluster,
                      rank_policy, threshold, threshold_kind, psd, kmeans_sample, kmeans_iter,
                      link_rcond, max_memory=None):
    """The arguments of :func:`hkern.meka` checked and normalised, as keyword arguments of
    :func:`build`: X divided by the lengthscales when ``sigma`` is an array (``sigma`` is then
    the engine's bandwidth 1 and ``lengthscales`` the array)."""
    X = check_array(X, "X")
    n = X.shape[0]
    name, kind = kernel_kind(kernel)
    X, _, sigma, lengthscales = prepare_sigma(X, sigma, max_memory)
    rank, n_clusters = check_sizes(rank, n_clusters, n)
    kmeans_sample = check_parameter("kmeans_sample", kmeans_sample)
    if n_clusters > min(n, kmeans_sample):
        raise ValueError(f"n_clusters={n_clusters} exceeds kmeans_sample={kmeans_sample}, the "
                         "number of points k-means runs on; raise kmeans_sample")
    kmeans_iter = check_parameter("kmeans_iter", kmeans_iter)
    oversample = check_parameter("oversample", oversample)
    landmarks_per_cluster = check_parameter("landmarks_per_cluster", landmarks_per_cluster)
    rank_policy = check_parameter("rank_policy", rank_policy)
    threshold_kind = check_parameter("threshold_kind", threshold_kind)
    threshold = check_parameter("threshold", threshold, threshold_kind)
    link_rcond = check_parameter("link_rcond", link_rcond)
    psd = check_parameter("psd", psd)
    return dict(X=X, name=name, kind=kind, sigma=sigma, lengthscales=lengthscales, rank=rank,
                n_clusters=n_clusters, oversample=oversample,
                landmarks_per_cluster=landmarks_per_cluster,
                rank_policy=rank_policy, threshold=threshold, threshold_kind=threshold_kind,
                psd=bool(psd), kmeans_sample=kmeans_sample, kmeans_iter=kmeans_iter,
                link_rcond=link_rcond)


def check_peak(peak_bytes, max_memory, args, function):
    """Refuse, before anything large is allocated, a construction (and what ``function`` does
    with it) whose estimated peak exceeds ``max_memory``."""
    n, d = args["X"].shape
    check_memory(peak_bytes + scaled_copy_bytes(args["X"], args["lengthscales"]), max_memory,
                 what=(f"{function} with n={n}, d={d}, r={args['rank']}, "
                       f"n_clusters={args['n_clusters']}"),
                 fix="choose a smaller r or fewer clusters")


def build(*, X, name, kind, sigma, lengthscales, rank, n_clusters, oversample,
          landmarks_per_cluster, rank_policy, threshold, threshold_kind, psd, kmeans_sample,
          kmeans_iter, link_rcond, rng, n_jobs, progress):
    """The steps of :func:`hkern.meka` on checked arguments, inside the caller's thread budget
    (``n_jobs`` is the caller's, kept by the approximation for its own methods); each step
    reported to ``progress`` (a :class:`hkern._progress.Progress`)."""
    n_threads = budget_threads()
    timings = {}
    start = time.perf_counter()
    Xc, _ = _centred_for_accuracy(kind, X, X)
    shift = None if Xc is X else X[0] - Xc[0]
    centroids, labels = cluster(Xc, n_clusters, kmeans_sample, kmeans_iter, rng, n_threads)
    c = centroids.shape[0]
    perm = np.argsort(labels, kind="stable")
    Xs = np.ascontiguousarray(Xc[perm])
    del Xc      # the centred copy (if one was made) is not needed beside the sorted one
    starts = np.zeros(c + 1, dtype=np.intp)
    starts[1:] = np.cumsum(np.bincount(labels, minlength=c))
    timings["cluster"] = time.perf_counter() - start
    sizes = np.diff(starts)
    progress(f"k-means: {c} clusters of {sizes.min()} to {sizes.max()} points "
             f"({timings['cluster']:.2f} s)")

    start = time.perf_counter()
    Zl, Fl, ranks = landmark_bases(kind, sigma, Xs, starts, rank, rank_policy,
                                   landmarks_per_cluster, rng, n_threads)
    k_starts = np.zeros(c + 1, dtype=np.intp)
    k_starts[1:] = np.cumsum(ranks)
    z_starts = np.zeros(c + 1, dtype=np.intp)
    z_starts[1:] = np.cumsum([z.shape[0] for z in Zl])
    f_off = np.zeros(c + 1, dtype=np.intp)
    f_off[1:] = np.cumsum([f.size for f in Fl])
    w_off = np.zeros(c + 1, dtype=np.intp)
    w_off[1:] = np.cumsum(sizes * ranks)
    Z = np.ascontiguousarray(np.concatenate(Zl))
    F = np.ascontiguousarray(np.concatenate([f.ravel() for f in Fl]))
    W = np.zeros(int(w_off[-1]))
    with blas_threads(1):
        status = _meka.fill_bases(kind, sigma, Xs, starts, Z, z_starts, F, f_off, k_starts, W,
                                  w_off, n_threads)
    check_status(status, "bases")
    timings["bases"] = time.perf_counter() - start
    progress(f"landmark bases: total rank {int(k_starts[-1])} ({timings['bases']:.2f} s)")

    start = time.perf_counter()
    K = int(k_starts[-1])
    L = np.eye(K)
    pairs = np.array([(s, t) for s in range(c) for t in range(s + 1, c)],
                     dtype=np.intp).reshape(-1, 2)
    zero = zeroed_pairs(kind, sigma, centroids, pairs, threshold, threshold_kind, n_threads)
    fitted = np.ascontiguousarray(pairs[~zero])
    samples, offsets = link_samples(starts, ranks, fitted, oversample, rng)
    link_ranks = np.zeros(max(len(fitted), 1), dtype=np.intc)
    with blas_threads(1):
        status = _meka.fill_links(kind, sigma, Xs, starts, W, w_off, k_starts, fitted, samples,
                                  offsets, link_rcond, L, link_ranks, n_threads)
    check_status(status, "link blocks")
    timings["links"] = time.perf_counter() - start
    progress(f"link blocks: {len(fitted)} of {len(pairs)} pairs fitted "
             f"({timings['links']:.2f} s)")

    parts = dict(X_sorted=Xs, perm=perm, starts=starts, centroids=centroids, Z=Z,
                 z_starts=z_starts, f_off=f_off, k_starts=k_starts, w_off=w_off,
                 zeroed_pairs=np.ascontiguousarray(pairs[zero]), kernel=name, kind=kind,
                 sigma=sigma, lengthscales=lengthscales, shift=shift, timings=timings,
                 n_jobs=n_jobs)
    approx = MekaApproximation(**parts, L=L, W=W, F=F, psd=False)
    if psd:
        start = time.perf_counter()
        L, W, F = approx._psd_factors()
        timings["psd"] = time.perf_counter() - start
        approx = MekaApproximation(**parts, L=L, W=W, F=F, psd=True)
        progress(f"projected onto the PSD cone ({timings['psd']:.2f} s)")
    return approx
