"""SLKL: stochastic low-rank kernel learning for regression (Machart et al., ICML 2011), and
the paper's baselines on the same candidate set."""
from .api import STEPS, SlklModel, fit_slkl
from .baselines import fit_slkl_krrm, fit_slkl_unif

__all__ = ["STEPS", "SlklModel", "fit_slkl", "fit_slkl_krrm", "fit_slkl_unif"]
