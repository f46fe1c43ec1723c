"""The app's ready rule for a command that serves: what each kind gives the engine, the
defaults the CLI has, and one line in the app's words for what cannot be used."""

from __future__ import annotations

import pytest

from modelmon.core.errors import OptionsError
from modelmon.core.limits import DEFAULT_READY_TIMEOUT_S
from modelmon.gui.state.ready_rule import ReadyRule, ReadyState


def test_a_listening_socket_is_the_default_and_has_no_timeout() -> None:
    serving = ReadyRule().serving()
    assert serving["ready"] is not None and serving["ready"].listen
    assert serving["ready_timeout_s"] is None
    assert ReadyRule().words() == "ready when a socket listens"


@pytest.mark.parametrize(
    ("kind", "value", "field", "expected"),
    [
        ("port", " 8000 ", "port", 8000),
        ("line", "Application startup complete", "line", "Application startup complete"),
        ("url", "http://127.0.0.1:8000/health", "url", "http://127.0.0.1:8000/health"),
    ],
)
def test_each_kind_names_its_condition_with_the_default_timeout(
    kind: str, value: str, field: str, expected: object
) -> None:
    serving = ReadyRule(kind, value).serving()
    assert getattr(serving["ready"], field) == expected
    assert serving["ready_timeout_s"] == DEFAULT_READY_TIMEOUT_S
    assert ReadyRule(kind, value, 30).serving()["ready_timeout_s"] == 30


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        (ReadyRule("port", ""), "the ready port is empty: give the TCP port"),
        (ReadyRule("port", "80a"), "the ready port must be a TCP port, 1 to 65535, not 80a"),
        (ReadyRule("port", "70000"), "the ready port must be a TCP port, 1 to 65535"),
        (ReadyRule("line", "(unclosed"), "the ready line is not a regular expression"),
        (ReadyRule("url", "ftp://host/x"), "the ready URL ftp://host/x: not an http://"),
        (ReadyRule("listen", "", 0.5), "the ready timeout must be 1 to 86400 s, not 0.5"),
    ],
)
def test_what_cannot_be_used_is_one_line_in_the_apps_words(rule: ReadyRule, said: str) -> None:
    with pytest.raises(OptionsError) as raised:
        rule.serving()
    message = str(raised.value)
    assert message.startswith(said) and "\n" not in message and "--ready" not in message


def test_a_secret_in_the_url_is_never_said() -> None:
    rule = ReadyRule("url", "http://127.0.0.1:8000/health?token=hunter2")
    assert "hunter2" not in rule.words() and rule.words().endswith("answers (900 s at most)")
    state = ReadyState()
    state.set("url", "ftp://u:hunter2@host/health")
    assert state.problem() is not None and "hunter2" not in state.problem()


def test_the_state_says_each_change_once_and_keeps_what_was_not_changed() -> None:
    state = ReadyState()
    seen: list[ReadyRule] = []
    state.changed.connect(seen.append)
    state.set("line", "ready")
    state.set(timeout_s=60)
    state.set(timeout_s=60)
    assert seen == [ReadyRule("line", "ready"), ReadyRule("line", "ready", 60.0)]
    with pytest.raises(OptionsError):
        state.set("socket")
    assert state.rule == ReadyRule("line", "ready", 60.0)
