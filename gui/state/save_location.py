"""Where a save dialog starts: the last folder exported to, else the home folder; never the
model's folder (it may be read-only, a network mount, or a hub cache). Qt-free."""

from __future__ import annotations

import os


def save_start(last_folder: str | None, file_name: str, home: str | None = None) -> str:
    """The path a save dialog proposes for ``file_name``."""
    folder = last_folder if last_folder and os.path.isdir(last_folder) else None
    return os.path.join(folder or home or os.path.expanduser("~"), file_name)
