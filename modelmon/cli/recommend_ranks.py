"""``modelmon recommend PATH --ranks N [--memory-limit SIZE]``: how N ranks of this node should
get their weights (each way that keeps every byte, measured under the limit), the pick, its
memory, the smallest limit it holds at, the line to paste; or that none fits, and what would.

Not a verb: ``recommend``'s run when it is asked for more than one rank."""

from __future__ import annotations

import argparse
import os
import sys

from modelmon.cli.common import ExitCode, cancel_on_interrupt, emit_json, fail


def run(args: argparse.Namespace, limit: int | None) -> int:
    from modelmon.core import open_model, recommend_ranks
    from modelmon.core.errors import BUDGET_NOT_KEPT, OptionsError
    from modelmon.core.output import render_ranks_answer, render_ranks_config
    from modelmon.core.system import check_output, write_or_keep

    if args.loader is not None or args.engine is not None:
        return fail(
            "--ranks measures modelmon's ways for N ranks: leave --loader and --engine out "
            "(watch your server's ranks with modelmon watch)",
            ExitCode.USAGE,
        )
    model = open_model(args.path)
    target = args.output or "modelmon.toml"
    if args.output is not None:  # refused before minutes of measuring, not after
        check_output(args.output, model.paths, OptionsError)
    stop = __import__("threading").Event()

    def progress(text: str) -> None:
        if not text.startswith(BUDGET_NOT_KEPT):  # a warning's line says it
            print(f"modelmon: {text}", file=sys.stderr)

    with cancel_on_interrupt(stop.set):
        found = recommend_ranks(
            model,
            args.ranks,
            memory_limit=limit,
            budget_s=args.budget,
            cancel=stop,
            on_progress=progress,
        )
    if stop.is_set():
        return fail("cancelled", ExitCode.CANCELLED)
    folder = os.path.dirname(os.path.abspath(target))  # the paste lines name it whole
    saved = write_or_keep(
        target,
        model.paths,
        lambda name: render_ranks_config(found, os.path.join(folder, name)).encode(),
        default_name="modelmon.toml",
    )
    where = os.path.abspath(saved.where) if saved.where is not None else None
    if args.json:
        emit_json(found.to_dict())
    else:
        print(render_ranks_answer(found, where))
        if saved.where is not None:
            print(f"\nConfig written to {saved.where}")
    if saved.failure is not None:
        return fail(f"{saved.failure}; kept in {saved.where}", ExitCode.NOT_SAVED)
    return ExitCode.OK if found.pick is not None else ExitCode.LOAD_FAILED
