"""CONTRIBUTING.md's Layout block names every source file of the package, and only files that exist.

In the block, a line starting at ``hkern/`` (or a name ending in ``/`` after it) opens a
folder; the lines indented under it belong to it.  Source files are the ``.py``, ``.pyx``,
``.pxd`` and ``.h`` names (``x.pyx/.pxd`` names both); words in parentheses are comments.
``__init__.py`` of the subpackages goes without saying.
"""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = re.compile(r"\b(\w+)\.(pyx/\.pxd|py|pyx|pxd|h)\b")


def _layout_block():
    text = (REPO / "CONTRIBUTING.md").read_text()
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def _without_comments(text):
    out, depth = [], 0
    for ch in text:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")" and depth > 0
    return "".join(out)


def _named_files():
    """{folder: set of file names} as the block lists them."""
    named, folder = {}, None
    for line in _layout_block().splitlines():
        if line.startswith("hkern/"):
            folder, rest = "hkern", line[len("hkern/"):]
        elif line[:1].strip():                      # another top-level entry (tests/, ...)
            folder, rest = None, ""
        else:
            rest = line
        match = re.match(r"\s*(\w+)/\s", rest)
        if folder is not None and match:
            folder, rest = f"hkern/{match.group(1)}", rest[match.end():]
        if folder is not None:
            named.setdefault(folder, []).append(rest)
    files = {}
    for folder, parts in named.items():
        names = set()
        for stem, ext in SOURCE.findall(_without_comments(" ".join(parts))):
            names.update({f"{stem}.pyx", f"{stem}.pxd"} if ext == "pyx/.pxd"
                         else {f"{stem}.{ext}"})
        files[folder] = names
    return files


def _tree_files():
    files = {}
    for path in sorted((REPO / "hkern").rglob("*")):
        if path.suffix in (".py", ".pyx", ".pxd", ".h") and "build" not in path.parts:
            folder = str(path.parent.relative_to(REPO))
            if path.name == "__init__.py" and folder != "hkern":
                continue
            files.setdefault(folder, set()).add(path.name)
    return files


def test_the_layout_block_is_read():
    named = _named_files()
    assert "hkern/hierarchical" in named and "plan.py" in named["hkern/hierarchical"]
    assert {"shim.pyx", "shim.pxd", "__init__.pxd"} <= named["hkern/_linalg"]


def test_every_folder_is_in_the_layout():
    assert sorted(_tree_files()) == sorted(_named_files())


def test_every_source_file_is_in_the_layout_and_nothing_else():
    named, tree = _named_files(), _tree_files()
    missing = {f: sorted(tree[f] - named.get(f, set())) for f in tree}
    stale = {f: sorted(named[f] - tree.get(f, set())) for f in named}
    assert {f: m for f, m in missing.items() if m} == {}
    assert {f: s for f, s in stale.items() if s} == {}
