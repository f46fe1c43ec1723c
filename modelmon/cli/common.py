"""What the verbs share: exit codes, the load options of ``load`` and ``bench``, one-line
failures, JSON on stdout, and Ctrl-C that cancels a run."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import select
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from enum import IntEnum
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypeVar

from modelmon.core.errors import (
    ConfigError,
    LoadCancelled,
    LoadError,
    ModelFormatError,
    OptionsError,
    ReferenceSyntaxError,
    WatchError,
    printable,
)
from modelmon.core.measuring.limits import (
    MAX_AB_PAIRS,
    check_memory_limit,
    memory_limit_range,
    range_text,
)
from modelmon.core.model.references import HF_SYNTAX, OLLAMA_SYNTAX
from modelmon.core.options import (
    CACHE_MODES,
    FADVISE_HINTS,
    MADVISE_HINTS,
    MAX_CHUNK,
    MAX_PARALLEL,
    MAX_READAHEAD_KIB,
    MIN_CHUNK,
    OPTION_NAMES,
    PARTITIONS,
    PREFETCH_MODES,
    LoadOptions,
    MiB,
    chunk_from_mib,
    from_mapping,
    option_text,
    parse_readahead,
    parse_size,
)
from modelmon.core.output.json import SCHEMA_VERSION, dumps

if TYPE_CHECKING:
    Verbs = argparse._SubParsersAction[argparse.ArgumentParser]

T = TypeVar("T")


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
    ExitCode.WATCHED_FAILED: "watch: the command failed, was killed, or could not be started",
    ExitCode.NO_MODEL_SEEN: "watch: the program never opened or mapped a model file",
    ExitCode.TOO_SHORT: "watch: the program exited before the first sample",
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
    f"folder holding one model, or a model in a local store, {HF_SYNTAX} (the Hugging Face "
    f"cache) or {OLLAMA_SYNTAX} (Ollama's); `modelmon models` lists them"
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
    escaped."""
    print(f"modelmon: {printable(message)}", file=sys.stderr)
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


def number_in(low: float, high: float, unit: str = "") -> Callable[[str], float]:
    """An argparse type: a finite number from ``low`` to ``high`` (refuses nan, inf, -5...);
    its error states the range. The bounds are the engine's (``core.options``,
    ``core.measuring.limits``), so a flag refuses what the engine would refuse, at once."""

    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a number {range_text(low, high, unit)}, not {text!r}"
            )
        return value

    return number


def whole_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high`` in ASCII digits ('²' is a
    digit to ``str.isdigit`` but not a number); its error states the range."""

    def whole(text: str) -> int:
        stripped = text.strip()
        digits = stripped.isascii() and stripped.isdigit() and len(stripped) <= 18
        if not digits or not low <= int(stripped) <= high:
            raise argparse.ArgumentTypeError(
                f"must be a whole number {range_text(low, high)}, not {text!r}"
            )
        return int(stripped)

    return whole


def engine_checked(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from an engine parser that raises OptionsError: its one line is the
    error (argparse would otherwise say only "invalid value")."""

    def checked(text: str) -> T:
        try:
            return parse(text)
        except OptionsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    checked.__name__ = parse.__name__
    return checked


# Device readahead as the engine reads it (KiB, or 4MiB; its error states the range).
readahead_kib = engine_checked(parse_readahead)


def memory_limit(text: str) -> int:
    """An argparse type: a RAM limit (``2GiB``) in the range a recommendation takes."""
    size = engine_checked(parse_size)(text)
    try:
        return check_memory_limit(size)
    except OptionsError:
        raise argparse.ArgumentTypeError(f"must be {memory_limit_range()}, not {text!r}") from None


WORKERS = whole_in(1, MAX_PARALLEL)  # processes, or threads per process
CHUNK_MIB = number_in(MIN_CHUNK / MiB, MAX_CHUNK / MiB, "MiB")
PAIRS = whole_in(1, MAX_AB_PAIRS)


def emit_json(data: Any) -> None:
    """``data`` as strict JSON on stdout; an object carries the ``schema_version`` of the
    CLI's JSON first."""
    if isinstance(data, Mapping):
        data = {"schema_version": SCHEMA_VERSION, **data}
    sys.stdout.write(dumps(data) + "\n")


def add_load_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The load options as flags: ``load``'s own, and the ``--`` form of a ``bench`` spec.

    Each flag's dest is the ``LoadOptions`` field it sets, but for ``--chunk-mib``
    (see ``load_options``).
    """
    default = LoadOptions()  # one set of defaults: the engine's
    return [
        parser.add_argument(
            "--strategy", "-s", default="sequential", help="see `modelmon strategies`"
        ),
        parser.add_argument(
            "--workers",
            "-w",
            type=WORKERS,
            default=default.workers,
            help=f"worker processes, {range_text(1, MAX_PARALLEL)} (default {default.workers})",
        ),
        parser.add_argument(
            "--threads",
            "-t",
            type=WORKERS,
            default=default.threads,
            help="reader threads per worker, each with its own descriptor, "
            f"{range_text(1, MAX_PARALLEL)} (default {default.threads})",
        ),
        parser.add_argument(
            "--chunk-mib",
            type=CHUNK_MIB,
            default=default.chunk / MiB,
            help=f"read size in MiB, {range_text(MIN_CHUNK / MiB, MAX_CHUNK / MiB)} "
            f"(default {default.chunk / MiB:g})",
        ),
        parser.add_argument(
            "--cache",
            choices=CACHE_MODES,
            default="cold",
            help="page-cache state to start from (verified); default cold",
        ),
        parser.add_argument("--fadvise", choices=FADVISE_HINTS, default="none"),
        parser.add_argument("--madvise", choices=MADVISE_HINTS, default="none"),
        parser.add_argument("--partition", choices=PARTITIONS, default="contiguous"),
        parser.add_argument(
            "--prefetch",
            choices=PREFETCH_MODES,
            default="read",
            help="warm-up pass of the warmup strategy",
        ),
        parser.add_argument(
            "--readahead",
            type=readahead_kib,
            default=None,
            metavar="KIB",
            help="set the device's readahead (KiB, or 4MiB) for the run, restored after "
            f"(needs write access to its read_ahead_kb), {range_text(0, MAX_READAHEAD_KIB)} KiB",
        ),
        parser.add_argument("--verify", action="store_true", help="crc32 of every tensor"),
        parser.add_argument(
            "--discard",
            action="store_true",
            help="stream through bounded buffers, keep nothing (models > RAM)",
        ),
    ]


def ignored_options(strategy: str, options: LoadOptions) -> list[str]:
    """The options set away from their defaults that ``strategy`` does not use, as
    ``name=value`` (``madvise=random`` with pread): reported as ignored, not as applied."""
    from modelmon.core.loading.strategies import get_strategy

    uses = get_strategy(strategy).uses  # an unknown strategy is an OptionsError here
    default = LoadOptions()
    return [
        option_text(name, getattr(options, name))
        for name in OPTION_NAMES
        if name not in uses and getattr(options, name) != getattr(default, name)
    ]


def note(message: str) -> None:
    """One line on stderr that is neither an error nor output (an ignored option...)."""
    print(f"modelmon: note: {message}", file=sys.stderr)


def load_options(flags: Mapping[str, Any], base: LoadOptions | None = None) -> LoadOptions:
    """``LoadOptions`` from the flags of ``add_load_options`` that are in ``flags``, over
    ``base``; other keys (the verb's own, ``strategy``) are ignored."""
    values = {name: flags[name] for name in OPTION_NAMES if name in flags}
    if "chunk_mib" in flags:
        values["chunk"] = chunk_from_mib(flags["chunk_mib"])
    return from_mapping(values, base)
