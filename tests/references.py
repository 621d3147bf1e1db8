"""Dense references built from mathematical definitions (small n only)."""
import numpy as np
from scipy.spatial.distance import cdist


def dense_kernel(X, Y, sigma):
    """Gaussian kernel exp(-||x - y||^2 / (2 sigma^2)) from its definition."""
    return np.exp(-cdist(X, Y, "sqeuclidean") / (2.0 * sigma**2))
