"""The iterative solvers of issue 19 against direct solvers and their peers, side by side.

One process on this machine; every time is the median of ``--repeats`` whole fits, memory the
peak resident set above the start.  Sections (``--sections``, all by default):

``exact``
    kin40k split 0, sigma 1.41, lam 1e-2: ``fit_exact(solver="direct")`` against
    ``fit_exact(solver="pcg")`` with the kernel recomputed at every iteration (``max_memory``
    2 GB, so K is not stored) and stored, for each preconditioner rank in ``--ranks``; and
    with the HCK preconditioner (K_hier + lam I) for each ``--hck-ranks``.
``crossover``
    kin40k subsamples of ``--crossover-n`` points: Cholesky against PCG with its defaults, the
    measurement behind ``fit_exact(solver="auto")``'s switch.
``nystrom``
    kin40k, sigma 2, lam 1e-3: ``fit_nystrom(solver="pcg")`` (FALKON in hkern) against
    :func:`falkon_numpy`, a plain NumPy/SciPy statement of FALKON's Algorithm 1 on hkern's
    kernel blocks, at M = 8192 (and every ``--centres``), and against scikit-learn's
    ``Nystroem`` + ``Ridge`` at M = 4096; the direct ``fit_nystrom`` for reference.
``synthetic``
    10^6 x 8 synthetic regression (a smooth function plus noise), sigma 2, lam
    ``--synthetic-lam``: Nystrom-PCG at M = 2048 and 4096, and (without
    ``--quick-synthetic``) the direct Nystrom fit at M = 2048 and HCK at r = 64 and 128.
``curves``
    Test error against fit time on kin40k, protein, keggundirected, elevators and pol (each
    with the (sigma, lam) of :func:`curve_settings`): HCK (an r sweep), direct Nystrom and
    scikit-learn's Nystroem + Ridge (M 1024, 2048), Nystrom-PCG (M 2048 to 8192, at most n/2)
    with the NumPy FALKON peer at M = 4096, exact PCG (rank 2000), and exact Cholesky where the
    n x n matrix fits in memory.

PCG fits stop at ``--tol`` (FALKON's relative residual for Nystrom-PCG and for the NumPy
peer, the same system and the same test).  A fit the memory limit refuses is printed as
skipped.  ``--write`` keeps results/solvers.json up to date after every fit (the records of
the sections run replace the old ones) and renders doc/results/solvers.md with its figure;
``--render-only`` renders them from the records.  The run behind the page (30 minutes):

    python experiments/compare_solvers.py --sections exact crossover nystrom synthetic \
        curves --ranks 2000 3000 --tol 1e-3 --write
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import scipy.linalg
from common import (
    RESULTS,
    available_memory,
    banner,
    code_version,
    load_standardized,
    markdown_table,
    rmse,
    timed_fit,
)
from solvers_page import RECORD, render, section_of

import hkern

SEED = 0
EXACT_SIGMA, EXACT_LAM = 1.41, 1e-2
NYSTROM_SIGMA, NYSTROM_LAM = 2.0, 1e-3
RECOMPUTE_MEMORY = 2 * 10**9
CURVE_SETS = ("kin40k", "protein", "keggundirected", "elevators", "pol")


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

    def __init__(self, repeats, sink=None):
        self.rows, self.records, self.repeats, self.sink = [], [], repeats, sink

    def time(self, section, name, fit, predict, Xt, yt, **extra):
        """Median seconds and peak memory of ``--repeats`` calls of ``fit``; test RMSE of
        ``predict(model, Xt)``.  A fit the memory limit refuses is printed and skipped."""
        try:
            runs = [timed_fit(fit) for _ in range(self.repeats)]
        except hkern.MemoryLimitError as exc:
            print(f"{section} | {name} | skipped: {exc}", flush=True)
            return None
        seconds = float(np.median([s for s, _, _ in runs]))
        peak = max(p for _, p, _ in runs)
        model = runs[-1][2]
        err = rmse(predict(model, Xt), yt)
        detail = extra.pop("detail", "")
        if hasattr(model, "solver_trace_") and model.solver_trace_ is not None:
            trace = model.solver_trace_
            detail = f"{trace.preconditioner_seconds:.1f} s + {model.n_iter_} iterations"
            if not trace.converged:
                detail += " (max_iter)"
            extra.update(iterations=int(model.n_iter_), converged=bool(trace.converged),
                         preconditioner_seconds=trace.preconditioner_seconds)
        self.rows.append([section, name, f"{seconds:.1f}", detail, f"{err:.4f}",
                          f"{peak / 2**30:.2f}"])
        self.records.append(dict(section=section, name=name, seconds=seconds, rmse=err,
                                 peak_bytes=peak, repeats=self.repeats, detail=detail,
                                 **extra))
        print(" | ".join(self.rows[-1]), flush=True)
        if self.sink is not None:
            self.sink(self.records)
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
    for r in args.hck_ranks:
        table.time("exact", f"pcg HCK preconditioner r={r} recomputed K",
                   lambda: hkern.fit_exact(
                       X, y, sigma=EXACT_SIGMA, lam=EXACT_LAM, solver="pcg", r=r,
                       preconditioner="hck", tol=args.tol, seed=SEED,
                       max_memory=RECOMPUTE_MEMORY),
                   predict_model, Xt, yt, r=r, stored=False, preconditioner="hck")


def section_crossover(table, args):
    """Where fit_exact(solver="auto") switches: Cholesky against PCG with its defaults (rank
    min(1000, n / 4), tol 1e-4, K stored when it fits) on kin40k subsamples."""
    X, y, Xt, yt, _ = load_standardized("kin40k")
    for n in args.crossover_n:
        idx = np.sort(np.random.default_rng(SEED).choice(X.shape[0], n, replace=False))
        Xn, yn = X[idx], y[idx]
        for solver in ("direct", "pcg"):
            table.time("crossover", f"{solver} n={n}", lambda: hkern.fit_exact(
                Xn, yn, sigma=EXACT_SIGMA, lam=EXACT_LAM, solver=solver, seed=SEED),
                predict_model, Xt, yt, n=n, solver=solver)


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
    n, sigma, lam = X.shape[0], 2.0, args.synthetic_lam
    where = dict(dataset="synthetic", n=n)
    for m in (2048, 4096):
        table.time("synthetic", f"Nystrom pcg M={m}", lambda: hkern.fit_nystrom(
            X, y, r=m, sigma=sigma, lam=lam, seed=SEED, solver="pcg", tol=args.tol,
            max_iter=args.max_iter), predict_model, Xt, yt, method="nystrom_pcg", size=m,
            m=m, **where)
    if not args.quick_synthetic:
        table.time("synthetic", "Nystrom direct M=2048", lambda: hkern.fit_nystrom(
            X, y, r=2048, sigma=sigma, lam=lam, seed=SEED), predict_model, Xt, yt,
            method="nystrom", size=2048, **where)
        for r in (64, 128):
            table.time("synthetic", f"HCK r={r}", lambda: hkern.fit_hierarchical(
                X, y, r=r, sigma=sigma, lam=lam, seed=SEED), predict_model, Xt, yt,
                method="hck", size=r, **where)


def curve_settings():
    """(sigma, lam) per data set for every method of the curves: the setting issue 18's
    validation grid chose for fit_hierarchical on that training set (results/selection.json,
    'grid_tuned'); kin40k's is the issue's exact-KRR setting, sigma 1.41 and lam 1e-2."""
    records = json.loads((RESULTS / "selection.json").read_text())
    return {r["dataset"]: (r["grid_tuned"]["sigma"], r["grid_tuned"]["lam"])
            for r in records if r["method"] == "hierarchical"}


def section_curves(table, args):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    memory = available_memory()
    settings = curve_settings()
    for name in args.datasets:
        X, y, Xt, yt, _ = load_standardized(name)
        n = X.shape[0]
        sigma, lam = settings[name]
        print(f"# {name}: n={n}, d={X.shape[1]}, sigma={sigma:g}, lam={lam:g}", flush=True)

        def run(label, fit, method, size, predict=predict_model):
            return table.time(f"curves {name}", label, fit, predict, Xt, yt, dataset=name,
                              method=method, size=size, sigma=sigma, lam=lam, n=n)

        for r in (256, 512, 1024):
            run(f"HCK r={r}", lambda: hkern.fit_hierarchical(
                X, y, r=r, sigma=sigma, lam=lam, seed=SEED), "hck", r)
        for m in (1024, 2048):
            run(f"Nystrom direct M={m}", lambda: hkern.fit_nystrom(
                X, y, r=m, sigma=sigma, lam=lam, seed=SEED), "nystrom", m)
            run(f"sklearn Nystroem+Ridge M={m}", lambda: make_pipeline(
                Nystroem(gamma=1 / (2 * sigma**2), n_components=m, random_state=SEED),
                Ridge(alpha=lam, fit_intercept=False)).fit(X, y), "sklearn_nystroem", m)
        for m in (2048, 4096, 8192):
            if 2 * m > n:
                continue
            model = run(f"Nystrom pcg M={m}", lambda: hkern.fit_nystrom(
                X, y, r=m, sigma=sigma, lam=lam, seed=SEED, solver="pcg", tol=args.tol,
                max_iter=args.max_iter), "nystrom_pcg", m)
            if m == 4096 and model is not None:
                Z = model.landmarks_
                run(f"numpy FALKON M={m}",
                    lambda: falkon_numpy(X, y, Z, sigma, lam, args.tol, args.max_iter),
                    "numpy_falkon", m,
                    lambda fitted, Xq: hkern.kernel_matrix(Xq, Z, sigma=sigma) @ fitted[0])
            del model
        run("exact pcg r=2000", lambda: hkern.fit_exact(
            X, y, sigma=sigma, lam=lam, solver="pcg", r=2000, tol=args.tol, seed=SEED,
            max_iter=args.max_iter), "exact_pcg", 2000)
        if 8 * n * n < 0.8 * memory:
            run("exact cholesky", lambda: hkern.fit_exact(X, y, sigma=sigma, lam=lam),
                "exact_cholesky", n)


SECTIONS = {"exact": section_exact, "crossover": section_crossover,
            "nystrom": section_nystrom, "synthetic": section_synthetic, "curves": section_curves}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=sorted(SECTIONS),
                        default=list(SECTIONS))
    parser.add_argument("--ranks", type=int, nargs="+", default=[3000])
    parser.add_argument("--crossover-n", type=int, nargs="+", default=[5000, 10000, 20000])
    parser.add_argument("--hck-ranks", type=int, nargs="*", default=[512, 1024])
    parser.add_argument("--centres", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-iter", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-cholesky", action="store_true")
    parser.add_argument("--synthetic-n", type=int, default=10**6)
    parser.add_argument("--synthetic-lam", type=float, default=1.0)
    parser.add_argument("--quick-synthetic", action="store_true",
                        help="only Nystrom-PCG on the synthetic set")
    parser.add_argument("--datasets", nargs="+", default=list(CURVE_SETS))
    parser.add_argument("--write", action="store_true",
                        help="record the rows in results/solvers.json (replacing those of the "
                             "sections run) and render doc/results/solvers.md")
    parser.add_argument("--render-only", action="store_true",
                        help="render doc/results/solvers.md from results/solvers.json")
    args = parser.parse_args()
    if args.render_only:
        render(json.loads(RECORD.read_text()))
        return
    print(banner(), flush=True)
    table = Table(args.repeats, sink=record_writer() if args.write else None)
    started = time.perf_counter()
    for section in args.sections:
        SECTIONS[section](table, args)
    print()
    print(markdown_table(["section", "fit", "seconds", "of which", "test RMSE", "peak GiB"],
                         table.rows))
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    if args.write:
        render(json.loads(RECORD.read_text()))


def record_writer():
    """A sink that keeps results/solvers.json up to date after every row: the records of this
    run replace those of the same sections (or data sets of the curves) and keep the others."""
    kept = json.loads(RECORD.read_text()) if RECORD.exists() else []
    command = "python experiments/compare_solvers.py " + " ".join(sys.argv[1:])
    code = code_version()

    def write(records):
        ran = {section_of(r) for r in records}
        for r in records:
            r.setdefault("command", command)
            r.setdefault("code", code)
        merged = [r for r in kept if section_of(r) not in ran] + records
        RECORD.write_text(json.dumps(merged, indent=1) + "\n")
    return write


if __name__ == "__main__":
    main()
