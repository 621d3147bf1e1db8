"""doc/results/solvers.md from results/solvers.json (the records of compare_solvers.py)."""
from __future__ import annotations

from common import FIGURES, PAGES, RESULTS, markdown_table, pyplot

RECORD = RESULTS / "solvers.json"
PAGE = PAGES / "solvers.md"
FIGURE = "solvers_error_vs_time"

# Methods of the curves, in the legend's order: (record key, label, line style).
CURVE_METHODS = (
    ("exact_cholesky", "exact, Cholesky", ":"),
    ("exact_pcg", "exact, PCG (RPCholesky r=2000)", "-"),
    ("hck", "HCK (r sweep)", "-"),
    ("nystrom", "Nystrom, direct (M sweep)", "-"),
    ("nystrom_pcg", "Nystrom-PCG / FALKON (M sweep)", "-"),
    ("numpy_falkon", "NumPy FALKON peer", "--"),
    ("sklearn_nystroem", "scikit-learn Nystroem+Ridge", "--"),
)


def section_of(record):
    """The unit a re-run replaces: a section, or one data set of the curves."""
    return record["section"]


def _rows(records):
    return [[r["name"], f"{r['seconds']:.1f}", r.get("detail", ""), f"{r['rmse']:.4f}",
             f"{r['peak_bytes'] / 2**30:.2f}"] for r in records]


def _table(records):
    return markdown_table(["fit", "seconds", "of which", "test RMSE", "peak GiB"],
                          _rows(records))


def _commands(records):
    seen = []
    for r in records:
        if r.get("command") and r["command"] not in seen:
            seen.append(r["command"])
    return "\n".join(f"    {c}" for c in seen)


def _curve_sets(records):
    names = []
    for r in records:
        if "method" in r and r.get("dataset") and r["dataset"] not in names:
            names.append(r["dataset"])
    return names


def plot(records):
    """Test RMSE against fit seconds, one panel per data set; False without matplotlib."""
    plt = pyplot()
    names = _curve_sets(records)
    if plt is None or not names:
        return False
    fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for i, (key, label, style) in enumerate(CURVE_METHODS):
            pts = sorted((r["seconds"], r["rmse"]) for r in records
                         if r.get("dataset") == name and r.get("method") == key)
            if pts:
                ax.plot(*zip(*pts), label=label, color=f"C{i}", marker="os^vDxP"[i],
                        linestyle=style)
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("fit seconds")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test RMSE (standardised y)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=4, bbox_to_anchor=(0.5, -0.25))
    FIGURES.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURES / f"{FIGURE}.png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return True


def render(records):
    """Write the page (and its figure) from the records."""
    parts = ["# Iterative solvers: measured\n",
             "Written by `experiments/compare_solvers.py` from `results/solvers.json`; every "
             "row is one whole fit in one process on this project's 2-core machine (seconds: "
             "the median of the run's repeats; peak GiB: the resident set above the start; "
             "test RMSE on standardised targets).  What the solvers are and how to choose "
             "between them: [](../solvers.md).  The commands of these records:\n",
             _commands(records) + "\n"]
    for section, title in (("exact", "Exact KRR on kin40k (sigma 1.41, lam 1e-2)"),
                           ("crossover", "Cholesky or PCG: kin40k subsamples (solver='auto')"),
                           ("nystrom", "Nystrom KRR on kin40k (sigma 2, lam 1e-3)"),
                           ("synthetic", "10^6 x 8 synthetic regression (sigma 2)")):
        rows = [r for r in records if r["section"] == section]
        if rows:
            parts += [f"## {title}\n", _table(rows) + "\n"]
    names = _curve_sets([r for r in records if r["section"].startswith("curves")])
    if names:
        parts += ["## Test error against fit time\n",
                  "The same (sigma, lam) for every method of a data set: the setting the "
                  "validation grid of issue 18 chose for `fit_hierarchical` "
                  "(`results/selection.json`).  PCG fits stop at the relative residual of the "
                  "command's `--tol`.\n"]
        if plot(records):
            parts.append(f"![test RMSE against fit seconds](figures/{FIGURE}.png)\n")
        for name in names:
            rows = [r for r in records if r["section"] == f"curves {name}"]
            first = rows[0]
            parts += [f"### {name} (n = {first['n']}, sigma {first['sigma']:g}, "
                      f"lam {first['lam']:g})\n", _table(rows) + "\n"]
    PAGE.write_text("\n".join(parts))
    print(f"wrote {PAGE}")
