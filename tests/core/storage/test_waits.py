"""The waits a front end tells a person about: an endpoint said once it keeps a request
waiting, and again only after it has answered since (its retries of one silence are one)."""

from __future__ import annotations

import contextlib
import threading

import pytest

from modelmon.core.storage import notice_storage_waits
from modelmon.core.storage.waits import waiting_for


class Silence(Exception):
    """A request that got no answer (a read timeout)."""


def test_an_endpoint_is_said_once_per_silence() -> None:
    said: list[str] = []
    heard = threading.Condition()

    def say(endpoint: str) -> None:
        with heard:
            said.append(endpoint)
            heard.notify_all()

    def until(count: int) -> list[str]:
        with heard:
            assert heard.wait_for(lambda: len(said) >= count, timeout=60), said
            return list(said)

    with notice_storage_waits(say, after_s=0.0):
        with pytest.raises(Silence), waiting_for("http://a"):
            assert until(1) == ["http://a"]
            raise Silence  # no answer: the retry that follows is the same silence
        with contextlib.ExitStack() as stack:
            stack.enter_context(waiting_for("http://a"))
            stack.enter_context(waiting_for("http://b"))  # said in the same look as a
            assert until(2) == ["http://a", "http://b"]
        with waiting_for("http://a"):  # this time it answers
            pass
        with waiting_for("http://a"), waiting_for("http://c"):
            assert until(4) == ["http://a", "http://b", "http://a", "http://c"]


def test_an_error_answer_is_an_answer() -> None:
    class Refused(Exception):
        pass

    said: list[str] = []
    heard = threading.Event()

    def say(endpoint: str) -> None:
        said.append(endpoint)
        heard.set()

    with notice_storage_waits(say, after_s=0.0):
        with pytest.raises(Refused), waiting_for("http://d", (Refused,)):
            assert heard.wait(60)
            raise Refused  # a 403: the endpoint answered
        heard.clear()
        with waiting_for("http://d"):
            assert heard.wait(60)
    assert said == ["http://d", "http://d"]
