"""The ceilings of a model in object storage, measured in this session by plain GETs
(``object_bounds``) and a plain memory fill beside them:

- storage: the best of the bucket's curve (connections 1…64 × part sizes, each point a
  short read), then repeated reading the whole model (and its next setting, where whole
  reads of the best fall far short of its short read): the bound of a load that discards
  its bytes; the curve rides along, point by point.
- sequential_read / parallel_read: one connection, and P connections, 16 MiB GETs.
- memory_fill: fresh memory filled alone (with the storage, the bound of a load that keeps
  its bytes), and while plain GETs of the model run beside it (which bound binds).
- memcpy: as for files.

There is no warm ceiling: nothing is cached on this machine between the bucket and a load.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Sequence

from modelmon.core.measuring.ab import BEYOND_NOISE
from modelmon.core.measuring.bounds import (
    fill_beside,
    fill_rate,
    fill_size,
    fill_threads,
    memcpy_mbps,
)
from modelmon.core.measuring.ceiling_records import (
    CEILINGS,
    KEEPING_SHARE,
    Ceiling,
    Ceilings,
    fill_ceiling,
    make_ceiling,
)
from modelmon.core.measuring.noise import BUCKET_RUN_NOISE
from modelmon.core.measuring.object_bounds import CURVE_PART, ObjectCurve, plain_get
from modelmon.core.model.records import Model
from modelmon.core.options import MiB
from modelmon.core.storage.connection import CLIENT_CONNECTIONS
from modelmon.core.system.cache import prime_fresh_memory
from modelmon.core.system.memory import memory_facts
from modelmon.core.units import rate_text

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
        if ceiling is None:
            continue
        items.append(ceiling)
        if on_ceiling is not None:
            on_ceiling(ceiling)
    return Ceilings(model.path, tuple(sorted(items, key=lambda c: CEILINGS.index(c.name))))


def _measure(name: str, model: Model, curve: ObjectCurve, repeats: int) -> Ceiling | None:
    if name == "keeping_read":
        return _keeping(model, curve, repeats)
    if name == "memcpy":
        runs = [memcpy_mbps() for _ in range(repeats)]
        return make_ceiling(name, runs, "numpy copy of a 256 MiB buffer in RAM", None)
    if name == "storage":
        return _storage(curve, repeats)
    if name == "memory_fill":
        return _fill(model, curve, repeats)
    connections = 1 if name == "sequential_read" else PARALLEL_CONNECTIONS
    if not curve.useful(connections, CURVE_PART):
        connections = 1
    runs = curve.runs(connections, CURVE_PART, repeats)
    spec = f"{connections} connection(s), {CURVE_PART // MiB} MiB GETs"
    return make_ceiling(name, runs, spec, None)


def _storage(curve: ObjectCurve, repeats: int) -> Ceiling:
    """The storage bound: whole reads of the model at the curve's best setting. A short read
    is the objects' first seconds, which a server may cache or let burst: where the whole
    reads fall short of the curve's fastest short read by more than twice a bucket's usual
    noise, the curve's next setting is read whole too, and the faster of the two is the
    bound (a load reads the model whole: a bound below it would be no bound)."""
    curve.sweep()
    ranked = curve.ranked()
    tried = [(ranked[0], curve.runs(*ranked[0], repeats, whole=True))]
    fastest = curve.readings[ranked[0]][0].mbps
    short = math.log(fastest / max(statistics.median(tried[0][1]), 1e-9))
    if len(ranked) > 1 and short > BEYOND_NOISE * BUCKET_RUN_NOISE:
        tried.append((ranked[1], curve.runs(*ranked[1], repeats, whole=True)))
    whole = tuple((curve.readings[key][0].label, statistics.median(runs)) for key, runs in tried)
    runs = max(tried, key=lambda item: statistics.median(item[1]))[1]
    said = "; ".join(f"{setting}: {rate_text(mbps)}" for setting, mbps in whole)
    which = "best setting" if len(whole) == 1 else "two best settings"
    spec = (
        f"plain GETs of the whole model at the curve's {which}: {said} "
        f"(curve, a short read a point: {curve.curve_text()})"
    )
    points = tuple((readings[0].label, readings[0].mbps) for readings in curve.readings.values())
    return make_ceiling("storage", runs, spec, None, curve=points, whole=whole)


def _keeping(model: Model, curve: ObjectCurve, repeats: int) -> Ceiling | None:
    """Plain GETs of the whole model at the storage bound's setting (its fastest whole
    read), each GET's bytes kept in fresh memory as a load keeps them: what plain code keeps
    at here (None where the model would take more than ``KEEPING_SHARE`` of usable memory)."""
    if model.file_bytes > KEEPING_SHARE * memory_facts().usable:
        return None
    if curve.whole:
        key = max(curve.whole, key=lambda k: statistics.median(r.mbps for r in curve.whole[k]))
    else:
        key = curve.best() if curve.readings else (PARALLEL_CONNECTIONS, CURVE_PART)
    runs = []
    for _ in range(repeats):
        prime_fresh_memory(model.file_bytes)
        reading = plain_get(curve.objects, *key, keep=True)
        runs.append(reading.mbps)
    spec = (
        f"plain GETs of the whole model, {reading.setting}, each GET's bytes kept in fresh memory"
    )
    return make_ceiling("keeping_read", runs, spec, None)


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
