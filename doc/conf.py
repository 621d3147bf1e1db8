"""Sphinx configuration for the hkern documentation.

Build (from the repository root, with ``pip install ".[docs]"``)::

    sphinx-build -W -b html doc doc/_build/html        # the site; warnings are errors
    sphinx-build -W -b doctest doc doc/_build/doctest  # runs the quick start's examples

The pages are Markdown (MyST) except the API reference (reStructuredText, autosummary).
"""
from __future__ import annotations

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

html_theme = "alabaster"
html_title = f"hkern {release}"
