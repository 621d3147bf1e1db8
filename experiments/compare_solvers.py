"""The iterative solvers of issue 19 against direct solvers and their peers, side by side.

One process on this machine; every time is the median of ``--repeats`` whole fits, memory the
peak resident set above the start.  Sections (``--sections``, all by default):

``exact``
    kin40k split 0, sigma 1.41, lam 1e-2: ``fit_exact(solver="cholesky")`` against
    ``fit_exact(solver="pcg")`` with the kernel recomputed at every iteration (``max_memory``
    2 GB, so K is not stored) and stored, for each preconditioner rank in ``--ranks``.
``nystrom``
    kin40k, sigma 2, lam 1e-3: ``fit_nystrom(solver="pcg")`` (FALKON in hkern) against
    :func:`falkon_numpy`, a plain NumPy/SciPy statement of FALKON's Algorithm 1 on hkern's
    kernel blocks, at M = 8192 (and every ``--centres``), and against scikit-learn's
    ``Nystroem`` + ``Ridge`` at M = 4096; the direct ``fit_nystrom`` for reference.
``synthetic``
    10^6 x 8 synthetic regression (a smooth function plus noise), M = 4096: Nystrom-PCG.
``curves``
    Test error against fit time on kin40k, protein, keggundirected, elevators and pol: HCK
    (an r sweep), direct Nystrom, Nystrom-PCG (an M sweep), exact PCG, and exact Cholesky
    where the n x n matrix fits in memory.

PCG fits stop at ``--tol`` (FALKON's relative residual for Nystrom-PCG and for the NumPy
peer, the same system and the same test).  ``--write`` records results/solvers.json.

    python experiments/compare_solvers.py --sections nystrom synthetic
    python experiments/compare_solvers.py --sections exact --ranks 2000 3000
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scipy.linalg
from common import (
    RESULTS,
    available_memory,
    banner,
    load_standardized,
    markdown_table,
    rmse,
    timed_fit,
)

import hkern

SEED = 0
EXACT_SIGMA, EXACT_LAM = 1.41, 1e-2
NYSTROM_SIGMA, NYSTROM_LAM = 2.0, 1e-3
RECOMPUTE_MEMORY = 2 * 10**9
CURVE_SETS = ("kin40k", "protein", "keggundirected", "elevators", "pol")
# One setting for every set of the curves section (standardised data); not yet tuned per set.
CURVE_SIGMA, CURVE_LAM = 1.0, 1e-3


def falkon_numpy(X, y, centres, sigma, lam, tol, max_iter):
    """FALKON's Algorithm 1 (Rudi, Carratino and Rosasco, 2017) in NumPy/SciPy: the peer.

    The paper's MATLAB, line by line, with hkern's ``kernel_matrix`` for the kernel blocks and
    SciPy's Cholesky and triangular solves; its lambda is our lam / n.  Conjugate gradients stop
    at the relative residual ``tol`` of the same preconditioned system hkern's solver stops on.
    Returns the coefficients alpha on the centres and the iterations.
    """
    n, m = X.shape[0], centres.shape[0]
    lam_n = lam / n
    kmm = hkern.kernel_matrix(centres, sigma=sigma)
    T = scipy.linalg.cholesky(kmm + np.finfo(float).eps * m * np.eye(m), lower=False)
    A = scipy.linalg.cholesky(T @ T.T / m + lam_n * np.eye(m), lower=False)
    bounds = np.ceil(np.linspace(0, n, int(np.ceil(n / m)) + 1)).astype(int)

    def knm_times_vector(u, v):
        w = np.zeros(m)
        for start, stop in zip(bounds[:-1], bounds[1:]):
            kr = hkern.kernel_matrix(X[start:stop], centres, sigma=sigma)
            w += kr.T @ (kr @ u + v[start:stop])
        return w

    def solve(M, b, trans=0):
        return scipy.linalg.solve_triangular(M, b, lower=False, trans=trans)

    def bhb(u):
        au = solve(A, u)
        return solve(A, solve(T, knm_times_vector(solve(T, au), np.zeros(n)) / n, trans=1)
                     + lam_n * au, trans=1)

    r = solve(A, solve(T, knm_times_vector(np.zeros(m), y / n), trans=1), trans=1)
    beta, it = conjgrad(bhb, r, tol, max_iter)
    return solve(T, solve(A, beta)), it


def conjgrad(apply_a, b, tol, max_iter):
    """Plain conjugate gradients from zero until ||r|| <= tol ||b||: (x, iterations)."""
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rr = r @ r
    stop = tol * np.sqrt(rr)
    for it in range(1, max_iter + 1):
        ap = apply_a(p)
        step = rr / (p @ ap)
        x += step * p
        r -= step * ap
        rr_new = r @ r
        if np.sqrt(rr_new) <= stop:
            return x, it
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x, max_iter


class Table:
    """Rows printed as they come, kept for the markdown table and the JSON record."""

    def __init__(self, repeats):
        self.rows, self.records, self.repeats = [], [], repeats

    def time(self, section, name, fit, predict, Xt, yt, **extra):
        """Median seconds and peak memory of ``--repeats`` calls of ``fit``; test RMSE of
        ``predict(model, Xt)``."""
        runs = [timed_fit(fit) for _ in range(self.repeats)]
        seconds = float(np.median([s for s, _, _ in runs]))
        peak = max(p for _, p, _ in runs)
        model = runs[-1][2]
        err = rmse(predict(model, Xt), yt)
        detail = extra.pop("detail", "")
        if hasattr(model, "solver_trace_") and model.solver_trace_ is not None:
            trace = model.solver_trace_
            detail = f"{trace.preconditioner_seconds:.1f} s + {model.n_iter_} iterations"
        self.rows.append([section, name, f"{seconds:.1f}", detail, f"{err:.4f}",
                          f"{peak / 2**30:.2f}"])
        self.records.append(dict(section=section, name=name, seconds=seconds, rmse=err,
                                 peak_bytes=peak, repeats=self.repeats, **extra))
        print(" | ".join(self.rows[-1]), flush=True)
        return model


def predict_model(model, Xt):
    return model.predict(Xt)


def section_exact(table, args):
    X, y, Xt, yt, _ = load_standardized("kin40k")
    if not args.no_cholesky:
        table.time("exact", "cholesky", lambda: hkern.fit_exact(
            X, y, sigma=EXACT_SIGMA, lam=EXACT_LAM), predict_model, Xt, yt)
    for r in args.ranks:
        for stored in (False, True):
            table.time("exact", f"pcg r={r} {'stored K' if stored else 'recomputed K'}",
                       lambda: hkern.fit_exact(
                           X, y, sigma=EXACT_SIGMA, lam=EXACT_LAM, solver="pcg", r=r,
                           tol=args.tol, seed=SEED,
                           max_memory=None if stored else RECOMPUTE_MEMORY),
                       predict_model, Xt, yt, r=r, stored=stored)


def section_nystrom(table, args):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    X, y, Xt, yt, _ = load_standardized("kin40k")
    sigma, lam = NYSTROM_SIGMA, NYSTROM_LAM
    for m in args.centres:
        model = table.time("nystrom", f"hkern pcg M={m}", lambda: hkern.fit_nystrom(
            X, y, r=m, sigma=sigma, lam=lam, seed=SEED, solver="pcg", tol=args.tol,
            max_iter=args.max_iter), predict_model, Xt, yt, m=m)
        Z = model.landmarks_         # the same uniform centres for the peer
        del model
        table.time("nystrom", f"numpy FALKON M={m}",
                   lambda: falkon_numpy(X, y, Z, sigma, lam, args.tol, args.max_iter),
                   lambda fitted, Xq: hkern.kernel_matrix(Xq, Z, sigma=sigma) @ fitted[0],
                   Xt, yt, m=m)
        if m <= 4096:
            table.time("nystrom", f"hkern direct M={m}", lambda: hkern.fit_nystrom(
                X, y, r=m, sigma=sigma, lam=lam, seed=SEED), predict_model, Xt, yt, m=m)
            table.time("nystrom", f"sklearn Nystroem+Ridge M={m}", lambda: make_pipeline(
                Nystroem(gamma=1 / (2 * sigma**2), n_components=m, random_state=SEED),
                Ridge(alpha=lam, fit_intercept=False)).fit(X, y), predict_model, Xt, yt, m=m)


def synthetic(n, d, seed):
    """n x d standard normal inputs, y = sum_j sin(x_j) / sqrt(d) + 0.1 noise; 10 000 test."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + 10_000, d))
    y = np.sin(X).sum(axis=1) / np.sqrt(d) + 0.1 * rng.standard_normal(n + 10_000)
    return X[:n], y[:n], X[n:], y[n:]


def section_synthetic(table, args):
    X, y, Xt, yt = synthetic(args.synthetic_n, 8, SEED)
    table.time("synthetic", f"hkern pcg n={X.shape[0]} M=4096", lambda: hkern.fit_nystrom(
        X, y, r=4096, sigma=2.0, lam=args.synthetic_lam, seed=SEED, solver="pcg", tol=args.tol,
        max_iter=args.max_iter), predict_model, Xt, yt, n=X.shape[0], m=4096)


def section_curves(table, args):
    memory = available_memory()
    for name in args.datasets:
        X, y, Xt, yt, _ = load_standardized(name)
        n = X.shape[0]
        sigma, lam = CURVE_SIGMA, CURVE_LAM
        for r in (256, 512, 1024):
            table.time(f"curves {name}", f"HCK r={r}", lambda: hkern.fit_hierarchical(
                X, y, r=r, sigma=sigma, lam=lam, seed=SEED), predict_model, Xt, yt,
                dataset=name, method="hck", size=r)
        for m in (1024, 2048, 4096):
            table.time(f"curves {name}", f"Nystrom direct M={m}", lambda: hkern.fit_nystrom(
                X, y, r=m, sigma=sigma, lam=lam, seed=SEED), predict_model, Xt, yt,
                dataset=name, method="nystrom", size=m)
        for m in (2048, 4096, 8192, 16384):
            if m < n:
                table.time(f"curves {name}", f"Nystrom pcg M={m}", lambda: hkern.fit_nystrom(
                    X, y, r=m, sigma=sigma, lam=lam, seed=SEED, solver="pcg", tol=args.tol,
                    max_iter=args.max_iter), predict_model, Xt, yt,
                    dataset=name, method="nystrom_pcg", size=m)
        table.time(f"curves {name}", "exact pcg r=2000", lambda: hkern.fit_exact(
            X, y, sigma=sigma, lam=lam, solver="pcg", r=2000, tol=args.tol, seed=SEED,
            max_iter=args.max_iter), predict_model, Xt, yt,
            dataset=name, method="exact_pcg", size=2000)
        if 8 * n * n < 0.8 * memory:
            table.time(f"curves {name}", "exact cholesky", lambda: hkern.fit_exact(
                X, y, sigma=sigma, lam=lam), predict_model, Xt, yt,
                dataset=name, method="exact_cholesky", size=n)


SECTIONS = {"exact": section_exact, "nystrom": section_nystrom, "synthetic": section_synthetic,
            "curves": section_curves}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=sorted(SECTIONS),
                        default=list(SECTIONS))
    parser.add_argument("--ranks", type=int, nargs="+", default=[3000])
    parser.add_argument("--centres", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-iter", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-cholesky", action="store_true")
    parser.add_argument("--synthetic-n", type=int, default=10**6)
    parser.add_argument("--synthetic-lam", type=float, default=1.0)
    parser.add_argument("--datasets", nargs="+", default=list(CURVE_SETS))
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    print(banner(), flush=True)
    table = Table(args.repeats)
    started = time.perf_counter()
    for section in args.sections:
        SECTIONS[section](table, args)
    print()
    print(markdown_table(["section", "fit", "seconds", "of which", "test RMSE", "peak GiB"],
                         table.rows))
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    if args.write:
        path = RESULTS / "solvers.json"
        path.write_text(json.dumps(table.records, indent=1) + "\n")


if __name__ == "__main__":
    main()
