"""hkern: scalable kernel methods on CPUs.

Public functions (numpydoc docstrings on each):

* kernels: :func:`kernel_matrix`, :func:`kernel_diag`, :func:`kernel_matvec`
* hierarchical kernels: :func:`fit_hierarchical`, and the block-diagonal :func:`fit_independent`
* the main fits: :func:`fit_exact` (exact kernel ridge regression), :func:`fit_nystrom`
  (Nystrom, and FALKON), :func:`fit_rff` (random Fourier features)
* MEKA block low-rank approximation: :func:`meka`, :func:`fit_meka`
* Gaussian processes: :func:`fit_grief` (GP-GRIEF, grid-structured eigenfunctions)
* column selection: :func:`oasis`, :func:`select_columns` (oASIS, greedy and randomly pivoted
  Cholesky, uniform)
* SLKL: :func:`fit_slkl` (learned sparse combination of rank-1 Nystrom kernels) and its
  baselines :func:`fit_slkl_unif`, :func:`fit_slkl_krrm`
* data: :mod:`hkern.datasets` (``load_uci``, ``make_regression``, ``standardize``)
* scikit-learn estimators over every method: :mod:`hkern.sklearn` (imported on its own; needs
  the ``sklearn`` extra)
* hyperparameters: ``sigma="auto"`` or ``"ard"`` and ``lam="auto"`` in every ``fit_<method>``
  select them (:mod:`hkern.hyperparameters`); the model's ``selection_`` is a
  :class:`HyperparameterSelection`
* :class:`MemoryLimitError`: raised before allocating when a call would need more than its
  ``max_memory`` (default: the memory available)

The fitted models and results the functions return are exported too: :class:`ExactKRR`,
:class:`NystromKRR`, :class:`RFFKRR`, :class:`HierarchicalKRR`, :class:`IndependentKRR`,
:class:`MekaApproximation`, :class:`MekaKRR`, :class:`GriefGP`, :class:`ColumnSelection`,
:class:`SlklModel` (construct them through the functions, not directly), and a classifier's
:class:`ProbabilityCalibration` (its ``calibration_``, behind ``predict_proba``).
"""
from . import datasets
from ._memory import MemoryLimitError
from ._probabilities import ProbabilityCalibration
from .exact import ExactKRR, fit_exact
from .features import RFFKRR, fit_rff
from .grief import GriefGP, fit_grief
from .hierarchical import HierarchicalKRR, IndependentKRR, fit_hierarchical, fit_independent
from .hyperparameters import HyperparameterSelection, SelectionWarning
from .kernels import kernel_diag, kernel_matrix, kernel_matvec
from .meka import MekaApproximation, MekaKRR, fit_meka, meka
from .nystrom import NystromKRR, fit_nystrom
from .oasis import ColumnSelection, oasis, select_columns
from .slkl import SlklModel, fit_slkl, fit_slkl_krrm, fit_slkl_unif
from .solvers import ConvergenceWarning

__version__ = "0.1.0"

__all__ = ["kernel_matrix", "kernel_diag", "kernel_matvec", "fit_hierarchical", "fit_independent",
           "fit_exact", "fit_nystrom", "fit_rff", "meka", "fit_meka", "oasis", "select_columns",
           "fit_grief", "fit_slkl", "fit_slkl_unif", "fit_slkl_krrm", "datasets",
           "MemoryLimitError", "ExactKRR", "NystromKRR", "RFFKRR", "HierarchicalKRR",
           "IndependentKRR", "MekaApproximation", "MekaKRR", "GriefGP", "ColumnSelection",
           "SlklModel", "HyperparameterSelection", "ProbabilityCalibration",
           "ConvergenceWarning", "SelectionWarning",
           "__version__"]
