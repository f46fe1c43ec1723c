"""Qt-free engine of modelmon: formats, load plans, strategies, cache control, measurement.

>>> from modelmon.core import load
>>> tensors = load("model.safetensors", strategy="sequential", threads=4)

What runs a load, by kind:
- ``load``: into this process, threads instead of worker processes; the tensors come back.
- ``measure`` / ``loading.runner.LoadRun``: in worker processes (``loading.worker``); only the
  measurement comes back. A/B pairs, ceilings and ``recommend`` are series of these.
- ``measuring.session.Session``: one ``LoadRun`` with live metrics sampled alongside.
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
    from modelmon.core.model.records import Model
    from modelmon.core.output.result import LoadResult

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
