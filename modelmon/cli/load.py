"""``modelmon load``: one measured load in worker processes, with progress and an ETA on a
terminal's stderr."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from modelmon.cli.common import (
    ExitCode,
    add_path,
    add_verb,
    cancel_on_interrupt,
    emit_json,
    fail,
    fail_on,
    note,
)
from modelmon.cli.flags import (
    add_load_options,
    given_options,
    ignored_options,
    load_options,
    number_in,
)
from modelmon.core.limits import MAX_INTERVAL_S, MIN_INTERVAL_S, range_text

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "load"
EXAMPLES = """\
  modelmon load model.gguf --strategy sequential --workers 4 --cache cold --verify
  modelmon load big.safetensors --discard --json      measure a model larger than RAM
  modelmon load model.gguf --json --samples           with time series and access pattern
  modelmon load model.safetensors --config modelmon.toml --cache cold
                                           apply a recommendation, measured from cold
  modelmon load hf:org/name -s mmap -w 4 --readahead 4MiB
  modelmon load model.safetensors --ranks 4 --workers 2     four loaders on this node
  modelmon load model.safetensors --discard --memory-limit 1Gi   as in a pod of 1 GiB
"""


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "run one measured load in worker processes", EXAMPLES)
    add_path(parser)
    flags = add_load_options(parser)
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="apply a config file written by `modelmon recommend` or the app; load flags "
        "given as well override it (its cache is keep: add --cache cold to measure it from a "
        "cold cache, as its evidence was)",
    )
    # Only the flags given override a config file: their defaults are filled in by ``run``,
    # so that it can tell a flag given from a default.
    parser.set_defaults(load_flag_defaults={flag.dest: flag.default for flag in flags})
    for flag in flags:
        flag.default = argparse.SUPPRESS
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    from modelmon.cli.flags import add_storage_timeout_option

    add_storage_timeout_option(parser)
    parser.add_argument(
        "--samples",
        action="store_true",
        help="with --json: add the metric time series and the access pattern",
    )
    low_ms, high_ms = MIN_INTERVAL_S * 1000, MAX_INTERVAL_S * 1000
    parser.add_argument(
        "--interval-ms",
        type=number_in(low_ms, high_ms, "ms"),
        default=100.0,
        help=f"with --samples: the sampling period, {range_text(low_ms, high_ms)} ms (default 100)",
    )
    from modelmon.cli.flags import add_memory_limit_option

    add_memory_limit_option(parser, "the workers")
    from modelmon.cli.priming import add_prime_option

    add_prime_option(parser)
    from modelmon.cli.ranks import add_options as add_ranks_options

    add_ranks_options(parser)


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.flags import say_memory_limit
    from modelmon.cli.priming import apply_prime_option
    from modelmon.cli.progress import progress_bars
    from modelmon.cli.ranks import run as run_ranks
    from modelmon.cli.ranks import wanted as ranks_wanted
    from modelmon.core import StrategyConfig, apply_config, open_model
    from modelmon.core.output import render_result
    from modelmon.core.runs import ReadBatch, Session, default_strategy
    from modelmon.core.system import memory_facts, swap_warning

    apply_prime_option(args)
    given = {dest: getattr(args, dest) for dest in args.load_flag_defaults if hasattr(args, dest)}
    for dest, default in args.load_flag_defaults.items():
        if not hasattr(args, dest):
            setattr(args, dest, default)
    if args.samples and not args.json:
        return fail("--samples adds the time series to --json: give both", ExitCode.USAGE)
    model = open_model(args.path)
    if args.config:  # the flags given override the file, as the library's options do
        chosen = apply_config(args.config, model, given.get("strategy"), given_options(given))
        from modelmon.cli.ranks import from_config
        from modelmon.core import read_config

        section = read_config(args.config).document.get("ranks", {})
        for line in from_config(args, section, args.config):
            note(line)
    else:
        strategy = given.get("strategy") or default_strategy(model)
        chosen = StrategyConfig(strategy, load_options(vars(args)))
    strategy, options = chosen.strategy, chosen.options
    ignored = ignored_options(strategy, options)
    if ignored:
        note(f"{strategy} does not use {', '.join(ignored)}: ignored")
    if ranks_wanted(args):
        return run_ranks(args, model, strategy, options)
    session = Session(
        model,
        strategy,
        options,
        interval_s=args.interval_ms / 1000,
        monitor=args.samples,
        memory_limit=say_memory_limit(args.memory_limit),
    )
    warning = swap_warning(session.model.total_bytes, memory_facts(), options.discard)
    if warning:
        print(f"modelmon: warning: {warning}", file=sys.stderr)
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
        data = outcome.to_dict(samples=args.samples)
        emit_json({**data, "ignored_options": ignored} if ignored else data)
    else:
        print(render_result(result))
    if result.status == "cancelled":
        return fail("cancelled", ExitCode.CANCELLED)
    if result.storage_error is not None:  # in the storage's words, as when opening
        return fail_on(result.storage_error)
    if result.status != "ok":
        return fail(f"load failed: {result.error}", ExitCode.LOAD_FAILED)
    return ExitCode.OK
