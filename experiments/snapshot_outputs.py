"""Bitwise snapshots of hkern's outputs, for a refactor that must not change a number (issue 33).

    python experiments/snapshot_outputs.py save before.npz     # on the old commit
    python experiments/snapshot_outputs.py save after.npz      # on the new one
    python experiments/snapshot_outputs.py compare before.npz after.npz

``save`` fits 15 models (exact by Cholesky and PCG with and without selection, Nystrom direct and
FALKON with and without selection, random features, HCK with and without ARD, the independent
kernel, MEKA, SLKL, GP-GRIEF) and runs two column selections, on 500 synthetic rows and on 4000
kin40k rows (the bundled split 0), and stores their predictions, coefficients, selected values,
every selection candidate and start, solver traces and column indices.  ``compare`` lists the
arrays whose bytes differ.  The outputs are the same for any thread count (tested), so the two
runs need not match in threads.
"""
import sys
import warnings

import numpy as np

import hkern
from hkern.datasets import load_uci, make_regression, standardize


def fits(r):
    """name -> fit(X, y) of the snapshot, r the size parameter."""
    sel = dict(sigma="auto", lam="auto", seed=0)
    # The fixed values the fits defaulted to before they selected by default, so that records
    # saved before and after that change compare.
    fixed, slkl = dict(sigma=1.0, lam=1e-2), dict(sigma=1.0, lam=1.0)
    return {
        "exact_chol": lambda X, y: hkern.fit_exact(X, y, solver="direct", **fixed),
        "exact_pcg": lambda X, y: hkern.fit_exact(X, y, solver="pcg", seed=0, **fixed),
        "exact_sel": lambda X, y: hkern.fit_exact(X, y, **sel),
        "exact_pcg_ard": lambda X, y: hkern.fit_exact(X, y, solver="pcg",
                                                      **dict(sel, sigma="ard")),
        "nys": lambda X, y: hkern.fit_nystrom(X, y, r, seed=0, **fixed),
        "falkon": lambda X, y: hkern.fit_nystrom(X, y, r, solver="pcg", seed=0, **fixed),
        "falkon_sel": lambda X, y: hkern.fit_nystrom(X, y, r, solver="pcg", **sel),
        "rff": lambda X, y: hkern.fit_rff(X, y, 2 * r, seed=0, **fixed),
        "hck": lambda X, y: hkern.fit_hierarchical(X, y, r=r, seed=0, **fixed),
        "hck_ard": lambda X, y: hkern.fit_hierarchical(X, y, r=r, **dict(sel, sigma="ard")),
        "indep": lambda X, y: hkern.fit_independent(X, y, r=r, seed=0, **fixed),
        "meka": lambda X, y: hkern.fit_meka(X, y, r, n_clusters=4, seed=0, **fixed),
        "slkl": lambda X, y: hkern.fit_slkl(X, y, r, seed=0, **slkl),
    }


def record(out, name, model, X_test):
    """The model's predictions, fitted values, solver trace and selection, into ``out``."""
    out[name + "/pred"] = np.asarray(model.predict(X_test))
    for a in ("sigma_", "lam_", "n_iter_", "dual_coef_", "coef_"):
        v = getattr(model, a, None)
        if v is not None and not callable(v):
            out[f"{name}/{a}"] = np.asarray(v, dtype=float)
    trace = getattr(model, "solver_trace_", None)
    if trace is not None:
        for a in ("residuals", "true_residual"):
            out[f"{name}/trace_{a}"] = np.asarray(getattr(trace, a), dtype=float)
    selection = getattr(model, "selection_", None)
    if selection is not None:
        out[name + "/sel_cands"] = np.array(
            [np.r_[np.atleast_1d(c.sigma), c.lam, c.value] for c in selection.candidates],
            dtype=float).ravel()
        start = selection.subsample_sigma
        out[name + "/sel_start"] = np.r_[
            np.atleast_1d(np.nan if start is None else start).astype(float),
            float(selection.subsample_lam or np.nan), float(selection.subsample_lml or np.nan),
            selection.best]


def suite(out, tag, X, y, X_test, r):
    for name, fit in fits(r).items():
        record(out, tag + name, fit(X, y), X_test)
    out[tag + "cols/idx"] = np.asarray(hkern.select_columns(X, r, seed=0).indices_, dtype=float)
    out[tag + "oasis/idx"] = np.asarray(hkern.oasis(X, r, seed=0).indices_, dtype=float)
    if X.shape[1] <= 4:
        record(out, tag + "grief", hkern.fit_grief(X, y, 100, seed=0, max_iter=20,
                                                   n_restarts=1), X_test)

def save(path):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X, y = make_regression(600, 3, seed=1)
        suite(out, "syn/", X[:500], y[:500], X[500:], 16)
        Xtr, ytr, Xte, _, _ = standardize(*load_uci("kin40k", split=0))
        suite(out, "kin/", Xtr[:4000], ytr[:4000], Xte[:2000], 128)
    np.savez(path, **out)
    print(len(out), "arrays saved to", path)


def compare(before, after):
    a, b = np.load(before), np.load(after)
    differ = [k for k in a.files if k not in b.files or a[k].shape != b[k].shape
              or a[k].tobytes() != b[k].tobytes()]
    new = [k for k in b.files if k not in a.files]
    print(f"{len(a.files)} arrays, {len(differ)} differ, {len(new)} new")
    for k in differ + new:
        print("  ", k)
    return 1 if differ or new else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["save"] and len(sys.argv) == 3:
        save(sys.argv[2])
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
