"""Watching another program load the open model, as a job: what to watch (a command or a
running process) and the command line as typed. Qt-free.

A command is split the way a shell splits words (quotes, backslashes) but never run by a
shell: no expansion, no redirection, no second command. ``{path}`` in it stands for the open
model's path. The watch counts only the open model's files, and for a command makes their
page cache cold, warm or keeps it first (verified); attached to a running process the cache
is kept as it is (it has already read what it read).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from typing import IO

from modelmon.core import Model, Watch, WatchResult
from modelmon.core.errors import OptionsError, one_line
from modelmon.core.options import CACHE_MODES
from modelmon.core.runs import arrival_blocks, last_line
from modelmon.gui.state.jobs import MAP_INTERVAL_S, Job, RunStart
from modelmon.gui.state.programs import command_words, model_path
from modelmon.gui.state.records import WATCH_LABEL, RunRecord, watch_status

MAX_TITLE = 80


# What a shell's double quotes leave as they are: a word holding none of these and a single
# quote reads as it was typed inside them, where single quotes would close and reopen.
DOUBLE_QUOTED_SPECIAL = frozenset('"$`\\!')


def shell_words(argv: tuple[str, ...]) -> str:
    """``argv`` as a shell line that runs it: ``shlex.join``'s quoting, except a word with a
    single quote and nothing double quotes change, which is double quoted (``-c "d['k']"``,
    not ``-c 'd['"'"'k'"'"']'``)."""
    words = []
    for word in argv:
        if "'" in word and not DOUBLE_QUOTED_SPECIAL & set(word):
            words.append(f'"{word}"')
        else:
            words.append(shlex.quote(word))
    return " ".join(words)


@dataclass(frozen=True, slots=True)
class WatchRequest:
    command: tuple[str, ...] | None  # argv, or None to attach to ``pid``
    pid: int | None = None
    cache: str = "cold"  # for a command: cold | warm | keep; attached: keep
    model: tuple[str, ...] = ()  # the files that count (the open model's)
    quiet_s: float | None = None  # end once the model arrived and the program is this quiet
    number: int = 0  # the how-manieth watch on this model, for its name
    described: str = ""  # an attached process's command line, for its title
    env: tuple[tuple[str, str], ...] = ()  # the command's NAME=VALUE words

    @property
    def whole(self) -> str:
        """What is watched, whole, on one line: its command, or "pid 4242 (python serve.py)".
        The watch's spec: the results, the plots and their exports show it as it is."""
        if self.command is not None:
            return " ".join(shell_words(self.command).split())
        return f"pid {self.pid}" + (f" ({self.described})" if self.described else "")

    @property
    def title(self) -> str:
        """``whole``, shortened for a status line."""
        text = self.whole
        return text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1] + "…"


@dataclass(frozen=True, slots=True)
class WatchInput:
    """What File ▸ Watch… was given: a command line, or the pid of the process picked."""

    command: str | None
    pid: int | None
    described: str  # the process's command line, when one was picked
    cache: str
    quiet_s: float | None


def watch_request(given: WatchInput, model: Model) -> WatchRequest:
    """The watch ``given`` asks for, on ``model``; OptionsError (one line) when it cannot
    be watched."""
    if given.command is not None:
        if given.cache not in CACHE_MODES:
            raise OptionsError(f"unknown cache mode {given.cache!r}: use cold, warm or keep")
        argv, env = command_line(given.command, model)
        return WatchRequest(
            argv, None, given.cache, model_scope(model), given.quiet_s, env=tuple(env.items())
        )
    if given.pid is None:
        raise OptionsError("pick the process to watch from the list")
    if given.pid == os.getpid():
        raise OptionsError("that is modelmon itself: pick the program that loads the model")
    if not os.path.exists(f"/proc/{given.pid}"):
        raise OptionsError(f"process {given.pid} is gone: refresh the list and pick again")
    return WatchRequest(
        None, given.pid, "keep", model_scope(model), given.quiet_s, described=given.described
    )


def model_scope(model: Model) -> tuple[str, ...]:
    """The paths whose files count: the model's files (and its index, when it has one)."""
    return tuple(dict.fromkeys(p for p in model.paths if os.path.exists(p)))


def command_line(text: str, model: Model | None) -> tuple[tuple[str, ...], dict[str, str]]:
    """The command's argv and environment from the line as typed (``Command``, the one
    grammar of ``cmd:`` and ``watch -- ...``); ``{path}`` becomes the model's path."""
    if not text.strip():
        raise OptionsError("type the command to run, e.g. python load.py {path}")
    command = command_words(text)
    if command.names_path and model is None:
        raise OptionsError("{path} stands for the open model's path: open one first")
    path = model_path(model) if model is not None else None
    return tuple(command.argv_for(path)), command.env_for(path)


class WatchJob(Job):
    """One watch: the command started (or the process attached to) and watched to its end;
    cancel stops the command's process group and its tree (an attached process is left
    running: the watch detaches)."""

    kind = "watch"

    def __init__(self, request: WatchRequest, model: Model) -> None:
        super().__init__(model)
        self.request = request
        self.watch: Watch | None = None

    def cancel(self) -> None:
        super().cancel()
        if self.watch is not None:
            self.watch.cancel()

    def execute(self) -> WatchResult:
        # The app has no terminal to show a command's output on: its output is discarded,
        # and its errors kept in a file, so that a failure can say its last line.
        with tempfile.TemporaryFile() as errors:
            return self._watch(errors)

    def _watch(self, errors: IO[bytes]) -> WatchResult:
        request = self.request
        cache = next((mode for mode in CACHE_MODES if mode == request.cache), None)
        self.watch = Watch(
            request.command,
            pid=request.pid,
            model=request.model,
            cache=cache if request.command is not None else None,
            quiet_s=request.quiet_s,
            interval_s=self.sample_interval_s,
            stdout=subprocess.DEVNULL,
            stderr=errors.fileno() if request.command is not None else None,
            map_interval_s=MAP_INTERVAL_S,
            env={**os.environ, **dict(request.env)} if request.env else None,
            # What modelmon starts runs under the limit; a running process has its memory.
            memory_limit=self.memory_limit if request.command is not None else None,
        )
        if self.cancelled:  # asked before the watch existed
            self.watch.cancel()
        spec = request.whole
        self.report(RunStart(WATCH_LABEL, spec, None, None, self.watch))
        try:
            result = self.watch.run()
        except Exception as exc:
            self._ended = RunRecord(
                WATCH_LABEL, spec, None, None, one_line(exc), number=request.number
            )
            raise
        ok = watch_status(result) == "ok"
        self._ended = RunRecord(
            WATCH_LABEL,
            spec,
            None,
            result,
            number=request.number,
            stderr_line=last_line(errors),
            arrivals=arrival_blocks(self.model, self.watch, result) if ok else (),
        )
        return result
