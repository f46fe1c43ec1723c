"""What the verbs share: exit codes, the load options of ``load`` and ``bench``, one-line
failures, JSON on stdout, and Ctrl-C that cancels a run."""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NoReturn

from modelmon.core.errors import (
    ConfigError,
    LoadCancelled,
    LoadError,
    ModelFormatError,
    OptionsError,
    ReferenceSyntaxError,
)
from modelmon.core.options import (
    CACHE_MODES,
    FADVISE_HINTS,
    MADVISE_HINTS,
    OPTION_NAMES,
    PARTITIONS,
    PREFETCH_MODES,
    LoadOptions,
    MiB,
    from_mapping,
    parse_readahead,
)
from modelmon.core.output.json import SCHEMA_VERSION, dumps

if TYPE_CHECKING:
    Verbs = argparse._SubParsersAction[argparse.ArgumentParser]


class ExitCode(IntEnum):
    """What ``modelmon`` tells a shell script; listed in every ``--help``."""

    OK = 0
    LOAD_FAILED = 1
    USAGE = 2
    BAD_MODEL = 3
    HANGUP = 129
    CANCELLED = 130
    TERMINATED = 143


MEANINGS = {
    ExitCode.OK: "success",
    ExitCode.LOAD_FAILED: "load failed",
    ExitCode.USAGE: "usage error",
    ExitCode.BAD_MODEL: "bad model file",
    ExitCode.HANGUP: "stopped by SIGHUP, its terminal gone (as cleanly as Ctrl+C)",
    ExitCode.CANCELLED: "cancelled (Ctrl+C)",
    ExitCode.TERMINATED: "stopped by SIGTERM (as cleanly as Ctrl+C)",
}

# The errors a verb may end with, most specific first, and the exit code each means.
# Anything else is a bug in modelmon and keeps its traceback.
EXIT_CODES: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (ModelFormatError, ExitCode.BAD_MODEL),
    (OptionsError, ExitCode.USAGE),
    (ReferenceSyntaxError, ExitCode.USAGE),
    (ConfigError, ExitCode.USAGE),
    (LoadError, ExitCode.LOAD_FAILED),
    (LoadCancelled, ExitCode.CANCELLED),
    (KeyboardInterrupt, ExitCode.CANCELLED),
)
EXPECTED_ERRORS = tuple(error for error, _ in EXIT_CODES)

EPILOG = f"""\
examples:
  modelmon                                   open the app (offers a demo model)
  modelmon --demo                            open the app on the demo model
  modelmon model.safetensors                 open the app on a model
  modelmon inspect model.safetensors.index.json --json
  modelmon load model.gguf --strategy sequential --workers 4 --cache cold --verify
  modelmon load big.safetensors --discard --json      measure a model larger than RAM
  modelmon load model.gguf --json --samples           with time series and access pattern
  modelmon bench model.safetensors --a "mmap-shared-fd workers=4" --b "sequential workers=4" -n 3
  modelmon recommend model.safetensors -o modelmon.toml --budget 120
  modelmon strategies
  modelmon demo                              write the demo models, print their paths

exit codes:
  {" · ".join(f"{code.value} {meaning}" for code, meaning in MEANINGS.items())}
"""


def add_verb(verbs: Verbs, name: str, help: str, epilog: bool = False) -> argparse.ArgumentParser:
    """A verb's subparser; ``epilog``: with the examples and exit codes under its ``--help``."""
    if not epilog:
        return verbs.add_parser(name, help=help)
    return verbs.add_parser(
        name, help=help, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def fail(message: str, code: ExitCode) -> ExitCode:
    print(f"modelmon: {message}", file=sys.stderr)
    return code


def fail_on(error: BaseException) -> ExitCode:
    """One line for one of ``EXPECTED_ERRORS``, and its exit code."""
    code = next(code for kind, code in EXIT_CODES if isinstance(error, kind))
    message = "" if isinstance(error, KeyboardInterrupt) else str(error)
    if code is ExitCode.CANCELLED:
        message = message or "cancelled"
    return fail(message, code)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The stop signals this process received, in order: main() turns a cancellation that a
# SIGTERM or SIGHUP caused into ExitCode.TERMINATED or HANGUP (128 + the signal, as a shell
# reports a process the signal ended).
received_signals: list[int] = []
SIGNAL_EXITS = {signal.SIGTERM: ExitCode.TERMINATED, signal.SIGHUP: ExitCode.HANGUP}


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (and exit code 2), like the rest."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"modelmon: {message} (see {self.prog} --help)\n")


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


def finite_number(text: str, minimum: float = 0.0) -> float:
    """An argparse type: a finite number above ``minimum`` (refuses nan, inf, -5...)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= minimum:
        raise argparse.ArgumentTypeError(f"must be a finite number above {minimum:g}: {text!r}")
    return value


def whole_number(text: str) -> int:
    """An argparse type: a whole number ≥ 1 written in ASCII digits ('²' is a digit to
    ``str.isdigit`` but not a number)."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) or int(stripped) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 1: {text!r}")
    return int(stripped)


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
            "--workers", "-w", type=whole_number, default=default.workers, help="worker processes"
        ),
        parser.add_argument(
            "--threads",
            "-t",
            type=whole_number,
            default=default.threads,
            help="reader threads per worker, each with its own descriptor",
        ),
        parser.add_argument(
            "--chunk-mib", type=finite_number, default=8.0, help="read size in MiB"
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
            type=parse_readahead,
            default=None,
            metavar="KIB",
            help="set the device's readahead (KiB, or 4MiB) for the run, restored after "
            "(needs write access to its read_ahead_kb)",
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
        f"{name}={getattr(options, name)}"
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
        values["chunk"] = int(flags["chunk_mib"] * MiB)
    return from_mapping(values, base)
