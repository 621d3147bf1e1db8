"""Log marginal likelihood of the low-rank GP K~ = Phi W Phi' + noise I, and its derivatives.

Two forms (doc/specs/grief.md, section 3), both needing only yy = y'y, r = Phi'y and
A = Phi'Phi (or their SVD transforms), so their cost does not depend on n:

* ``plain_lml``: O(p^3) with a Cholesky factor of P = noise W^-1 + A.
* ``svd_lml``: O(p) in the basis Phi~ = U~ of the thin SVD of Phi (A = I).
"""
from __future__ import annotations

import numpy as np

from .. import _linalg

__all__ = ["LOG_2PI", "plain_lml", "plain_posterior", "svd_lml", "svd_transform"]

LOG_2PI = float(np.log(2.0 * np.pi))
# Singular values of Phi kept by the SVD form, relative to the largest: directions below it
# are numerically in the null space of Phi and would make 1/s blow up.
SVD_RTOL = 1e-7


def plain_posterior(A, r, w, noise):
    """Cholesky factor L of P = noise W^-1 + A and beta = P^-1 r."""
    P = A.copy()
    P[np.diag_indices_from(P)] += noise / w
    L = _linalg.cholesky(P)
    return L, _linalg.cho_solve(L, r)


def plain_lml(yy, r, A, n, w, noise, grad=True):
    """LML and (optionally) dLML/dw (p,) and dLML/dnoise for K~ = Phi diag(w) Phi' + noise I.

    Returns (lml, dw, dnoise, L, beta); dw and dnoise are None without ``grad``.
    ``noise`` is taken as a NumPy float (no OverflowError from its square; see svd_lml).
    """
    noise = np.float64(noise)
    p = r.shape[0]
    L, beta = plain_posterior(A, r, w, noise)
    rb = float(r @ beta)
    logdet = 2.0 * np.sum(np.log(np.diag(L))) + np.sum(np.log(w)) + (n - p) * np.log(noise)
    lml = -0.5 * logdet - 0.5 * (yy - rb) / noise - 0.5 * n * LOG_2PI
    if not grad:
        return lml, None, None, L, beta
    Linv = _linalg.solve_triangular(L, np.eye(p), lower=True)
    pinv_diag = np.einsum("ij,ij->j", Linv, Linv)                  # diag(P^-1)
    dw = (beta**2 + noise * pinv_diag) / (2.0 * w**2) - 0.5 / w
    # tr(P^-1 A), with P^-1 A = I - P^-1 noise W^-1
    tr_pinv_a = p - noise * np.sum(pinv_diag / w)
    quad = yy - 2.0 * rb + float(beta @ (A @ beta))
    dnoise = quad / (2.0 * noise**2) - (n - tr_pinv_a) / (2.0 * noise)
    return lml, dw, dnoise, L, beta


def svd_transform(A, r):
    """From A = Phi'Phi and r = Phi'y: (s, V, uy) with Phi = U diag(s) V', uy = U'y.

    The thin SVD of Phi is taken through the eigendecomposition of A (s^2, V), keeping singular
    values above SVD_RTOL times the largest.
    """
    ev, V = np.linalg.eigh(A)
    ev, V = ev[::-1], V[:, ::-1]
    s = np.sqrt(np.maximum(ev, 0.0))
    keep = s > SVD_RTOL * max(s[0], np.finfo(float).tiny) if s.size else s > 0
    s, V = s[keep], np.ascontiguousarray(V[:, keep])
    return s, V, (V.T @ r) / s


def svd_lml(yy, rho, n, w, noise, grad=True):
    """LML (and dLML/dw, dLML/dnoise) in the SVD basis, O(p~); rho = (U'y)^2.

    ``noise`` is taken as a NumPy float: a value whose square does not fit a double (a MALA
    proposal far in the tail) then gives an infinite or NaN result for the caller to reject,
    where Python's float power raised OverflowError.
    """
    noise = np.float64(noise)
    pt = rho.shape[0]
    wn = w + noise
    lml = (-0.5 * np.sum(np.log(wn) + rho / wn)
           - 0.5 * ((n - pt) * np.log(noise) + (yy - rho.sum()) / noise) - 0.5 * n * LOG_2PI)
    if not grad:
        return lml, None, None
    dw = 0.5 * (rho / wn**2 - 1.0 / wn)
    dnoise = dw.sum() - 0.5 * ((n - pt) / noise - (yy - rho.sum()) / noise**2)
    return lml, dw, dnoise
