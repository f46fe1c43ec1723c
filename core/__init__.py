"""Qt-free engine of modelmon: formats, load plans, strategies, cache control, measurement.

>>> from modelmon.core import load
>>> tensors = load("model.safetensors", strategy="sequential", threads=4)

What runs a load, by kind:
- ``load``: into this process, threads instead of worker processes; the tensors come back.
- ``measure`` / ``loading.runner.LoadRun``: in worker processes (``loading.worker``); only the
  measurement comes back. A/B pairs, ceilings and ``recommend`` are series of these.
- ``measuring.session.Session``: one ``LoadRun`` with live metrics sampled alongside.

Someone else's load, watched from outside: ``watch`` runs a command (or attaches to a pid) and
returns what arrived how fast and why it is slow; ``watcher`` gives the ``Watch`` unstarted,
for a caller that plots it live and may cancel it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelmon.core.errors import (
    ConfigError,
    ConfigMismatchWarning,
    LoadCancelled,
    LoadError,
    ModelFormatError,
    ModelmonError,
    ModelmonWarning,
    OptionsError,
)
from modelmon.core.options import LoadOptions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from modelmon.core.model.records import Model
    from modelmon.core.output.result import LoadResult
    from modelmon.core.watching.result import Reference, WatchResult
    from modelmon.core.watching.watch import Watch

__all__ = [
    "ConfigError",
    "ConfigMismatchWarning",
    "LoadCancelled",
    "LoadError",
    "LoadOptions",
    "ModelFormatError",
    "ModelmonError",
    "ModelmonWarning",
    "OptionsError",
    "load",
    "measure",
    "open_model",
    "storage_references",
    "watch",
    "watcher",
]


# numpy and the format libraries load on first use, so `modelmon --version` stays instant.
def load(path: Any, strategy: str | None = None, **options: Any) -> dict[str, Any]:
    """Load every tensor into this process; see ``modelmon.core.api.load``."""
    from modelmon.core.api import load as _load

    return _load(path, strategy, **options)


def measure(path: Any, strategy: str | None = None, **options: Any) -> LoadResult:
    """Measure one load in worker processes; see ``modelmon.core.api.measure``."""
    from modelmon.core.api import measure as _measure

    return _measure(path, strategy, **options)


def open_model(path: Any) -> Model:
    """Parse a model (file, shard index or directory); see ``modelmon.core.model.formats``."""
    from modelmon.core.model.formats import open_model as _open_model

    return _open_model(path)


def watcher(command: Sequence[str] | None = None, **options: Any) -> Watch:
    """A watch of ``command`` (or of ``pid=``), not started; see
    ``modelmon.core.watching.watch.Watch``."""
    from modelmon.core.watching.watch import Watch

    return Watch(command, **options)


def watch(command: Sequence[str] | None = None, **options: Any) -> WatchResult:
    """Run ``command`` (or attach to ``pid=``) and watch it load its model, to the end."""
    return watcher(command, **options).run()


def storage_references(paths: Sequence[str], repeats: int = 1) -> tuple[Reference, ...]:
    """What this storage delivers on these model files (read ceilings, cold), to compare a
    watched load with; see ``modelmon.core.watching.compare``."""
    from modelmon.core.watching.compare import storage_references as _references

    return _references(paths, repeats)
