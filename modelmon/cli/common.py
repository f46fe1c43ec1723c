"""What the verbs share: exit codes, the load options of ``load`` and ``bench``, one-line
failures, JSON on stdout, and Ctrl-C that cancels a run."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any

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
    CANCELLED = 130


MEANINGS = {
    ExitCode.OK: "success",
    ExitCode.LOAD_FAILED: "load failed",
    ExitCode.USAGE: "usage error",
    ExitCode.BAD_MODEL: "bad model file",
    ExitCode.CANCELLED: "cancelled (Ctrl+C)",
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


@contextlib.contextmanager
def cancel_on_interrupt(cancel: Callable[[], object]) -> Iterator[None]:
    """Within the block, Ctrl-C calls ``cancel`` (the run stops and reports) instead of raising
    KeyboardInterrupt; the previous SIGINT handler is back afterwards."""
    previous = signal.signal(signal.SIGINT, lambda *_: cancel())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
            "--workers", "-w", type=int, default=default.workers, help="worker processes"
        ),
        parser.add_argument(
            "--threads",
            "-t",
            type=int,
            default=default.threads,
            help="reader threads per worker, each with its own descriptor",
        ),
        parser.add_argument("--chunk-mib", type=float, default=8.0, help="read size in MiB"),
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


def load_options(flags: Mapping[str, Any], base: LoadOptions | None = None) -> LoadOptions:
    """``LoadOptions`` from the flags of ``add_load_options`` that are in ``flags``, over
    ``base``; other keys (the verb's own, ``strategy``) are ignored."""
    values = {name: flags[name] for name in OPTION_NAMES if name in flags}
    if "chunk_mib" in flags:
        values["chunk"] = int(flags["chunk_mib"] * MiB)
    return from_mapping(values, base)
