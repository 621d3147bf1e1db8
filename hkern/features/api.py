"""fit_rff: kernel ridge regression on random Fourier features (Rahimi and Recht), and its
memory plan."""
from __future__ import annotations

import numpy as np

from .._memory import check_memory
from .._model import prepare_fit
from .._parameters import check_parameter
from .._probabilities import calibrates_probabilities
from .._ridge import block_rows, ridge_dual, ridge_on_features
from .._threads import budget_threads, budgeted
from .._validation import check_seed
from ..hyperparameters import selects_hyperparameters
from ..kernels import sample_spectral
from .model import RFFKRR
from .rff import check_phases, rff_features

__all__ = ["fit_rff", "rff_peak_bytes"]


def rff_peak_bytes(n, d, r, n_outputs):
    """Peak bytes of :func:`fit_rff` beyond its inputs.

    Both: the centred targets (n k).  r <= n (primal): the frequencies (r d), the Gram
    matrix and one block's Gram product (2 r^2) and one row block of features
    (``block_rows(n, r) * r`` doubles, about 32 MiB).  r > n (dual): all n x r features, the
    n x n Gram matrix and the frequencies, then (the n x n one freed) the r x r factor of the
    weights' posterior (the predictive variance).
    """
    if r > n:
        return 8 * (n * r + max(n * n, r * r) + r * d + 2 * (n + r) * n_outputs)
    return 8 * (2 * r * r + block_rows(n, r) * r + r * d + (2 * r + n) * n_outputs)


@calibrates_probabilities
@selects_hyperparameters("likelihood", profiles_ridge=True)
@budgeted
def fit_rff(X, y, r=1024, *, kernel="gaussian", sigma="ard", lam="auto", task="regression",
            seed=None, n_jobs=None, verbose=False, max_memory=None):
    """Kernel ridge regression on r random Fourier features.

    Frequencies come from the kernel's spectral density (:func:`hkern.kernels.sample_spectral`):
    Gaussian, Laplace and the Matern kernels are supported.  For r <= n the r x r primal system
    is solved with features formed one row block at a time (memory O(r^2 + block * r)); for
    r > n the n x n dual system (memory O(n r)) gives the same solution more cheaply.

    Parameters
    ----------
    X : array_like (n, d)
        A ``numpy.memmap`` (or ``np.load(path, mmap_mode="r")``) is read where it lies, by row
        blocks; it is copied once (8 n d bytes) where per-feature lengthscales scale it
        (X / sigma) or it sits far from the origin (the kernels' centred copy).
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"``.
    r : int
        Number of features, >= 1 (may exceed n).
    kernel : str
        "gaussian", "laplace", "matern12", "matern32" or "matern52".
    {sigma}
    lam : float or "auto", default="auto"
        Ridge regularisation, > 0, or selected.
    seed : None, int or numpy.random.Generator
    task : {"regression", "classification"}
    n_jobs : int or None
        Threads; None uses the CPUs available, within OMP_NUM_THREADS and threadpoolctl
        limits.  Results are identical for any value.
    {verbose}
    max_memory : int or None
        Most bytes the fit may allocate (see :func:`rff_peak_bytes`: about 16 r^2 + 32 MiB
        and 8 bytes per target for r <= n); None (default): the memory available when the call
        starts.

    Returns
    -------
    RFFKRR

    Raises
    ------
    ValueError
        For invalid input, or when sigma is so small next to X that the features' phases
        overflow; :class:`hkern.MemoryLimitError` (a ValueError) when the fit would need more
        than ``max_memory``.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_rff(X, y, r=300, sigma=1.0, lam=1e-3, seed=0)
    >>> float(np.sqrt(np.mean((model.predict(X) - y) ** 2))) < 0.1
    True
    """
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory, profiles_ridge=True)
    X, Y = inputs.X, inputs.Y
    r = check_parameter("r", r)
    rng = check_seed(seed)
    n, d = X.shape
    check_memory(rff_peak_bytes(n, d, r, Y.shape[1]) + inputs.scaled_bytes, max_memory,
                 what=f"fit_rff with n={n}, r={r}", fix="choose a smaller r")
    with np.errstate(over="ignore"):        # infinite frequencies are refused just below
        frequencies = sample_spectral(inputs.kernel, d, r, inputs.bandwidth, rng)
    check_phases(X, frequencies)
    offsets = rng.uniform(0.0, 2.0 * np.pi, size=r)

    n_threads = budget_threads()

    def features(rows):
        return rff_features(rows, frequencies, offsets, n_threads)

    if r > n:
        coef, evidence, lam, factor = ridge_dual(features(X), Y, inputs.lam, n_threads)
    else:
        coef, evidence, lam, factor = ridge_on_features(features, X, Y, inputs.lam, r, r,
                                                        n_threads)
    return RFFKRR(frequencies, offsets, coef, posterior_factor=factor, evidence=evidence,
                  **inputs.model_params(n_jobs, lam=lam))
