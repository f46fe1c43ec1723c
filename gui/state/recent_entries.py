"""Recent models as menus and the start page show them: name and folder. Qt-free. A
reference (``hf:``...) and an object's URL (``s3://``...) are kept as written.

Every sharded model is "model.safetensors.index.json" and every hub snapshot sits in a
folder named after a commit, so the label names the file and the folder that tells them apart.
"""

from __future__ import annotations

import os

from modelmon.core.model import HF_SCHEME, OLLAMA_SCHEME
from modelmon.core.storage import is_object_url

REFERENCE_PREFIXES = (HF_SCHEME, OLLAMA_SCHEME)


def is_reference(entry: str) -> bool:
    """A name that is no path: ``hf:``, ``ollama:``, or an object's URL."""
    return entry.startswith(REFERENCE_PREFIXES) or is_object_url(entry)


def normalised(entry: str) -> str:
    """A path made absolute; a reference (hf:, ollama:) as it is."""
    return entry if is_reference(entry) else os.path.abspath(entry)


def still_there(entry: str) -> bool:
    return is_reference(entry) or os.path.exists(entry)


def recent_label(entry: str, home: str | None = None) -> str:
    """ "model.safetensors.index.json — ~/models/llama-3b" for a path; a reference as it is."""
    if is_reference(entry):
        return entry
    trimmed = entry.rstrip("/") or entry
    name = os.path.basename(trimmed) or trimmed
    folder = os.path.dirname(trimmed)
    home = home if home is not None else os.path.expanduser("~")
    if home and home != "/" and (folder == home or folder.startswith(home + os.sep)):
        folder = "~" + folder[len(home) :]
    return f"{name} — {folder}" if folder else name


def window_title(entry: str, demo: bool = False, home: str | None = None) -> str:
    """The window's title for the open model: the demo says it is the demo; a model its name
    and folder, as the recent list shows it (every sharded model is
    "model.safetensors.index.json": the folder tells them apart)."""
    if demo:
        return "modelmon — the demo model"
    return f"modelmon — {recent_label(entry, home)}"
