"""What a bucket (or an https server) gives this machine, measured by plain GETs that are none
of modelmon's strategies: the ceiling a load from object storage is judged against.

A plain reader is N connections, each taking the next GET of one part size from a queue of
the model's parts in file order, its bytes read into one reused buffer and discarded: what a
plain parallel client (``aws s3 cp``'s transfer manager) does, with no retries, no
``If-Match``, no record per request. Its ceiling is a curve, connections 1…64 × part
sizes: the endpoint's answer to "how many connections, how large a part", measured in the
same session as the loads.

Nothing is cached on this machine between runs (no page cache lies between the bucket and the
process); a cache in the server is the server's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from modelmon.core.errors import LoadCancelled, LoadError, StorageError, one_line
from modelmon.core.measuring.bounds import _timed
from modelmon.core.model.records import Model
from modelmon.core.options import MiB
from modelmon.core.storage.connection import Connection, Transient
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.objects import open_store
from modelmon.core.storage.transfer import final_error
from modelmon.core.storage.urls import ObjectURL
from modelmon.core.units import rate_text

# The curve: connections at one part size, then part sizes at the best connections, then
# twice those connections at the best part size (the search's neighbourhood of the best).
CONNECTIONS = (1, 2, 4, 8, 16, 32, 64)
CURVE_PART = 16 * MiB
PARTS = (4 * MiB, 8 * MiB, 64 * MiB)


@dataclass(frozen=True, slots=True)
class ObjectReading:
    """One plain read of the objects: how, and how fast."""

    connections: int
    part: int  # bytes per GET
    mbps: float
    bytes: int  # every byte of the objects, once
    seconds: float  # from the first GET to the last body's end

    @property
    def setting(self) -> str:
        return f"{self.connections} connection(s), {self.part // MiB} MiB GETs"


def object_facts(model: Model) -> list[ObjectFacts]:
    facts = [file.remote for file in model.files if file.remote is not None]
    if len(facts) != len(model.files):
        raise LoadError(f"{model.path}: not every file is an object")
    return facts


class _Parts:
    """Every GET of a plain read, in file order, handed to whichever connection is free (as
    a parallel client's queue of parts does): no connection idles while another has a tail."""

    def __init__(self, objects: Sequence[ObjectFacts], part: int) -> None:
        self._parts = [
            (facts.object_url(), offset, min(facts.size, offset + part) - 1)
            for facts in objects
            for offset in range(0, facts.size, part)
        ]
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> tuple[ObjectURL, int, int] | None:
        with self._lock:
            if self._next >= len(self._parts):
                return None
            self._next += 1
            return self._parts[self._next - 1]

    def __len__(self) -> int:
        return len(self._parts)


def _read_parts(
    connection: Connection, parts: _Parts, part: int, failures: list[BaseException]
) -> None:
    buffer = memoryview(bytearray(min(part, 8 * MiB)))
    try:
        while not failures and (taken := parts.take()) is not None:
            url, first, last = taken
            try:
                _answer, body = connection.get(url, first, last, None)
                left = last + 1 - first
                while left > 0:
                    got = body.readinto(buffer[: min(left, len(buffer))])
                    if got <= 0:
                        raise StorageError(url.text, "the body ended early")
                    left -= got
                body.finish()
            except Transient as exc:  # a plain read is not retried: named as it failed
                raise final_error(url, exc, 1) from None
    except BaseException as exc:  # the caller raises it, one line
        failures.append(exc)


def plain_get(
    objects: Sequence[ObjectFacts],
    connections: int,
    part: int,
    start_gate: Callable[[], bool] | None = None,
) -> ObjectReading:
    """Read every byte of ``objects`` once over ``connections`` connections (each its own,
    each taking the next GET of ``part`` bytes as it is free); the bytes are discarded. With
    ``start_gate``, the first GET waits for it once the connections are made (False: the
    reading is called off, ``LoadCancelled``)."""
    sizes = [facts.size for facts in objects]
    parts = _Parts(objects, part)
    failures: list[BaseException] = []
    with open_store(objects[0].object_url()) as store:
        opened = [store.connect() for _ in range(max(1, min(connections, len(parts))))]
        try:
            threads = [
                threading.Thread(
                    target=_read_parts,
                    args=(conn, parts, part, failures),
                    name=f"modelmon-plain-get-{n}",
                )
                for n, conn in enumerate(opened)
            ]
            if start_gate is not None and not start_gate():
                raise LoadCancelled("plain GETs: called off before the first one")
            seconds = _timed(threads)
        finally:
            for conn in opened:
                conn.close()
    if failures:
        failure = failures[0]
        if isinstance(failure, StorageError):  # the storage's own words, as a load's
            raise failure
        raise LoadError(f"ceiling: plain GETs of {objects[0].url} failed: {one_line(failure)}")
    return ObjectReading(connections, part, sum(sizes) / seconds / 1e6, sum(sizes), seconds)


def plain_read(
    model: Model, connections: int, part: int, start_gate: Callable[[], bool] | None = None
) -> ObjectReading:
    """Every byte of ``model``'s objects read once by plain GETs (``plain_get``): what the
    endpoint gives code that is none of modelmon's strategies at this setting. A fleet's
    nodes go from one barrier through ``start_gate``."""
    return plain_get(object_facts(model), connections, part, start_gate)


class ObjectCurve:
    """Plain GETs of one model's objects, each setting's readings kept (the named ceilings
    reuse the curve's runs of their settings)."""

    def __init__(self, model: Model, cancel: threading.Event | None) -> None:
        self.objects = object_facts(model)
        self.cancel = cancel
        self.readings: dict[tuple[int, int], list[ObjectReading]] = {}

    def read(self, connections: int, part: int) -> ObjectReading:
        if self.cancel is not None and self.cancel.is_set():
            raise LoadError("ceiling: cancelled")
        reading = plain_get(self.objects, connections, part)
        self.readings.setdefault((connections, part), []).append(reading)
        return reading

    def runs(self, connections: int, part: int, repeats: int) -> list[float]:
        key = (connections, part)
        while len(self.readings.get(key, [])) < repeats:
            self.read(connections, part)
        return [r.mbps for r in self.readings[key][:repeats]]

    def useful(self, connections: int, part: int) -> bool:
        """Whether every connection has a GET to make: more would only wait."""
        total = sum(facts.size for facts in self.objects)
        return connections == 1 or -(-total // part) >= connections

    def sweep(self, on_point: Callable[[ObjectReading], None] | None = None) -> tuple[int, int]:
        """The curve, once each: connections 1…64 at one part size, other part sizes at the
        best number of connections, twice those connections at the best part; the best
        setting."""
        for connections in CONNECTIONS:
            key = (connections, CURVE_PART)
            if self.useful(*key) and key not in self.readings:
                reading = self.read(connections, CURVE_PART)
                if on_point is not None:
                    on_point(reading)
        best = self.best()
        settings = [(best[0], part) for part in PARTS]
        settings.append((min(2 * best[0], CONNECTIONS[-1]), -1))  # -1: the best part, then
        for connections, part in settings:
            part = self.best()[1] if part < 0 else part
            if self.useful(connections, part) and (connections, part) not in self.readings:
                reading = self.read(connections, part)
                if on_point is not None:
                    on_point(reading)
        return self.best()

    def best(self) -> tuple[int, int]:
        return max(self.readings, key=lambda key: self.readings[key][0].mbps)

    def curve_text(self) -> str:
        return "; ".join(
            f"{readings[0].setting}: {rate_text(readings[0].mbps)}"
            for readings in self.readings.values()
        )
