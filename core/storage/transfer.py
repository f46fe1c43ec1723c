"""One byte range of one object, read on one connection into a caller's memory, checked and
retried: what every ranged read of modelmon goes through (a header's, a load's part).

Each answer is held to what was asked: a ranged GET answered with the whole object (200, no
Content-Range) is refused (``RangesIgnoredError``: modelmon never downloads a whole object
to take a slice of it); a Content-Range or Content-Length other than the range asked, or
bytes past it, is an error; an ETag or size other than the object's when it was opened is
``ObjectChangedError`` (the request also carries ``If-Match``, which S3 answers with 412).
Throttling, server errors and dropped connections are retried with backoff and jitter
(``policy.RetryPolicy``), for at most its tries and the storage timeout since the last byte
arrived, then given up on as what the last failure was (``final_error``); a body cut short
is asked for again from the byte where the reads into memory stopped (at most ``SLICE``
bytes before the byte the server had sent, since a reset loses what the socket held).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from modelmon.core.errors import (
    EndpointUnreachableError,
    LoadCancelled,
    ObjectChangedError,
    RangesIgnoredError,
    StorageError,
    StorageServerError,
    StorageThrottledError,
)
from modelmon.core.limits import STORAGE_TIMEOUT_ENV
from modelmon.core.storage.connection import Answer, Body, Connection, Transient
from modelmon.core.storage.pace import Pace
from modelmon.core.storage.policy import RetryPolicy, storage_timeout_s, store_timeouts
from modelmon.core.storage.records import RequestRecord
from modelmon.core.storage.urls import ObjectURL

SLICE = 256 << 10  # bytes per read into memory: how often a cancel is seen, what a reset costs
_POLL_S = 0.05  # how often a back-off looks whether another reader has failed

# on_data(url, offset, chunk): every chunk as it arrives, in order within a range.
DataSink = Callable[[str, int, memoryview], None]


@dataclass(frozen=True, slots=True)
class Expected:
    """What the object was when it was opened; every answer must agree."""

    size: int
    etag: str | None


class Stopped(Exception):
    """Another reader failed: this one stops without a record of its own."""


class GiveBack(Exception):
    """A paced read was throttled before any of its bytes arrived: its part goes back to the
    queue (to be asked for again, perhaps joined into a larger part) and its reader waits."""

    def __init__(self, transient: Transient) -> None:
        super().__init__(transient.detail)
        self.transient = transient


class RangeReader:
    """One connection's reads: ``read`` fills memory with one range, retrying as needed."""

    def __init__(
        self,
        connection: Connection,
        number: int,
        policy: RetryPolicy,
        cancel: threading.Event,
        record: Callable[[RequestRecord], None],
        stop: threading.Event | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.connection, self.number, self.policy = connection, number, policy
        self.cancel, self.stop, self.record, self.pace = cancel, stop, record, pace
        self._paced = (0, 0)  # the pace (allowed in flight, part size) a request was sent at
        self._current: Body | None = None
        self._progress_at = 0.0  # time.monotonic() of the last byte (or the read's start)

    def read(
        self,
        url: ObjectURL,
        first: int,
        targets: Sequence[memoryview],
        expected: Expected | None,
        on_data: DataSink | None = None,
        attempt: int = 0,
    ) -> tuple[Answer, int]:
        """Read bytes ``first``... of ``url`` into ``targets`` in turn (their lengths summed is
        the range asked). ``expected`` None: the object is being opened, the range may end
        early at the object's end. The first answer, and the bytes read. Paced (``pace``): a
        throttle tells the pace, and one before any byte of the range arrived is
        ``GiveBack``, not waited out here; ``attempt``: tries of the range before this one."""
        views = [as_bytes(view) for view in targets if view.nbytes]
        end = first + sum(len(view) for view in views)
        position, failures, resumed = first, 0, False
        self._progress_at = time.monotonic()  # the last byte that arrived, or the start
        index, within = 0, 0  # the target being filled, and how far
        first_answer: Answer | None = None
        while position < end:
            self._check_cancel()
            pace = self.pace
            self._paced = (0, 0) if pace is None else pace.now()
            sent = time.perf_counter_ns()
            if_match = None
            if expected is not None and expected.etag and not expected.etag.startswith("W/"):
                if_match = expected.etag
            try:
                answer, body = self.connection.get(url, position, end - 1, if_match)
            except Transient as exc:
                self._note(url, position, end, 0, exc.status or 0, sent, 0, exc.kind, attempt)
                if pace is not None and exc.kind == "throttled":
                    pace.throttled(sent)
                    if position == first:
                        raise GiveBack(exc) from None
                failures += 1
                self._back_off(url, exc, failures)
                attempt += 1
                continue
            except StorageError as exc:
                self._note(url, position, end, 0, exc.status or 0, sent, 0, "failed", attempt)
                raise
            answered = time.perf_counter_ns()
            self._current = body
            received = 0
            transient: Transient | None = None
            outcome = "failed"  # unless the body arrives whole, or a retry may cure what cut it
            try:
                end = self._check(url, answer, body, position, end, expected)
                if expected is None:
                    expected = Expected(answer.total or end, answer.etag)
                first_answer = first_answer or answer
                while position < end:
                    self._check_cancel(body)
                    view = views[index]
                    chunk = view[within : within + min(SLICE, end - position)]
                    count = body.readinto(chunk)
                    if count == 0:
                        raise Transient("dropped", f"the body ended {end - position} bytes early")
                    self._progress_at = time.monotonic()
                    if pace is not None:
                        pace.arrived()
                    if on_data is not None:
                        on_data(url.text, position, chunk[:count])
                    position += count
                    received += count
                    within += count
                    if within == len(view) and index + 1 < len(views):
                        index, within = index + 1, 0
                extra = body.finish()
                if extra:
                    raise StorageError(
                        url.text,
                        f"the server sent more bytes than it announced for bytes {first}-{end - 1}",
                    )
                outcome = "ok"
            except Transient as exc:
                transient, outcome = exc, exc.kind
            finally:
                if outcome != "ok":
                    body.drop()
                self._current = None
                self._note(
                    url,
                    position - received,
                    end,
                    received,
                    answer.status,
                    sent,
                    answered,
                    outcome,
                    attempt,
                    resumed,
                )
            if transient is not None:
                failures = 1 if received else failures + 1
                self._back_off(url, transient, failures)
                attempt += 1
                resumed = True
                continue
            if pace is not None:
                pace.answered()
        assert first_answer is not None or first == end
        return first_answer or Answer(206, None, 0, None, None), position - first

    def shutdown(self) -> None:
        """From another thread: unblock a read in progress (its socket is shut down)."""
        body = self._current
        if body is not None:
            body.shutdown()

    # --- what an answer must be ------------------------------------------------------------

    def _check(
        self,
        url: ObjectURL,
        answer: Answer,
        body: Body,
        position: int,
        end: int,
        expected: Expected | None,
    ) -> int:
        """Where the range ends (``end``, or the object's end when opening); an error for an
        answer that is not the range asked of the object opened."""
        if answer.status == 200 and answer.content_range is None:
            raise RangesIgnoredError(
                url.text,
                "the server ignores byte ranges: it answered a ranged GET with the whole object "
                "(200, no Content-Range); modelmon reads objects by ranges only",
                200,
            )
        if answer.status not in (200, 206) or answer.content_range is None:
            raise StorageError(
                url.text, f"answered a ranged GET with {answer.status} and no byte range"
            )
        sent_first, sent_last, total = answer.content_range
        asked = f"bytes {position}-{end - 1}"
        if sent_first is None or sent_last is None or total is None:
            raise StorageError(url.text, f"asked for {asked}, the server sent no byte range")
        if expected is not None:
            if total != expected.size:
                raise ObjectChangedError(
                    url.text,
                    f"the object was replaced since it was opened: it holds {total} bytes, "
                    f"it held {expected.size}",
                )
            if expected.etag and answer.etag and answer.etag != expected.etag:
                raise ObjectChangedError(
                    url.text,
                    f"the object was replaced since it was opened: ETag {answer.etag}, it was "
                    f"{expected.etag}",
                )
            last = end - 1
        else:  # opening: a range past the object's end is cut at its end
            last = min(end - 1, total - 1)
        if sent_first != position or sent_last != last:
            raise StorageError(
                url.text,
                f"asked for bytes {position}-{last}, the server sent {sent_first}-{sent_last}",
            )
        announced = answer.content_length
        if announced is not None and announced != last + 1 - position:
            raise StorageError(
                url.text,
                f"the answer to bytes {position}-{last} announces {announced} bytes, not "
                f"{last + 1 - position}",
            )
        return last + 1

    # --- waits -----------------------------------------------------------------------------

    def _check_cancel(self, body: Body | None = None) -> None:
        if self.cancel.is_set() or (self.stop is not None and self.stop.is_set()):
            if body is not None:
                body.drop()
            if self.cancel.is_set():
                raise LoadCancelled("the read was cancelled")
            raise Stopped

    def _back_off(self, url: ObjectURL, exc: Transient, failures: int) -> None:
        """Wait before the next try, or give up: after the policy's tries in a row with no
        byte, or when the wait would take the read past the storage timeout (``patience_s``
        since the last byte arrived: on any connection of the reader, when paced)."""
        since = self._progress_at
        if self.pace is not None:
            since = max(since, self.pace.last_byte)
        self.back_off(url, exc, failures, since)

    def back_off(self, url: ObjectURL, exc: Transient, failures: int, since: float) -> None:
        """The wait after ``failures`` failures in a row (``exc`` the last) with no byte
        since ``since`` (``time.monotonic()``), or the final error when the tries or the
        storage timeout are spent; it ends early when the read is cancelled (LoadCancelled)
        or another reader failed (Stopped)."""
        deadline = time.monotonic() + retry_delay(self.policy, url, exc, failures, since)
        while True:  # a back-off ends early when the read is cancelled or another reader failed
            left = deadline - time.monotonic()
            if self.cancel.wait(min(max(left, 0.0), _POLL_S)):
                raise LoadCancelled("the read was cancelled")
            if self.stop is not None and self.stop.is_set():
                raise Stopped
            if left <= _POLL_S:
                return

    def _note(
        self,
        url: ObjectURL,
        first: int,
        end: int,
        received: int,
        status: int,
        sent: int,
        answered: int,
        outcome: str,
        attempt: int,
        resumed: bool = False,
    ) -> None:
        self.record(
            RequestRecord(
                connection=self.number,
                url=url.text,
                first=first,
                asked=end - first,
                received=received,
                status=status,
                sent_ns=sent,
                first_byte_ns=answered,
                end_ns=time.perf_counter_ns(),
                outcome=outcome,
                attempt=attempt,
                resumed=resumed,
                allowed=self._paced[0],
                part=self._paced[1],
            )
        )


def as_bytes(view: memoryview) -> memoryview:
    """``view`` as flat bytes (a numpy array's memory, whatever its shape and dtype)."""
    if view.readonly:
        raise ValueError("a ranged read needs writable memory to read into")
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def final_error(
    url: ObjectURL, exc: Transient, failures: int, patience_s: float | None = None
) -> StorageError:
    """The error a read gives up with after ``failures`` tries in a row (``patience_s``: the
    storage timeout, when that ended them), typed by the last failure: a throttle is named a
    throttle, a server's failure its failure."""
    tries = f"{failures} {'try' if failures == 1 else 'tries'}"
    if patience_s is None:
        problem = f"{exc.detail}, after {tries}"
    else:
        problem = (
            f"{exc.detail}; nothing arrived within the storage timeout, {patience_s:g} s "
            f"({tries}; --storage-timeout SECONDS or {STORAGE_TIMEOUT_ENV} waits longer)"
        )
    kind = _FINAL_ERRORS.get(exc.kind, StorageError)
    return kind(url.text, problem, exc.status, exc.code)


def retry_delay(
    policy: RetryPolicy, url: ObjectURL, exc: Transient, failures: int, since: float
) -> float:
    """The wait before the next try after ``failures`` failures in a row (``exc`` the last)
    with no byte since ``since`` (``time.monotonic()``); the final error instead when the
    policy's tries are spent (fewer for an endpoint that refuses connections) or the wait
    would pass the storage timeout."""
    limit = policy.unreachable_attempts if exc.kind == "unreachable" else policy.attempts
    if failures >= limit:
        raise final_error(url, exc, failures)
    delay = policy.delay(failures)
    if time.monotonic() - since + delay >= policy.patience_s:
        raise final_error(url, exc, failures, policy.patience_s)
    return delay


def once_error(url: ObjectURL, exc: Transient) -> StorageError:
    """A request made once (a HEAD, a listing) that failed, named as a read's last failure:
    a timeout that was the storage timeout (no socket wait is longer) says so."""
    patience = storage_timeout_s()
    at_timeout = exc.kind == "timeout" and store_timeouts().read_s >= patience
    return final_error(url, exc, 1, patience if at_timeout else None)


_FINAL_ERRORS: dict[str, type[StorageError]] = {
    "unreachable": EndpointUnreachableError,
    "throttled": StorageThrottledError,
    "server-error": StorageServerError,
}
