"""The load options as flags (``load``'s, and the ``--`` form of a ``bench`` spec), and the
argparse types that check a value against the engine's ranges as it is parsed, so a flag
refuses at once what the engine would refuse after minutes, in the same words."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from modelmon.core.errors import OptionsError
from modelmon.core.limits import (
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_STORAGE_TIMEOUT_S,
    MAX_AB_PAIRS,
    MAX_READY_TIMEOUT_S,
    MAX_STORAGE_TIMEOUT_S,
    MIN_READY_TIMEOUT_S,
    MIN_STORAGE_TIMEOUT_S,
    STORAGE_TIMEOUT_ENV,
    range_text,
)
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
    option_text,
    parse_readahead,
    parse_size,
)
from modelmon.core.options import from_mapping as options_from_mapping

T = TypeVar("T")


def number_in(low: float, high: float, unit: str = "") -> Callable[[str], float]:
    """An argparse type: a finite number from ``low`` to ``high`` (refuses nan, inf, -5...),
    written with its ``unit`` or without; its error states the range. The bounds are the
    engine's (``core.options``, ``core.limits``), so a flag refuses what the engine would
    refuse, at once."""

    def number(text: str) -> float:
        bare = text.strip()
        if unit and bare.endswith(unit):  # "60s", "60 s": as the app shows the value
            bare = bare[: -len(unit)].rstrip()
        try:
            value = float(bare)
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
    """An argparse type: a RAM limit (``2GiB``) in the range a recommendation takes (up to
    this machine's RAM, read only when the flag is given)."""
    from modelmon.core.system import check_memory_limit, memory_limit_range

    size = engine_checked(parse_size)(text)
    try:
        return check_memory_limit(size)
    except OptionsError:
        raise argparse.ArgumentTypeError(f"must be {memory_limit_range()}, not {text!r}") from None


MEMORY_LIMIT_HELP = (
    "run {what} inside a memory cgroup of this size, as a container's limit (16Gi, 512Mi, "
    "1500Mi, 2GiB): its peak, page cache, re-reads and OOM kills are reported. Where no "
    "cgroup can be made (not root, no delegation) one line says so and the limit is only "
    "planned with. Default: inside a container (a memory cgroup with a limit) that limit, "
    "measured in a cgroup of the run's own where one can be made; elsewhere none"
)


def add_memory_limit_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--memory-limit SIZE``: ``what`` runs under it (``MEMORY_LIMIT_HELP``)."""
    parser.add_argument(
        "--memory-limit",
        type=memory_limit,
        default=None,
        metavar="SIZE",
        help=MEMORY_LIMIT_HELP.format(what=what),
    )


def add_storage_timeout_option(parser: argparse.ArgumentParser) -> None:
    """``--storage-timeout SECONDS``: every verb that reads a bucket (``main`` applies it)."""
    low, high = MIN_STORAGE_TIMEOUT_S, MAX_STORAGE_TIMEOUT_S
    parser.add_argument(
        "--storage-timeout",
        type=number_in(low, high, "s"),
        default=None,
        metavar="SECONDS",
        help="a model in object storage: how long a read waits for an endpoint that sends "
        f"nothing, its retries together, before it fails, {range_text(low, high)} s "
        f"(default {DEFAULT_STORAGE_TIMEOUT_S:g}, or ${STORAGE_TIMEOUT_ENV}); a byte "
        "arriving starts the wait again",
    )


def say_memory_limit(limit: int | None) -> int | None:
    """The limit to run under: the one given, once its one line is said where no cgroup can
    be made for it; without one, inside a container (a memory cgroup with a limit), its own
    limit where a cgroup can be made in it, so the run's share of it is measured."""
    from modelmon.core.system import memory_facts, memory_limit_unavailable

    if limit is None:
        own = memory_facts().cgroup_limit
        return own if own is not None and memory_limit_unavailable(own) is None else None
    line = memory_limit_unavailable(limit)
    if line is not None:
        print(f"modelmon: {line}", file=sys.stderr)
    return limit


OVERWRITE_MODEL = "--overwrite-model"


def add_overwrite_model_option(parser: argparse.ArgumentParser, flags: str) -> None:
    """``--overwrite-model``: let ``flags`` (-o, --csv) replace a file that is a model."""
    parser.add_argument(
        OVERWRITE_MODEL,
        action="store_true",
        help=f"let {flags} replace a file that is a model (a safetensors or GGUF file, a "
        "shard index, judged by its first bytes, not its name); without it such a file is "
        "refused. The run's own input files are refused all the same",
    )


WORKERS = whole_in(1, MAX_PARALLEL)  # processes, or threads per process
CHUNK_MIB = number_in(MIN_CHUNK / MiB, MAX_CHUNK / MiB, "MiB")
PAIRS = whole_in(1, MAX_AB_PAIRS)


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
    from modelmon.core.runs import get_strategy

    uses = get_strategy(strategy).uses  # an unknown strategy is an OptionsError here
    default = LoadOptions()
    return [
        option_text(name, getattr(options, name))
        for name in OPTION_NAMES
        if name not in uses and getattr(options, name) != getattr(default, name)
    ]


def given_options(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The ``LoadOptions`` fields the flags of ``add_load_options`` in ``flags`` set (``chunk``
    from ``--chunk-mib``); other keys (the verb's own, ``strategy``) are left out."""
    values = {name: flags[name] for name in OPTION_NAMES if name in flags}
    if "chunk_mib" in flags:
        values["chunk"] = chunk_from_mib(flags["chunk_mib"])
    return values


def load_options(flags: Mapping[str, Any], base: LoadOptions | None = None) -> LoadOptions:
    """``LoadOptions`` from the flags of ``add_load_options`` that are in ``flags``, over
    ``base``."""
    return options_from_mapping(given_options(flags), base)


READY_GROUP = (
    "when a server's cold start ends. By default, at its first listening TCP socket (of the "
    "command or of a process that read the model) opened after the first model byte; the "
    "command is then stopped. Asked for, the first of these is ready:"
)


def add_ready_options(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """``--ready-port``, ``--ready-line``, ``--ready-url`` and ``--ready-timeout``: when a
    watched command (``watch``) or a server run (``bench``, ``recommend --server``) is
    ready. The group, for a verb that adds its own."""
    ready = parser.add_argument_group("ready", READY_GROUP)
    ready.add_argument(
        "--ready-port",
        type=whole_in(1, 65535),
        metavar="PORT",
        help="a process of the command's tree listens on this TCP port",
    )
    ready.add_argument(
        "--ready-line",
        metavar="REGEX",
        help="a line of the command's output (stdout or stderr) matches this regular "
        "expression (Python's syntax; each line's match is bounded in time)",
    )
    ready.add_argument(
        "--ready-url",
        metavar="URL",
        help="this http(s) URL answers 2xx (asked every 0.2 s): /health, /v1/models",
    )
    ready.add_argument(
        "--ready-timeout",
        type=number_in(MIN_READY_TIMEOUT_S, MAX_READY_TIMEOUT_S, "s"),
        default=None,
        metavar="SECONDS",
        help="a command not ready this long after it started is stopped and fails (exit 9 "
        "for watch); with --ready-port, --ready-line or --ready-url the default is "
        f"{DEFAULT_READY_TIMEOUT_S:.0f}; alone, it bounds the default ready (a listening "
        "socket)",
    )
    return ready


def ready_options(args: argparse.Namespace) -> tuple[Any, float | None]:
    """The ``ReadyCondition`` the ready flags ask for (checked: a bad pattern or URL is one
    line now, not after a run), and the timeout: the one given, else the default where a
    condition was named, else none (a loader that is no server runs as long as it loads)."""
    from modelmon.core import ReadyCondition

    condition = ReadyCondition(args.ready_port, args.ready_line, args.ready_url)
    condition.check()
    timeout = args.ready_timeout
    if timeout is None and condition.asked:
        timeout = DEFAULT_READY_TIMEOUT_S
    return condition, timeout
