"""What a bucket (or an https server) gives this machine, measured by plain GETs that are none
of modelmon's strategies: the ceiling a load from object storage is judged against.

A plain reader is N connections, each taking the next GET of one part size from a queue of
the model's parts in file order, its bytes read into one reused buffer and discarded: what a
plain parallel client (``aws s3 cp``'s transfer manager) does, with no ``If-Match``, no
record per request, and the retries a plain client's defaults make: a throttle (503
SlowDown, 429) waited out with backoff, and a GET that failed in a way a retry may cure (no
answer, a dropped connection, a server's 5xx) tried again within the storage timeout
(``--storage-timeout``), as modelmon's own reads are. A reading that needed such a retry is
read again once: its rate holds the wait, which is no bound. Its ceiling is a curve,
connections 1…64 × part sizes: the endpoint's answer to "how many connections, how large a
part", measured in the same session as the loads. Each point reads for ``CURVE_POINT_S`` at
most (the GETs in flight then finish): the curve of a 10 GB model costs seconds a point, not
a whole read each; the storage bound, its best setting, reads the whole model.

A bucket that throttles takes a number of requests a second, whatever their size: a setting
throttled asks for more than that, and more connections or smaller parts would ask for more
still. So a reading throttled for ``THROTTLED_S`` stops there, its rate the bytes it read
over its time (the bucket's rate × its part size, a burst included), and the curve leaves
out the settings that ask for more requests than a throttled one and tries larger parts
(``LARGER_PARTS``) instead: what such a bucket allows is found in seconds, not in the
minutes that small parts take at a few requests a second. Where the largest part size so
far reads best, the curve has not turned on that axis yet, and it goes on up it the same way
(a server that pays per request, as loopback's does, reads 256 MiB parts faster still).

Nothing is cached on this machine between runs (no page cache lies between the bucket and the
process); a cache in the server is the server's.
"""

from __future__ import annotations

import math
import mmap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from modelmon.core.errors import LoadCancelled, LoadError, StorageError, one_line
from modelmon.core.measuring.bounds import _timed
from modelmon.core.model.records import Model
from modelmon.core.options import MiB
from modelmon.core.storage.connection import Connection, Transient
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.objects import open_store
from modelmon.core.storage.policy import RetryPolicy, read_policy
from modelmon.core.storage.transfer import final_error, retry_delay
from modelmon.core.storage.urls import ObjectURL
from modelmon.core.units import rate_text

# The curve: connections at one part size, then part sizes at the best connections, then
# twice those connections at the best part size (the search's neighbourhood of the best).
CONNECTIONS = (1, 2, 4, 8, 16, 32, 64)
CURVE_PART = 16 * MiB
PARTS = (4 * MiB, 8 * MiB, 64 * MiB)
# A throttled reading stops this long after its first throttle; larger parts are tried
# after a throttled best, or one at the largest part measured, up to the largest.
THROTTLED_S = 2.0
LARGER_PARTS = (64 * MiB, 256 * MiB)
# Each point of the curve reads for this long at most (its GETs in flight then finish): a
# point's rate, in a fraction of a whole read of a large model. The bound reads it all.
CURVE_POINT_S = 1.5
_RETRIES = RetryPolicy()  # a plain client's waits after a throttle (its tries in a row)


@dataclass(frozen=True, slots=True)
class ObjectReading:
    """One plain read of the objects: how, and how fast."""

    connections: int
    part: int  # bytes per GET
    mbps: float
    bytes: int  # the bytes read (every byte of the objects once, unless ``stopped``)
    seconds: float  # from the first GET to the last body's end
    throttles: int = 0  # answers that were 503 SlowDown or 429 (each waited out)
    stopped: bool = False  # throttled for THROTTLED_S, stopped before its last byte
    retries: int = 0  # GETs tried again after no answer, a dropped connection, a 5xx

    @property
    def setting(self) -> str:
        return f"{self.connections} connection(s), {self.part // MiB} MiB GETs"

    @property
    def label(self) -> str:
        """The setting, and its throttles where there were any."""
        if not self.throttles:
            return self.setting
        times = "once" if self.throttles == 1 else f"{self.throttles} times"
        stopped = f", stopped after {THROTTLED_S:g} s of it" if self.stopped else ""
        return f"{self.setting}, throttled {times}{stopped}"


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


@dataclass
class _Reading:
    """What the connections of one plain read share: the bytes read, the throttles, and
    the stop (a failure, or throttled for ``THROTTLED_S``)."""

    read: int = 0
    deadline: float = math.inf  # time.monotonic() after which no GET is begun
    throttles: int = 0
    first_throttle: float | None = None  # time.monotonic()
    last_throttle: Transient | None = None
    retries: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    failures: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    policy: RetryPolicy = field(default_factory=read_policy)  # with the storage timeout

    def throttled(self, exc: Transient) -> None:
        with self.lock:
            self.throttles += 1
            self.last_throttle = exc
            now = time.monotonic()
            self.first_throttle = self.first_throttle or now
            if now - self.first_throttle >= THROTTLED_S:
                self.stop.set()


def _read_parts(
    connection: Connection,
    parts: _Parts,
    part: int,
    reading: _Reading,
    kept: list[mmap.mmap] | None = None,
) -> None:
    """GETs of ``parts`` over ``connection``, read into one reused buffer, or (``kept``) each
    into fresh memory, kept there as a load keeps its bytes (freed by the caller)."""
    buffer = memoryview(bytearray(min(part, 8 * MiB)))
    first_get = True  # every connection makes one, however late its thread ran
    try:
        while (
            not reading.stop.is_set()
            and (first_get or time.monotonic() < reading.deadline)
            and (taken := parts.take()) is not None
        ):
            first_get = False
            url, first, last = taken
            if kept is not None:
                fresh = mmap.mmap(-1, last + 1 - first)
                kept.append(fresh)
                buffer = memoryview(fresh)
            if not _get_retried(connection, url, first, last, buffer, reading):
                return
    except BaseException as exc:  # the caller raises it, one line
        reading.failures.append(exc)
        reading.stop.set()


def _get_retried(
    connection: Connection,
    url: ObjectURL,
    first: int,
    last: int,
    buffer: memoryview,
    reading: _Reading,
) -> bool:
    """One GET, tried again as a plain client's defaults do: a throttle waited out (until the
    reading stops), another failure a retry may cure within the policy's tries and the
    storage timeout (counted from this GET's first try), else its final error. False when
    the reading stopped meanwhile."""
    throttles = failures = 0
    since = time.monotonic()
    while True:
        try:
            if _get(connection, url, first, last, buffer, reading):
                return True
            throttles += 1
            delay = _RETRIES.delay(throttles)
        except Transient as exc:
            failures += 1
            delay = retry_delay(reading.policy, url, exc, failures, since)
            with reading.lock:
                reading.retries += 1
        if reading.stop.wait(delay):
            return False


def _get(
    connection: Connection,
    url: ObjectURL,
    first: int,
    last: int,
    buffer: memoryview,
    reading: _Reading,
) -> bool:
    """One GET read and discarded; False when it was throttled."""
    try:
        _answer, body = connection.get(url, first, last, None)
        left, done = last + 1 - first, 0
        while left > 0:
            # On through the buffer, around again where it is shorter than the GET.
            at = done % len(buffer)
            got = body.readinto(buffer[at : at + min(left, len(buffer) - at)])
            if got <= 0:
                raise StorageError(url.text, "the body ended early")
            left -= got
            done += got
        body.finish()
    except Transient as exc:
        if exc.kind != "throttled":
            raise  # tried again by the caller, as a plain client's retries do
        reading.throttled(exc)
        return False
    with reading.lock:
        reading.read += last + 1 - first
    return True


def plain_get(
    objects: Sequence[ObjectFacts],
    connections: int,
    part: int,
    start_gate: Callable[[], bool] | None = None,
    limit_s: float | None = None,
    keep: bool = False,
) -> ObjectReading:
    """Read every byte of ``objects`` once over ``connections`` connections (each its own,
    each taking the next GET of ``part`` bytes as it is free); the bytes are discarded. With
    ``start_gate``, the first GET waits for it once the connections are made (False: the
    reading is called off, ``LoadCancelled``). ``limit_s``: no GET is begun after that many
    seconds from the first (each connection makes one at least). A read throttled for
    ``THROTTLED_S`` stops there too. Its rate is what it read over the time it took."""
    # keep: each GET's bytes read into fresh memory, kept until the reading is timed, as a
    # load keeps them.
    parts = _Parts(objects, part)
    reading = _Reading()
    kept: list[mmap.mmap] | None = [] if keep else None
    with open_store(objects[0].object_url()) as store:
        opened = [store.connect() for _ in range(max(1, min(connections, len(parts))))]
        try:
            threads = [
                threading.Thread(
                    target=_read_parts,
                    args=(conn, parts, part, reading, kept),
                    name=f"modelmon-plain-get-{n}",
                )
                for n, conn in enumerate(opened)
            ]
            if start_gate is not None and not start_gate():
                raise LoadCancelled("plain GETs: called off before the first one")
            if limit_s is not None:  # from the first GET: making the connections is not read
                reading.deadline = time.monotonic() + limit_s
            seconds = _timed(threads)
        finally:
            for conn in opened:
                conn.close()
            for fresh in kept or ():
                fresh.close()
    if reading.failures:
        failure = reading.failures[0]
        step = f"in the plain GETs that measure the storage's bound ({connections} connection(s)"
        step += f", {part // MiB} MiB GETs)"
        if isinstance(failure, StorageError):  # the storage's own words, and where it failed
            raise type(failure)(
                failure.url, f"{failure.problem}, {step}", failure.status, failure.code
            )
        raise LoadError(f"ceiling: plain GETs of {objects[0].url} failed: {one_line(failure)}")
    if not reading.read and reading.last_throttle is not None:  # throttled, every request
        count = reading.throttles
        error = final_error(objects[0].object_url(), reading.last_throttle, count)
        raise type(error)(
            error.url,
            f"{error.problem}; {count} of {count} requests throttled, nothing arrived",
            error.status,
            error.code,
        )
    mbps = reading.read / seconds / 1e6
    return ObjectReading(
        connections,
        part,
        mbps,
        reading.read,
        seconds,
        reading.throttles,
        reading.stop.is_set(),
        reading.retries,
    )


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
        # The curve's points (each at most CURVE_POINT_S of reading), and whole reads.
        self.readings: dict[tuple[int, int], list[ObjectReading]] = {}
        self.whole: dict[tuple[int, int], list[ObjectReading]] = {}

    def read(self, connections: int, part: int, whole: bool = False) -> ObjectReading:
        if self.cancel is not None and self.cancel.is_set():
            raise LoadError("ceiling: cancelled")
        limit = None if whole else CURVE_POINT_S
        reading = plain_get(self.objects, connections, part, limit_s=limit)
        if reading.retries:  # its rate holds a retry's wait: read again, once
            reading = plain_get(self.objects, connections, part, limit_s=limit)
        found = self.whole if whole else self.readings
        found.setdefault((connections, part), []).append(reading)
        return reading

    def runs(self, connections: int, part: int, repeats: int, whole: bool = False) -> list[float]:
        """``repeats`` rates of the setting: the curve's points, or whole reads."""
        key, found = (connections, part), self.whole if whole else self.readings
        while len(found.get(key, [])) < repeats:
            self.read(connections, part, whole)
        return [r.mbps for r in found[key][:repeats]]

    def useful(self, connections: int, part: int) -> bool:
        """Whether every connection has a GET to make: more would only wait."""
        total = sum(facts.size for facts in self.objects)
        return connections == 1 or -(-total // part) >= connections

    def sweep(self, on_point: Callable[[ObjectReading], None] | None = None) -> tuple[int, int]:
        """The curve, once each: connections 1…64 at one part size, other part sizes at the
        best number of connections, larger parts still where the best was throttled, twice
        the connections at the best part; none that asks more requests than a setting the
        bucket throttled. The best setting."""

        def measure(connections: int, part: int) -> None:
            key = (connections, part)
            if key in self.readings or not self.useful(*key) or self.asks_more(*key):
                return
            reading = self.read(connections, part)
            if on_point is not None:
                on_point(reading)

        for connections in CONNECTIONS:
            measure(connections, CURVE_PART)
        for part in PARTS:
            measure(self.best()[0], part)
        for part in LARGER_PARTS:
            best = self.best()
            # A bucket's rate allows larger parts more bytes a second; and where the largest
            # part so far is the best, the curve has not yet turned: it goes on up the axis,
            # with as many connections as the model has parts of that size.
            fewer = self.parts_of(part) < self.parts_of(best[1])  # else the same GETs
            if fewer and (self.readings[best][0].throttles or self.at_edge(best)):
                measure(min(best[0], self.parts_of(part)), part)
        best = self.best()
        measure(min(2 * best[0], CONNECTIONS[-1]), best[1])
        return self.best()

    def parts_of(self, part: int) -> int:
        """GETs of ``part`` the model's objects make."""
        return sum(max(1, -(-facts.size // part)) for facts in self.objects)

    def at_edge(self, setting: tuple[int, int]) -> bool:
        """Whether ``setting``'s part is the largest the curve measured so far."""
        return setting[1] >= max(part for _, part in self.readings)

    def asks_more(self, connections: int, part: int) -> bool:
        """Whether the setting asks for requests faster than one the bucket throttled: as
        many connections or more, parts no larger."""
        return any(
            readings[0].throttles and connections >= known[0] and part <= known[1]
            for known, readings in self.readings.items()
        )

    def best(self) -> tuple[int, int]:
        return self.ranked()[0]

    def ranked(self) -> list[tuple[int, int]]:
        """The settings of the curve, fastest short read first."""
        return sorted(self.readings, key=lambda key: self.readings[key][0].mbps, reverse=True)

    def curve_text(self) -> str:
        return "; ".join(
            f"{readings[0].label}: {rate_text(readings[0].mbps)}"
            for readings in self.readings.values()
        )
