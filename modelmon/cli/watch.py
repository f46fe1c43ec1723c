"""``modelmon watch``: run a command (or attach to a process) and watch how it loads its model,
from outside: what arrived how fast, and why it is slow.

The command's own output goes where it would (with ``--json``, its standard output goes to
standard error, so standard output carries only the JSON). Exit codes beyond the common ones:
5 the command failed, was killed (the OOM killer under --memory-limit named so) or could not be
started; 6 it never opened or mapped a model file; 7 it exited before the first sample (what
arrived is reported, its timing is not).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, add_verb, cancel_on_interrupt, emit_json, fail
from modelmon.cli.flags import number_in, whole_in
from modelmon.core.limits import (
    MAX_INTERVAL_S,
    MAX_QUIET_S,
    MIN_INTERVAL_S,
    MIN_QUIET_S,
    range_text,
)
from modelmon.core.model import HF_SYNTAX, OLLAMA_SYNTAX
from modelmon.core.options import CACHE_MODES

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs
    from modelmon.core import WatchResult
    from modelmon.core.system import MemoryLimit

VERB = "watch"
EXAMPLES = """\
  modelmon watch -- python serve.py --model /models/llama        cold by default, verified
  modelmon watch --cache warm --quiet 5 -- llama-server -m /models/m.gguf
  modelmon watch --pid 4242 --model /models/llama                attach: it and its children
  modelmon watch --model hf:org/name -- python load.py            its shards, made cold
  modelmon watch --json --samples --compare -- vllm serve /models/llama
  modelmon watch --memory-limit 16Gi -- python load.py /models/llama     as in a 16 GiB pod
"""
MAX_PID = 2**22  # the kernel's pid_max ceiling (PID_MAX_LIMIT on 64-bit)


def _after_ready(text: str) -> str | float:
    """--after-ready: stop, watch, or seconds (a usage error otherwise)."""
    if text in ("stop", "watch"):
        return text
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"stop, watch or a number of seconds, not {text!r}"
        ) from None
    if not 0 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"seconds from 0 to 3600, not {text}")
    return seconds


INTERVAL_MS = (MIN_INTERVAL_S * 1000, MAX_INTERVAL_S * 1000)


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(
        verbs, VERB, "watch a command (or a running process) load its model", EXAMPLES
    )
    parser.add_argument(
        "--pid",
        type=whole_in(1, MAX_PID),
        help="attach to this running process (and its children)",
    )
    parser.add_argument(
        "--model",
        action="append",
        metavar="PATH",
        help="the model (repeatable), named as every verb names one: a file, a shard index "
        f"(its shards), a folder, {HF_SYNTAX} or {OLLAMA_SYNTAX}. Only its weight files "
        "count, and a command's start is made cold on them; default: the model the "
        "command's arguments name (the same forms), then any model file the program opens "
        "or maps",
    )
    parser.add_argument(
        "--cache",
        choices=CACHE_MODES,
        default=None,
        help="page-cache state of the model before a command starts (verified); default "
        "cold. Attached (--pid), the cache is kept as it is",
    )
    parser.add_argument(
        "--quiet",
        type=number_in(MIN_QUIET_S, MAX_QUIET_S, "s"),
        default=None,
        metavar="SECONDS",
        help="end when the model has arrived and the program has been quiet this long (a "
        "server that loaded and waits); a command is then stopped (SIGTERM, SIGKILL 3 s "
        "later). Default: wait for the command to exit; attached, 5 s",
    )
    parser.add_argument(
        "--interval-ms",
        type=number_in(*INTERVAL_MS, "ms"),
        default=100.0,
        help=f"sampling period, {range_text(*INTERVAL_MS)} ms (default 100)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="afterwards, measure this storage's read ceilings on the same files (cold) and "
        "show them next to the loader's MB/s",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    from modelmon.cli.flags import add_storage_timeout_option

    add_storage_timeout_option(parser)
    parser.add_argument(
        "--samples",
        action="store_true",
        help="with --json: add the metric time series and the pages' arrivals",
    )
    from modelmon.cli.flags import add_memory_limit_option

    add_memory_limit_option(parser, "the command and its children")
    from modelmon.cli.flags import add_ready_options

    ready = add_ready_options(parser)
    ready.add_argument(
        "--after-ready",
        type=_after_ready,
        default="stop",
        metavar="stop|watch|SECONDS",
        help="once ready: stop the command and end (default), watch on until it exits or "
        "is quiet, or watch this many seconds more, then stop it",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ARGS",
        help="the command to run and watch",
    )


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.flags import ready_options, say_memory_limit
    from modelmon.core import Command, Watch, storage_references
    from modelmon.core.output import render_watch

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(command) == (args.pid is not None):
        return fail("watch needs a command after -- or --pid PID (one of the two)", ExitCode.USAGE)
    # Leading NAME=VALUE words set the command's environment, as in a shell and in cmd:.
    ready, ready_timeout = ready_options(args)
    words = (
        Command.from_words(command, "watch's command", "python load.py MODEL") if command else None
    )
    watch = Watch(
        list(words.argv) if words else None,
        env={**os.environ, **dict(words.env)} if words and words.env else None,
        pid=args.pid,
        model=args.model or (),
        cache=args.cache,
        quiet_s=args.quiet,
        interval_s=args.interval_ms / 1000,
        stdout=sys.stderr.fileno() if args.json else None,
        memory_limit=say_memory_limit(args.memory_limit) if command else args.memory_limit,
        ready=ready,
        after_ready=args.after_ready,
        ready_timeout_s=ready_timeout,
        on_notice=lambda line: print(f"modelmon: {line}", file=sys.stderr, flush=True),
    )
    with cancel_on_interrupt(watch.cancel):
        result = watch.run()
    if args.compare and result.ended_by != "cancel" and result.files:
        references = storage_references([f.path for f in result.files])
        if references:
            result = result.with_references(references)
    if args.json:
        emit_json(result.to_dict(samples=args.samples))
    else:
        print(render_watch(result))
    return _exit_code(result)


def _exit_code(result: WatchResult) -> int:
    """One line for a watch that did not see a load run to its end, and its exit code."""
    from modelmon.core.output import limit_text

    what = f"pid {result.pid}"
    if result.command:
        what = " ".join(shlex.join(result.command).split())
        what = what if len(what) <= 80 else what[:77] + "..."
    if result.changed_files:
        return fail(
            f"{what} wrote into its model while it ran: what arrived is not a load of it",
            ExitCode.WATCHED_FAILED,
        )
    if result.ended_by == "cancel":
        if result.attached:  # modelmon only looked at it: it goes on as it was
            return fail(f"cancelled: the watch of {what} ended; it still runs", ExitCode.CANCELLED)
        return fail(f"cancelled: {what} was stopped", ExitCode.CANCELLED)
    limited: MemoryLimit | None = result.memory_limit
    if limited is not None and limited.oom_killed:  # the command, or a process of its tree
        victims = result.oom_victims
        if victims and all(pid != result.pid for pid, _ in victims):
            ended = (
                f"killed by {result.signal}" if result.signal else f"exited with {result.exit_code}"
            )
            return fail(
                f"{what} {ended}; the kernel's OOM killer ended {result.oom_victims_text()} of "
                f"its tree at the memory limit of {limit_text(limited.limit_bytes)}",
                ExitCode.WATCHED_FAILED,
            )
        return fail(f"{what}: {limited.oom_text()}", ExitCode.WATCHED_FAILED)
    if result.status == "killed":
        return fail(f"{what} was killed by {result.signal}", ExitCode.WATCHED_FAILED)
    if result.status == "exited" and result.exit_code:
        return fail(f"{what} exited with {result.exit_code}", ExitCode.WATCHED_FAILED)
    cold = result.cold_start
    timed_out = result.ended_by == "ready-timeout"
    if cold is not None and (cold.asked or timed_out) and cold.ready_s is None:
        why = (
            f"not ready within {result.wall_seconds:.0f} s (--ready-timeout)"
            if timed_out
            else "exited before it was ready"
        )
        if cold.ready_url_failure:
            why += f"; the ready URL {cold.ready_url_failure}"
        return fail(f"{what}: {why}", ExitCode.NOT_READY)
    if result.ended_before_first_sample:
        return fail(
            f"{what} exited after {result.wall_seconds * 1000:.0f} ms, before the first sample "
            f"({result.interval_s * 1000:.0f} ms): what arrived is reported, not how fast "
            "(a shorter --interval-ms sees more)",
            ExitCode.TOO_SHORT,
        )
    if not result.saw_model:
        return fail(_no_model_seen(result, what), ExitCode.NO_MODEL_SEEN)
    return ExitCode.OK


def _no_model_seen(result: WatchResult, what: str) -> str:
    """Why no model was seen, in the terms of what the user gave and what modelmon could read."""
    if any("of another user" in note for note in result.notes):
        return (
            f"{what} belongs to another user: modelmon cannot read its descriptors or "
            "mappings, so it cannot see what it loads (run modelmon as that user, or as root)"
        )
    if any(f.named for f in result.files):
        names = ", ".join(os.path.basename(f.path) for f in result.files if f.named)
        return f"{what} never opened or mapped {names}, and none of it arrived"
    return (
        f"{what} never opened or mapped a model file (name it with --model PATH if it reads "
        "one modelmon does not recognise by name)"
    )
