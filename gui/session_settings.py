"""What a window keeps of itself between sessions: its geometry, configurations A and B (a
file's pair and a bucket's), the A/B's pairs and the memory limit, through ``AppSettings``;
restored when the window is made, remembered when it closes."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QMainWindow

from modelmon.gui.settings import AppSettings
from modelmon.gui.state.workbench import Workbench

# Below this the model facts, the two configurations and a plot no longer fit side by side
# even with the panels scrolling; the default size is larger, the screen permitting.
MINIMUM_SIZE = QSize(800, 500)
DEFAULT_SIZE = QSize(1400, 900)


def restore_session(
    window: QMainWindow, settings: AppSettings, bench: Workbench, labels: Iterable[str]
) -> None:
    """The geometry, configurations A and B, the pairs and the memory limit of the last
    session. A limit this machine no longer takes (less RAM) is dropped, and said."""
    geometry = settings.geometry()
    if geometry is None or not window.restoreGeometry(geometry):
        screen = window.screen().availableGeometry().size()
        window.resize(DEFAULT_SIZE.boundedTo(screen).expandedTo(MINIMUM_SIZE))
    for label in labels:
        for objects in (False, True):  # a file's pair, a bucket's pair
            config = settings.config(label, objects)
            if config is not None:
                bench.configs.set(label, *config, objects=objects)
    pairs = settings.pairs()
    if pairs is not None:
        bench.ab.set_pairs(pairs)
    limit = settings.memory_limit()
    refused = bench.set_memory_limit(limit) if limit else None
    if refused is not None:
        why = refused[:1].lower() + refused[1:]  # "The memory limit must be ...", mid-sentence
        bench.message.emit(f"The last session's memory limit is not kept: {why}", "warning")


def remember_session(
    window: QMainWindow, settings: AppSettings, bench: Workbench, labels: Iterable[str]
) -> None:
    """Keep the geometry, configurations A and B (a file's and a bucket's), the pairs and the
    memory limit."""
    settings.set_geometry(window.saveGeometry())
    configs = bench.configs
    for label in labels:
        for objects, pair in configs.pairs.items():
            strategy, options = pair[label]
            if objects == configs.objects:
                options = configs.effective(label)
            settings.set_config(label, strategy, options, objects)
    settings.set_pairs(bench.ab.pairs)
    settings.set_memory_limit(bench.memory_limit_text)
