"""The open model's ceilings: one set per model and storage, kept across sessions with the
time each was measured. Qt-free.

A ceiling is what this storage gives on this file: it stays true until the file or the
storage changes, not until the app closes. So each set is stored under the model's path and
the device it lives on (a model copied to another disk is measured anew there), and shown
with its age ("measured 3 days ago"): the user judges whether it is still worth trusting.
The store is the app's settings (``gui/settings.py``); tests give a dict.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Protocol

from modelmon.core import Ceiling, Ceilings
from modelmon.gui.state.events import Event
from modelmon.gui.state.model_info import ModelInfo


class CeilingStore(Protocol):
    def load_ceilings(self, key: str) -> str | None: ...

    def save_ceilings(self, key: str, text: str) -> None: ...


class MemoryStore:
    """A store that forgets when the app closes (no settings given)."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def load_ceilings(self, key: str) -> str | None:
        return self.texts.get(key)

    def save_ceilings(self, key: str, text: str) -> None:
        self.texts[key] = text


def storage_key(info: ModelInfo) -> str:
    """The model's files and the devices they live on, as the store's key (a digest: the
    settings file takes any text as a value, not as a key)."""
    # An object is its URL and ETag (a new upload is another file) at its endpoint.
    paths = sorted(
        f"{f.path} {f.remote.etag}" if f.remote is not None else os.path.realpath(f.path)
        for f in info.model.files
    )
    devices = sorted(
        f"{facts.fs_type} {facts.source or facts.block_device or '?'} at {facts.mount_point}"
        for facts in info.storage
    ) + sorted(f"{facts.storage} at {facts.endpoint}" for facts in info.objects)
    text = "\n".join([*paths, *devices])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def ceilings_json(ceilings: Ceilings) -> str:
    return json.dumps(ceilings.to_dict(), allow_nan=False)


def ceilings_from_json(text: str, model: str) -> Ceilings | None:
    """The stored set, for ``model``; None when it does not read (another version wrote it)."""
    try:
        data: Any = json.loads(text)
        items = tuple(
            Ceiling(
                name=str(c["name"]),
                mbps=float(c["mbps"]),
                runs=tuple(float(r) for r in c["runs"]),
                spec=str(c["spec"]),
                verified=None if c["verified"] is None else bool(c["verified"]),
                measured_at=float(c.get("measured_at", 0.0)),
                wall_s=float(c.get("wall_s", 0.0)),
                curve=tuple((str(name), float(mbps)) for name, mbps in c.get("curve", ())),
                whole=tuple((str(name), float(mbps)) for name, mbps in c.get("whole", ())),
                throttle=str(c.get("throttle", "")),
                slack=float(c.get("slack", 0.0)),
            )
            for c in data["ceilings"]
        )
    except (ValueError, TypeError, KeyError):
        return None
    if not items or not all(math.isfinite(c.mbps) and c.mbps > 0 for c in items):
        return None
    return Ceilings(model, items)


class CeilingsState:
    """The open model's set; ``changed`` (Ceilings or None) whenever it changes."""

    def __init__(self, store: CeilingStore | None = None) -> None:
        self.store: CeilingStore = store if store is not None else MemoryStore()
        self.current: Ceilings | None = None
        self.model = ""  # the open model's path, as its ceilings name it
        self.key: str | None = None
        self.changed = Event()

    def open(self, info: ModelInfo, kept: Ceilings | None = None) -> None:
        """``info`` is open: its set from this session (``kept``), else the stored one."""
        self.model = info.model.path
        self.key = storage_key(info)
        if kept is None:
            text = self.store.load_ceilings(self.key)
            kept = ceilings_from_json(text, self.model) if text else None
        self._set(kept, save=False)

    def add(self, ceiling: Ceiling) -> None:
        self.merge(Ceilings(self.model, (ceiling,)))

    def merge(self, newer: Ceilings) -> None:
        """``newer``'s in place of the same names; only the open model's."""
        if newer.model != self.model:
            return
        known = self.current or Ceilings(self.model, ())
        self._set(known.merged(newer), save=True)

    def _set(self, ceilings: Ceilings | None, save: bool) -> None:
        self.current = ceilings
        if save and ceilings is not None and self.key is not None:
            self.store.save_ceilings(self.key, ceilings_json(ceilings))
        self.changed.emit(ceilings)
