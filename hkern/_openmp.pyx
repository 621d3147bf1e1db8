# cython: language_level=3
"""The OpenMP runtime hkern's compiled cores run on, as the thread budget reads it.

A module of its own, below :mod:`hkern._threads`: the compiled cores import the thread budget,
and the budget needs this one number from OpenMP.
"""
from openmp cimport omp_get_max_threads


def openmp_max_threads():
    """omp_get_max_threads() of the OpenMP runtime hkern's cores run on.

    It honours OMP_NUM_THREADS, the CPU affinity mask and a threadpoolctl limit on OpenMP
    (hkern._threads.resolve_n_jobs reads it for ``n_jobs=None``).
    """
    return omp_get_max_threads()
