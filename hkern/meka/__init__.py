"""MEKA: memory-efficient block low-rank kernel approximation G ~ W L W^T, and kernel ridge
regression on it (Si, Hsieh and Dhillon, JMLR 2017; spec: doc/specs/meka.md)."""
from .api import MekaApproximation, meka
from .krr import MekaKRR, fit_meka

__all__ = ["MekaApproximation", "MekaKRR", "fit_meka", "meka"]
