"""Load strategies, one small class each, registered by name in ``STRATEGIES``."""

from __future__ import annotations

from modelmon.core.loading.strategies import (  # noqa: F401
    direct,
    library,
    mapped,
    mapped_view,
    objects,
    pread,
    sequential,
    stream,
    warmup,
)
from modelmon.core.loading.strategies.base import STRATEGIES, Strategy, get_strategy
from modelmon.core.model.records import Model

# Listing order: the baseline, the mmap family, then the planned reads.
LISTING_ORDER = (
    "library",
    "mmap",
    "mmap-view",
    "mmap-shared-fd",
    "pread",
    "sequential",
    "stream",
    "direct",
    "warmup",
    "ranged",
    "ranged-stream",
)
_registered = dict(STRATEGIES)
STRATEGIES.clear()
STRATEGIES.update({name: _registered[name] for name in LISTING_ORDER if name in _registered})
STRATEGIES.update(_registered)
# Those that read files, and those that read objects (s3://, https://) by ranged GETs.
FILE_STRATEGIES = {name: cls for name, cls in STRATEGIES.items() if not cls.reads_objects}
OBJECT_STRATEGIES = {name: cls for name, cls in STRATEGIES.items() if cls.reads_objects}


def default_strategy(model: Model) -> str:
    """What a load runs when no strategy is named: sequential reads of a file, concurrent
    ranged GETs of a model in object storage."""
    remote = any(file.remote is not None for file in model.files)
    return "ranged" if remote else "sequential"


__all__ = [
    "FILE_STRATEGIES",
    "OBJECT_STRATEGIES",
    "STRATEGIES",
    "Strategy",
    "default_strategy",
    "get_strategy",
]
