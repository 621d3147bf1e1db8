"""Sphinx configuration for the hkern documentation.

Build (from the repository root, with ``pip install ".[docs]"``)::

    sphinx-build -W -b html doc doc/_build/html        # the site; warnings are errors
    sphinx-build -W -b doctest doc doc/_build/doctest  # runs the quick start's examples

The pages are Markdown (MyST) except the API reference (reStructuredText, autosummary).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import hkern

project = "hkern"
author = "the hkern developers"
copyright = "2026, the hkern developers"
release = hkern.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_design",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_templates", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# autosummary writes one stub page per listed object into generated/ (not committed).
autosummary_generate = True
autodoc_typehints = "none"
autodoc_default_options = {"members": False}

# numpydoc: the docstrings are the reference; no per-method tables for the small result classes
# (their methods are documented inline with :members: in api.rst), and no "See Also" guessing.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

# MyST: $...$ maths, heading anchors so pages can link to sections (results_*.md#...).
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# Doctests run single-threaded so their outputs are reproducible on any machine.
doctest_global_setup = """
import numpy as np
import hkern
"""

# The PyData theme, as NumPy, SciPy, pandas and scikit-learn use: the landing page's cards
# (sphinx-design) and a navigation bar of the four toctree captions.
html_theme = "pydata_sphinx_theme"
html_title = f"hkern {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}

# The benchmark history page (benchmark_history.md) links to asv's own site, published here
# from the fixed record set asv_bench/records (asv.records.conf.json) and copied to the output
# as asv/.  asv publish reads the commits' dates and branches from the git repository.
_ASV_EXTRA = Path(__file__).parent / "_build" / "asv-extra"


def _publish_benchmark_history(app):
    if app.builder.format != "html":
        return
    shutil.rmtree(_ASV_EXTRA / "asv", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "asv", "publish", "--config",
                    "asv.records.conf.json"],
                   cwd=Path(__file__).parents[1] / "asv_bench", check=True,
                   stdout=subprocess.DEVNULL)


_ASV_EXTRA.mkdir(parents=True, exist_ok=True)     # Sphinx checks the path before the build
html_extra_path = [str(_ASV_EXTRA)]


def setup(app):
    app.connect("builder-inited", _publish_benchmark_history)
