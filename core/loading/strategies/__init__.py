"""Load strategies, one small class each, registered by name in ``STRATEGIES``."""

from __future__ import annotations

from modelmon.core.loading.strategies import (  # noqa: F401
    direct,
    library,
    mapped,
    mapped_view,
    pread,
    sequential,
    stream,
    warmup,
)
from modelmon.core.loading.strategies.base import STRATEGIES, Strategy, get_strategy

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
)
_registered = dict(STRATEGIES)
STRATEGIES.clear()
STRATEGIES.update({name: _registered[name] for name in LISTING_ORDER if name in _registered})
STRATEGIES.update(_registered)

__all__ = ["STRATEGIES", "Strategy", "get_strategy"]
