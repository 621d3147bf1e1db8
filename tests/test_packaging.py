"""The declared Python versions against the interpreter that built and runs hkern, and the files
a distribution must carry."""
import re
import sys
from importlib import metadata
from pathlib import Path

import hkern

REPO = Path(__file__).resolve().parents[1]


def _declared():
    meta = metadata.metadata("hkern")
    lower = re.fullmatch(r">=\s*3\.(\d+)", meta["Requires-Python"])
    versions = sorted(int(c.rsplit(".", 1)[1]) for c in meta.get_all("Classifier")
                      if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    return lower, versions


def test_this_interpreter_is_a_declared_version():
    lower, versions = _declared()
    assert lower is not None, "Requires-Python must be a lower bound '>=3.N'"
    assert versions and versions[0] == int(lower.group(1))      # the classifiers start there
    assert versions == list(range(versions[0], versions[-1] + 1))  # and leave no gap
    assert sys.version_info[:2] >= (3, versions[0])
    assert sys.version_info.minor in versions, (
        f"Python 3.{sys.version_info.minor} builds and runs hkern but is not among the declared "
        f"versions 3.{versions[0]} to 3.{versions[-1]} (pyproject.toml's classifiers)")


def test_installed_version_and_metadata_agree():
    assert metadata.version("hkern") == hkern.__version__
    assert metadata.metadata("hkern")["License"] == "BSD-3-Clause"


def test_license_citation_and_changelog_are_present():
    for name in ("LICENSE", "CITATION.cff", "CHANGELOG.md", "CONTRIBUTING.md"):
        assert (REPO / name).is_file(), name
    assert "BSD 3-Clause" in (REPO / "LICENSE").read_text()
    assert len((REPO / "README.md").read_text().splitlines()) <= 100
