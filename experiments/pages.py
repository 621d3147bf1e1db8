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


RENDERERS = {f.__name__: f for f in (nystrom_variance_forms, ard_against_isotropic)}


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
