"""The ceilings of a model in object storage, measured in this session by plain GETs
(``object_bounds``) and a plain memory fill beside them:

- storage: the best of the bucket's curve (connections 1…64 × part sizes, each point a
  short read), then repeated reading the whole model: the bound of a load that discards its
  bytes; the curve rides along, point by point.
- sequential_read / parallel_read: one connection, and P connections, 16 MiB GETs.
- memory_fill: fresh memory filled alone (with the storage, the bound of a load that keeps
  its bytes), and while plain GETs of the model run beside it (which bound binds).
- memcpy: as for files.

There is no warm ceiling: nothing is cached on this machine between the bucket and a load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from modelmon.core.measuring.bounds import (
    fill_beside,
    fill_rate,
    fill_size,
    fill_threads,
    memcpy_mbps,
)
from modelmon.core.measuring.ceiling_records import (
    CEILINGS,
    Ceiling,
    Ceilings,
    fill_ceiling,
    make_ceiling,
)
from modelmon.core.measuring.object_bounds import CURVE_PART, ObjectCurve, plain_get
from modelmon.core.model.records import Model
from modelmon.core.options import MiB
from modelmon.core.storage.connection import CLIENT_CONNECTIONS
from modelmon.core.system.cache import prime_fresh_memory

# Connections of the plain parallel read: what a parallel client opens without tuning.
PARALLEL_CONNECTIONS = CLIENT_CONNECTIONS


def object_ceilings(
    model: Model,
    names: Sequence[str],
    repeats: int,
    cancel: threading.Event | None,
    on_ceiling: Callable[[Ceiling], None] | None,
) -> Ceilings:
    """The ceilings ``names`` of a model in object storage (``parallel_read_warm`` has no
    meaning here and is left out); each the median of ``repeats``."""
    curve = ObjectCurve(model, cancel)
    order = sorted(
        (name for name in names if name != "parallel_read_warm"),
        key=lambda name: name != "storage",  # the curve first: the others reuse its runs
    )
    items: list[Ceiling] = []
    for name in order:
        if cancel is not None and cancel.is_set():
            break
        ceiling = _measure(name, model, curve, repeats)
        items.append(ceiling)
        if on_ceiling is not None:
            on_ceiling(ceiling)
    return Ceilings(model.path, tuple(sorted(items, key=lambda c: CEILINGS.index(c.name))))


def _measure(name: str, model: Model, curve: ObjectCurve, repeats: int) -> Ceiling:
    if name == "memcpy":
        runs = [memcpy_mbps() for _ in range(repeats)]
        return make_ceiling(name, runs, "numpy copy of a 256 MiB buffer in RAM", None)
    if name == "storage":
        connections, part = curve.sweep()
        runs = curve.runs(connections, part, repeats, whole=True)
        best = curve.readings[(connections, part)][0].label
        spec = (
            f"plain GETs of the whole model at the curve's best setting: {best} "
            f"(curve, a short read a point: {curve.curve_text()})"
        )
        points = tuple(
            (readings[0].label, readings[0].mbps) for readings in curve.readings.values()
        )
        return make_ceiling(name, runs, spec, None, curve=points)
    if name == "memory_fill":
        return _fill(model, curve, repeats)
    connections = 1 if name == "sequential_read" else PARALLEL_CONNECTIONS
    if not curve.useful(connections, CURVE_PART):
        connections = 1
    runs = curve.runs(connections, CURVE_PART, repeats)
    spec = f"{connections} connection(s), {CURVE_PART // MiB} MiB GETs"
    return make_ceiling(name, runs, spec, None)


def _fill(model: Model, curve: ObjectCurve, repeats: int) -> Ceiling:
    """Fresh memory filled by threads alone (the bound), and by P threads while plain GETs
    of the model, at the curve's best setting, run beside it (on loopback the server shares
    this machine's CPUs too)."""
    parallel = PARALLEL_CONNECTIONS
    connections, part = curve.best() if curve.readings else (parallel, CURVE_PART)
    size = fill_size(model.file_bytes)
    alone: list[float] = []
    beside: list[float] = []
    for _ in range(repeats):
        prime_fresh_memory(size)
        alone.append(fill_rate(size, fill_threads(parallel)))
        prime_fresh_memory(size)
        beside.append(
            fill_beside(size, parallel, lambda: plain_get(curve.objects, connections, part))
        )
    return fill_ceiling(alone, beside, size, parallel, "plain GETs", None)
