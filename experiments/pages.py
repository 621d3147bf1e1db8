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
import math
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
DOCS = REPO / "doc"
NL = "\n"
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


def mpi_exact_pcg():
    """Exact KRR by PCG on 1 and 2 ranks of one thread: fit time, its preconditioner's,
    iterations, memory, test RMSE and the coefficients' digest, median over the rounds."""
    runs = {}
    for line in (RESULTS / "mpi_exact_pcg.json").read_text().splitlines():
        for run in json.loads(line)["runs"]:
            runs.setdefault(run["ranks"], []).append(run)
    rows, seconds = [], {}
    for ranks, group in sorted(runs.items()):
        fit = [run["seconds"] for run in group]
        seconds[ranks] = _median(fit)
        spread = f" ({min(fit):.1f}–{max(fit):.1f})" if len(group) > 1 else ""
        first = group[0]
        rows.append([f"{ranks} × 1", len(group), f"{_median(fit):.1f}{spread}",
                     f"{_median([run['preconditioner_seconds'] for run in group]):.1f}",
                     first["iterations"], first["preconditioner_rank"],
                     f"{max(max(run['peak_rss_bytes']) for run in group) / 2**30:.2f}",
                     f"{first['test_rmse']:.5f}",
                     ", ".join(sorted({f"`{run['coef_digest']}`" for run in group}))])
    first = runs[min(runs)][0]
    return ("From `results/mpi_exact_pcg.json` (`python experiments/exact_sharded.py run`; "
            f"kin40k, the first{NL}{_spaced(first['n'])} training rows, sigma {first['sigma']:g}, "
            f"lam {first['lam']:g}, `precision=\"{first['precision']}\"`; seconds the median "
            "over the rounds, range in brackets):" + NL + NL
            + _table(["ranks × threads", "runs", "fit s", "preconditioner s", "iterations",
                      "rank", "peak GiB per rank", "test RMSE", "coefficients' digest"], rows)
            + NL + f"2 ranks fit {seconds[1] / seconds[2]:.2f} times as fast as 1 rank, to the "
            "same coefficients (one digest)." + NL)


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


def _precision_json(name):
    return json.loads((RESULTS / "mixed_precision" / name).read_text())


def falkon_precision_kin40k():
    """kin40k, 8192 centres, sigma 2, lam 1e-3: FALKON in double, auto and mixed precision."""
    record = _precision_json("falkon.json")
    med, rows = record["medians"], []
    for precision, runs in record["rows"].items():
        ran = sorted({r["ran"] for r in runs})
        residual = runs[0]["float64_model_residual"]
        rows.append([f"`{precision}`", ", ".join(ran), f"{med[precision]['seconds']:.1f}",
                     f"{med[precision]['seconds'] / med['double']['seconds']:.2f}",
                     f"{med[precision]['rmse']:.5f}",
                     "" if residual is None else f"{residual:.2e}",
                     f"{med[precision]['gib']:.2f}"])
    return (f"`fit_nystrom(X, y, 8192, solver=\"pcg\", sigma=2, lam=1e-3, seed=0)` on kin40k "
            f"split 0, each\nprecision {len(record['rows']['double'])} times, alternating "
            f"(medians; `{record['command']}`):\n\n"
            + _table(["precision", "ran", "seconds", "of double's", "test RMSE",
                      "float64-model residual", "peak GiB"], rows))


def falkon_precision_defaults():
    """The default FALKON call per set in double and auto precision."""
    record = _precision_json("falkon_defaults.json")
    rows = []
    for name, r in record["sets"].items():
        med, runs = r["medians"], r["rows"]["auto"]
        rows.append([name, runs[0]["rank"], f"{med['double']['seconds']:.1f}",
                     f"{med['auto']['seconds']:.1f}",
                     f"{med['auto']['seconds'] / med['double']['seconds']:.3f}",
                     ", ".join(sorted({x["ran"] for x in runs})),
                     f"{med['auto']['rmse'] - med['double']['rmse']:+.5f}"])
    return ("The default call `fit_nystrom(X, y, solver=\"pcg\", seed=0)` (its centres and "
            "its selection of\nsigma and lam) in double and auto precision on split 0, "
            f"alternating (medians; `{record['command']}`):\n\n"
            + _table(["set", "centres", "double s", "auto s", "auto / double", "auto ran",
                      "test RMSE auto - double"], rows))


def falkon_precision_sweep():
    """The sweep of sigma x lam per set: where auto ran mixed and where double, its time and
    RMSE against double's, and the pivot quantiles of the two groups."""
    def ratios(points):
        values = [r["auto"]["seconds"] / r["double"]["seconds"] for r in points]
        return f"{_median(values):.2f} ({max(values):.2f})" if values else ""

    rows = []
    for path in sorted((RESULTS / "mixed_precision").glob("falkon_sweep_*.json")):
        record = json.loads(path.read_text())
        points = [r for r in record["rows"] if "seconds" in r["double"] and "seconds" in r["auto"]]
        mixed = [r for r in points if r["auto"]["ran"] == "mixed"]
        double = [r for r in points if r["auto"]["ran"] == "double"]
        change = [abs(r["auto"]["rmse"] / r["double"]["rmse"] - 1) for r in points]
        low = [r["pivot_quantile"] for r in points if r["pivot_quantile"] < 2]
        high = [r["pivot_quantile"] for r in points if r["pivot_quantile"] >= 2]
        gaps = [r["auto"]["float64_model_residual"] / 1e-3 for r in mixed]
        rows.append([path.stem.removeprefix("falkon_sweep_"), len(points), len(mixed),
                     ratios(mixed), ratios(double), f"{100 * max(change):.3f}%",
                     f"{max(gaps):.1f}" if gaps else "",
                     f"{min(low):.3g} to {max(low):.3g}" if low else "",
                     f"{min(high):.3g}" if high else ""])
    return ("FALKON on 20 000 rows of each set (or all of its training rows) with 2048 uniform "
            "centres, sigma" + NL + "a quarter, half and all of the median distance and lam "
            "1e-1 .. 1e-4, one fit per precision and point" + NL + "(`python "
            "experiments/mixed_precision.py falkon-sweep SET --n 20000 --centres 2048`); "
            "auto's time" + NL + "over double's as the median (largest) of the points where "
            "it ran mixed, and of those where its" + NL + "screen sent it to double (single "
            "fits of 0.4 to 8 s):" + NL + NL
            + _table(["set", "points", "auto ran mixed", "auto / double, mixed",
                      "auto / double, double", "largest RMSE change",
                      "largest float64-model residual (tol)", "pivot quantiles below 2",
                      "least quantile from 2"], rows))


def falkon_precision_screen():
    """What the pivot screen costs against the double factors and the double fit."""
    record = _precision_json("falkon_screen.json")
    rows = [[r["set"], f"{r['sigma']:.3g}", r["centres"], "yes" if r["passes"] else "no",
             f"{r['screen_seconds']:.3f}", f"{r['double_factors_seconds']:.3f}",
             f"{r['double_fit_seconds']:.2f}",
             f"{100 * r['screen_seconds'] / r['double_fit_seconds']:.1f}%"]
            for r in record["rows"]]
    return (f"The screen's cost (`{record['command']}`, lam {record['lam']:g}; medians of the "
            "factor timings):" + NL + NL
            + _table(["set", "sigma", "centres", "screen passes", "screen s",
                      "double factors s", "double fit s", "screen / fit"], rows))

def _growth_cell(r):
    status = r["status"]
    if status.startswith("not run") and r.get("expected_seconds"):
        return f"not run (about {r['expected_seconds']:.0f} s expected)"
    if status.startswith("stopped"):
        return status.replace(": still running", "")
    if status != "ok":
        return "refused (memory)" if "memory" in status.lower() or \
            "MiB" in status or "GiB" in status else status.split(":")[0]
    return f"{r['seconds']:.3g} s, {r['peak_bytes'] / 2**30:.3g} GiB, {r['test_rmse']:.3f}"


def _slope(points):
    """Least-squares slope of log(value) against log(n) over (n, value) points."""
    if len(points) < 2:
        return None
    xs = [math.log(p[0]) for p in points]
    ys = [math.log(p[1]) for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _growth_stop(last):
    """How far a method went: its largest n's record."""
    n, status = _spaced(last["n"]), last["status"]
    if status == "ok":
        return f"ran to n = {n}"
    if status.startswith("not run"):
        return f"n = {n} not run: time"
    if status.startswith("stopped"):
        return f"stopped at n = {n}: time"
    return f"refused at n = {n}"


def growth():
    """Fit time, peak memory and test RMSE against n per method, and the exponents."""
    record = json.loads((RESULTS / "growth.json").read_text())
    records = [r for r in record["records"] if not r.get("memmap")]
    out = []
    for d, call in sorted({(r["d"], r["call"]) for r in records},
                          key=lambda dc: (dc[0], dc[1] != "fixed")):
        runs = [r for r in records if r["d"] == d and r["call"] == call]
        sizes = sorted({r["n"] for r in runs})
        methods = list(dict.fromkeys(r["method"] for r in runs))
        rows, slopes = [], []
        for method in methods:
            by_n = {r["n"]: r for r in runs if r["method"] == method}
            rows.append([method] + [_growth_cell(by_n[n]) if n in by_n else "" for n in sizes])
            ok = [by_n[n] for n in sizes if n in by_n and by_n[n]["status"] == "ok"
                  and n >= 10**4]
            t = _slope([(r["n"], r["seconds"]) for r in ok])
            m = _slope([(r["n"], r["peak_bytes"]) for r in ok if r["peak_bytes"] > 0])
            stop = _growth_stop(by_n[max(by_n)])
            theory = next(iter(by_n.values()))
            slopes.append([method, "" if t is None else f"{t:.2f}", theory["theory_time"],
                           "" if m is None else f"{m:.2f}", theory["theory_memory"], stop])
        out.append(f"**d = {d}, {call} call** (each cell: fit seconds, peak GiB above X, test "
                   "RMSE):" + NL + NL
                   + _table(["method"] + [f"n = {_spaced(n)}" for n in sizes], rows) + NL
                   + "Exponents of n, fitted from n = 10 000 on:" + NL + NL
                   + _table(["method", "time", "theory", "memory", "theory", "how far"],
                            slopes))
    commands = dict.fromkeys(r.get("command", record["command"]) for r in record["records"])
    return ("From `results/growth.json`, made by" + NL + NL
            + "".join(f"    {c}" + NL for c in commands) + NL + NL.join(out))


def growth_memory_mapped():
    """The fits of a memory-mapped X: seconds, anonymous and whole resident peaks, RMSE."""
    record = json.loads((RESULTS / "growth.json").read_text())
    rows = []
    for r in record["records"]:
        if not r.get("memmap"):
            continue
        if r["status"] != "ok":
            rows.append([r["method"], _spaced(r["n"]), r["status"].split(":")[0], "", "", ""])
            continue
        rows.append([r["method"], _spaced(r["n"]), f"{r['seconds']:.0f}",
                     f"{r['peak_anonymous_bytes'] / 2**30:.2f}",
                     f"{r['peak_bytes'] / 2**30:.2f}", f"{r['test_rmse']:.4f}"])
    return ("X memory-mapped from disk (`--mmap`): the fit's peak anonymous memory (RssAnon: "
            "what the fit" + NL + "allocates) and its peak resident set (which also counts "
            "the pages of X read into the" + NL + "page cache), above the process's own "
            "before the fit:" + NL + NL
            + _table(["method", "n", "seconds", "peak anonymous GiB", "peak resident GiB",
                      "test RMSE"], rows))


def _falkon_scale(part):
    record = json.loads((RESULTS / "falkon_scale.json").read_text())
    return record["commands"][part], [r for r in record["records"] if r["part"] == part]


def falkon_ridge():
    """hkern's FALKON with lam held at 1 and with lam / n held fixed, at two n."""
    command, runs = _falkon_scale("ridge")
    runs = list({(r["n"], r["lam"]): r for r in runs}.values())   # at 10^5 rows lam 1 is both
    rows = [[_spaced(r["n"]), f"{r['lam']:g}", f"{r['penalty']:.0e}", r["iterations"],
             f"{r['seconds']:.1f}", f"{r['test_rmse']:.4f}"] for r in runs]
    return (f"From `results/falkon_scale.json` (`{command}`; {runs[0]['r']} centres, sigma "
            f"{runs[0]['sigma']:g}):" + NL + NL
            + _table(["n", "lam", "lam / n", "iterations", "fit s", "test RMSE"], rows))


def _gib(n_bytes):
    return f"{n_bytes / 2**30:.2f}"


def falkon_peer():
    """hkern's FALKON and the real Falkon library on the same centres, sigma and lam."""
    command, runs = _falkon_scale("peer")
    double_command, doubles = _falkon_scale("peer_double")
    rows = [[r["library"] + f" {r['version']}", r["round"] + 1, f"{r['seconds']:.1f}",
             r["iterations"], r["precision"], r["threads"], f"{r['test_rmse']:.4f}",
             _gib(r["peak_anonymous_bytes"])] for r in runs + doubles]
    ours = _median([r["seconds"] for r in runs if r["library"] == "hkern"])
    ours_double = _median([r["seconds"] for r in doubles])
    theirs = _median([r["seconds"] for r in runs if r["library"] == "falkon"])
    first = runs[0]
    return (f"From `results/falkon_scale.json` (`{command}`, then `{double_command}`): the "
            f"first" + NL + f"{_spaced(first['n'])} rows (d = {first['d']}), "
            f"{first['r']} centres (the same rows for both), sigma {first['sigma']:g}, hkern's "
            f"lam {first['lam']:g}" + NL + "(Falkon's penalty lam / n); each fit in its own "
            "process, in the order of the table:" + NL + NL
            + _table(["library", "round", "fit s", "iterations", "precision", "threads",
                      "test RMSE", "peak anonymous GiB"], rows)
            + NL + f"For the same number of iterations the real Falkon took {theirs / ours:.1f} "
            f"times the time of hkern's default" + NL + f"(`precision=\"auto\"`, medians), and "
            f"{theirs / ours_double:.1f} times that of hkern in double precision, Falkon's "
            "arithmetic." + NL)


def falkon_ten_million():
    """hkern's FALKON on 10^7 memory-mapped rows: time and memory against issue 54's targets."""
    command, runs = _falkon_scale("ten-million")
    rows = [[_spaced(r["n"]), r["r"], f"{r['seconds']:.0f} ({r['seconds'] / 60:.1f} min)",
             r["iterations"], r["precision"], _gib(r["peak_anonymous_bytes"]),
             _gib(r["peak_resident_bytes"]), f"{r['test_rmse']:.4f}"] for r in runs]
    first = runs[0]
    slowest = max(r["seconds"] for r in runs) / 60
    largest = max(r["peak_anonymous_bytes"] for r in runs)
    return (f"From `results/falkon_scale.json` (`{command}`): sigma {first['sigma']:g}, lam "
            f"{first['lam']:g}," + NL + "X a memory "
            f"map of the .npy file, {first['threads']} threads:" + NL + NL
            + _table(["n", "centres", "fit s", "iterations", "precision",
                      "peak anonymous GiB", "peak resident GiB", "test RMSE"], rows)
            + NL + f"Against the targets: {slowest:.1f} minutes (at most 20), and "
            f"{largest / 1e9:.2f} GB of the fit's own memory (at most 2 GB beyond" + NL
            + "the page cache of X; the resident peak also counts the pages of X read into "
            "it)." + NL)


def memory_mapped():
    """The same fit on a memory-mapped X and in memory: digests, seconds, peaks, estimate."""
    records = _records("memory_mapped.json")
    rows = []
    for method in dict.fromkeys(r["method"] for r in records):
        pair = {r["memmap"]: r for r in records if r["method"] == method}
        memory, mapped = pair[False], pair[True]
        same = (memory["coef_digest"] == mapped["coef_digest"]
                and memory["predictions_digest"] == mapped["predictions_digest"])
        mib = [f"{r[key] / 2**20:.1f}" for r, key in (
            (memory, "peak_anonymous_bytes"), (mapped, "peak_anonymous_bytes"),
            (mapped, "peak_resident_bytes"), (mapped, "estimate_bytes"))]
        rows.append([method, _spaced(memory["n"]), f"{memory['seconds']:.1f}",
                     f"{mapped['seconds']:.1f}", "yes" if same else "**no**", *mib])
    return ("From `results/memory_mapped.json` (`python experiments/memory_mapped.py --write`; "
            "peaks above the" + NL + "process's before the fit; the estimate is the largest "
            "the fit passed to its memory guard):" + NL + NL
            + _table(["fit", "n", "in memory s", "memory map s", "same bits",
                      "anonymous MiB, in memory", "anonymous MiB, map", "resident MiB, map",
                      "estimate MiB"], rows))


def which_fit_at_scale():
    """The user's summary of FALKON at 10^7 rows and beside the real Falkon at 10^6."""
    _, big = _falkon_scale("ten-million")
    _, peer = _falkon_scale("peer")
    r = big[0]
    ours = _median([p["seconds"] for p in peer if p["library"] == "hkern"])
    theirs = _median([p["seconds"] for p in peer if p["library"] == "falkon"])
    return (f"FALKON with {r['r']} centres fit {_spaced(r['n'])} rows (d = {r['d']}, X memory "
            f"mapped, lam / n = {r['penalty']:g}) in" + NL + f"{r['seconds'] / 60:.0f} minutes "
            f"with {r['peak_anonymous_bytes'] / 2**30:.2f} GiB of its own memory, to test RMSE "
            f"{r['test_rmse']:.4f} (noise sd 0.1). On" + NL + f"{_spaced(peer[0]['n'])} rows "
            f"the real Falkon library took {theirs / ours:.1f} times hkern's time (its default "
            "precision) for the" + NL + "same centres, sigma, lam and iterations "
            "([growth](results/growth.md#ten-million-rows-x-memory-mapped))." + NL)


GROWTH_EXPONENT = {"hck": 1, "falkon": 1, "exact": 2}    # fit time against n, at fixed size


def mpi_growth():
    """Strong and weak scaling of the sharded fits on 1, 2 and 4 ranks of one thread."""
    runs = {}
    for rec in json.loads((RESULTS / "mpi_growth.json").read_text()):
        runs.setdefault((rec["study"], rec["method"], rec["n"], rec["ranks"]), []).append(rec)
    rows = []
    order = list(GROWTH_EXPONENT)
    for (study, method, n, ranks), group in sorted(runs.items(), key=lambda item: (
            order.index(item[0][1]), item[0][0], item[0][3])):
        seconds = max(rec["fit_seconds"] for rec in group)          # the slowest rank
        one = [v for (s, m, _, p), v in runs.items() if (s, m, p) == (study, method, 1)]
        base = max(rec["fit_seconds"] for rec in one[0]) if one else None
        n_one = one[0][0]["n"] if one else None
        if base is None:
            ratio = ""
        elif study == "strong":
            ratio = f"speedup {base / seconds:.2f} (ideal {ranks})"
        else:      # the ideal: the serial work grows as n^a, shared among the ranks
            ideal = base * (n / n_one) ** GROWTH_EXPONENT[method] / ranks
            ratio = f"efficiency {ideal / seconds:.2f} (ideal time {ideal:.1f} s)"
        first = group[0]
        rows.append([study, {"hck": "HCK", "falkon": "FALKON", "exact": "exact PCG"}[method],
                     f"`r={first['r']}`" if method != "exact" else "default", _spaced(n),
                     f"{ranks} × 1", f"{seconds:.1f}",
                     f"{max(rec['peak_rss_gib'] for rec in group):.2f}",
                     f"{first['test_rmse']:.5f}", ratio])
    return ("From `results/mpi_growth.json` (`experiments/mpi_scaling.py --study strong|weak`, "
            "the loop in its" + NL + "docstring; fit seconds of the slowest rank; this "
            "machine has 2 cores, so 4 ranks share them two to a core):" + NL + NL
            + _table(["study", "fit", "size", "n", "ranks × threads", "fit s",
                      "peak GiB per rank", "test RMSE", "against 1 rank"], rows))


RENDERERS = {f.__name__: f for f in (nystrom_variance_forms, ard_against_isotropic, mpi_scaling,
                                     mpi_growth,
                                     mpi_exact_pcg,
                                     float32_inputs, pcg_std, falkon_precision_kin40k,
                                     falkon_precision_defaults, falkon_precision_sweep,
                                     falkon_precision_screen, growth,
                                     growth_memory_mapped, falkon_peer, falkon_ten_million,
                                     memory_mapped, which_fit_at_scale, falkon_ridge)}


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
