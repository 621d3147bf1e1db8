"""Every rendered block of the docs is what experiments/pages.py makes from the records in
results/ today: a page cannot quote a measurement its record does not hold."""
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _pages_module():
    spec = importlib.util.spec_from_file_location("pages", REPO / "experiments" / "pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGES = _pages_module()


def test_there_are_rendered_pages_and_every_block_has_a_renderer():
    paths = PAGES.pages()
    assert paths
    for path in paths:
        for name, _ in PAGES.blocks(path.read_text()):
            assert name in PAGES.RENDERERS, (path, name)


@pytest.mark.parametrize("path", PAGES.pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_page_agrees_with_its_records(path):
    text = path.read_text()
    assert PAGES.rendered(text) == text, (
        f"{path.relative_to(REPO)} differs from its records: run python experiments/pages.py")


def test_a_changed_number_is_caught(tmp_path):
    text = next(iter(PAGES.pages())).read_text()
    name, block = PAGES.blocks(text)[0]
    tampered = text.replace(block, block.replace("0.", "1.", 1), 1)
    assert PAGES.rendered(tampered) != tampered
