"""``modelmon recommend``: measure, pick, explain, and write the config file."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from modelmon.cli.common import (
    ExitCode,
    add_path,
    add_verb,
    cancel_on_interrupt,
    emit_json,
    fail,
    memory_limit,
    number_in,
    whole_in,
)
from modelmon.core.measuring.limits import (
    DEFAULT_BUDGET_S,
    EVIDENCE_OVERRUN,
    MAX_BUDGET_S,
    MAX_SEARCH_WORKERS,
    MIN_BUDGET_S,
    MIN_MEMORY_LIMIT,
    SEARCH_WIDTH,
    range_text,
)
from modelmon.core.options import MiB

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "recommend"
EXAMPLES = """\
  modelmon recommend model.safetensors -o modelmon.toml
  modelmon recommend model.gguf --budget 600 --memory-limit 16GiB -o modelmon.toml
  modelmon recommend hf:org/name --json > recommendation.json
  modelmon load model.safetensors --config modelmon.toml    apply what it wrote
"""
DESCRIPTION_CHARS = 40  # a longer step is logged above the bar, not squeezed into it
BUDGET_HELP = (
    f"how long the whole command may take, from its start to its answer: "
    f"{range_text(MIN_BUDGET_S, MAX_BUDGET_S)} s (default {DEFAULT_BUDGET_S:g}). Every run is "
    "planned to end within it, but the storage's ceilings and a first complete load always "
    "run (without them there is no answer: a model one load of which takes longer than the "
    f"budget takes that long), and the pick's runs toward its evidence may go up to "
    f"{EVIDENCE_OVERRUN * 100:.0f}%% over"  # argparse expands %: %% is one
)


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(
        verbs,
        VERB,
        "measure strategies within a budget, pick the best, explain it, write a config",
        EXAMPLES,
    )
    add_path(parser)
    parser.add_argument("-o", "--output", help="write the config here (TOML), atomically")
    parser.add_argument(
        "--budget",
        type=number_in(MIN_BUDGET_S, MAX_BUDGET_S, "s"),
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=BUDGET_HELP,
    )
    parser.add_argument(
        "--memory-limit",
        type=memory_limit,
        metavar="SIZE",
        help="RAM the loaded model may take, e.g. 2GiB, from "
        f"{MIN_MEMORY_LIMIT // MiB} MiB to this machine's RAM (default: what is available "
        "now); a model larger than it gets a streaming recommendation",
    )
    parser.add_argument(
        "--workers",
        type=whole_in(1, MAX_SEARCH_WORKERS),
        help=f"parallelism to try, {range_text(1, MAX_SEARCH_WORKERS)} (the search also "
        f"tries {SEARCH_WIDTH}× it; default max(4, CPUs))",
    )
    parser.add_argument("--json", action="store_true", help="print the config document as JSON")


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.progress import progress_bars
    from modelmon.core.errors import LoadError, OptionsError
    from modelmon.core.measuring.recommend import recommend
    from modelmon.core.model.formats import open_model, require_tensor_bytes
    from modelmon.core.output.config import recommendation_document, write_config
    from modelmon.core.system.atomic import check_output

    model = open_model(args.path)
    require_tensor_bytes(model)
    limit = args.memory_limit
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
                started=getattr(args, "started", None),
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
    for tool, snippet in document["apply"].items():
        print(f"  {tool:<15} {snippet}")
    if args.output:
        print(f"\nwritten to {args.output}")
    return ExitCode.OK
