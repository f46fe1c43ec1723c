"""Comments and docstrings say what the code does and why, in the present tense: history lives
in git. None names a tracker issue (``#12``), a dated run ("the 08:38 bench", "2024-05-01"),
or tells what the code once did ("a search once picked ..."), in any module of the engine,
the app, the command line and the fleet, or the benchmarks."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "gui", "modelmon", "benchmarks")

TRACKER = re.compile(r"(?<![\w&/#])#\d{1,5}\b")  # #12, not a colour (#1f77b4) or an anchor
DATED = re.compile(
    r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"  # an ISO date
    r"|\b(?:bench|run|search|session)\w*\s+(?:at|of|on|from)\s+\d{1,2}:\d\d\b"  # "bench at 08:38"
    r"|\b\d{1,2}:\d\d(?::\d\d)?\s+(?:bench|run|search)"  # "the 08:38 bench"
    r"|\b(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?\b"
)
HISTORY = re.compile(
    r"\bonce (?:took|ran|picked|recommended|spent|cost|gave|broke|hung|showed|drew|lost|ate|"
    r"failed|crashed|answered|pulled|left the)\b"
    r"|\bused to\b|\bpreviously\b|\bformerly\b|\bbefore this (?:change|fix|commit)\b"
    r"|\bas of (?:this|the) (?:change|commit|fix)\b",
    re.IGNORECASE,
)


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring in ``path``."""
    source = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                yield node.body[0].lineno, doc


def findings(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, text in prose(path):
                for match in pattern.finditer(text):
                    where = path.relative_to(ROOT)
                    found.append(f"{where}:{line}: {match.group(0)!r} in {text.strip()[:120]!r}")
    return found


def test_no_tracker_numbers_in_comments_or_docstrings() -> None:
    assert findings(TRACKER) == []


def test_no_dated_runs_in_comments_or_docstrings() -> None:
    assert findings(DATED) == []


def test_no_histories_in_comments_or_docstrings() -> None:
    assert findings(HISTORY) == []


def test_the_patterns_catch_what_they_are_for() -> None:
    """The scans above would see each kind of line they forbid (a test that cannot fail is
    no test)."""
    for text in ("see #11 for the plan", "(#10)", "fixed in #2345"):
        assert TRACKER.search(text), text
    for text in ("colour #1f77b4", "a css #fff", "&#8212;", "x#1"):
        assert not TRACKER.search(text), text
    for text in ("the 08:38 bench", "measured in the bench at 14:05", "on 2024-05-01", "March 3"):
        assert DATED.search(text), text
    assert not DATED.search('"A/B 2 at 14:03:55" names a session')
    for text in ("a search once picked the library", "this used to hang", "previously 4×"):
        assert HISTORY.search(text), text
    assert not HISTORY.search("once cut, the event stays set")
