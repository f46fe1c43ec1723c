"""What the verbs share: exit codes, one-line failures and warnings, JSON on stdout, and Ctrl-C
(SIGTERM, SIGHUP) that cancels a run. The load options as flags are ``flags``'s."""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from enum import IntEnum
from typing import IO, TYPE_CHECKING, Any, NoReturn

from modelmon.core.errors import (
    ConfigError,
    LoadCancelled,
    LoadError,
    ModelFormatError,
    ModelmonWarning,
    ObjectURLError,
    OptionsError,
    ReferenceSyntaxError,
    StorageError,
    WatchError,
    printable,
    redact_urls,
)
from modelmon.core.model import HF_SYNTAX, OLLAMA_SYNTAX
from modelmon.core.output import SCHEMA_VERSION, dumps

if TYPE_CHECKING:
    Verbs = argparse._SubParsersAction[argparse.ArgumentParser]


class ExitCode(IntEnum):
    """What ``modelmon`` tells a shell script; listed in every ``--help``."""

    OK = 0
    LOAD_FAILED = 1
    USAGE = 2
    BAD_MODEL = 3
    NOT_SAVED = 4
    WATCHED_FAILED = 5
    NO_MODEL_SEEN = 6
    TOO_SHORT = 7
    STORAGE_FAILED = 8
    NOT_READY = 9
    HANGUP = 129
    CANCELLED = 130
    PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell shows for a tool that SIGPIPE ended
    TERMINATED = 143


MEANINGS = {
    ExitCode.OK: "success",
    ExitCode.LOAD_FAILED: "load failed",
    ExitCode.USAGE: "usage error",
    ExitCode.BAD_MODEL: "bad model file",
    ExitCode.NOT_SAVED: "measured, but not saved where asked (kept elsewhere, said where)",
    ExitCode.WATCHED_FAILED: "watch: the command failed, was killed (an OOM kill under "
    "--memory-limit named so), or could not be started",
    ExitCode.NO_MODEL_SEEN: "watch: the program never opened or mapped a model file",
    ExitCode.TOO_SHORT: "watch: the program exited before the first sample",
    ExitCode.STORAGE_FAILED: "object storage refused or failed a read, or its AWS "
    "configuration cannot be used (credentials, no such bucket or object, endpoint down or "
    "silent, malformed or redirecting, throttled, failing, object changed)",
    ExitCode.NOT_READY: "watch: the command was never ready (--ready-port, --ready-line, "
    "--ready-url) before it exited or --ready-timeout",
    ExitCode.HANGUP: "stopped by SIGHUP, its terminal gone (as cleanly as Ctrl+C)",
    ExitCode.CANCELLED: "cancelled (Ctrl+C)",
    ExitCode.PIPE_CLOSED: "stdout closed by its reader (| head), as SIGPIPE",
    ExitCode.TERMINATED: "stopped by SIGTERM (as cleanly as Ctrl+C)",
}

# The errors a verb may end with, most specific first, and the exit code each means.
# Anything else is a bug in modelmon and keeps its traceback.
EXIT_CODES: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (ModelFormatError, ExitCode.BAD_MODEL),
    (OptionsError, ExitCode.USAGE),
    (ReferenceSyntaxError, ExitCode.USAGE),
    (ObjectURLError, ExitCode.USAGE),
    (StorageError, ExitCode.STORAGE_FAILED),
    (ConfigError, ExitCode.USAGE),
    (WatchError, ExitCode.WATCHED_FAILED),
    (LoadError, ExitCode.LOAD_FAILED),
    (LoadCancelled, ExitCode.CANCELLED),
    (KeyboardInterrupt, ExitCode.CANCELLED),
)
EXPECTED_ERRORS = tuple(error for error, _ in EXIT_CODES)

EXIT_CODES_TEXT = "exit codes:\n  " + " · ".join(
    f"{code.value} {meaning}" for code, meaning in MEANINGS.items()
)


def epilog(examples: str) -> str:
    """The end of a ``--help``: its ``examples`` (one per line, each ``modelmon ...``) and
    the exit codes."""
    return f"examples:\n{examples.rstrip()}\n\n{EXIT_CODES_TEXT}\n"


# modelmon's own --help: what it does without a verb, and one line per verb.
EPILOG = epilog("""\
  modelmon                                   open the app (offers a demo model)
  modelmon --demo                            open the app on the demo model
  modelmon model.safetensors                 open the app on a model
  modelmon inspect model.safetensors.index.json --json
  modelmon load model.gguf --strategy sequential --workers 4 --cache cold --verify
  modelmon bench model.safetensors --a "mmap-shared-fd workers=4" --b "sequential workers=4" -n 3
  modelmon recommend model.safetensors -o modelmon.toml --budget 120
  modelmon models                            the models already on this machine
  modelmon watch -- python serve.py --model /models/llama   watch your own loader load it
  modelmon watch --pid 4242 --model /models/llama           attach to a running one
  modelmon strategies
  modelmon demo                              write the demo models, print their paths
  modelmon VERB --help                       a verb's options and examples""")

# What every verb's PATH may be: what ``open_model`` opens.
PATH_HELP = (
    "the model: a .safetensors or .gguf file, a shard index (*.safetensors.index.json), a "
    f"folder holding one model, a model in a local store, {HF_SYNTAX} (the Hugging Face "
    f"cache) or {OLLAMA_SYNTAX} (Ollama's; `modelmon models` lists them), or a model in "
    "object storage, s3://BUCKET/KEY, a prefix s3://BUCKET/PREFIX/, or https://HOST/FILE"
)


def add_verb(verbs: Verbs, name: str, help: str, examples: str) -> argparse.ArgumentParser:
    """A verb's subparser: ``help`` in modelmon's list of verbs and atop its own ``--help``,
    which ends with its ``examples`` and the exit codes."""
    return verbs.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=epilog(examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_path(parser: argparse.ArgumentParser, help: str = PATH_HELP) -> None:
    """The verb's model: PATH, with the forms it may take."""
    parser.add_argument("path", metavar="PATH", help=help)


def fail(message: str, code: ExitCode) -> ExitCode:
    """``message`` as one stderr line: what would break the line (a newline in a path) is
    escaped, every URL in it redacted."""
    print(f"modelmon: {printable(redact_urls(message))}", file=sys.stderr)
    return code


def fail_on(error: BaseException) -> ExitCode:
    """One line for one of ``EXPECTED_ERRORS``, and its exit code."""
    code = next(code for kind, code in EXIT_CODES if isinstance(error, kind))
    message = "" if isinstance(error, KeyboardInterrupt) else str(error)
    if code is ExitCode.CANCELLED:
        message = message or "cancelled"
    return fail(message, code)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STDOUT_FD = 1
# The stop signals this process received, in order: main() turns a cancellation that a
# SIGTERM or SIGHUP caused into ExitCode.TERMINATED or HANGUP (128 + the signal, as a shell
# reports a process the signal ended).
received_signals: list[int] = []
SIGNAL_EXITS = {signal.SIGTERM: ExitCode.TERMINATED, signal.SIGHUP: ExitCode.HANGUP}


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (and exit code 2), like the rest."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"modelmon: {message} (see {self.prog} --help)\n")

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        # argparse drops a write that fails: --help into a closed pipe then exited 0 where
        # every other output exits PIPE_CLOSED (main() handles the BrokenPipeError).
        if message:
            (file or sys.stderr).write(message)


def stdout_closed() -> bool:
    """Whether the reader of stdout has gone: a pipe whose read end is closed polls as an
    error (a file, a terminal or /dev/null never does)."""
    try:
        poller = select.poll()
        poller.register(STDOUT_FD, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def silence_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered, and Python's flush at exit, then go
    nowhere instead of raising BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, STDOUT_FD)
    finally:
        os.close(devnull)


def _terminate(signum: int, _frame: object) -> None:
    received_signals.append(signum)
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """SIGTERM and SIGHUP (a closed terminal, an ssh session gone) stop a headless verb the
    way Ctrl-C does (KeyboardInterrupt, or the cancel of ``cancel_on_interrupt``), so workers
    are stopped and reaped and a changed readahead is put back rather than left behind."""
    for number in SIGNAL_EXITS:
        signal.signal(number, _terminate)


def exit_code_for(code: int) -> int:
    """A cancellation caused by SIGTERM exits TERMINATED, by SIGHUP HANGUP (the first of them
    received), by Ctrl-C CANCELLED."""
    if code == ExitCode.CANCELLED:
        cause = next((s for s in received_signals if s in SIGNAL_EXITS), None)
        if cause is not None:
            return int(SIGNAL_EXITS[signal.Signals(cause)])
    return code


@contextlib.contextmanager
def cancel_on_interrupt(cancel: Callable[[], object]) -> Iterator[None]:
    """Within the block, Ctrl-C (and SIGTERM, SIGHUP) calls ``cancel`` (the run stops and reports)
    instead of raising KeyboardInterrupt; the previous handlers are back afterwards."""

    def on_signal(signum: int, _frame: object) -> None:
        received_signals.append(signum)
        cancel()

    previous = {number: signal.signal(number, on_signal) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def emit_json(data: Any) -> None:
    """``data`` as strict JSON on stdout; an object carries the ``schema_version`` of the
    CLI's JSON first."""
    if isinstance(data, Mapping):
        data = {"schema_version": SCHEMA_VERSION, **data}
    sys.stdout.write(dumps(data) + "\n")


def note(message: str) -> None:
    """One line on stderr that is neither an error nor output (an ignored option...)."""
    print(f"modelmon: note: {printable(redact_urls(message))}", file=sys.stderr)


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Within the block, the engine's warnings (a config measured on another model, a
    readahead left out) are one stderr line each, ``modelmon: warning: ...``, as modelmon's
    own are; other warnings keep Python's form."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
            if issubclass(category, ModelmonWarning):
                line = printable(redact_urls(str(message)))
                print(f"modelmon: warning: {line}", file=sys.stderr)
            else:
                shown(message, category, *rest, **kw)

        warnings.simplefilter("default", ModelmonWarning)
        warnings.showwarning = show
        yield
