"""Put modelmon in the desktop's application menu: the freedesktop.org way, for this user only.

Writes the ``.desktop`` entry to ``$XDG_DATA_HOME/applications`` and the icon into the hicolor
theme (scalable SVG and 256 px PNG), then asks the menu to refresh when the tools exist. Every
file is written through the guard (``core.system.outputs``: never the shipped files it copies,
never a special file) and atomically; nothing outside those three paths is touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from modelmon.resources import DESKTOP_ENTRY, ICON_PNG, ICON_SVG, resource_path


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def desktop_entry_text() -> str:
    """The shipped entry, with Exec naming this installation's script when it is not on PATH."""
    text = resource_path(DESKTOP_ENTRY).read_text()
    script = Path(sys.executable).with_name("modelmon")
    if shutil.which("modelmon") is None and script.exists():
        text = text.replace("Exec=modelmon ", f"Exec={script} ")
    return text


def install_desktop(base: Path | None = None) -> list[Path]:
    """Install the launcher and icons under ``base`` (default: the XDG data home)."""
    from modelmon.core.errors import OptionsError
    from modelmon.core.system import check_output

    base = base or data_home()
    targets = {
        base / "applications" / DESKTOP_ENTRY: desktop_entry_text().encode(),
        base / "icons/hicolor/scalable/apps" / ICON_SVG: resource_path(ICON_SVG).read_bytes(),
        base / "icons/hicolor/256x256/apps" / ICON_PNG: resource_path(ICON_PNG).read_bytes(),
    }
    shipped = [resource_path(name) for name in (DESKTOP_ENTRY, ICON_SVG, ICON_PNG)]
    for path, data in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        check_output(path, shipped, OptionsError).write(data, OptionsError)
    # Menus cache their entries; refresh them where the desktop's tools are installed.
    for tool in (
        ["update-desktop-database", str(base / "applications")],
        ["gtk-update-icon-cache", "-q", "-t", str(base / "icons/hicolor")],
    ):
        if shutil.which(tool[0]):
            subprocess.run(
                tool, check=False, capture_output=True, timeout=30, stdin=subprocess.DEVNULL
            )
    return list(targets)
