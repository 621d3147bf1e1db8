"""hkern: scalable kernel methods on CPUs.

Public functions (numpydoc docstrings on each):

* kernels: :func:`kernel_matrix`, :func:`kernel_diag`, :func:`kernel_matvec`
* hierarchical kernels: :func:`fit_hierarchical`, and the block-diagonal :func:`fit_independent`
* baselines: :func:`fit_exact`, :func:`fit_nystrom`, :func:`fit_rff`
* Gaussian processes: :func:`fit_grief` (GP-GRIEF, grid-structured eigenfunctions)
* column selection: :func:`oasis`, :func:`select_columns` (oASIS, greedy and randomly pivoted
  Cholesky, uniform)
* data: :mod:`hkern.datasets` (``load_uci``, ``make_regression``, ``standardize``)
"""
from . import datasets
from .baselines import fit_exact, fit_nystrom, fit_rff
from .grief import fit_grief
from .hierarchical import fit_hierarchical, fit_independent
from .kernels import kernel_diag, kernel_matrix, kernel_matvec
from .oasis import oasis, select_columns

__version__ = "0.1.0"

__all__ = ["kernel_matrix", "kernel_diag", "kernel_matvec", "fit_hierarchical", "fit_independent",
           "fit_exact", "fit_nystrom", "fit_rff", "fit_grief", "oasis", "select_columns", "datasets",
           "__version__"]
