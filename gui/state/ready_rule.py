"""When a command the app runs is a server that is ready: the rule the user set for its runs
and A/Bs, as the CLI's ``--ready-port``, ``--ready-line``, ``--ready-url`` and
``--ready-timeout`` say it. Without one, a command's first listening socket opened after its
first model byte is ready (``core.watching.ready``); a loader that never listens runs until
it has loaded. Qt-free: the window's ready row draws this state and sets it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from modelmon.core import ReadyCondition
from modelmon.core.errors import OptionsError, redact_url
from modelmon.core.limits import (
    DEFAULT_READY_TIMEOUT_S,
    MAX_READY_TIMEOUT_S,
    MIN_READY_TIMEOUT_S,
)
from modelmon.core.measuring import RunSettings
from modelmon.gui.state.events import Event

# (kind, what the row's choice says, the placeholder of its value)
READY_KINDS: tuple[tuple[str, str, str], ...] = (
    ("listen", "a socket listens", ""),
    ("port", "this port listens", "8000"),
    ("line", "a line matches", "Application startup complete"),
    ("url", "this URL answers", "http://127.0.0.1:8000/health"),
)
KIND_NAMES = tuple(kind for kind, _, _ in READY_KINDS)
MAX_TIMEOUT_S = MAX_READY_TIMEOUT_S  # the most the row's timeout takes
READY_TIPS = {
    "kind": "When a command's server is ready, for its runs and A/Bs (the CLI's --ready-port, "
    "--ready-line, --ready-url): by default its first listening socket opened after its "
    "first model byte. Each run is timed to that moment, then the server and everything it "
    "started are stopped.",
    "value": "The TCP port it listens on when ready, the regular expression a line of its "
    "output matches (stdout or stderr), or a URL that answers 2xx when it is ready.",
    "timeout": "A server not ready this long after it started is stopped and its run fails. "
    f"Default: {DEFAULT_READY_TIMEOUT_S:.0f} s where a port, line or URL is named; none for "
    "a listening socket (a loader that never listens runs until it has loaded).",
}
# The CLI's flags as the app names them, in the checks' one-line errors.
_FLAG_WORDS = {
    "--ready-port": "the ready port",
    "--ready-line": "the ready line",
    "--ready-url": "the ready URL",
}


@dataclass(frozen=True, slots=True)
class ReadyRule:
    """A server's ready, as set: ``kind`` one of ``KIND_NAMES``, ``value`` the port, the
    pattern or the URL it names, ``timeout_s`` how long it may take (0: the default, which is
    ``DEFAULT_READY_TIMEOUT_S`` where a condition is named, none for a listening socket)."""

    kind: str = "listen"
    value: str = ""
    timeout_s: float = 0.0

    def condition(self) -> ReadyCondition:
        """The engine's condition: OptionsError, in one line, where it cannot be watched for."""
        value = self.value.strip()
        if self.kind == "listen":
            return ReadyCondition()
        if not value:
            raise OptionsError(f"{_said(self.kind)} is empty: {_hint(self.kind)}")
        if self.kind == "port":
            if not value.isdigit():
                raise OptionsError(f"the ready port must be a TCP port, 1 to 65535, not {value}")
            condition = ReadyCondition(port=int(value))
        elif self.kind == "line":
            condition = ReadyCondition(line=self.value)  # a pattern's spaces are its own
        elif self.kind == "url":
            condition = ReadyCondition(url=value)
        else:
            raise OptionsError(f"no such ready rule: {self.kind!r}")
        try:
            condition.check()
        except OptionsError as exc:
            raise OptionsError(_app_words(str(exc))) from None
        return condition

    def serving(self) -> RunSettings:
        """What each run of a command is given: its condition and its timeout (checked)."""
        condition = self.condition()
        timeout: float | None = self.timeout_s or None
        if timeout is not None and not MIN_READY_TIMEOUT_S <= timeout <= MAX_READY_TIMEOUT_S:
            raise OptionsError(
                f"the ready timeout must be {MIN_READY_TIMEOUT_S:.0f} to "
                f"{MAX_READY_TIMEOUT_S:.0f} s, not {timeout:g}"
            )
        if timeout is None and condition.asked:
            timeout = DEFAULT_READY_TIMEOUT_S
        return {"ready": condition, "ready_timeout_s": timeout}

    def words(self) -> str:
        """The rule in a sentence's words: "ready when http://…/health answers (900 s at
        most)"; a URL as it may be written (redacted)."""
        value = self.value.strip()
        said = {
            "listen": "ready when a socket listens",
            "port": f"ready when port {value} listens",
            "line": f"ready when a line matches {value!r}",
            "url": f"ready when {redact_url(value)} answers",
        }.get(self.kind, "ready when a socket listens")
        timeout = self.timeout_s or (DEFAULT_READY_TIMEOUT_S if self.kind != "listen" else 0)
        return f"{said} ({timeout:.0f} s at most)" if timeout else said


def _said(kind: str) -> str:
    return _FLAG_WORDS[f"--ready-{kind}"]


def _hint(kind: str) -> str:
    return {
        "port": "give the TCP port the server listens on when it is ready",
        "line": "give a regular expression its ready line matches",
        "url": "give a URL that answers 2xx when it is ready (/health)",
    }[kind]


def _app_words(message: str) -> str:
    for flag, words in _FLAG_WORDS.items():
        message = message.replace(flag, words)
    return message


class ReadyState:
    """The ready rule every command's run and A/B is given; ``changed`` emits the rule."""

    def __init__(self) -> None:
        self.rule = ReadyRule()
        self.changed = Event()  # ReadyRule

    def set(
        self, kind: str | None = None, value: str | None = None, timeout_s: float | None = None
    ) -> None:
        """Change what is given; the rest stays as it was."""
        rule = replace(
            self.rule,
            kind=self.rule.kind if kind is None else kind,
            value=self.rule.value if value is None else value,
            timeout_s=self.rule.timeout_s if timeout_s is None else float(timeout_s),
        )
        if rule.kind not in KIND_NAMES:
            raise OptionsError(f"no such ready rule: {rule.kind!r}")
        if rule != self.rule:
            self.rule = rule
            self.changed.emit(rule)

    def problem(self) -> str | None:
        """What is wrong with the rule as set, in one line; None when it can be used."""
        try:
            self.rule.serving()
        except OptionsError as exc:
            return str(exc)
        return None
