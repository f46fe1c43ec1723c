"""``modelmon load``: one measured load in worker processes, with progress and an ETA on a
terminal's stderr."""

from __future__ import annotations

import argparse
import os
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


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.progress import progress_bars
    from modelmon.cli.ranks import run as run_ranks
    from modelmon.cli.ranks import wanted as ranks_wanted
    from modelmon.core.loading.messages import ReadBatch
    from modelmon.core.measuring.session import Session
    from modelmon.core.output.text import render_result

    if ranks_wanted(args):
        return run_ranks(args)
    options = load_options(vars(args))
    session = Session(
        args.path, args.strategy, options, interval_s=args.interval_ms / 1000, monitor=args.samples
    )
    with progress_bars() as bars:
        name = os.path.basename(session.model.path.rstrip("/")) or session.model.path
        task = bars.bytes_task(f"loading {name}", session.model.total_bytes)

        def on_message(message: object) -> None:
            # Tensor bytes as the workers report them; read-ahead (prefetch) is not progress.
            if isinstance(message, ReadBatch) and not message.prefetch:
                bars.advance(task, sum(message.lengths))

        session.load.on_message = on_message
        with cancel_on_interrupt(session.cancel):
            outcome = session.run()
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
