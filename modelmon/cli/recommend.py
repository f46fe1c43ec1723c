"""``modelmon recommend``: measure, pick, explain, and write the config file."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from modelmon.cli.common import (
    ExitCode,
    add_verb,
    cancel_on_interrupt,
    emit_json,
    fail,
    finite_number,
    whole_number,
)

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "recommend"
DESCRIPTION_CHARS = 40  # a longer step is logged above the bar, not squeezed into it


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(
        verbs,
        VERB,
        "measure strategies within a budget, pick the best, explain it, write a config",
        epilog=True,
    )
    parser.add_argument("path")
    parser.add_argument("-o", "--output", help="write the config here (TOML), atomically")
    parser.add_argument(
        "--budget", type=finite_number, default=120.0, help="seconds to spend (default 120)"
    )
    parser.add_argument(
        "--memory-limit", help="RAM the load may use, e.g. 2GiB (default: available)"
    )
    parser.add_argument(
        "--workers", type=whole_number, help="parallelism to try (default max(4, CPUs))"
    )
    parser.add_argument("--json", action="store_true", help="print the config document as JSON")
    from modelmon.cli.priming import add_prime_option

    add_prime_option(parser)


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.priming import apply_prime_option
    from modelmon.cli.progress import progress_bars
    from modelmon.core.errors import LoadError, OptionsError
    from modelmon.core.measuring.recommend import recommend
    from modelmon.core.model.formats import open_model, require_tensor_bytes
    from modelmon.core.options import parse_size
    from modelmon.core.output.config import recommendation_document, write_config
    from modelmon.core.output.text import search_memory_text
    from modelmon.core.system.atomic import check_output

    apply_prime_option(args)
    model = open_model(args.path)
    require_tensor_bytes(model)
    limit = parse_size(args.memory_limit) if args.memory_limit else None
    if args.output is not None:  # refused before minutes of measuring, not after
        inputs = [model.path, *(file.path for file in model.files)]
        check_output(args.output, inputs, OptionsError)
    cancel = threading.Event()
    with progress_bars() as bars, cancel_on_interrupt(cancel.set):
        task = bars.budget_task("recommending", args.budget)

        def progress(text: str) -> None:
            bars.log(f"  {text}")
            bars.describe(task, text if len(text) <= DESCRIPTION_CHARS else "recommending")

        try:
            rec = recommend(
                model,
                args.budget,
                memory_limit=limit,
                workers=args.workers,
                progress=progress,
                cancel=cancel,
            )
        except LoadError:
            if not cancel.is_set():
                raise
            # A step stopped by the cancel (a ceiling...) reports it as its failure.
            return fail("cancelled", ExitCode.CANCELLED)
    if cancel.is_set():
        return fail("cancelled", ExitCode.CANCELLED)
    name = Path(args.output).name if args.output else "modelmon.toml"
    document = recommendation_document(rec, name, limit)
    if args.output:
        write_config(args.output, document)
    if args.json:
        emit_json(document)
        return ExitCode.OK
    for sentence in rec.explanation:
        print(sentence)
    print(f"\nrecommended: {rec.winner.spec}")
    print(f"memory: {search_memory_text(rec)}")
    for tool, snippet in document["apply"].items():
        print(f"  {tool:<15} {snippet}")
    if args.output:
        print(f"\nwritten to {args.output}")
    return ExitCode.OK
