"""Numbers in the docs rendered from the records in results/, so that a page cannot drift from
the measurement it quotes.

A page holds a rendered block between two comment lines::

    <!-- rendered by experiments/pages.py: NAME -->
    ...markdown made by RENDERERS[NAME] from its record...
    <!-- end rendered -->

    python experiments/pages.py            # rewrite every block from its record
    python experiments/pages.py --check    # list the blocks that differ (tests/test_pages.py)

A renderer reads only results/ and returns markdown; the block's text is exactly its output.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
DOCS = REPO / "doc"
BLOCK = re.compile(r"(<!-- rendered by experiments/pages\.py: (\w+) -->\n)(.*?)"
                   r"(<!-- end rendered -->)", re.S)


def _records(name):
    return json.loads((RESULTS / name).read_text())["records"]


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def nystrom_variance_forms():
    """The default FALKON fit's 95% coverage with the DTC and the SoR variance, per set."""
    rows = [[r["set"], f"{r['signal_variance']:.3g}", f"{r['dtc']['coverage']['0.95']:.4f}",
             f"{r['sor']['coverage']['0.95']:.4f}"]
            for r in _records("nystrom_variance_forms.json")]
    return ("The default FALKON fit's 95% intervals, with the DTC term and without it (SoR,\n"
            "hkern's), from `results/nystrom_variance_forms.json`\n"
            "(`python experiments/nystrom_variance_forms.py`):\n\n"
            + _table(["set", "fitted signal variance", "DTC coverage", "SoR coverage"], rows))


def ard_against_isotropic():
    """sigma="ard" against sigma="auto" per set and fit, test RMSE and their ratio."""
    rows = []
    for r in _records("ard_against_isotropic.json"):
        split = f"{r['splits']} splits pooled" if r.get("splits") else "split 0"
        rows.append([r["set"], f"`{r['fit']}`", split, f"{r['ard_rmse']:.4f}",
                     f"{r['isotropic_rmse']:.4f}", f"{r['ratio']:.4f}", r["kept"]])
    return ("Test RMSE (standardised) of the default call (`sigma=\"ard\"`) and of "
            "`sigma=\"auto\"`, from\n`results/ard_against_isotropic.json` (each record names "
            "its command):\n\n"
            + _table(["set", "fit", "test rows", '"ard"', '"auto"', "ratio", "kept"], rows))


def _mpi_runs():
    """The runs of results/mpi_scaling.json, one per mpiexec: (config, [records of its ranks])."""
    records = json.loads((RESULTS / "mpi_scaling.json").read_text())
    runs, i = [], 0
    while i < len(records):
        first = records[i]
        runs.append(records[i:i + first["ranks"]])
        i += first["ranks"]
    groups = {}
    for run in runs:
        r = run[0]
        key = (r["method"], r["n"], r["r"], r["sharded"], r["ranks"], r["threads"] or "all")
        groups.setdefault(key, []).append(run)
    return groups


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def mpi_scaling():
    """Fit time, peak memory per rank and test RMSE of each MPI configuration, per run."""
    rows, fit_time, peak = [], {}, {}
    for (method, n, r, sharded, ranks, threads), runs in _mpi_runs().items():
        seconds = [max(rec["fit_seconds"] for rec in run) for run in runs]
        fit_time[method, n, sharded, ranks] = _median(seconds)
        peak[method, n, sharded, ranks] = max(rec["peak_rss_gib"] for run in runs for rec in run)
        spread = f" ({min(seconds):.2f}–{max(seconds):.2f})" if len(runs) > 1 else ""
        rows.append([f"{'HCK' if method == 'hck' else 'FALKON'} n = {n:,}".replace(",", " "),
                     f"`r={r}`" if method == "hck" else f"`r={r}` centres",
                     "sharded" if sharded else "serial", f"{ranks} × {threads}", len(runs),
                     f"{_median(seconds):.2f}{spread}",
                     f"{peak[method, n, sharded, ranks]:.2f}", f"{runs[0][0]['test_rmse']:.5f}"])
    memory = peak["hck", 2000000, True, 4] / peak["hck", 2000000, False, 1]
    hck = fit_time["hck", 500000, True, 1] / fit_time["hck", 500000, True, 2]
    falkon = fit_time["falkon", 500000, True, 1] / fit_time["falkon", 500000, True, 2]
    return ("From `results/mpi_scaling.json` (`python experiments/mpi_scaling.py ... --write`; "
            "fit seconds: the\nslowest rank's, median over the runs, range in brackets):\n\n"
            + _table(["fit", "size", "data", "ranks × threads", "runs", "fit s",
                      "peak GiB per rank", "test RMSE"], rows)
            + f"\nEach of 4 ranks peaks at {memory:.2f} of the serial HCK fit's memory; 2 ranks "
            f"fit HCK {hck:.2f} times\nas fast as 1 rank, FALKON {falkon:.2f} times.\n")


def float32_inputs():
    """Peak traced memory and seconds of each call on float32 X and on its float64 widening."""
    record = json.loads((RESULTS / "float32_inputs.json").read_text())
    rows = [[f"`{r['call']}`", f"{r['peak_mib_float32']:.1f}", f"{r['peak_mib_float64']:.1f}",
             f"{r['seconds_float32']:.2f}", f"{r['seconds_float64']:.2f}",
             "yes" if r["same_bits"] else "no"] for r in record["records"]]
    size = f"{record['n']:,} x {record['d']}".replace(",", " ")
    return ("From `results/float32_inputs.json` (`python experiments/float32_inputs.py`; "
            f"{size} data,\ntraced peak MiB and seconds of the call on float32 X and on "
            "float64 X):\n\n"
            + _table(["call", "MiB float32", "MiB float64", "s float32", "s float64",
                      "same bits"], rows))


def _spaced(n):
    """An integer with its thousands apart, as the pages write them: 36 000."""
    return f"{n:,}".replace(",", " ")


def pcg_std():
    """Exact PCG's conditional std against the exact (Cholesky) one, and its cost at full n."""
    record = json.loads((RESULTS / "pcg_std.json").read_text())
    rows = []
    for key, r in record.items():
        if key.startswith("accuracy/"):
            latent = r["errors"]["latent"]
            rows.append([r["set"], _spaced(r["n"]), _spaced(r["m"]),
                         f"{100 * latent['median']:.2f}%", f"{100 * latent['max']:.2f}%",
                         "yes" if r["never_below_exact"] else "no"])
    speed = [r for key, r in record.items() if key.startswith("speed/")]
    lines = [f"On all {_spaced(r['n'])} rows of {r['set']} the std of {_spaced(r['m'])} test "
             f"points took {r['std_seconds']:.0f} s ({r['std_over_fit']:.2f} of the fit's\ntime) "
             f"and a peak of {r['std_peak_bytes'] / 2**30:.2f} GiB, where the n x n factor would "
             f"take {r['n_by_n_bytes'] / 2**30:.1f} GiB.\n" for r in speed]
    return ("`fit_exact(solver=\"pcg\")`'s std against the exact one on the first rows of each "
            "set (relative\ndeviation of the latent std over the test points), from "
            "`results/pcg_std.json`:\n\n"
            + _table(["set", "training rows", "test points", "median deviation", "largest",
                      "never below exact"], rows)
            + "".join("\n" + line for line in lines))


RENDERERS = {f.__name__: f for f in (nystrom_variance_forms, ard_against_isotropic, mpi_scaling,
                                     float32_inputs, pcg_std)}


def blocks(text):
    """(name, current text) of every rendered block of a page."""
    return [(m.group(2), m.group(3)) for m in BLOCK.finditer(text)]


def rendered(text):
    """The page with every block's text replaced by its renderer's output."""
    def replace(m):
        if m.group(2) not in RENDERERS:
            raise KeyError(f"no renderer {m.group(2)!r} in experiments/pages.py")
        return m.group(1) + RENDERERS[m.group(2)]() + m.group(4)
    return BLOCK.sub(replace, text)


def pages():
    """Every page of the docs and the README that holds a rendered block."""
    candidates = sorted(DOCS.rglob("*.md")) + [REPO / "README.md"]
    return [p for p in candidates if "_build" not in p.parts and BLOCK.search(p.read_text())]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="list the pages whose blocks differ from their records; exit 1")
    args = parser.parse_args()
    stale = []
    for path in pages():
        text = path.read_text()
        new = rendered(text)
        if new != text:
            stale.append(path.relative_to(REPO))
            if not args.check:
                path.write_text(new)
    for path in stale:
        print(f"{'differs from its records' if args.check else 'rewrote'}: {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
