"""No user page quotes a measurement by hand (issue 53).

User pages (README.md and doc/*.md except the measurement histories doc/design.md and
doc/benchmark_history.md) say what to call and why.  Every measured number on them is either
inside a block rendered by experiments/pages.py from a record in results/ (checked against the
record by tests/test_pages.py), or in code (fenced, inline, or a doctest), or is on
doc/results/.  This test finds measurement-like numbers in the rest of the prose: decimals
(0.0624, 3.4e-3) and numbers with a unit of time, memory, ratio or share (12 s, 1.5 GiB, 2.05x,
25%).  It ignores what is not a measurement by its shape: version numbers (Python 3.10),
section numbers (spec 2.5, section 7.5), sizes like 20 000 x 256 (a product, not a ratio);
the rest that is not a measurement is in ALLOWED with its reason.
"""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXCLUDED = {"design.md", "benchmark_history.md"}  # measurement histories, like doc/results/
FIX = ("render it from a record in results/ with experiments/pages.py, or move it to "
       "doc/results/ and point there")

# (page, number as matched, reason).  Only numbers that are not measurements.
ALLOWED = {
    ("doc/solvers.md", "1 MiB"): "the kernel engine's block size (a constant in the code)",
    ("doc/solvers.md", "1 GiB"): "the default memory caps of exact PCG's factor and stored K",
    ("doc/uncertainty.md", "95%"): "the nominal level of an interval, not a measured coverage",
    ("doc/uncertainty.md", "50%"): "the nominal level of an interval, not a measured coverage",
    ("doc/uncertainty.md", "99%"): "the nominal level of an interval, not a measured coverage",
    ("doc/hyperparameters.md", "5%"): "a rule of the hold-out criterion's early stop",
    ("doc/mpi.md", "10 s"): "the tests' timeout, a setting",
    ("doc/index.md", "10%"): "the error level at which the MEKA page times the methods, a setting",
}

BLOCK = re.compile(r"<!-- rendered by experiments/pages\.py: \w+ -->\n.*?<!-- end rendered -->",
                   re.S)
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", re.S | re.M)
INLINE = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", re.S)   # inline code, across a line break
LINK_TARGET = re.compile(r"\]\([^)\s]*\)|^\s*:\w[\w-]*:.*$|<[^>\n]*>")
NUMBER = re.compile(
    r"(?<![\w.\-/^§])"                       # not inside a word, a path or a version
    r"(?:\d+(?:\.\d+)?\s?(?:GFLOP/s|GiB|GB|MiB|MB|KiB|ms|s|%|x|×)"   # a number with a unit
    r"|\d+\.\d+(?:e[-+]?\d+)?)"              # or a decimal, in scientific notation too
    r"(?![\w.]*\d|\w)")
# a decimal that is a version or a section number, judged by the words before it
NOT_A_MEASUREMENT = re.compile(
    r"(?:Python|scikit-learn|NumPy|SciPy|mpi4py|version|≥|>=|spec|section|§|Props?)\s*$", re.I)
# "20 000 x 256", "4 × 1", "4096 x p": a size, not a ratio
SIZE = re.compile(r"\s*(?:\d|[A-Za-z](?![A-Za-z])|[A-Za-z]_)")


def user_pages():
    pages = [REPO / "README.md"] + sorted(p for p in (REPO / "doc").glob("*.md")
                                          if p.name not in EXCLUDED)
    return pages


def _blank(match):
    return "\n" * match.group(0).count("\n")


def prose(text):
    """The page's lines with rendered blocks, fenced code, doctests, inline code and link
    targets blanked (line numbers kept)."""
    text = BLOCK.sub(_blank, text)
    text = FENCE.sub(_blank, text)
    text = INLINE.sub(lambda m: " " + _blank(m), text)
    lines = []
    for line in text.split("\n"):
        if line.lstrip().startswith((">>>", "...")):
            line = ""
        line = LINK_TARGET.sub("]", line)
        lines.append(line)
    return lines


def measurements(text):
    """(line number, number) of every measurement-like number in the page's prose."""
    found = []
    for lineno, line in enumerate(prose(text), 1):
        for m in NUMBER.finditer(line):
            token = m.group(0)
            if NOT_A_MEASUREMENT.search(line[:m.start()]):
                continue
            if token.rstrip().endswith(("x", "×")) and SIZE.match(line[m.end():]):
                continue
            found.append((lineno, token))
    return found


def unexplained(path):
    rel = str(path.relative_to(REPO))
    return [(lineno, token) for lineno, token in measurements(path.read_text())
            if (rel, token) not in ALLOWED]


@pytest.mark.parametrize("path", user_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_user_page_quotes_no_measurement_by_hand(path):
    rel = path.relative_to(REPO)
    bad = unexplained(path)
    assert not bad, "\n".join(f"{rel}:{lineno}: {token!r} is a measured number in a user page: "
                              f"{FIX}" for lineno, token in bad)


def test_every_allowlist_entry_is_used_and_has_a_reason():
    used = {(str(p.relative_to(REPO)), token) for p in user_pages()
            for _, token in measurements(p.read_text())}
    for key, reason in ALLOWED.items():
        assert reason.strip(), key
        assert key in used, f"ALLOWED entry {key} matches nothing: remove it"


def test_the_pages_are_found_and_the_histories_left_out():
    names = {str(p.relative_to(REPO)) for p in user_pages()}
    assert {"README.md", "doc/solvers.md", "doc/index.md"} <= names
    assert not names & {"doc/design.md", "doc/benchmark_history.md"}
    assert not any(n.startswith("doc/results/") for n in names)


def test_a_number_inserted_into_prose_is_caught():
    path = REPO / "doc" / "solvers.md"
    text = path.read_text()
    assert not unexplained(path)
    lines = text.split("\n")
    # the first line of plain prose: not code, not a heading, not a table
    prose_lines = prose(text)
    i = next(i for i, line in enumerate(prose_lines)
             if line.strip() and line == lines[i] and line[0].isalpha() and len(line) > 40)
    for inserted in (" It took 12.5 s on kin40k.", " (test RMSE 0.1007)", " 2.05x faster."):
        tampered = "\n".join(lines[:i] + [lines[i] + inserted] + lines[i + 1:])
        found = measurements(tampered)
        assert [n for line, n in found if line == i + 1], inserted
    # and the same numbers in code or in a rendered block are not flagged
    for safe in ("`tol=0.5`", "\n```\nx = 12.5\n```\n",
                 "\n<!-- rendered by experiments/pages.py: x -->\n0.1007\n<!-- end rendered -->\n"):
        assert measurements(text + safe) == measurements(text), safe


@pytest.mark.parametrize("line, expected", [
    ("took 3.8 s against 37.4 s", ["3.8 s", "37.4 s"]),
    ("RMSE 0.1805 -> 0.1734", ["0.1805", "0.1734"]),
    ("a residual of 3.4e-3", ["3.4e-3"]),
    ("83% of it, 2.05x faster, 176 MiB", ["83%", "2.05x", "176 MiB"]),
    ("Python 3.10 or later, scikit-learn ≥ 1.3, spec 2.5", []),
    ("a 20 000 x 256 array, 4096 x p blocks, tol 1e-3, 40 000 rows", []),
    ("see `fit(tol=0.5)` and [x](results/a_0.5.md)", []),
])
def test_the_heuristic(line, expected):
    assert [n for _, n in measurements(line)] == expected
