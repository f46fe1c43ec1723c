"""The recent-models list, kept in QSettings: paths (made absolute) and references (hf:...)."""

from __future__ import annotations

from PySide6.QtCore import QSettings

from modelmon.gui.state.recent_entries import normalised, still_there

KEY = "recent/files"
MAX_RECENT = 8


class RecentFiles:
    def __init__(self, settings: QSettings) -> None:
        self._settings = settings

    def paths(self) -> list[str]:
        """Most recent first; paths that no longer exist are left out."""
        value = self._settings.value(KEY, [])
        stored = [value] if isinstance(value, str) else list(value or [])
        return [p for p in stored if isinstance(p, str) and still_there(p)][:MAX_RECENT]

    def add(self, path: str) -> None:
        path = normalised(path)
        paths = [path, *(p for p in self.paths() if p != path)][:MAX_RECENT]
        self._settings.setValue(KEY, paths)
        self._settings.sync()

    def clear(self) -> None:
        self._settings.remove(KEY)
        self._settings.sync()
