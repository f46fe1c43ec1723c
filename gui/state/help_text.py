"""The Help menu's texts: About, the keyboard shortcuts, how modelmon measures. Qt-free.

"How it measures" is read from the shipped resource, the one place it is written (the
first section of docs/how-it-measures.md carries the same text, and
tests/gui/state/test_small_helpers.py keeps them equal).
"""

from __future__ import annotations

import html
from importlib import metadata

from modelmon import __version__
from modelmon.resources import resource_path

HOW_IT_MEASURES = "how-it-measures.md"


def how_it_measures() -> str:
    """The "How it measures" section as Markdown."""
    return resource_path(HOW_IT_MEASURES).read_text(encoding="utf-8")


def project_links() -> list[tuple[str, str]]:
    """(label, url) from the installed package's metadata (pyproject's [project.urls])."""
    try:
        entries = metadata.metadata("modelmon").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return []
    links = []
    for entry in entries:
        label, _, url = entry.partition(",")
        if url.strip():
            links.append((label.strip(), url.strip()))
    return links


def about_html(qt_version: str, links: list[tuple[str, str]] | None = None) -> str:
    links = project_links() if links is None else links
    shown = (
        "<br>".join(f"<a href='{html.escape(url)}'>{html.escape(text)}</a>" for text, url in links)
        or "The README and docs/ in the source tree describe every view and verb."
    )
    return (
        f"<h3>modelmon {html.escape(__version__)}</h3>"
        "<p>Measures why model weights load slowly on this machine (this file, this disk, "
        "this RAM) and shows what to change.</p>"
        f"<p>{shown}</p>"
        f"<p><small>Qt {html.escape(qt_version)}</small></p>"
    )


def menu_text(text: str) -> str:
    """A menu entry's words as shown: its mnemonic marks ("&Run") gone, a doubled "&&" (a
    literal ampersand, "CPU && memory") kept as one."""
    return "&".join(part.replace("&", "") for part in text.split("&&"))


def shortcuts_html(shortcuts: list[tuple[str, str, str]]) -> str:
    """A table of (menu, action, key) rows, grouped by menu in the order given."""
    rows = "".join(
        f"<tr><td>{html.escape(menu)}</td><td>{html.escape(action)}</td>"
        f"<td><b>{html.escape(key)}</b></td></tr>"
        for menu, action, key in shortcuts
    )
    return (
        "<table cellspacing='0' cellpadding='3'>"
        "<tr><th align='left'>Menu</th><th align='left'>Action</th><th align='left'>Key</th></tr>"
        f"{rows}</table>"
    )
