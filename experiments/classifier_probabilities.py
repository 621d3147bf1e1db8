"""Class probabilities of hkern's classifiers (issue 52, item 3): how well ``predict_proba``
is calibrated, against the alternatives it was chosen from and against scikit-learn's
``LogisticRegression`` on ``Nystroem`` features of the same rank and kernel.

    HKERN_DATA=../shared/data/uci python experiments/classifier_probabilities.py [tasks] [fits]
    python experiments/classifier_probabilities.py --table      # the record as markdown

tasks (default all): breast_cancer (scikit-learn's, binary), digits (scikit-learn's, 10
classes), kin40k_binary (kin40k's y above its training median), elevators_4 (elevators' y cut
at its training quartiles: 4 classes), and kin40k_binary_full (all 36 000 training and 4000
test rows: the one-fold calibration; run with the nystrom fit only).  Split: scikit-learn's
sets 75/25 stratified (seed 0); the UCI sets split 0, the first 3000 training and 2000 test
rows.  X standardised with
training statistics.  fits (default all): exact, nystrom (direct), falkon (fit_nystrom
solver="pcg"), hierarchical, rff, each its default call with ``task="classification"``,
``seed=0``.

Per task and fit: the test accuracy, log-loss and ECE (15 equal-width bins of the top-class
confidence; ``ece_floor``: the mean ECE of labels drawn from the probabilities themselves, what
the number of test rows alone leaves) of

* ``hkern``: ``predict_proba`` as shipped (softmax(beta h_eps(s)), eps of a grid and beta
  fitted on out-of-fold scores: all five stratified folds below 10 000 training rows, one
  fold above; hkern/_probabilities.py);
* on the same five folds' fits (each at the full fit's sigma and lam) and held-out scores:
  ``hkern_one_split`` / ``hkern_five_folds`` (the same calibration from fold 0 alone / from
  all five), ``temperature_one_split`` / ``temperature_five_folds`` (eps infinite: plain
  temperature scaling, softmax(beta s)), ``one_split_on_its_own_fit`` (fold 0's calibration
  applied to fold 0's fit rather than the full fit: do the full fit's scores share the fold
  fit's scale?), ``platt_five_folds`` (Platt scaling per class, then normalised),
  ``vector_five_folds`` (softmax(a * s + b), 2k parameters), ``least_squares`` (max(1 + s, 0)
  normalised, no parameter: the +-1 regression read as 2 p - 1), ``variance_five_folds``
  (exact and hierarchical: softmax(beta s / sqrt(1 + pi beta^2 v / 8)), v the latent
  posterior variance);
* ``laplace`` (exact fit, binary tasks only: its dense Newton steps cost n^3 per iteration): a
  Laplace-approximation GP classifier on the exact fit's kernel at an amplitude chosen on fold
  0's rows, with the probit-averaged predictive probability;

and ``sklearn``: ``LogisticRegression()`` (C=1) and ``LogisticRegressionCV`` (up to 10 000
rows) on
``Nystroem(kernel="rbf", gamma=1/2, n_components=rank)`` of X divided by the fit's chosen
lengthscales (gamma = 1 / (2 sigma^2) for a scalar sigma): hkern's Gaussian kernel
exp(-|x - x'|^2 / (2 sigma^2)).  rank: the fit's (Nystrom/FALKON/RFF 1024, HCK 256, exact
1024).  Seconds: the full fit with its calibration, and the calibration alone
(``calibration_.seconds_``).  Records in ``results/classifier_probabilities.json``.
"""
import json
import sys
import time
import warnings

import numpy as np
from common import RESULTS, code_version, command_line, load_split
from scipy import optimize
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, log_softmax, logsumexp, softmax

import hkern
from hkern._probabilities import (
    N_FOLDS,
    SOFTNESS_GRID,
    _holdout_fit_arguments,
    fit_calibration,
    held_out_folds,
    softmax_probabilities,
    stratified_folds,
)

TASKS = ["breast_cancer", "digits", "kin40k_binary", "elevators_4"]
FITS = ["exact", "nystrom", "falkon", "hierarchical", "rff"]
ROWS, TEST_ROWS = 3000, 2000
BINS = 15
OUT = RESULTS / "classifier_probabilities.json"


# ------------------------------------------------------------------------------------------
# data

def standardized(Xtr, Xte):
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, (Xte - mu) / sd


def load_task(name):
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.model_selection import train_test_split
    if name in ("breast_cancer", "digits"):
        X, y = (load_breast_cancer if name == "breast_cancer" else load_digits)(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X.astype(float), y, test_size=0.25,
                                              stratify=y, random_state=0)
    else:
        base, _, bins = name.partition("_")
        full = bins.endswith("_full")
        bins = bins.removesuffix("_full")
        Xtr, ytr, Xte, yte = load_split(base, 0)
        if not full:
            Xtr, ytr, Xte, yte = Xtr[:ROWS], ytr[:ROWS], Xte[:TEST_ROWS], yte[:TEST_ROWS]
        k = 2 if bins == "binary" else int(bins)
        cuts = np.quantile(ytr, np.arange(1, k) / k)
        ytr, yte = np.searchsorted(cuts, ytr), np.searchsorted(cuts, yte)
    Xtr, Xte = standardized(Xtr, Xte)
    return Xtr, ytr, Xte, yte


# ------------------------------------------------------------------------------------------
# metrics

def ece(P, codes, bins=BINS):
    """Expected calibration error: |accuracy - confidence| over equal-width bins of the
    top-class confidence, weighted by the bins' shares of the rows."""
    conf = P.max(axis=1)
    right = (P.argmax(axis=1) == codes).astype(float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        at = which == b
        if at.any():
            total += at.mean() * abs(right[at].mean() - conf[at].mean())
    return float(total)


def log_loss(P, codes):
    p = np.clip(P[np.arange(len(codes)), codes], 1e-15, 1.0)
    return float(-np.mean(np.log(p)))


def ece_floor(P, draws=200):
    """The mean ECE of labels drawn from P itself (perfectly calibrated probabilities): what
    the number of test rows alone leaves, the floor a measured ECE is read against."""
    rng = np.random.default_rng(0)
    cum = np.cumsum(P, axis=1)
    return float(np.mean([ece(P, np.minimum((rng.random((len(P), 1)) > cum).sum(axis=1),
                                            P.shape[1] - 1)) for _ in range(draws)]))


def metrics(P, codes):
    return {"accuracy": float(np.mean(P.argmax(1) == codes)), "log_loss": log_loss(P, codes),
            "ece": ece(P, codes), "ece_floor": ece_floor(P)}


# ------------------------------------------------------------------------------------------
# the alternatives, fitted on held-out scores S (m, k) with labels c

def platt(S, c):
    """Per class j: p_j = sigmoid(a_j s_j + b_j) by maximum likelihood; returns the map."""
    params = []
    for j in range(S.shape[1]):
        t = (c == j).astype(float)

        def nll(w, s=S[:, j], t=t):
            z = w[0] * s + w[1]
            val = np.mean(np.logaddexp(0, z) - t * z)
            g = expit(z) - t
            return val, np.array([np.mean(g * s), np.mean(g)])
        params.append(optimize.minimize(nll, [1.0, 0.0], jac=True, method="L-BFGS-B").x)
    params = np.array(params)

    def apply(T):
        P = expit(T * params[:, 0] + params[:, 1])
        return P / P.sum(1, keepdims=True)
    return apply


def vector_scaling(S, c):
    k = S.shape[1]
    Y = np.eye(k)[c]

    def nll(w):
        a, b = w[:k], w[k:]
        Z = S * a + b
        L = log_softmax(Z, axis=1)
        G = (np.exp(L) - Y) / len(c)
        return -np.sum(Y * L) / len(c), np.concatenate([(G * S).sum(0), G.sum(0)])
    w = optimize.minimize(nll, np.concatenate([np.ones(k), np.zeros(k)]), jac=True,
                          method="L-BFGS-B").x
    return lambda T: softmax(T * w[:k] + w[k:], axis=1)


def least_squares(T):
    P = np.maximum(1.0 + T, 1e-6)
    return P / P.sum(1, keepdims=True)


def variance_beta(S, V, c):
    def nll(beta):
        Z = beta * S / np.sqrt(1.0 + np.pi * beta ** 2 * V / 8)[:, None]
        return float(np.mean(logsumexp(Z, axis=1) - Z[np.arange(len(c)), c]))
    beta = optimize.minimize_scalar(nll, bounds=(0.0, 50.0), method="bounded").x
    return lambda T, W: softmax(beta * T / np.sqrt(1.0 + np.pi * beta ** 2 * W / 8)[:, None],
                                axis=1)


def laplace_binary(K, t, Ks, kss, max_iter=30):
    """Rasmussen & Williams, Algorithms 3.1 and 3.2 (logistic likelihood, t in {-1, +1}):
    the Newton mode of the latent f, and the probit-averaged probability at the test points
    (K: training kernel, Ks: test x train, kss: test prior variances)."""
    n = len(t)
    f = np.zeros(n)
    y01 = (t + 1) / 2
    for _ in range(max_iter):
        pi = expit(f)
        W = pi * (1 - pi)
        sW = np.sqrt(W)
        B = np.eye(n) + sW[:, None] * K * sW[None, :]
        L = cho_factor(B, lower=True)
        b = W * f + (y01 - pi)
        a = b - sW * cho_solve(L, sW * (K @ b))
        f_new = K @ a
        if np.max(np.abs(f_new - f)) < 1e-6:
            f = f_new
            break
        f = f_new
    pi = expit(f)
    W = pi * (1 - pi)
    sW = np.sqrt(W)
    B = np.eye(n) + sW[:, None] * K * sW[None, :]
    L = cho_factor(B, lower=True)
    mean = Ks @ (y01 - pi)
    v = cho_solve(L, (sW[:, None] * Ks.T))
    var = np.maximum(kss - np.sum((sW[:, None] * Ks.T) * v, axis=0), 0.0)
    return expit(mean / np.sqrt(1 + np.pi * var / 8))


def laplace(model, Xtr, codes, Xte, train, held):
    """OvR Laplace GP classifiers on the exact fit's kernel times an amplitude chosen among
    a few by the log-loss of the held-out rows (fitted on the other rows), then refitted on
    all rows at that amplitude."""
    k = len(model.classes_)
    Xs_tr, Xs_te = Xtr / model.sigma, Xte / model.sigma     # the lengthscales (ARD)
    bw = 1.0 if np.ndim(model.sigma) else model.sigma
    if np.ndim(model.sigma) == 0:
        Xs_tr, Xs_te = Xtr, Xte

    def probs(rows, Xq, amp):
        K = amp * hkern.kernel_matrix(Xs_tr[rows], sigma=bw)
        Ks = amp * hkern.kernel_matrix(Xq, Xs_tr[rows], sigma=bw)
        P = np.column_stack([laplace_binary(K, np.where(codes[rows] == j, 1.0, -1.0), Ks,
                                            np.full(len(Xq), amp))
                             for j in (range(k) if k > 2 else [1])])
        if k == 2:
            P = np.column_stack([1 - P[:, 0], P[:, 0]])
        return P / P.sum(1, keepdims=True)
    losses = {amp: log_loss(probs(train, Xs_tr[held], amp), codes[held])
              for amp in (1.0, 10.0, 100.0)}
    amp = min(losses, key=losses.get)
    return probs(np.arange(len(codes)), Xs_te, amp), amp


# ------------------------------------------------------------------------------------------
# fits

FIT_CALLS = {
    "exact": (hkern.fit_exact, {}),
    "nystrom": (hkern.fit_nystrom, {}),
    "falkon": (hkern.fit_nystrom, {"solver": "pcg"}),
    "hierarchical": (hkern.fit_hierarchical, {}),
    "rff": (hkern.fit_rff, {}),
}
RANKS = {"exact": 1024, "nystrom": 1024, "falkon": 1024, "hierarchical": 256, "rff": 1024}


def sklearn_baselines(model, Xtr, ytr, Xte, codes_te, rank):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    if np.ndim(model.sigma):
        Xa, Xb, gamma = Xtr / model.sigma, Xte / model.sigma, 0.5
    else:
        Xa, Xb, gamma = Xtr, Xte, 1.0 / (2.0 * model.sigma ** 2)
    out = {}
    feats = Nystroem(kernel="rbf", gamma=gamma, n_components=min(rank, len(Xa)),
                     random_state=0).fit(Xa)
    Fa, Fb = feats.transform(Xa), feats.transform(Xb)
    estimators = [("sklearn_lr", LogisticRegression(max_iter=5000))]
    if len(Xa) <= 10_000:      # its 8 x 5 fits on 36 000 rows would take most of an hour here
        estimators.append(("sklearn_lr_cv", LogisticRegressionCV(Cs=8, max_iter=5000)))
    for name, est in estimators:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Fa, ytr)
        rec = metrics(est.predict_proba(Fb), codes_te)
        rec["seconds"] = time.perf_counter() - start
        out[name] = rec
    return out


def fold_fits(fit, args, model, Xtr, codes_tr, which):
    """The library's calibration fits, rebuilt from its seed stream (seed 0): the folds
    ``which`` of :func:`hkern._probabilities.stratified_folds`, each fitted at the full fit's
    sigma and lam; returns [(held-out rows, that fit)]."""
    rng = np.random.default_rng(np.random.SeedSequence([0, 0x70726F62]))
    folds = stratified_folds(codes_tr, rng)
    out = []
    for fold in range(N_FOLDS):
        fold_seed = int(rng.integers(2 ** 31))
        if fold not in which:
            continue
        rows = np.flatnonzero(folds == fold)
        # (the fits run here have no hold-out size rule of their own: MEKA and SLKL do)
        a = _holdout_fit_arguments(args, model, np.flatnonzero(folds != fold), len(codes_tr),
                                   fold_seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append((rows, fit(**a)))
    return out


def run(task, fit_name):
    Xtr, ytr, Xte, yte = load_task(task)
    fit, extra = FIT_CALLS[fit_name]
    call = dict(task="classification", seed=0, **extra)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = fit(Xtr, ytr, **call)
    seconds = time.perf_counter() - start
    cal = model.calibration_
    classes = model.classes_
    codes_tr, codes_te = np.searchsorted(classes, ytr), np.searchsorted(classes, yte)
    T = model.decision_function(Xte)
    n = len(ytr)
    rec = {"task": task, "fit": fit_name, "call": dict(call),
           "n_train": n, "n_test": len(yte), "classes": len(classes),
           "sigma": np.atleast_1d(model.sigma).tolist(), "lam": float(model.lam),
           "fit_seconds": seconds, "calibration_seconds": cal.seconds_,
           "calibration_folds": len(held_out_folds(n)),
           "beta": cal.beta_, "softness": cal.softness_, "methods": {}}
    rec["methods"]["hkern"] = metrics(model.predict_proba(Xte), codes_te)

    # every fold's fit (the library's own when it holds out all five), timed
    start = time.perf_counter()
    parts = fold_fits(fit, dict(_default_arguments(fit), X=Xtr, y=ytr, **call), model, Xtr,
                      codes_tr, range(N_FOLDS))
    rec["five_fold_fits_seconds"] = time.perf_counter() - start
    rows = np.concatenate([r for r, _ in parts])
    S = np.concatenate([m.decision_function(Xtr[r]) for r, m in parts])
    c = codes_tr[rows]
    rows0, part0 = parts[0]
    S0, c0 = S[:len(rows0)], c[:len(rows0)]
    library = (S, c) if len(held_out_folds(n)) == N_FOLDS else (S0, c0)
    softness, beta, _ = fit_calibration(*library)
    assert softness == cal.softness_ and abs(beta - cal.beta_) < 1e-9, (softness, beta, cal)

    def calibrated(scores, codes, grid, apply_to=T):
        e, b, _ = fit_calibration(scores, codes, grid)
        return dict(metrics(softmax_probabilities(apply_to, b, softness=e), codes_te),
                    softness=e, beta=b)
    rec["methods"]["hkern_one_split"] = calibrated(S0, c0, SOFTNESS_GRID)
    rec["methods"]["hkern_five_folds"] = calibrated(S, c, SOFTNESS_GRID)
    rec["methods"]["temperature_one_split"] = calibrated(S0, c0, (None,))
    rec["methods"]["temperature_five_folds"] = calibrated(S, c, (None,))
    # the fold's calibration on the fold fit's own test scores: is the full fit's scale its?
    rec["methods"]["one_split_on_its_own_fit"] = calibrated(
        S0, c0, SOFTNESS_GRID, apply_to=part0.decision_function(Xte))
    rec["methods"]["platt_five_folds"] = metrics(platt(S, c)(T), codes_te)
    rec["methods"]["vector_five_folds"] = metrics(vector_scaling(S, c)(T), codes_te)
    rec["methods"]["least_squares"] = metrics(least_squares(T), codes_te)

    if fit_name in ("exact", "hierarchical"):
        from hkern._threads import budget_threads, budgeted

        @budgeted
        def latent_variance(m, X, n_jobs=None):
            return m._latent_variance(m._check_X(X), budget_threads(), None)
        try:
            V = np.concatenate([latent_variance(m, Xtr[r]) for r, m in parts])
            V_te = latent_variance(model, Xte)
            rec["methods"]["variance_five_folds"] = metrics(variance_beta(S, V, c)(T, V_te),
                                                            codes_te)
        except (AttributeError, NotImplementedError, ValueError) as exc:
            rec["variance_error"] = repr(exc)
    if fit_name == "exact" and len(classes) == 2:
        start = time.perf_counter()
        train0 = np.setdiff1d(np.arange(n), rows0)
        P, amp = laplace(model, Xtr, codes_tr, Xte, train0, rows0)
        rec["methods"]["laplace"] = metrics(P, codes_te)
        rec["methods"]["laplace"].update(amplitude=amp, seconds=time.perf_counter() - start)
    rec.update(sklearn_baselines(model, Xtr, ytr, Xte, codes_te, RANKS[fit_name]))
    return rec


def _default_arguments(fit):
    import inspect
    return {p: v.default for p, v in inspect.signature(fit).parameters.items()
            if p not in ("X", "y")}


SHOWN = ["hkern", "temperature_five_folds", "hkern_one_split", "platt_five_folds",
         "vector_five_folds", "least_squares", "variance_five_folds", "laplace",
         "one_split_on_its_own_fit"]


def table(records):
    """The record as markdown: per task and fit, hkern's log-loss / ECE (and the ECE floor), the
    scikit-learn baselines', and the seconds; then every alternative's log-loss / ECE."""
    lines = ["| task | fit | n | hkern log-loss | ECE (floor) | LR log-loss | ECE | LRCV log-loss "
             "| ECE | fit s | of which calibration s |", "|" + "---|" * 11]
    for r in records:
        h, a = r["methods"]["hkern"], r["sklearn_lr"]
        b = (f"{r['sklearn_lr_cv']['log_loss']:.4f} | {r['sklearn_lr_cv']['ece']:.4f}"
             if "sklearn_lr_cv" in r else "- | -")
        lines.append(f"| {r['task']} | {r['fit']} | {r['n_train']} | {h['log_loss']:.4f} | "
                     f"{h['ece']:.4f} ({h['ece_floor']:.4f}) | {a['log_loss']:.4f} | "
                     f"{a['ece']:.4f} | {b} | "
                     f"{r['fit_seconds']:.1f} | {r['calibration_seconds']:.1f} |")
    lines += ["", "| task | fit | " + " | ".join(SHOWN) + " |", "|" + "---|" * (2 + len(SHOWN))]
    for r in records:
        cells = [f"{r['methods'][m]['log_loss']:.3f} / {r['methods'][m]['ece']:.3f}"
                 if m in r["methods"] else "" for m in SHOWN]
        lines.append(f"| {r['task']} | {r['fit']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv):
    if argv and argv[0] == "--table":
        print(table(json.loads(OUT.read_text())["records"]))
        return
    tasks = argv[0].split(",") if argv else TASKS
    fits = argv[1].split(",") if len(argv) > 1 else FITS
    records = json.loads(OUT.read_text())["records"] if OUT.exists() else []
    for task in tasks:
        for fit_name in fits:
            rec = run(task, fit_name)
            rec["code"] = code_version()
            rec["command"] = command_line()
            records = [r for r in records if (r["task"], r["fit"]) != (task, fit_name)]
            records.append(rec)
            m = rec["methods"]
            print(f"{task:14s} {fit_name:12s} fit {rec['fit_seconds']:7.1f}s cal "
                  f"{rec['calibration_seconds']:6.1f}s beta {rec['beta']:.3g} "
                  f"softness {rec['softness']}  " + "  ".join(
                      f"{k}: ll {v['log_loss']:.4f} ece {v['ece']:.4f}"
                      for k, v in {**m, "lr": rec["sklearn_lr"],
                                   "lrcv": rec.get("sklearn_lr_cv", {"log_loss": np.nan,
                                                                      "ece": np.nan})}.items()),
                  flush=True)
            OUT.write_text(json.dumps({"records": records}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
