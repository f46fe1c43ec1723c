"""Where a save dialog starts: the last folder exported to, else the home folder; never the
model's folder (it may be read-only, a network mount, or a hub cache). Qt-free."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from modelmon.core.system import state_home


def save_start(last_folder: str | None, file_name: str, home: str | None = None) -> str:
    """The path a save dialog proposes for ``file_name``."""
    folder = last_folder if last_folder and os.path.isdir(last_folder) else None
    return os.path.join(folder or home or os.path.expanduser("~"), file_name)


def kept_answer_path(model_name: str, now: float | None = None) -> Path:
    """Where the app keeps a recommendation's config file the moment its search ends, so the
    line to paste names a file that exists: ``$XDG_STATE_HOME/modelmon/recommendations/
    MODEL-YYYYmmdd-HHMMSS.toml`` (``~/.local/state`` without it)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", model_name).strip(".-") or "model"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return state_home() / "recommendations" / f"{name[:80]}-{stamp}.toml"
