"""The recent-files list, kept in QSettings (organisation "modelmon")."""

from __future__ import annotations

import os

from PySide6.QtCore import QSettings

KEY = "recent/files"
MAX_RECENT = 8


class RecentFiles:
    def __init__(self, settings: QSettings) -> None:
        self._settings = settings

    def paths(self) -> list[str]:
        """Most recent first; entries that no longer exist are left out."""
        value = self._settings.value(KEY, [])
        stored = [value] if isinstance(value, str) else list(value or [])
        return [p for p in stored if isinstance(p, str) and os.path.exists(p)][:MAX_RECENT]

    def add(self, path: str) -> None:
        path = os.path.abspath(path)
        paths = [path, *(p for p in self.paths() if p != path)][:MAX_RECENT]
        self._settings.setValue(KEY, paths)
        self._settings.sync()

    def clear(self) -> None:
        self._settings.remove(KEY)
        self._settings.sync()
