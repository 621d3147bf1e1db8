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


def grief_dense_phi(X, grids, lengthscales, p, jitter=1e-12):
    """GRIEF basis Phi = K_XU Q S_p' Lambda_p^(-1/2) built naively (tiny d and mbar only).

    U is the full Cartesian grid (dimension 1 slowest), K_UU the Kronecker product of the jittered
    1-D SE matrices, and Q, Lambda its dense eigendecomposition; the p largest eigenvalues are
    taken by a full sort.  Returns (Phi, eigenvalues (p,), positions in the dense spectrum).
    """
    import itertools
    U = np.array(list(itertools.product(*grids)))
    K_UU = np.ones((1, 1))
    for g, ls in zip(grids, lengthscales):
        K_UU = np.kron(K_UU, dense_kernel(g[:, None], g[:, None], ls) + jitter * np.eye(g.size))
    lam, Q = np.linalg.eigh(K_UU)
    order = np.argsort(-lam, kind="stable")[:p]
    K_XU = dense_kernel(X / lengthscales, U / lengthscales, 1.0)
    return K_XU @ Q[:, order] / np.sqrt(lam[order]), lam[order], order
