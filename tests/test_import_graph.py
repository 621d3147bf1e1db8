"""The package's import graph: no circles, and no module imports from a package above it.

Every ``import`` and ``from ... import`` counts, at the top of a module or inside a function
(an import inside a function is how a circle hides), and so do the Python-level imports and
the ``cimport``s of the Cython modules.  The graph is read from the source, so the test needs
no build and sees modules that are never imported at run time (the MPI ones).
"""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "hkern"

# The layers, lowest first: the architecture.  A module may import from its own layer and the
# ones below.
# * foundation: hkern's private top-level modules (threads, validation, memory, the model bases,
#   the ridge on explicit features, MPI plumbing) with the kernel engine, which they use and
#   which uses them, and the data sets;
# * oasis: column selection; every Nystrom piece (landmarks, the Nystrom preconditioners)
#   selects its columns through it;
# * solvers: block PCG, the preconditioners and their registry, FALKON, exact KRR by PCG;
# * hyperparameters: the selection of sigma and lam, and the iterative fits' views of it (the
#   fits hand their model class and preconditioner to those views, which import no fit);
# * exact, nystrom, features: the main fits (exact KRR, Nystrom and FALKON, random Fourier
#   features);
# * hierarchical, meka, grief, slkl: the methods, which may build on the main fits (SLKL's
#   baselines are exact KRR on its columns; HCK registers itself as a preconditioner of
#   fit_exact, which finds it by name);
# * baselines: the deprecated former home of the main fits, which forwards to them;
# * root: the public face (hkern/__init__) and the command line, which import every method;
# * sklearn: the scikit-learn estimators wrap the public functions (``hkern.fit_exact`` ...);
#   the package root does not import them.
LAYERS = [
    ("foundation", "kernels", "datasets", "plotting"),   # plotting: drawings, none of hkern
    ("oasis",),
    ("solvers",),
    ("hyperparameters",),
    ("exact", "nystrom", "features"),
    ("hierarchical", "meka", "grief", "slkl"),
    ("baselines",),
    ("root",),
    ("sklearn",),
]
LAYER_OF = {package: level for level, packages in enumerate(LAYERS) for package in packages}
ROOT_MODULES = {"hkern", "hkern._cli", "hkern.__main__"}   # the public face and the CLI

CIMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+cimport\b|cimport\s+([\w.]+))", re.M)


def _module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in sorted(ROOT.rglob("*"))
            if p.suffix in (".py", ".pyx", ".pxd") and "build" not in p.parts}


def _python_part(path):
    """The source as Python: for Cython, its ``import`` / ``from ... import`` lines only."""
    text = path.read_text()
    if path.suffix == ".py":
        return text
    lines = [line.strip() for line in text.splitlines()
             if re.match(r"\s*(from\s+[\w.]+\s+import\b|import\s+[\w.]+)", line)
             and "cimport" not in line and not line.rstrip().endswith(("(", "\\"))]
    return "\n".join(lines)


def _resolve(current, is_package, level, module):
    if not level:
        return module
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _edges(modules):
    """{module: {imported hkern module}} (names resolved to the deepest module that exists)."""
    def known(name):
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    edges = {}
    for name, path in modules.items():
        is_package = path.stem == "__init__"
        targets = set()
        for node in ast.walk(ast.parse(_python_part(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                for a in node.names:
                    full = f"{base}.{a.name}"
                    targets.add(full if full in modules else base)
        if path.suffix in (".pyx", ".pxd"):
            for m in CIMPORT.finditer(path.read_text()):
                target = m.group(1) or m.group(2)
                if target.startswith("."):
                    dots = len(target) - len(target.lstrip("."))
                    target = _resolve(name, is_package, dots, target.lstrip(".") or None)
                targets.add(target)
        edges[name] = {known(t) for t in targets
                       if t.split(".")[0] == "hkern" and known(t) != name}
    return edges


def _package(module):
    """The layer name of a module: "root", "foundation" (hkern's private modules and private
    packages such as hkern._linalg), or its public package's name."""
    if module in ROOT_MODULES:
        return "root"
    parts = module.split(".")
    return "foundation" if len(parts) < 2 or parts[1].startswith("_") else parts[1]


@pytest.fixture(scope="module")
def graph():
    modules = _modules()
    return modules, _edges(modules)


def test_every_package_has_a_layer(graph):
    modules, _ = graph
    assert {_package(m) for m in modules} <= set(LAYER_OF)


def test_the_graph_is_read(graph):
    # The reader finds the imports it must (a broken reader would pass the rules vacuously).
    _, edges = graph
    assert "hkern.hierarchical.plan" in edges["hkern.hierarchical.sharded"]
    assert "hkern._linalg.shim" in edges["hkern.hierarchical._hck"]     # a cimport
    assert "hkern._linalg.interrupt" in edges["hkern._linalg.tiled"]
    assert "hkern._openmp" in edges["hkern._threads"]
    assert "hkern.solvers" in edges["hkern.meka.krr"]
    # the architecture's own edges: a fit builds its selection view, HCK registers its
    # preconditioner kind, Nystrom draws its landmarks through column selection, the
    # deprecated paths forward to the main fits
    assert "hkern.hyperparameters.exact_pcg_problem" in edges["hkern.exact.api"]
    assert "hkern.solvers.preconditioners" in edges["hkern.hierarchical.preconditioner"]
    assert "hkern.oasis.landmarks" in edges["hkern.nystrom.api"]
    assert {"hkern.exact", "hkern.nystrom", "hkern.features"} <= edges["hkern.baselines"]
    assert sum(len(t) for t in edges.values()) > 300


def test_no_module_imports_from_a_package_above_it(graph):
    _, edges = graph
    upward = sorted(f"{a} ({_package(a)}) imports {b} ({_package(b)})"
                    for a, targets in edges.items() for b in targets
                    if LAYER_OF[_package(b)] > LAYER_OF[_package(a)])
    assert upward == []


def test_no_import_circles(graph):
    _, edges = graph
    state, circles = {}, []

    def visit(module, path):
        state[module] = "open"
        for target in sorted(edges.get(module, ())):
            if state.get(target) == "open":
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert circles == []
