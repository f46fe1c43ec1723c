"""``modelmon load``: one measured load in worker processes, with a progress bar on a terminal."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from modelmon.cli.common import (
    ExitCode,
    add_load_options,
    add_verb,
    cancel_on_interrupt,
    emit_json,
    fail,
    load_options,
)

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "load"


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "run one measured load in worker processes", epilog=True)
    parser.add_argument("path")
    add_load_options(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--samples",
        action="store_true",
        help="with --json: add the metric time series and the access pattern",
    )
    parser.add_argument("--interval-ms", type=float, default=100.0, help="sampling period")
    from modelmon.cli.ranks import add_options as add_ranks_options

    add_ranks_options(parser)


class Progress:
    """A one-line progress bar on a terminal's stderr, at most 10 redraws a second."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.done, self.last = max(total, 1), enabled, 0, 0.0
        self.started = time.monotonic()

    def update(self, message: object) -> None:
        from modelmon.core.loading.messages import ReadBatch

        if not (self.enabled and isinstance(message, ReadBatch)) or message.prefetch:
            return
        self.done += sum(message.lengths)
        now = time.monotonic()
        if now - self.last >= 0.1:
            self.last = now
            fraction = min(1.0, self.done / self.total)
            rate = self.done / max(now - self.started, 1e-9) / 1e6
            bar = "#" * int(fraction * 30)
            sys.stderr.write(f"\r[{bar:<30}] {fraction:6.1%} {rate:8.0f} MB/s")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.last:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.ranks import run as run_ranks
    from modelmon.cli.ranks import wanted as ranks_wanted
    from modelmon.core.measuring.session import Session
    from modelmon.core.output.text import render_result

    if ranks_wanted(args):
        return run_ranks(args)
    options = load_options(vars(args))
    from modelmon.core.system.memory import memory_facts, swap_warning

    session = Session(
        args.path, args.strategy, options, interval_s=args.interval_ms / 1000, monitor=args.samples
    )
    warning = swap_warning(session.model.total_bytes, memory_facts(), options.discard)
    if warning:
        print(f"modelmon: warning: {warning}", file=sys.stderr)
    progress = Progress(session.model.total_bytes, sys.stderr.isatty() and not args.json)
    session.load.on_message = progress.update
    try:
        with cancel_on_interrupt(session.cancel):
            outcome = session.run()
    finally:
        progress.close()
    result = outcome.result
    if args.json:
        emit_json(outcome.to_dict(samples=args.samples))
    else:
        print(render_result(result))
    if result.status == "cancelled":
        return fail("cancelled", ExitCode.CANCELLED)
    if result.status != "ok":
        return fail(f"load failed: {result.error}", ExitCode.LOAD_FAILED)
    return ExitCode.OK
