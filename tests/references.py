"""Dense references built from mathematical definitions (small n only)."""
import numpy as np
from scipy.spatial.distance import cdist


def dense_kernel(X, Y, sigma):
    """Gaussian kernel exp(-||x - y||^2 / (2 sigma^2)) from its definition."""
    return np.exp(-cdist(X, Y, "sqeuclidean") / (2.0 * sigma**2))


def slkl_dense(C, mu, y, lam, nu):
    """SLKL quantities from their definitions (spec slkl.md sections 1-2), n x n inverse.

    C (n, M) holds the candidate columns c_m.  Returns a (M,), b (M,), F and
    Kinv = (lam I + sum_m mu_m c_m c_m^T)^{-1}.
    """
    n = C.shape[0]
    Kinv = np.linalg.inv(lam * np.eye(n) + (C * mu) @ C.T)
    a = C.T @ (Kinv @ y)
    b = np.einsum("im,ij,jm->m", C, Kinv, C)
    F = y @ np.linalg.solve(np.eye(n) + (C * mu) @ C.T / lam, y) + nu * mu.sum()
    return a, b, F, Kinv


def slkl_G(C, mu, active, lam):
    """G = (D^{-1} + C_A^T C_A / lam)^{-1} by direct inversion, in the order of `active`."""
    CA = C[:, active]
    return np.linalg.inv(np.diag(1.0 / mu[active]) + CA.T @ CA / lam)
