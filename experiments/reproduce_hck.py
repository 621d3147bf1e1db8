"""Reproduce the HCK paper's experiments (Chen, Avron, Sindhwani) on the shared UCI sets.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 5 \
        python experiments/reproduce_hck.py --part trends
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 5 \
        python experiments/reproduce_hck.py --part randomness
    python experiments/reproduce_hck.py --quick --no-write          # smoke test, < 1 min
    python experiments/reproduce_hck.py --render-only      # page + plots from the stored results

Writes doc/results/reproduce_hck.md (and doc/results/figures/hck_*.png, results/reproduce_hck.json);
each part keeps its results in the JSON file, so the parts can run separately.

1. trends (paper Sec. 5.3, Figs 5/6): relative test error ||y_hat - y|| / ||y|| (original units
   of y) against r for HCK, Nystrom, random Fourier features and the independent kernel, with
   sigma and lam chosen *per method and per r* on a validation split carved from the training
   set (the paper grid-searched them; its grids and split are not given), plus fit seconds and
   peak RSS (the paper's third column estimated memory as 4 r per point for HCK, r for the
   others).
2. randomness (paper Sec. 5.1, Fig 3): lam = 0.01, sigma swept over a log grid, SEEDS seeds;
   one seed stays fixed across the sigma sweep; mean and standard deviation of the relative
   test error per (method, r, sigma).  The paper used cadata (n = 16 512, d = 8), which is not
   among the shared sets: elevators (n_train = 14 939, d = 18) has a similar size.
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
from common import (
    FIGURES,
    PAGES,
    RESULTS,
    ROOT,
    blas_threads,
    command_line,
    load_split,
    machine_note,
    markdown_table,
    pyplot,
    relative_error,
    timed_fit,
    tune,
    validation_split,
)
from compare import METHODS

from hkern.datasets import standardize

PAGE = PAGES / "reproduce_hck.md"
STORE = RESULTS / "reproduce_hck.json"

KEYS = ("hck", "nystrom", "rff", "independent")
FITS = {m.key: m for m in METHODS if m.key in KEYS}
LABELS = {"hck": "HCK", "nystrom": "Nystrom", "rff": "Fourier (RFF)",
          "independent": "independent"}

FULL = dict(trend_sets=("kin40k", "pol"), r_grid=(32, 64, 128, 256, 512),
            sigma_factors=(0.25, 0.5, 1.0), lams=(1e-3, 1e-2, 1e-1), n_fit_max=8000,
            n_val_max=4000, random_set="elevators", random_r=(32, 128), seeds=30,
            sigmas=(0.25, 0.5, 1, 2, 4, 8, 16, 64))
QUICK = dict(trend_sets=("pol",), r_grid=(32, 64), sigma_factors=(0.5, 1.0), lams=(1e-2,),
             n_fit_max=2000, n_val_max=1000, random_set="pol", random_r=(32,), seeds=3,
             sigmas=(1, 4, 16))


def paper_error(pred, y_test_std, y_scale, y_mean):
    """||y_hat - y|| / ||y|| in the original units of y (the paper's regression metric)."""
    y = y_test_std * y_scale + y_mean
    return relative_error(np.asarray(pred).reshape(-1) * y_scale + y_mean, y)


def load(name):
    """Standardised split 0 of ``name`` plus y_scale and the training mean of y (to report
    errors in the original units)."""
    raw = load_split(name)
    return (*standardize(*raw), float(np.mean(raw[1])))


def trends(cfg, n_jobs):
    out = {}
    for name in cfg["trend_sets"]:
        X_train, y_train, X_test, y_test, y_scale, y_mean = load(name)
        n, d = X_train.shape
        fit_idx, val_idx = validation_split(n, cfg["n_fit_max"], cfg["n_val_max"])
        grid = [dict(sigma=round(c * math.sqrt(d), 4), lam=lam)
                for c in cfg["sigma_factors"] for lam in cfg["lams"]]
        print(f"\n## trends: {name} (n_train {n}, d {d})", flush=True)
        rows = []
        for key in KEYS:
            m = FITS[key]
            for r in cfg["r_grid"]:
                params, val, _ = tune(
                    lambda X, y, **p: m.fit(X, y, r, p["sigma"], p["lam"], 0, n_jobs),
                    X_train, y_train, fit_idx, val_idx, grid)
                t, peak, model = timed_fit(lambda: m.fit(X_train, y_train, r, params["sigma"],
                                                         params["lam"], 0, n_jobs))
                err = paper_error(model.predict(X_test), y_test, y_scale, y_mean)
                rows.append(dict(method=key, r=r, sigma=params["sigma"], lam=params["lam"],
                                 rel_error=err, fit_s=t, peak_mib=peak / 2**20))
                print(f"  {key:12s} r={r:4d} sigma={params['sigma']:<7g} lam={params['lam']:<6g}"
                      f" rel. error {err:.4f}  fit {t:6.2f} s  peak {peak / 2**20:7.1f} MiB",
                      flush=True)
        out[name] = dict(n_train=n, d=d, n_tune=len(fit_idx), n_val=len(val_idx), rows=rows)
    return out


def randomness(cfg, n_jobs):
    name = cfg["random_set"]
    X_train, y_train, X_test, y_test, y_scale, y_mean = load(name)
    n, d = X_train.shape
    print(f"\n## randomness: {name} (n_train {n}, d {d}), {cfg['seeds']} seeds", flush=True)
    errors = {}
    for key in KEYS:
        for r in cfg["random_r"]:
            E = np.empty((cfg["seeds"], len(cfg["sigmas"])))
            for seed in range(cfg["seeds"]):
                for j, sigma in enumerate(cfg["sigmas"]):
                    model = FITS[key].fit(X_train, y_train, r, sigma, 0.01, seed, n_jobs)
                    E[seed, j] = paper_error(model.predict(X_test), y_test, y_scale, y_mean)
            errors[f"{key}/{r}"] = E.tolist()
            print(f"  {key:12s} r={r:4d} mean over seeds per sigma "
                  f"{np.round(E.mean(0), 4).tolist()}  sd {np.round(E.std(0), 4).tolist()}",
                  flush=True)
    return dict(dataset=name, n_train=n, d=d, errors=errors)


# ---------------------------------------------------------------------------------------------
# Page and plots
# ---------------------------------------------------------------------------------------------

def plot_trends(plt, res):
    names = list(res)
    fig, axes = plt.subplots(len(names), 3, figsize=(11, 3.2 * len(names)), squeeze=False)
    for row_axes, name in zip(axes, names):
        for key in KEYS:
            rows = [r for r in res[name]["rows"] if r["method"] == key]
            for ax, x in zip(row_axes, ("r", "fit_s", "peak_mib")):
                ax.plot([r[x] for r in rows], [r["rel_error"] for r in rows], marker="o",
                        label=LABELS[key])
        for ax, xlabel in zip(row_axes, ("r", "fit seconds", "peak RSS of the fit (MiB)")):
            ax.set_xscale("log", base=2 if xlabel == "r" else 10)
            ax.set_xlabel(xlabel)
            ax.grid(alpha=0.3)
        row_axes[0].set_ylabel(f"{name}: relative test error")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(FIGURES / "hck_error_vs_r.png", dpi=80)
    plt.close(fig)


def plot_randomness(plt, res, sigmas):
    rs = sorted({int(k.split("/")[1]) for k in res["errors"]})
    fig, axes = plt.subplots(len(KEYS), len(rs), figsize=(3.6 * len(rs), 2.6 * len(KEYS)),
                             squeeze=False, sharey=True)
    for i, key in enumerate(KEYS):
        for j, r in enumerate(rs):
            E = np.array(res["errors"][f"{key}/{r}"])
            mean, sd = E.mean(0), E.std(0)
            ax = axes[i][j]
            ax.fill_between(sigmas, mean - 3 * sd, mean + 3 * sd, color="tab:red", alpha=0.35)
            ax.plot(sigmas, mean, color="tab:blue")
            ax.set_xscale("log")
            ax.set_title(f"{LABELS[key]}, r = {r}", fontsize=9)
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("sigma")
    fig.tight_layout()
    fig.savefig(FIGURES / "hck_randomness.png", dpi=80)
    plt.close(fig)


def render(store):
    cfg = store["config"]
    out = ["# Reproduction: hierarchically compositional kernels (HCK paper)", "",
           "Chen, Avron and Sindhwani, *Hierarchically compositional kernels for scalable "
           "nonparametric learning* (JMLR 2017).  Written by `python experiments/reproduce_hck.py "
           "--part trends|randomness`; the commands, machine and dates are at the end of each "
           "section.  The paper's "
           "figures are plots without numbers in the text, so the comparison with the paper "
           "is of trends (its claims are quoted), not of values.  Our data sets differ from "
           "the paper's (cadata, YearPredictionMSD and the LIBSVM classification sets are "
           "not among the shared data); the relative error is ||y_hat - y|| / ||y|| in the "
           "original units of y, as in the paper.", ""]
    if store.get("quick"):
        out += ["**Quick mode (`--quick`): tiny grids, numbers for smoke-testing only.**", ""]
    if "trends" in store:
        res = store["trends"]
        out += ["## Error against r (paper Sec. 5.3, Figs 5 and 6)", "",
                "Setting: split 0, X and y standardised with training statistics, Gaussian "
                "kernel; sigma = c sqrt(d) with c in "
                f"{cfg['sigma_factors']} and lam in {cfg['lams']} chosen per method *and per "
                "r* on a validation split of the training set (20%, at most "
                f"{cfg['n_val_max']} points; tuning fits on at most {cfg['n_fit_max']} of the "
                "other training points), then one fit on the whole training set.  One seed "
                "(the paper had no repeats either).", ""]
        if (FIGURES / "hck_error_vs_r.png").exists():
            out += ["![relative error against r, fit time and memory](figures/"
                    "hck_error_vs_r.png)", ""]
        for name, r in res.items():
            out += [f"### {name} (n_train {r['n_train']}, d {r['d']})", ""]
            header = ["r"] + [LABELS[k] for k in KEYS]
            body = []
            for rr in cfg["r_grid"]:
                cells = [rr]
                for k in KEYS:
                    row = next(x for x in r["rows"] if x["method"] == k and x["r"] == rr)
                    cells.append(f"{row['rel_error']:.4f} ({row['fit_s']:.2f} s, "
                                 f"{row['peak_mib']:.0f} MiB)")
                body.append(cells)
            out += ["Relative test error (fit seconds, peak RSS of the fit):", "",
                    markdown_table(header, body), ""]
        out += _trend_verdict(res, cfg)
        out += [store['trends_note'], ""]
    if "randomness" in store:
        res = store["randomness"]
        sig = cfg["sigmas"]
        out += ["## Effect of randomness (paper Sec. 5.1, Fig. 3)", "",
                f"Setting: {res['dataset']} split 0 (n_train {res['n_train']}, d {res['d']}; the "
                "paper used cadata, n = 16 512, d = 8, which we do not have), standardised, "
                f"Gaussian kernel, lam = 0.01, sigma in {sig} (standardised inputs), "
                f"r in {cfg['random_r']}, {cfg['seeds']} seeds (paper: 30; r = 32, 129, 516).  "
                "A seed stays fixed across the sigma sweep.  Band = mean +- 3 standard "
                "deviations, as in the paper.", ""]
        if (FIGURES / "hck_randomness.png").exists():
            out += ["![relative error against sigma over seeds](figures/hck_randomness.png)",
                    ""]
        header = ["method", "r"] + [f"sigma={s:g}" for s in sig]
        body = []
        for key in KEYS:
            for r in cfg["random_r"]:
                E = np.array(res["errors"][f"{key}/{r}"])
                body.append([LABELS[key], r] + [f"{m:.4f} ± {s:.4f}" for m, s in
                                                zip(E.mean(0), E.std(0))])
        out += ["Mean ± standard deviation of the relative test error over the seeds:", "",
                markdown_table(header, body), ""]
        out += _random_verdict(res, cfg)
        out += [store['randomness_note'], ""]
    return "\n".join(out)


def _trend_verdict(res, cfg):
    lines = ["Paper (Sec. 5.3): *HCK almost always yields the best performance versus r* "
             "(the exception was YearPredictionMSD); *Fourier runs fastest, then Nystrom and "
             "independent, and HCK falls behind*; memory ~4r per point for HCK against r for "
             "the others.  Ours:", ""]
    for name, r in res.items():
        wins = []
        for rr in cfg["r_grid"]:
            best = min((x for x in r["rows"] if x["r"] == rr), key=lambda x: x["rel_error"])
            wins.append(f"{rr}: {LABELS[best['method']]}")
        slow = {k: np.mean([x["fit_s"] for x in r["rows"] if x["method"] == k]) for k in KEYS}
        order = " < ".join(LABELS[k] for k in sorted(slow, key=slow.get))
        top = max(cfg["r_grid"])
        mem = {k: next(x["peak_mib"] for x in r["rows"] if x["method"] == k and x["r"] == top)
               for k in KEYS}
        lines += [f"* {name}: lowest error at each r - {', '.join(wins)}.  Mean fit time, "
                  f"fastest first: {order}.  Peak MiB at r = {top}: "
                  + ", ".join(f"{LABELS[k]} {mem[k]:.0f}" for k in KEYS)
                  + f" (HCK / Nystrom = {mem['hck'] / mem['nystrom']:.1f}x)."]
        losses = []
        for rr in cfg["r_grid"]:
            by = {x["method"]: x for x in r["rows"] if x["r"] == rr}
            best = min(by.values(), key=lambda x: x["rel_error"])
            if best["method"] != "hck":
                losses.append(f"r = {rr}: {LABELS[best['method']]} {best['rel_error']:.4f} "
                              f"against HCK {by['hck']['rel_error']:.4f} (tuned sigma "
                              f"{best['sigma']:g} / {by['hck']['sigma']:g})")
        if losses:
            lines += [f"  Where HCK is not the lowest: {'; '.join(losses)}."]
    lines += ["", "Where we differ and why: the paper's data sets are not ours, so only the "
              "trends can agree.  Where the independent kernel edges out HCK, a likely reason "
              "is that a local kernel fits that set well, so the cross-leaf Nystrom coupling "
              "that HCK adds carries little information and costs a little accuracy through "
              "the landmark approximation; the paper's claim is 'almost always', with an "
              "exception of its own.  The speed order can differ from the paper's (Fourier "
              "fastest there): hkern's independent kernel solves only leaf blocks, and "
              "hkern's Nystrom builds its features in row blocks.  Our "
              "memory column is measured peak RSS, not the paper's 4r / r per point "
              "estimate (HCK / Nystrom above; the paper's estimate is 4x)."]
    return lines + [""]


def _random_verdict(res, cfg):
    lines = ["Paper (Sec. 5.1): *the error curves of the proposed kernel are the most stable, "
             "with the narrowest standard deviation band*; Nystrom varies at small sigma, the "
             "independent kernel at large sigma, and Fourier curves are non-smooth; every "
             "method stabilises as r grows.  Ours (median over sigma of the standard "
             "deviation across seeds):", ""]
    for r in cfg["random_r"]:
        med = {k: float(np.median(np.std(np.array(res["errors"][f"{k}/{r}"]), axis=0)))
               for k in KEYS}
        lines += [f"* r = {r}: " + ", ".join(f"{LABELS[k]} {med[k]:.4f}"
                                             for k in sorted(med, key=med.get)) + "."]
    sig = cfg["sigmas"]
    r0 = cfg["random_r"][0]
    sd = {k: np.std(np.array(res["errors"][f"{k}/{r0}"]), axis=0) for k in KEYS}
    lines += ["", f"Per sigma at r = {r0}: the largest standard deviation is Nystrom's at "
              f"sigma = {sig[int(np.argmax(sd['nystrom']))]:g}, the independent kernel's at "
              f"sigma = {sig[int(np.argmax(sd['independent']))]:g}, HCK's at "
              f"sigma = {sig[int(np.argmax(sd['hck']))]:g}; at the largest sigma "
              f"({sig[-1]:g}) the independent kernel varies "
              f"{sd['independent'][-1] / max(sd['hck'][-1], 1e-12):.1f}x as much as HCK.",
              "",
              "Where we differ and why: our data set (elevators) and sigma grid are not the "
              "paper's (cadata, sigma from 0.01 to 100 on inputs whose scaling is not given), "
              "so 'small' and 'large' sigma are relative to the optimum here."]
    for r in cfg["random_r"]:
        E = {k: np.array(res["errors"][f"{k}/{r}"]) for k in KEYS}
        med = {k: float(np.median(E[k].std(0))) for k in KEYS}
        best = {k: float(E[k].mean(0).min()) for k in KEYS}
        if med["nystrom"] < med["hck"]:
            lines += ["", f"At r = {r} Nystrom's band is narrower than HCK's (median over sigma), "
                      f"while its best mean error is {best['nystrom']:.4f} against HCK's "
                      f"{best['hck']:.4f}: with enough landmarks for this set's effective rank "
                      "a low-rank approximation varies little with the landmark draw, and "
                      "the paper itself notes that every method stabilises as r grows."]
    return lines + [""]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("all", "trends", "randomness"), default="all")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--n-jobs", type=int, default=1)
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--render-only", action="store_true",
                   help="no fits: rewrite the page and plots from results/reproduce_hck.json")
    args = p.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    cfg_json = json.loads(json.dumps(cfg))
    store = json.loads(STORE.read_text()) if STORE.exists() else {}
    if args.render_only:
        cfg = store["config"]
    else:
        if store.get("config") != cfg_json:
            store = {}     # never mix quick and full settings on one page
        store.update(config=cfg_json, quick=args.quick)
        note = machine_note(command_line())
        with blas_threads(args.n_jobs):
            if args.part in ("all", "trends"):
                store.update(trends=trends(cfg, args.n_jobs), trends_note=note)
            if args.part in ("all", "randomness"):
                store.update(randomness=randomness(cfg, args.n_jobs), randomness_note=note)
    if args.no_write:
        return 0
    FIGURES.mkdir(parents=True, exist_ok=True)
    STORE.write_text(json.dumps(store, indent=1) + "\n")
    plt = pyplot()
    if plt is not None:
        if "trends" in store:
            plot_trends(plt, store["trends"])
        if "randomness" in store:
            plot_randomness(plt, store["randomness"], cfg["sigmas"])
    PAGE.write_text(render(store))
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
