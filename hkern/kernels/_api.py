"""Python face of the kernel families: names, validation, thread budgets, spectral sampling."""
from __future__ import annotations

import numpy as np

from .._memory import check_memory
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import (
    check_array,
    check_rhs,
    check_sigma,
    check_underflow,
    document_sigma,
    scale_inputs,
)
from . import _kernels

__all__ = ["KERNELS", "kernel_matrix", "kernel_diag", "kernel_matvec", "kernel_kind",
           "sample_spectral"]

# Canonical names and the integer kind the compiled core uses (hkern/kernels/_kernels.pxd).
KERNELS = {
    "gaussian": 0,
    "laplace": 1,
    "imq": 2,
    "matern12": 3,
    "matern32": 4,
    "matern52": 5,
}
_ALIASES = {"rbf": "gaussian", "inverse_multiquadric": "imq", "exponential": "matern12"}


def kernel_kind(kernel):
    """Canonical name and compiled kind for a kernel name (aliases accepted)."""
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be a string, one of {sorted(KERNELS)}; got {kernel!r}")
    name = _ALIASES.get(kernel.lower(), kernel.lower())
    if name not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)} (aliases: "
                         f"{sorted(_ALIASES)}); got {kernel!r}")
    return name, KERNELS[name]


def _centred_for_accuracy(kind, X, Y):
    """X and Y shifted by a common vector when their offset from the origin dwarfs their spread.

    Squared distances come from ||x||^2 + ||y||^2 - 2 x.y, whose rounding error grows with the
    norms, not with the distances: data at 30 standard deviations from the origin lost three
    digits.  Every kernel depends on x - y only, so a common shift changes nothing but the
    rounding.  Data already near the origin (standardised data) are used as they are.
    """
    centre, shifted_Y = _common_shift(kind, Y)
    if centre is None:
        return X, Y
    return (shifted_Y if X is Y else np.ascontiguousarray(X - centre)), shifted_Y


def _common_shift(kind, Y):
    """(centre, Y - centre) when :func:`_centred_for_accuracy` shifts, else (None, Y)."""
    if kind == KERNELS["laplace"] or Y.shape[0] == 0:
        return None, Y  # L1 distances are computed from differences directly
    centre = Y.mean(axis=0)
    shifted_Y = Y - centre                  # one n x d temporary, kept if the shift is used
    spread = np.mean(np.einsum("ij,ij->i", shifted_Y, shifted_Y))
    if centre @ centre <= spread:
        return None, Y
    return centre, shifted_Y


# Single precision (``dtype=np.float32``).  The float32 engine forms squared norms and
# distances in float (largest 3.4e38, smallest normal 1.2e-38) and scales them by 1 / sigma^2
# in float: these bounds keep every one of those finite and normal, where float64 has
# MAX_MAGNITUDE (1e150).
SINGLE_MAX_MAGNITUDE = 1e15
SINGLE_MIN_MAGNITUDE = 1e-15
SINGLE_SIGMA_RANGE = (1e-15, 1e15)


def _resolve_dtype(dtype, *arrays):
    """The precision of a kernel function: ``dtype`` (float32 or float64) if given, else float32
    when every one of ``arrays`` is a float32 NumPy array, else float64."""
    if dtype is None:
        single = all(getattr(a, "dtype", None) == np.float32 for a in arrays)
        return np.dtype(np.float32) if single else np.dtype(np.float64)
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be None, numpy.float32 or numpy.float64; got {dtype!r}")
    return resolved


def _check_in(A, name, dtype):
    """``A`` checked (check_array) in ``dtype``: a float32 array is kept as it is, anything else
    is checked in float64 first and rounded to float32 only after the magnitude checks."""
    if dtype == np.float32 and getattr(A, "dtype", None) == np.float32:
        return check_array(A, name, dtype=np.float32)
    return check_array(A, name)


def _check_single(sigma, named):
    """Refuse data the float32 engine cannot represent (see SINGLE_MAX_MAGNITUDE), then round
    every array of ``named`` ({name: array}) to C-contiguous float32; returns them in order."""
    lo_sigma, hi_sigma = SINGLE_SIGMA_RANGE
    if not lo_sigma <= sigma <= hi_sigma:
        raise ValueError(f"sigma={sigma:.3g} is outside [{lo_sigma:g}, {hi_sigma:g}], the "
                         "bandwidths single precision represents here: use dtype=numpy.float64, "
                         "or multiply X and sigma by a common factor (the kernels depend on "
                         "X / sigma only)")
    out = []
    for name, A in named.items():
        largest = max(float(A.max()), -float(A.min())) if A.size else 0.0
        if largest > SINGLE_MAX_MAGNITUDE or 0.0 < largest < SINGLE_MIN_MAGNITUDE:
            raise ValueError(f"{name} has values up to {largest:.3g} in magnitude; single "
                             f"precision accepts {SINGLE_MIN_MAGNITUDE:g} <= max |value| <= "
                             f"{SINGLE_MAX_MAGNITUDE:g} (beyond, its squared distances overflow "
                             "or underflow float32): use dtype=numpy.float64, or multiply the "
                             "data and sigma by a common factor")
        out.append(np.ascontiguousarray(A, dtype=np.float32))
    return out


SINGLE_RHS_RANGE = (1e-30, 1e30)


def _check_single_rhs(B):
    """Refuse a B whose product with K would leave float32's range: the engine itself scales B
    (:func:`_single_operand`), but a float32 result of up to n max |B| must be finite, and one
    of entries near max |B| K should not be subnormal."""
    largest = max(float(B.max()), -float(B.min())) if B.size else 0.0
    lo, hi = SINGLE_RHS_RANGE
    if largest > hi or 0.0 < largest < lo:
        raise ValueError(f"B has values up to {largest:.3g} in magnitude; with a float32 result "
                         f"single precision accepts {lo:g} <= max |B| <= {hi:g}: use "
                         "dtype=numpy.float64, or scale B and the result by a common factor")


def _single_operand(B):
    """``B`` (float64, any finite values) as the float32 operand of the single-precision engine:
    ``(B / scale rounded to float32, scale)``, scale the power of two that brings max |B| into
    [0.5, 1).  Dividing and multiplying back by a power of two is exact, so any B hkern accepts
    (up to 1e150) is used at float32's relative precision, where a plain cast would overflow
    above 3.4e38 or lose everything below 1e-38; the float products of 256 entries stay far
    from float32's range."""
    largest = max(float(B.max()), -float(B.min())) if B.size else 0.0
    if largest == 0.0:
        return np.ascontiguousarray(B, dtype=np.float32), 1.0
    scale = float(np.ldexp(1.0, int(np.frexp(largest)[1])))
    if B.dtype == np.float32 and 2.0**-60 <= scale <= 2.0**60:
        return np.ascontiguousarray(B), 1.0     # already float32, and far from its limits
    return np.ascontiguousarray(B * (1.0 / scale), dtype=np.float32), scale


def _kernel_matrix_trusted(kind, sigma, X, Y, n_threads, out=None):
    """K(X, Y) for validated C-contiguous inputs, both float64 or both float32 (then computed in
    single precision, and float32), written into ``out`` (C-contiguous, X's dtype, K's shape)
    if given: a loop that rebuilds the matrix reuses its memory instead of faulting in fresh
    pages each time."""
    X, Y = _centred_for_accuracy(kind, X, Y)
    return _kernel_matrix_raw(kind, sigma, X, Y, n_threads, out)


def _kernel_matrix_raw(kind, sigma, X, Y, n_threads, out=None):
    """:func:`_kernel_matrix_trusted` of inputs already shifted as the caller wants (no shift
    of its own: a caller computing K a block of columns at a time shifts them all alike)."""
    if out is None:
        out = np.empty((X.shape[0], Y.shape[0]), dtype=X.dtype)
    # Tiles call single-threaded BLAS from OpenMP threads: BLAS and OpenMP must not multiply.
    with blas_threads(1):
        _kernels.fill_kernel_matrix(kind, sigma, X, Y, out, n_threads)
    return out


@budgeted
@document_sigma
def kernel_matrix(X, Y=None, *, kernel="gaussian", sigma=1.0, n_jobs=None, dtype=None,
                  max_memory=None):
    r"""Kernel matrix K[i, j] = k(X[i], Y[j]).

    All kernels share one parametrisation: a bandwidth (lengthscale) ``sigma > 0`` and
    ``k(x, x) = 1``; with one lengthscale per feature (an array ``sigma``, ARD) each is the
    formula below with :math:`\sigma = 1` at :math:`x / \sigma, y / \sigma`:

    ============  ==================================================================
    ``gaussian``  :math:`\exp(-\|x-y\|_2^2 / (2\sigma^2))`  (alias ``"rbf"``)
    ``laplace``   :math:`\exp(-\|x-y\|_1 / \sigma)`
    ``imq``       :math:`\sigma / \sqrt{\|x-y\|_2^2 + \sigma^2}`
    ``matern12``  :math:`\exp(-r/\sigma)`, :math:`r = \|x-y\|_2`  (alias ``"exponential"``)
    ``matern32``  :math:`(1 + \sqrt3 r/\sigma) \exp(-\sqrt3 r/\sigma)`
    ``matern52``  :math:`(1 + \sqrt5 r/\sigma + 5r^2/(3\sigma^2)) \exp(-\sqrt5 r/\sigma)`
    ============  ==================================================================

    Conversions to the papers' conventions:

    * MEKA and scikit-learn's ``rbf_kernel`` write :math:`\exp(-\gamma\|x-y\|^2)`:
      :math:`\gamma = 1/(2\sigma^2)`.
    * oASIS writes :math:`\exp(-\|x-y\|^2/\sigma_{paper}^2)`: :math:`\sigma_{paper}^2 = 2\sigma^2`.
    * The HCK paper's inverse multiquadric is :math:`\sigma^2/\sqrt{\|x-y\|^2+\sigma^2}`, which
      is ``sigma`` times hkern's ``imq``.

    Parameters
    ----------
    X : array_like of shape (m, d)
    Y : array_like of shape (n, d), optional
        Defaults to ``X``.
    kernel : str
        One of the names above.
    {sigma}
    n_jobs : int or None
        Threads; None uses the CPUs available, within OMP_NUM_THREADS and threadpoolctl
        limits.  The result is bitwise identical for any value.
    dtype : None, numpy.float32 or numpy.float64
        The precision of the computation and of the result.  None (default): float32 when X
        (and Y, if given) are float32 NumPy arrays, float64 otherwise.  float32 evaluates the
        distances (sgemm) and the kernel (a single-precision exponential) in float: half the
        memory, about twice the speed, entries accurate to a few float32 roundings (see
        Notes).  float64 with float32 inputs converts them, as before.
    max_memory : int or None
        Most bytes the call may allocate (the result takes 8 m n, scaled copies of X and Y
        8 (m + n) d more with lengthscales; half of each in single precision); None (default):
        the memory available when the call starts.

    Returns
    -------
    K : ndarray of shape (m, n), of dtype ``dtype``

    Raises
    ------
    ValueError
        For invalid input; :class:`hkern.MemoryLimitError` (a ValueError) when the result
        would not fit in ``max_memory``.

    Notes
    -----
    Squared distances come from one GEMM per output tile (:math:`\|x\|^2 + \|y\|^2 - 2x^Ty`);
    distances smaller than 1e-3 of :math:`\|x\|^2+\|y\|^2`, where that formula cancels, are
    recomputed exactly, and data far from the origin compared with their spread are first
    shifted by a common vector (the kernels depend on x - y only).  The elementwise map runs in
    an OpenMP loop over tiles.

    In single precision an entry k(s) of scaled distance s is within a few
    :math:`u = 2^{-24}` of k times :math:`1 + |d\log k/ds|\,(s + N)`, N the scaled squared
    norms :math:`(\|x\|^2 + \|y\|^2)/\sigma^2` (the distance formula's rounding): relative
    1e-6 to 1e-5 on the entries that matter for standardised data.  It accepts data with
    1e-15 <= max(abs(value)) <= 1e15 and 1e-15 <= sigma <= 1e15, where float32 norms and
    distances stay finite and normal (and :func:`kernel_matvec` 1e-30 <= max(abs(B)) <= 1e30,
    or B = 0, for a finite float32 result); outside, use float64.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> hkern.kernel_matrix(X, kernel="gaussian", sigma=1.0).round(4)
    array([[1.    , 0.6065],
           [0.6065, 1.    ]])
    """
    dtype = _resolve_dtype(dtype, X) if Y is None else _resolve_dtype(dtype, X, Y)
    X = _check_in(X, "X", dtype)
    if Y is None:
        Y = X
    else:
        Y = _check_in(Y, "Y", dtype)
        if Y.shape[1] != X.shape[1]:
            raise ValueError(f"Y has {Y.shape[1]} features but X has {X.shape[1]}; they must "
                             "match")
    _, kind = kernel_kind(kernel)
    bandwidth, lengthscales = check_sigma(sigma, X.shape[1])
    m, n, d = X.shape[0], Y.shape[0], X.shape[1]
    copies = 1 if lengthscales is None else 2
    # The m x n result, and shifted copies of X and Y when they sit far from the origin (and
    # their copies divided by the lengthscales).
    check_memory(dtype.itemsize * (m * n + copies * (m + n) * d), max_memory,
                 what=f"kernel_matrix of shape ({m}, {n})",
                 fix="use kernel_matvec for products K @ B, or pass fewer rows")
    X, Y = _scaled_pair(X, Y, bandwidth, lengthscales, dtype)
    return _kernel_matrix_trusted(kind, bandwidth, X, Y, budget_threads())


def kernel_diag(X, *, kernel="gaussian", sigma=1.0):
    """Diagonal k(X[i], X[i]) of the kernel matrix without forming it.

    Every hkern kernel is stationary with unit peak, so this is a vector of ones; it exists so
    that code written against it stays correct if a non-stationary kernel is added.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> hkern.kernel_diag(np.zeros((3, 2)))
    array([1., 1., 1.])
    """
    X = check_array(X, "X")
    kernel_kind(kernel)
    check_sigma(sigma, X.shape[1])
    return np.ones(X.shape[0])


def _scaled_pair(X, Y, bandwidth, lengthscales, dtype=np.float64):
    """X and Y divided by the lengthscales (Y once when it is X), checked against the bandwidth
    the engine will use on them; in single precision (``dtype`` float32) checked against its
    range and rounded to float32 (X and Y may come in float64 or float32)."""
    same = Y is X
    if lengthscales is not None:
        if X.dtype == np.float32:       # stay in float: float32 / float64 would promote
            lengthscales = lengthscales.astype(np.float32)
        X = scale_inputs(X, lengthscales, "X")
        Y = X if same else scale_inputs(Y, lengthscales, "Y")
    check_underflow(bandwidth, X, Y)
    if dtype == np.float32:
        if same:
            X, = _check_single(bandwidth, {"X": X})
            Y = X
        else:
            X, Y = _check_single(bandwidth, {"X": X, "Y": Y})
    return X, Y


def _matvec_bytes(m, n, d, k, n_threads, itemsize=8):
    """Bytes of :func:`_kernel_matvec_trusted` beyond its inputs: the m x k result, squared norms,
    one kernel tile per thread (the kernel is never stored), and shifted copies of X and Y when
    the data sit far from the origin; in single precision (itemsize 4) the norms, copies and
    tiles take half, and B in float32 and the float32 result come on top of the float64 sums,
    and, for one column (the fused Gaussian loop), Y transposed with its norms and B beside it
    and 16 running sums a row of each thread's row tile."""
    if itemsize == 4:     # + B scaled (a float64 temporary) and rounded to float32
        fused = 4 * ((n + 256) * (d + 2) * 17 // 16 + 16 * 128 * n_threads) + 128
        return (8 * (m * k + n * k) + 4 * (m * k + n * k + m + n + (m + n) * d)
                + fused + _kernels.kernel_times_bytes(k, n_threads, 4))
    return 8 * (m * k + m + n + (m + n) * d) + _kernels.TILE_BYTES * n_threads


def _kernel_matvec_trusted(kind, sigma, X, Y, B, n_threads):
    """K(X, Y) @ B by the fused kernel-product engine: each tile of K is computed in cache and
    multiplied at once, never stored (hkern.kernels._kernels.kernel_times).

    X and Y both float64, or both float32 for single precision: then B is rounded to float32,
    each tile's product is float and the sum over the tiles double.  The result is float64 in
    both (the float32 engine's sums are double; the caller rounds them if it wants float32).
    """
    X, Y = _centred_for_accuracy(kind, X, Y)
    return _kernel_matvec_raw(kind, sigma, X, Y, B, n_threads)


def _kernel_matvec_raw(kind, sigma, X, Y, B, n_threads):
    """:func:`_kernel_matvec_trusted` of inputs already shifted as the caller wants (no shift
    of its own: a caller summing K B over blocks of columns shifts them all alike)."""
    m, n = X.shape[0], Y.shape[0]
    out = np.empty((m,) + B.shape[1:])
    B2 = np.ascontiguousarray(B.reshape(n, -1))
    scale = 1.0
    if X.dtype == np.float32:
        B2, scale = _single_operand(B2)
    with blas_threads(1):   # tiles call single-threaded BLAS from OpenMP threads
        _kernels.kernel_times_matrix(kind, sigma, X, Y, B2, out.reshape(m, -1), n_threads)
    if scale != 1.0:
        out *= scale
    return out


def _normal_times_bytes(n, m, d, k, n_threads, itemsize=8):
    """Bytes of :func:`_kernel_normal_times_trusted` beyond its inputs: the m x k result, squared
    norms, the engine's blocks and partial sums, and shifted copies of X and Z when the data sit
    far from the origin (norms and copies in the inputs' precision, ``itemsize`` bytes; in single
    precision also U rounded to float32)."""
    extra = 4 * m * k if itemsize == 4 else 0
    return (8 * m * k + extra + itemsize * (m + n + (m + n) * d)
            + _kernels.normal_times_bytes(n, m, k, n_threads, itemsize))


def _kernel_normal_times_trusted(kind, sigma, X, Z, U, V, n_threads):
    """K(X, Z)^T (K(X, Z) U + V) in one pass over K(X, Z) (U or V None: zero), each block of K
    computed in cache and used twice, never stored (hkern.kernels._kernels.kernel_normal_times).

    The products FALKON's conjugate gradients need: with U the normal-equations operator, with
    V alone the right-hand side K^T y.  U (m x k) and V (n x k) are C-contiguous float64.  X
    and Z both float64, or both float32 for single precision: then U is rounded to float32, and
    V, every sum longer than 256 terms and the result stay float64.
    """
    X, Z = _centred_for_accuracy(kind, X, Z)
    k = (U if U is not None else V).shape[1]
    scale = 1.0
    if U is not None and X.dtype == np.float32:
        U, scale = _single_operand(U)
        if V is not None and scale != 1.0:
            V = V * (1.0 / scale)       # exact: a power of two
    out = np.empty((Z.shape[0], k))
    with blas_threads(1):   # blocks call single-threaded BLAS from OpenMP threads
        _kernels.kernel_normal_times_matrix(kind, sigma, X, Z, U, V, out, n_threads)
    if scale != 1.0:
        out *= scale
    return out


def _slab_groups(n, m, n_threads):
    """(b0, b1, r0, r1) for each group of n_threads consecutive slabs of kernel_normal_times
    on n rows and m centres: its blocks b0 <= b < b1 and rows r0 <= r < r1."""
    rows, blocks, slabs = _kernels.normal_times_layout(n, m)
    group = max(1, n_threads)
    for s0 in range(0, slabs, group):
        b0 = s0 * blocks // slabs
        b1 = min(s0 + group, slabs) * blocks // slabs
        yield b0, b1, b0 * rows, min(b1 * rows, n)


def _widened_rows_bytes(n, m, d, n_threads):
    """Bytes of the float64 rows :func:`_kernel_normal_times_widened` holds at a time (one
    group of n_threads slabs of X, widened)."""
    return 8 * d * max((r1 - r0 for _, _, r0, r1 in _slab_groups(n, m, n_threads)), default=0)


def _kernel_normal_times_widened(kind, sigma, X, Z, U, V, n_threads):
    """:func:`_kernel_normal_times_trusted` in float64 for a float32 ``X`` kept in float32:
    bitwise its result on ``X.astype(np.float64)``, without that n x d float64 copy.

    The pass runs over the engine's own blocks and slabs (``normal_times_layout``), a group of
    ``n_threads`` slabs at a time (the threads share out a call's slabs): each group's rows are
    widened (and shifted, where :func:`_centred_for_accuracy` shifts) into a float64 buffer of
    at most n_threads / slabs of X, and its blocks added to their slabs' partial sums
    (``kernel_normal_times_blocks``, as an MPI rank continues a pass), which are then added in
    order, as the one-call pass adds them.  Z, U and V are float64.
    """
    n, m = X.shape[0], Z.shape[0]
    k = (U if U is not None else V).shape[1]
    if n == 0 or m == 0:
        return _kernel_normal_times_trusted(kind, sigma, X.astype(np.float64), Z, U, V,
                                            n_threads)
    # The shift _centred_for_accuracy would apply to the float64 X: from Z alone.
    centre, Z_used = _common_shift(kind, Z)
    slabs = _kernels.normal_times_layout(n, m)[2]
    sums = np.zeros((slabs, m, k))
    with blas_threads(1):
        for b0, b1, r0, r1 in _slab_groups(n, m, n_threads):
            part = X[r0:r1].astype(np.float64)
            if centre is not None:
                part -= centre
            _kernels.kernel_normal_times_blocks(
                kind, sigma, n, b0, b1, part, Z_used, U,
                None if V is None else np.ascontiguousarray(V[r0:r1]), sums, n_threads)
    out = np.zeros((m, k))
    for s in range(slabs):          # the order kernel_normal_times adds its slabs in
        out += sums[s]
    return out


@budgeted
def kernel_matvec(X, Y, B, *, kernel="gaussian", sigma=1.0, n_jobs=None, dtype=None,
                  max_memory=None):
    """``kernel_matrix(X, Y) @ B`` without holding the whole kernel matrix.

    Parameters
    ----------
    X : array_like of shape (m, d)
    Y : array_like of shape (n, d)
    B : array_like of shape (n,) or (n, k)
    kernel, sigma, n_jobs
        As in :func:`kernel_matrix`.
    dtype : None, numpy.float32 or numpy.float64
        As in :func:`kernel_matrix`: None follows X and Y (float32 when both are float32).  In
        single precision B is rounded to float32, each 128 x 256 tile of K and its product
        with B are float, and the sum over the tiles is double, rounded to float32 once at the
        end: the result's error does not grow with n (a float sum of n terms would).
    max_memory : int or None
        Most bytes the call may allocate (the result and one 128 x 256 tile of K per thread:
        the kernel matrix is never stored; and copies of X and Y divided by the lengthscales
        when sigma is an array); None (default): the memory available when the call starts.

    Returns
    -------
    ndarray of shape (m,) or (m, k), of dtype ``dtype``

    Examples
    --------
    >>> import numpy as np, hkern
    >>> X = np.random.default_rng(0).normal(size=(5, 2))
    >>> np.allclose(hkern.kernel_matvec(X, X, np.ones(5)), hkern.kernel_matrix(X).sum(1))
    True
    """
    dtype = _resolve_dtype(dtype, X, Y)
    X = _check_in(X, "X", dtype)
    Y = _check_in(Y, "Y", dtype)
    if Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y has {Y.shape[1]} features but X has {X.shape[1]}; they must match")
    single_B = dtype == np.float32 and getattr(B, "dtype", None) == np.float32
    B = check_rhs(B, Y.shape[0], "B", dtype=np.float32 if single_B else np.float64)
    _, kind = kernel_kind(kernel)
    bandwidth, lengthscales = check_sigma(sigma, X.shape[1])
    m, n, d = X.shape[0], Y.shape[0], X.shape[1]
    k = B.shape[1] if B.ndim == 2 else 1
    scaled = 0 if lengthscales is None else (m + n) * d
    # The m x k result, a tile of K per thread, shifted copies of X and Y when the data sit far
    # from the origin (and copies divided by the lengthscales).
    check_memory(_matvec_bytes(m, n, d, k, budget_threads(), dtype.itemsize)
                 + dtype.itemsize * scaled, max_memory,
                 what=f"kernel_matvec with m={m}, n={n}, k={k}",
                 fix="pass B with fewer columns, or fewer rows of X at a time")
    X, Y = _scaled_pair(X, Y, bandwidth, lengthscales, dtype)
    if dtype == np.float32:
        _check_single_rhs(B)
    out = _kernel_matvec_trusted(kind, bandwidth, X, Y, B, budget_threads())
    return out.astype(np.float32) if dtype == np.float32 else out


def sample_spectral(kernel, n_features, n_components, sigma, rng):
    """Frequencies drawn from the kernel's spectral density (Bochner), for random features.

    k(x - y) = E_w[cos(w.(x - y))] with w drawn from the returned distribution:

    * gaussian: w ~ N(0, I / sigma^2);
    * laplace (a product of 1-D Laplace kernels): w_j ~ Cauchy(0, 1/sigma) independently;
    * matern (nu = 1/2, 3/2, 5/2): multivariate Student-t with 2 nu degrees of freedom and
      scale 1/sigma, i.e. w = g / (sigma sqrt(u / (2 nu))), g ~ N(0, I), u ~ chi2(2 nu).

    Returns an (n_components, n_features) array.
    """
    name, _ = kernel_kind(kernel)
    shape = (n_components, n_features)
    if name == "gaussian":
        return rng.standard_normal(shape) / sigma
    if name == "laplace":
        return rng.standard_cauchy(shape) / sigma
    if name.startswith("matern"):
        nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[name]
        u = rng.chisquare(2 * nu, size=(n_components, 1))
        return rng.standard_normal(shape) / (sigma * np.sqrt(u / (2 * nu)))
    raise ValueError(f"random Fourier features are not available for kernel={kernel!r}: its "
                     "spectral density has no sampler here; use 'gaussian', 'laplace' or a "
                     "Matern kernel")
