"""The search space of a model in object storage: ``ranged`` and ``ranged-stream`` over
connections × part sizes, seeded by the bucket's curve (``object_ceilings``): the plain GETs'
best setting first, then its neighbours along each axis, then the other order.

Options are what a loader would apply; there is no page cache to make cold between runs.
The search is the file search's (``search.Search``: entry runs, then the top two in
alternating pairs), but for a pick no pair confirmed (``BucketSearch``).
"""

from __future__ import annotations

import re

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import Ceilings
from modelmon.core.measuring.noise import BUCKET_NOISE
from modelmon.core.measuring.search import Search
from modelmon.core.model.records import Model
from modelmon.core.options import MAX_CHUNK, LoadOptions, MiB
from modelmon.core.storage.connection import CLIENT_CONNECTIONS

# Where the curve says nothing: what parallel clients of S3 use by default.
DEFAULT_CONNECTIONS, DEFAULT_PART = CLIENT_CONNECTIONS, 16 * MiB
MAX_CONNECTIONS = 64
MIN_PART = 4 * MiB


def curve_best(ceilings: Ceilings) -> tuple[int, int]:
    """(connections, part size) of the plain GETs' best setting: the storage bound's (the
    faster of the settings read whole), else its curve's fastest short read; the defaults
    where neither was measured."""
    storage = ceilings.get("storage")
    points = (storage.whole or storage.curve) if storage is not None else ()
    if not points:
        return DEFAULT_CONNECTIONS, DEFAULT_PART
    setting = max(points, key=lambda point: point[1])[0]
    found = re.match(r"(\d+) connection\(s\), (\d+) MiB GETs", setting)
    if found is None:
        return DEFAULT_CONNECTIONS, DEFAULT_PART
    return int(found.group(1)), int(found.group(2)) * MiB


def object_candidates(model: Model, ceilings: Ceilings) -> list[Candidate]:
    """The search space, most promising first (the budget trims from the end)."""
    connections, part = curve_best(ceilings)
    base = LoadOptions()
    parts_in_model = max(1, -(-model.total_bytes // part))

    def ranged(strategy: str, threads: int, chunk: int, role: str = "") -> Candidate:
        threads = max(1, min(threads, MAX_CONNECTIONS, parts_in_model))
        return Candidate.of(strategy, base.with_(threads=threads, chunk=chunk), role)

    grid = [
        ranged("ranged", connections, part),
        # One connection, each object in order in GETs of up to 1 GiB: a plain download.
        ranged("ranged", 1, MAX_CHUNK, role="baseline"),
        ranged("ranged", connections * 2, part),
        ranged("ranged", max(1, connections // 2), part),
        ranged("ranged-stream", connections, part),
        ranged("ranged", connections, max(MIN_PART, part // 2)),
        ranged("ranged", connections, min(MAX_CHUNK, part * 4)),
        ranged("ranged", connections * 4, max(MIN_PART, part // 2)),
    ]
    unique: dict[str, Candidate] = {}
    for candidate in grid:
        kept = unique.setdefault(candidate.spec, candidate)
        if candidate.role == "baseline":  # the curve's best may be the plain download itself
            kept.role = "baseline"
    return list(unique.values())


class BucketSearch(Search):
    """The search of a bucket: the file search's, with a bucket's usual run-to-run noise
    (``noise.BUCKET_RUN_NOISE``: runs on a loaded network or a busy server spread by tens of
    percent) as the least that unpaired runs are weighed against; where they tie, the more
    robust is fewer connections, kinder to the bucket and to a fleet reading it at once."""

    usual = BUCKET_NOISE
