"""Requests that wait for an answer which has not come: what a front end tells a person who
would otherwise see nothing (an endpoint that takes connections and never answers is silent
for the whole storage timeout).

Every request to an endpoint (``s3.request``, ``https.HTTPConnection.send``) is registered
while it waits for its answer's headers. ``notice_waits`` watches them from a thread of its
own and says an endpoint once a request to it has waited ``after_s``, and again only after
the endpoint has answered since (its retries of one silence are one silence). Nothing is said
in a process that does not ask: a worker's waits are registered, never watched.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator

_lock = threading.Lock()
_waiting: dict[int, tuple[str, float]] = {}  # token → (endpoint, time.monotonic() it began)
_answers: dict[str, int] = {}  # endpoint → answers it gave (headers, of any status)
_tokens = itertools.count()

NOTICE_AFTER_S = 1.0  # an answer takes tens of milliseconds; a second of nothing is worth saying
POLL_S = 0.1


@contextlib.contextmanager
def waiting_for(endpoint: str, answers: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Within the block, a request to ``endpoint`` waits for its answer: it has one when the
    block ends, or raises one of ``answers`` (an error status a client raises)."""
    token = next(_tokens)
    with _lock:
        _waiting[token] = (endpoint, time.monotonic())
    answered = False
    try:
        yield
        answered = True
    except answers:
        answered = True
        raise
    finally:
        with _lock:
            _waiting.pop(token, None)
            if answered:
                _answers[endpoint] = _answers.get(endpoint, 0) + 1


def answers(endpoint: str) -> int:
    """How many answers ``endpoint`` has given this process."""
    with _lock:
        return _answers.get(endpoint, 0)


def waits() -> list[tuple[str, float]]:
    """(endpoint, seconds waited) of each request waiting now."""
    now = time.monotonic()
    with _lock:
        return [(endpoint, now - since) for endpoint, since in _waiting.values()]


@contextlib.contextmanager
def notice_waits(say: Callable[[str], None], after_s: float = NOTICE_AFTER_S) -> Iterator[None]:
    """Within the block, ``say(endpoint)`` once a request to ``endpoint`` has waited
    ``after_s`` for an answer, and again only after ``endpoint`` has answered since (from a
    thread: ``say`` must not block for long)."""
    stop = threading.Event()
    said: dict[str, int] = {}  # endpoint → its answers when it was said

    def watch() -> None:
        while not stop.wait(POLL_S):
            late = sorted({endpoint for endpoint, seconds in waits() if seconds >= after_s})
            for endpoint in late:
                count = answers(endpoint)
                if said.get(endpoint) != count:
                    said[endpoint] = count
                    say(endpoint)

    thread = threading.Thread(target=watch, name="modelmon-storage-waits", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
