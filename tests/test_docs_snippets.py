"""Every ```python block of the documentation runs (so the docs cannot rot).

The blocks of one page run in order in one shared namespace, as a reader
pasting them into one Python session would run them. Figures referenced by
the pages must be drawn by `docs/figures.py` (or be committed).
"""

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import keras
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```\s*$", re.S | re.M)
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]+\.png)\)")

# The snippets use tf.GradientTape and print TensorFlow tensors.
pytestmark = [
    pytest.mark.tf_only,
    pytest.mark.skipif(
        keras.backend.backend() != "tensorflow",
        reason="the documentation snippets assume the TensorFlow backend",
    ),
]


def python_blocks(text):
    return [match.group(1) for match in BLOCK.finditer(text)]


def _pages():
    return sorted(DOCS.rglob("*.md"))


def _pages_with_code():
    return [p for p in _pages() if python_blocks(p.read_text())]


def _figures_module():
    spec = importlib.util.spec_from_file_location("docs_figures", DOCS / "figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_blocks_are_found():
    text = "a\n```python\nx = 1\n```\nb\n```text\nno\n```\n```python\ny = x\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = x\n"]


@pytest.mark.parametrize(
    "page", _pages_with_code(), ids=lambda p: str(p.relative_to(DOCS))
)
def test_page_snippets_run(page):
    namespace = {"__name__": "__docs__"}
    for number, block in enumerate(python_blocks(page.read_text()), start=1):
        code = compile(
            block, f"{page.relative_to(ROOT)} (python block {number})", "exec"
        )
        exec(code, namespace)


def test_every_guide_page_has_formula_snippet_and_figure():
    guide = [p for p in (DOCS / "guide").glob("*.md") if p.name != "index.md"]
    assert len(guide) >= 13
    for page in guide:
        text = page.read_text()
        assert "$$" in text, f"{page.name}: no displayed formula"
        assert python_blocks(text), f"{page.name}: no python snippet"
        assert IMAGE.search(text), f"{page.name}: no figure"
        assert "[keras_attention." in text, f"{page.name}: no link to the API"


def test_referenced_figures_are_drawn_or_committed():
    drawn = set(re.findall(r'_save\(fig, "(\w+)"\)', (DOCS / "figures.py").read_text()))
    for page in _pages():
        for target in IMAGE.findall(page.read_text()):
            path = (page.parent / target).resolve()
            assert path.parent == DOCS / "img", f"{page.name}: {target}"
            assert path.stem in drawn or path.is_file(), f"{page.name}: {target}"


def test_figure_script_draws(tmp_path):
    figures = _figures_module()
    figures.main(["--only", "pe", "pointer", "--output-dir", str(tmp_path)])
    for name in ("positional_encoding.png", "pointer.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_site_builds_strict(tmp_path):
    """`mkdocs build --strict` passes: API references resolve and griffe
    parses every docstring (figures are replaced by placeholders here; `make
    docs` draws the real ones)."""
    pytest.importorskip("mkdocstrings_handlers.python")
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    drawn = re.findall(r'_save\(fig, "(\w+)"\)', (DOCS / "figures.py").read_text())
    for name in drawn:
        placeholder = docs / "img" / f"{name}.png"
        if not placeholder.exists():
            placeholder.write_bytes(b"\x89PNG\r\n\x1a\n")
    config = (ROOT / "mkdocs.yml").read_text()
    for old, new in (
        ("docs_dir: docs\n", f"docs_dir: {docs}\n"),
        ("site_dir: site\n", f"site_dir: {tmp_path / 'site'}\n"),
        ("paths: [.]\n", f"paths: [{ROOT}]\n"),
    ):
        assert old in config, old
        config = config.replace(old, new)
    (tmp_path / "mkdocs.yml").write_text(config)
    # Not `-q`: it hides the warnings that --strict counts.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    site = tmp_path / "site"
    assert (site / "api" / "layers" / "index.html").is_file()
    # The live views the pages embed (docs/views/, committed) are copied,
    # and each built page's iframe points at one (relative to the page).
    frames = 0
    for page in site.rglob("index.html"):
        for src in re.findall(r'<iframe src="([^"]+)"', page.read_text()):
            assert (page.parent / src).resolve().is_file(), (page, src)
            frames += 1
    assert frames >= 1
    assert (site / "views" / "alignment.html").is_file()
