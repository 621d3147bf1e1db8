"""Kernel families evaluated in compiled blocks (see :func:`kernel_matrix` for definitions)."""
from ._api import KERNELS, kernel_diag, kernel_kind, kernel_matrix, kernel_matvec, sample_spectral

__all__ = ["KERNELS", "kernel_matrix", "kernel_diag", "kernel_matvec", "kernel_kind",
           "sample_spectral"]
