"""What this storage can deliver on the watched model's files, to set next to the watched
loader's MB/s: modelmon's read ceilings, measured now (cold, own descriptors, discard)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from modelmon.core.errors import ModelFormatError
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.watching.result import Reference

COMPARE_CEILINGS = ("sequential_read", "parallel_read")


def model_of(paths: Sequence[str]) -> Model | None:
    """The model the watched files make up (one file, or the shards of one folder); None
    when they are not one model modelmon can read (a .bin, files from several folders)."""
    if not paths:
        return None
    folders = {os.path.dirname(path) for path in paths}
    target = paths[0] if len(paths) == 1 else folders.pop() if len(folders) == 1 else None
    if target is None:
        return None
    try:
        model = open_model(target)
    except (ModelFormatError, OSError, ValueError):
        return None
    watched = {os.path.realpath(path) for path in paths}
    if not watched <= {os.path.realpath(f.path) for f in model.files}:
        return None
    return model


def storage_references(
    paths: Sequence[str], repeats: int = 1, cancel: threading.Event | None = None
) -> tuple[Reference, ...]:
    """The sequential and parallel read ceilings of the files, cold, each the median of
    ``repeats`` runs; () when the files are not a model modelmon can read."""
    model = model_of(paths)
    if model is None:
        return ()
    ceilings = measure_ceilings(model, COMPARE_CEILINGS, repeats=repeats, cancel=cancel)
    return tuple(Reference(c.name, c.mbps, c.spec) for c in ceilings.items)
