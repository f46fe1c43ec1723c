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
    from modelmon.core.system import check_output, kept_answer_path, write_or_keep

    if args.loader is not None or args.engine is not None:
        return fail(
            "--ranks measures modelmon's ways for N ranks: leave --loader and --engine out "
            "(watch your server's ranks with modelmon watch)",
            ExitCode.USAGE,
        )
    model = open_model(args.path)
    target = args.output or "modelmon.toml"
    output = None
    if args.output is not None:  # refused before minutes of measuring, not after
        output = check_output(args.output, model.paths, OptionsError)
    to_stdout = output is not None and output.is_stdout
    if to_stdout and args.json:
        raise OptionsError("-o - and --json both write standard output; choose one")
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
    saved = write_or_keep(
        target,
        model.paths,
        # The name given is the file's whole path where it is known: the paste lines name it.
        lambda name: render_ranks_config(found, name).encode(),
        default_name="modelmon.toml",
        # Into a pipe or a terminal, the config names a copy kept of it: a file that exists.
        stdout_copy=kept_answer_path(os.path.basename(args.path.rstrip("/")) or "model"),
    )
    where = saved.named if saved.where is not None and os.path.isabs(saved.named) else None
    text = sys.stderr if to_stdout else sys.stdout  # standard output carries the config then
    if args.json:
        emit_json(found.to_dict())
    else:
        print(render_ranks_answer(found, where), file=text)
        if saved.failure is None and to_stdout and saved.copy is not None:
            print(
                "\nConfig written to standard output; a copy, the file the lines to paste "
                f"name, is kept in {saved.copy}",
                file=text,
            )
        elif saved.where is not None and not to_stdout:
            print(f"\nConfig written to {saved.where}", file=text)
    if saved.failure is not None:
        return fail(f"{saved.failure}; kept in {saved.where}", ExitCode.NOT_SAVED)
    return ExitCode.OK if found.pick is not None else ExitCode.LOAD_FAILED
