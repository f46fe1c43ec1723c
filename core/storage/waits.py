"""Requests that wait for an answer which has not come: what a front end tells a person who
would otherwise see nothing (an endpoint that takes connections and never answers is silent
for the whole storage timeout).

Every request to an endpoint (``s3.request``, ``https.HTTPConnection.send``) is registered
while it waits for its answer's headers. ``notice_waits`` watches them from a thread of its
own and says each endpoint once when a request to it has waited ``after_s`` (again only
after every request to it was answered or failed). Nothing is said in a process that does
not ask: a worker's waits are registered, never watched.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator

_lock = threading.Lock()
_waiting: dict[int, tuple[str, float]] = {}  # token → (endpoint, time.monotonic() it began)
_tokens = itertools.count()

NOTICE_AFTER_S = 1.0  # an answer takes tens of milliseconds; a second of nothing is worth saying
POLL_S = 0.1


@contextlib.contextmanager
def waiting_for(endpoint: str) -> Iterator[None]:
    """Within the block, a request to ``endpoint`` waits for its answer."""
    token = next(_tokens)
    with _lock:
        _waiting[token] = (endpoint, time.monotonic())
    try:
        yield
    finally:
        with _lock:
            _waiting.pop(token, None)


def waits() -> list[tuple[str, float]]:
    """(endpoint, seconds waited) of each request waiting now."""
    now = time.monotonic()
    with _lock:
        return [(endpoint, now - since) for endpoint, since in _waiting.values()]


@contextlib.contextmanager
def notice_waits(say: Callable[[str], None], after_s: float = NOTICE_AFTER_S) -> Iterator[None]:
    """Within the block, ``say(endpoint)`` once a request to ``endpoint`` has waited
    ``after_s`` for an answer (from a thread: ``say`` must not block for long)."""
    stop = threading.Event()
    said: set[str] = set()

    def watch() -> None:
        while not stop.wait(POLL_S):
            now = waits()
            said.intersection_update(endpoint for endpoint, _ in now)
            late = sorted({endpoint for endpoint, seconds in now if seconds >= after_s} - said)
            for endpoint in late:
                said.add(endpoint)
                say(endpoint)

    thread = threading.Thread(target=watch, name="modelmon-storage-waits", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
