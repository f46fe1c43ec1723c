"""The documentation names only what exists: every repository path in the README and docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *ROOT.glob("docs/*.md")])
TOP = ("core/", "gui/", "modelmon/", "tests/", "benchmarks/", "docs/", "resources/", ".ci/")
# A path in backquotes (`core/runs/start.py`, `gui/plots/*.py`), up to a space or a colon.
QUOTED = re.compile(r"`([^`\s:]+)")
LINK = re.compile(r"\]\(([^)#\s]+)")


def _named_paths(page: Path) -> set[str]:
    text = page.read_text()
    named = {m for m in QUOTED.findall(text) if m.startswith(TOP)}
    links = {
        str((page.parent / m).resolve().relative_to(ROOT))
        for m in LINK.findall(text)
        if "://" not in m and not m.startswith("mailto:")
    }
    return named | links


def _exists(path: str) -> bool:
    """A path, or a pattern (``gui/plots/*.py``, ``gui/plots/<plot>.py``) that matches one."""
    pattern = re.sub(r"<[^>]*>", "*", path.rstrip("/"))
    return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / pattern).exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page: Path):
    missing = sorted(path for path in _named_paths(page) if not _exists(path))
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_pages_name_paths_at_all():
    """The check reads the paths the pages name (a pattern that found none would pass)."""
    assert len(_named_paths(ROOT / "docs" / "architecture.md")) > 30


def test_the_quick_start_says_how_to_run_the_command_line_it_then_uses() -> None:
    """``./dev app`` puts no ``modelmon`` on PATH: the quick start names where it is (the
    console script pyproject.toml installs into .venv), beside its two commands."""
    import tomllib

    readme = (ROOT / "README.md").read_text()
    start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "./dev app" in start and "./dev test" in start
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "modelmon" in scripts
    assert ".venv/bin/modelmon" in start and "source .venv/bin/activate" in start
    assert "modelmon recommend" in readme.split("## Quick start", 1)[1]  # what it then uses
