"""Preconditioners for kernel ridge systems (K + lam I) a = y.

:class:`NystromPreconditioner` is M = F F^T + lam I for a Nystrom factor F (n x k) of the kernel
matrix (K ~ F F^T, e.g. ``select_columns(...).F_``), applied by the Woodbury identity

    M^{-1} R = (R - F S^{-1} F^T R) / lam,    S = lam I + F^T F = L_S L_S^T,

with the k x k Cholesky factor L_S: O(n k) per column, no explicit inverse.  S is positive
definite for any lam > 0, and its condition number is at most 1 + ||F||^2 / lam; the
subtraction loses about log10(||F||^2 / lam) digits in the directions of F's large singular
values, where M^{-1} is of order 1 / ||F||^2 anyway (relative error ~ eps ||F||^2 / lam: 1e-9
for ||F||^2 = 1e4 and lam = 1e-3).  The error is the same at every application, so CG sees a
fixed symmetric operator.

The interface every preconditioner of hkern offers is declared here (:class:`Preconditioner`,
:class:`LikelihoodPreconditioner`), and so is how a fit names and builds one
(:class:`PreconditionerKind`), with the registry of the kinds by name
(:func:`register_preconditioner`, :func:`preconditioner_kind`).  The Nystrom kinds are fed by
:func:`hkern.select_columns` and register themselves in :mod:`hkern.solvers.exact_pcg`
(:data:`~hkern.solvers.exact_pcg.NYSTROM_PRECONDITIONERS`); the hierarchical package registers
the HCK kind when it is imported (:data:`hkern.hierarchical.preconditioner.HCK_PRECONDITIONER`).
So ``fit_exact(solver="pcg", preconditioner="hck")`` finds HCK by its name, and neither the
solvers nor the fit import the package above them that feeds it (doc/design.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from .. import _linalg
from .._linalg.segments import rows_times, transposed_products
from .._row_span import SEGMENT_ROWS, RowSpan
from .._threads import blas_threads
from .operators import single_times

__all__ = ["IdentityPreconditioner", "LikelihoodPreconditioner", "NystromPreconditioner",
           "Preconditioner", "PreconditionerKind", "preconditioner_kind",
           "register_preconditioner", "registered_preconditioners"]


@runtime_checkable
class Preconditioner(Protocol):
    """M^{-1} for an M close to the system matrix, as block CG applies it.

    ``M(R)`` returns M^{-1} R for R of shape (n, j), a new array; M is symmetric positive
    definite and the same operator at every call.  ``rank`` is its size parameter (the Nystrom
    factor's columns, the HCK landmarks per node), which the solver's record reports.
    """

    @property
    def rank(self) -> int: ...

    def __call__(self, R: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class LikelihoodPreconditioner(Protocol):
    """What stochastic Lanczos quadrature needs of M beyond its solve
    (:func:`hkern.solvers.slq.stochastic_lml`): log det M, and draws z ~ N(0, M)."""

    def __call__(self, R: np.ndarray) -> np.ndarray: ...

    def logdet(self) -> float: ...

    def sample(self, rng: np.random.Generator, t: int) -> np.ndarray: ...


@dataclass(frozen=True)
class PreconditionerKind:
    """A preconditioner as a fit names it (``fit_exact(preconditioner=name)``).

    Attributes
    ----------
    name : str
    build : callable
        ``build(inputs, rank, *, seed, n_threads, max_memory, adaptive=False,
        dtype=numpy.float64)``: a :class:`Preconditioner` for the prepared inputs
        (``hkern._model.FitInputs``) of ``rank``.  ``adaptive`` (``rank`` is a most, not a
        number) and ``dtype`` (float32: a mixed-precision factor) concern the Nystrom kinds;
        others ignore them.
    peak_bytes : callable
        ``peak_bytes(n, d, k, rank, n_threads, itemsize=8)``: bytes of building it for n
        points of d features and applying it to k columns (``itemsize`` 4: its float32 form,
        where the kind has one).
    """

    name: str
    build: Callable
    peak_bytes: Callable


# The preconditioner kinds by name, as the packages that feed them registered them.
_KINDS = {}


def register_preconditioner(kind):
    """Make ``kind`` (a :class:`PreconditionerKind`) known by its name, and return it.

    A package that feeds the solvers a preconditioner registers its kind when it is imported
    (``HCK_PRECONDITIONER = register_preconditioner(PreconditionerKind("hck", ...))``), so that
    a fit below it finds the kind by the name its user passes (:func:`preconditioner_kind`)
    without importing it.  ``import hkern`` imports every such package, so the registry is full
    before any call.  A name is registered by one module only (importing that module again
    replaces its kind).

    Raises
    ------
    ValueError
        When another module's kind already has the name.
    """
    known = _KINDS.get(kind.name)
    if known is not None and known.build.__module__ != kind.build.__module__:
        raise ValueError(f"a preconditioner kind named {kind.name!r} is already registered, by "
                         f"{known.build.__module__}")
    _KINDS[kind.name] = kind
    return kind


def preconditioner_kind(name):
    """The registered :class:`PreconditionerKind` named ``name``.

    Raises
    ------
    ValueError
        When no kind of that name is registered (the message lists the registered names).
    """
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"no preconditioner is named {name!r}; the registered ones are "
                         f"{', '.join(repr(k) for k in _KINDS)} (a package registers its kind "
                         "when it is imported: import hkern)") from None


def registered_preconditioners():
    """{name: kind} of every registered :class:`PreconditionerKind` (a copy), in the order
    they were registered."""
    return dict(_KINDS)


class NystromPreconditioner:
    """M^{-1} for M = F F^T + lam I (module docstring).

    Parameters
    ----------
    F : ndarray (n, k)
        Nystrom factor, float64, or float32 (a mixed-precision preconditioner: F is applied
        in single precision to float64 residuals, S is formed and factorised in float64).  A
        view with contiguous rows (the first k columns of a larger array, as a factor that
        stopped early comes) or columns (Fortran order, as block RPCholesky returns its factor) is
        kept as it is; other layouts are copied.
    lam : float
        The ridge, > 0.
    n_threads : int
        Threads of its products (results identical for any value).
    pivots : ndarray (k,) of int, optional
        The rows whose kernel columns F spans, in F's column order (F at them lower
        triangular), when F is a Nystrom factor: they let F be extended to new points
        (:func:`hkern.solvers.exact_pcg.extended_preconditioner`).
    gram : ndarray (k, k), optional
        F^T F in float64, when already known (:meth:`with_lam`, an extended factor); it is
        kept as the attribute ``gram``.
    span : hkern._row_span.RowSpan, optional
        The rows F holds (all n by default; on MPI ranks, this rank's run of segments of a
        factor whose other rows the other ranks hold).  Every product with F is made a
        segment at a time and its sums over rows added in global segment order, so that
        the same factor gives the same bits on any number of ranks.  R stays whole: every
        rank applies M^{-1} to all n rows.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.solvers import NystromPreconditioner
    >>> F = np.random.default_rng(0).normal(size=(50, 5))
    >>> M = NystromPreconditioner(F, 0.1)
    >>> R = np.ones((50, 1))
    >>> bool(np.allclose((F @ F.T + 0.1 * np.eye(50)) @ M(R), R))
    True
    """

    def __init__(self, F, lam, n_threads=1, pivots=None, gram=None, span=None):
        single = isinstance(F, np.ndarray) and F.dtype == np.float32
        self.F = _linalg.in_place(F, np.float32 if single else np.float64)
        self.lam = float(lam)
        self.n_threads = n_threads
        self.pivots = pivots
        self.span = RowSpan(self.F.shape[0]) if span is None else span
        k = self.F.shape[1]
        # F^T F costs n k^2 flops (3.2e11 at kin40k's n = 36 000 and rank 3000), S's factor
        # k^3 / 3: the gram is kept for another lam or more rows.
        self.gram = segment_gram(self.F, self.span, n_threads) if gram is None else gram
        S = self.gram.copy()
        S.flat[:: k + 1] += self.lam
        self._factor = _linalg.cholesky(S, overwrite=True, n_threads=n_threads)

    @property
    def rank(self):
        return self.F.shape[1]

    def with_lam(self, lam):
        """The preconditioner of the same factor for another ridge ``lam`` (F shared, not
        copied)."""
        return NystromPreconditioner(self.F, lam, self.n_threads, pivots=self.pivots,
                                     gram=self.gram, span=self.span)

    def _times(self, V, trans=False, alpha=1.0):
        if self.F.dtype == np.float32:
            return single_times(self.F, V, trans_a=trans, alpha=alpha, n_threads=self.n_threads)
        return _linalg.matmul(self.F, V, trans_a=trans, alpha=alpha, n_threads=self.n_threads)

    def __call__(self, R):
        """M^{-1} R for R of shape (n, j)."""
        span, F = self.span, self.F
        R = np.ascontiguousarray(R, dtype=np.float64)
        held = np.ascontiguousarray(R[span.lo:span.hi])
        with blas_threads(1):
            # F^T R: each segment's product, summed in segment order (hkern._row_span).
            T = span.fold(transposed_products(F, held, SEGMENT_ROWS, self.n_threads))
            if T is None:                   # no rows at all
                T = np.zeros((F.shape[1], R.shape[1]))
            T = _linalg.cho_solve(self._factor, T, n_threads=self.n_threads)
            local = rows_times(F, np.ascontiguousarray(T), -1.0, SEGMENT_ROWS, self.n_threads)
        out = span.all_rows(local)
        out += R
        out /= self.lam
        return out

    def logdet(self):
        """log det M = log det S + (n - k) log lam (Sylvester's determinant identity)."""
        n, k = self.F.shape
        return _linalg.cholesky_logdet(self._factor) + (n - k) * np.log(self.lam)

    def sample(self, rng, t):
        """t independent draws z ~ N(0, M), the columns of an (n, t) array.

        z = F g1 + sqrt(lam) g2 with g1 ~ N(0, I_k), g2 ~ N(0, I_n) independent (drawn in that
        order from ``rng``, a numpy Generator), whose covariance is F F^T + lam I = M: the
        probes of preconditioned stochastic trace estimation (:mod:`hkern.solvers.slq`).
        """
        n, k = self.F.shape
        g1 = rng.standard_normal((k, t))
        g2 = rng.standard_normal((n, t))
        out = self._times(g1)
        out += np.sqrt(self.lam) * g2
        return out


# Rows of F converted to float64 at a time when S = F^T F of a float32 F is formed (16 MB of
# float64 at 1000 columns).
_GRAM_ROWS = 2048


def segment_gram(F, span, n_threads):
    """F^T F in float64 of the rows ``span`` holds of a factor spread over a
    :class:`~hkern._row_span.RowSpan`: each segment's Gram added in place, in global
    segment order (a float32 F converted a segment at a time, as in float64_gram)."""
    k = F.shape[1]

    def step(S, a, b):
        part = F[span.local(a, b)]
        if part.dtype != np.float64:
            part = part.astype(np.float64)
        # The lower triangle only, mirrored once at the end (a mirror per segment cost more
        # than the segment's product: 157 segments of 3000 columns).
        return _linalg.gram(part, trans=True, n_threads=n_threads, out=S, mirror=False)
    return _linalg.symmetrize(span.chain(np.zeros((k, k)), step), from_lower=True)


def float64_gram(F, n_threads):
    """F^T F in float64 (F float64, or float32 converted a block of rows at a time: float32
    sums over n rows would lose S's small eigenvalues, which M^{-1} divides by)."""
    if F.dtype == np.float64:
        return _linalg.gram(F, trans=True, n_threads=n_threads)
    S = np.zeros((F.shape[1], F.shape[1]))
    for r0 in range(0, F.shape[0], _GRAM_ROWS):
        _linalg.gram(F[r0:r0 + _GRAM_ROWS].astype(np.float64), trans=True, n_threads=n_threads,
                     out=S)
    return S


class IdentityPreconditioner:
    """M = I in n dimensions, with the face of :class:`NystromPreconditioner` that
    :func:`hkern.solvers.slq.stochastic_lml` uses: for a system that is already preconditioned
    (FALKON's B^T H B), whose log-determinant is then estimated with standard normal probes.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.solvers.preconditioners import IdentityPreconditioner
    >>> M = IdentityPreconditioner(3)
    >>> M.logdet(), M.sample(np.random.default_rng(0), 2).shape
    (0.0, (3, 2))
    """

    def __init__(self, n):
        self.n = int(n)

    def __call__(self, R):
        return np.array(R, dtype=np.float64, copy=True)

    def logdet(self):
        return 0.0

    def sample(self, rng, t):
        return rng.standard_normal((self.n, t))
