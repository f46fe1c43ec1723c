"""``modelmon fleet load|bench``: the same measured load on every node of a Ray cluster.

All nodes start at one barrier; the report has each node and the aggregate. A model in
object storage is read by every node with its own client and configuration (its
environment's credentials: none travels in a task), then the bucket's bound is measured. Ray is the
optional ``fleet`` extra: without it the verb says in one line how to install it and exits 2.
Several loaders on this machine need no Ray: that is ``load --ranks N`` (``cli/ranks.py``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from modelmon.cli.common import PATH_HELP, ExitCode, add_path, add_verb, emit_json, epilog, fail
from modelmon.cli.flags import (
    OVERWRITE_MODEL,
    PAIRS,
    add_load_options,
    add_overwrite_model_option,
    add_storage_timeout_option,
    load_options,
)
from modelmon.core.errors import OptionsError
from modelmon.core.limits import MAX_AB_PAIRS

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs
    from modelmon.core.system import Output, Saved

VERB = "fleet"

LOAD_EXAMPLES = """\
  modelmon fleet load /shared/model.safetensors --address auto --workers 4 --json
  modelmon fleet load /shared/model.gguf --address ray://head:10001 --nodes 8 --csv nodes.csv
  modelmon fleet load s3://models/llama/ --threads 8 --json    each node from the bucket
  modelmon fleet load /shared/model.safetensors --ranks 4 --ranks-mode one-reader --json
"""
BENCH_EXAMPLES = """\
  modelmon fleet bench /shared/model.safetensors --a "sequential workers=2" \\
      --b "mmap-shared-fd workers=2" -n 2 --json
  modelmon fleet bench /shared/llama --a "engine: transformers" \\
      --b "cmd: python serve.py --model {path}" -n 2
  modelmon fleet bench /shared/model.safetensors --a sequential --b sequential \\
      --ranks 4 --b-ranks-mode one-reader -n 2
"""
EXAMPLES = f"""\
{LOAD_EXAMPLES}{BENCH_EXAMPLES}\
  modelmon load model.safetensors --ranks 4 --workers 2     four loaders on this node
  modelmon load model.safetensors --ranks 4 --ranks-split   four tensor-parallel ranks
"""
FLEET_PATH_HELP = (
    f"{PATH_HELP}; a file at the same path on every node (shared storage), or an object URL "
    "every node reads with the credentials of its own environment"
)


def add_parser(verbs: Verbs) -> None:
    parser = verbs.add_parser(
        VERB,
        help="the same load on every node of a Ray cluster at once (needs modelmon[fleet])",
        description="Run a measured load on every node of a Ray cluster, all starting "
        "together, so contention on shared storage is real. The model path must be the same "
        "on every node (shared storage), or a bucket's URL (s3://, https://) each node reads "
        "with its own credentials. Needs Ray: pip install 'modelmon[fleet]'. See "
        "docs/fleet.md.",
        epilog=epilog(EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="fleet_verb", metavar="ACTION", required=True)
    load = add_verb(actions, "load", "one load on every node, from one barrier", LOAD_EXAMPLES)
    add_path(load, FLEET_PATH_HELP)
    add_load_options(load)
    bench = add_verb(
        actions, "bench", "A/B on every node: A, B, A, B … each from a barrier", BENCH_EXAMPLES
    )
    add_path(bench, FLEET_PATH_HELP)
    program = ' or a program: "cmd: COMMAND {path}", "engine: NAME knob=value" (cold only)'
    bench.add_argument(
        "--a", required=True, metavar="SPEC", help=f'e.g. "sequential workers=2";{program}'
    )
    bench.add_argument(
        "--b", required=True, metavar="SPEC", help=f'e.g. "mmap-shared-fd workers=2";{program}'
    )
    bench.add_argument(
        "-n", type=PAIRS, default=2, help=f"pairs to run, 1 to {MAX_AB_PAIRS} (default 2)"
    )
    bench.add_argument("--cache", choices=("cold", "warm"), default="cold")
    from modelmon.cli.bench_ranks import add_options as add_ranks_options
    from modelmon.cli.flags import memory_limit

    add_ranks_options(load, "on every node", sides=False)
    add_ranks_options(bench, "on every node")
    for action in (load, bench):
        action.add_argument(
            "--memory-limit",
            type=memory_limit,
            default=None,
            metavar="SIZE",
            help="with --ranks: each node's N ranks run together in one memory cgroup of this "
            "size on their node, as a pod's limit (16Gi, 512Mi): its peak, held memory and "
            "OOM kills are the node's. Where a node can make no cgroup, its notes say so and "
            "its ranks' own peaks are summed. Default: a cgroup of the node's RAM, measured "
            "but not limiting",
        )
    for action in (load, bench):
        action.add_argument(
            "--address",
            default="auto",
            help="the Ray cluster: auto (the one this machine belongs to, the default), "
            "HOST:PORT or ray://HOST:10001",
        )
        action.add_argument(
            "--nodes",
            type=node_count,
            default=None,
            metavar="N|all",
            help="how many alive nodes, a whole number ≥ 1 or all (default all)",
        )
        action.add_argument(
            "--no-bound",
            action="store_true",
            help="a model in object storage: skip the bucket's bound (plain GETs from one node "
            "alone, then from every node at once: two more reads of the model)",
        )
        action.add_argument("--json", action="store_true", help="one JSON object on stdout")
        action.add_argument("--csv", metavar="FILE", help="also write one row per node per run")
        add_overwrite_model_option(action, "--csv")
        add_storage_timeout_option(action)
    load.set_defaults(strategy=None)  # the model's own default: ranged for a bucket


def node_count(text: str) -> int | None:
    """An argparse type: ``all`` (None) or a whole number of nodes ≥ 1 (how many a cluster
    has is known only once connected: asking for more is the cluster's error)."""
    stripped = text.strip()
    if stripped == "all":
        return None
    if not (stripped.isascii() and stripped.isdigit()) or int(stripped) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 1 or all, not {text!r}")
    return int(stripped)


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.bench_ranks import mode_of, strategy_of
    from modelmon.cli.bench_ranks import wanted as ranks_wanted
    from modelmon.core import StrategyConfig, open_model
    from modelmon.core.configuration import parse_program, program_kind
    from modelmon.core.measuring import check_ranks
    from modelmon.core.options import parse_spec
    from modelmon.core.runs import check_loadable, default_strategy, get_strategy
    from modelmon.core.system import check_output
    from modelmon.fleet.bucket import bound_setting
    from modelmon.fleet.node import SameObjects
    from modelmon.fleet.report import Side

    # Every usage error before Ray: a wrong option is one line whether or not Ray is here.
    wanted = args.nodes
    ranked = ranks_wanted(args)
    if args.memory_limit is not None and not ranked:
        raise OptionsError(
            "--memory-limit is the cgroup of each node's --ranks N ranks: give --ranks "
            "(a fleet of one loader a node runs without a limit)"
        )
    sides = []
    if args.fleet_verb == "bench":
        for label, spec in (("A", args.a), ("B", args.b)):
            if program_kind(spec) is not None:
                if ranked:
                    strategy_of(parse_program(spec), f"--{label.lower()}")
                if args.cache != "cold":
                    raise OptionsError(
                        f"--{label.lower()} {spec}: a program's load is timed by the bytes "
                        "that arrive from storage: it runs from a cold cache only"
                    )
                sides.append(Side(label, parse_program(spec)))
                continue
            strategy, options = parse_spec(spec)
            config = StrategyConfig(strategy, options.with_(cache=args.cache))
            ranks = (args.ranks, mode_of(args, f"--{label.lower()}")) if ranked else None
            sides.append(Side(label, config, ranks))
    model = open_model(args.path)  # a bad path fails here, once, not on every node
    if args.fleet_verb == "load":
        strategy = args.strategy or default_strategy(model)
        ranks = (args.ranks, mode_of(args)) if ranked else None
        sides = [Side("load", StrategyConfig(strategy, load_options(vars(args))), ranks)]
    rounds = 1 if args.fleet_verb == "load" else args.n
    for side in sides:  # a strategy that cannot load it fails here, not on every node
        if isinstance(side.config, StrategyConfig):
            strategy = side.config.strategy
            check_loadable(get_strategy(strategy), model, side.config.options)
            if side.ranks is not None:
                try:
                    check_ranks(model, strategy, *side.ranks, side.config.options)
                except OptionsError as exc:
                    raise OptionsError(f"[{side.label}] {side.spec}: {exc}") from None
    same = SameObjects.of(model)  # each node reads these objects, or says why not
    bound = None if same is None or args.no_bound else bound_setting(s.config for s in sides)
    csv_output: Output | None = None
    if args.csv is not None:  # refused before the cluster is asked for anything
        csv_output = check_output(
            args.csv,
            model.paths,
            OptionsError,
            replace_models=args.overwrite_model,
            override=OVERWRITE_MODEL,
        )
        if csv_output.is_stdout and args.json:
            raise OptionsError("--csv - and --json both write standard output; choose one")
    try:
        import ray  # noqa: F401  (only to say, in one line, how to get it)
    except ImportError:
        from modelmon.fleet import INSTALL_HINT

        return fail(INSTALL_HINT, ExitCode.USAGE)
    from modelmon.core.errors import ModelmonError
    from modelmon.core.system import write_or_keep
    from modelmon.fleet.cluster import Connection, run_fleet
    from modelmon.fleet.node import NodeRun
    from modelmon.fleet.report import render_fleet

    chatty = sys.stderr.isatty() and not args.json

    def on_round(runs: list[NodeRun]) -> None:
        if chatty and runs:
            ok = [r for r in runs if r.status == "ok"]
            total = sum(r.bytes for r in ok)
            print(
                f"round {runs[0].round + 1} ({runs[0].side}): {len(ok)}/{len(runs)} nodes ok, "
                f"{total / 1e6:.0f} MB",
                file=sys.stderr,
            )

    with Connection(args.address):
        result = run_fleet(
            args.fleet_verb,
            args.path if same is not None else model.path,  # a URL as given: each node's own
            sides,
            rounds,
            wanted,
            on_round,
            same=same,
            storage_timeout_s=args.storage_timeout,
            bound=bound,
            memory_limit=args.memory_limit,
        )
    saved: Saved | None = None
    if csv_output is not None:
        saved = write_or_keep(
            csv_output.named,
            model.paths,
            lambda _name: result.csv_bytes(),
            ModelmonError,
            "fleet.csv",
            replace_models=args.overwrite_model,
            override=OVERWRITE_MODEL,
        )
    text = sys.stderr if csv_output is not None and csv_output.is_stdout else sys.stdout
    if args.json:
        emit_json(result.to_dict())
    else:
        print(render_fleet(result), file=text)
    code = ExitCode.OK
    if saved is not None and saved.failure is not None:
        kept = f"the rows are kept in {saved.where}" if saved.where else "they follow the report"
        code = fail(f"{saved.failure}; {kept}", ExitCode.NOT_SAVED)
        if saved.where is None:  # nowhere could keep them: they are not lost
            text.write(result.csv_bytes().decode())
    if result.status != "ok":  # the node whose failure ended the run, not one it stopped
        bad = min(result.runs, key=lambda r: (r.status != "failed", r.withdrew, r.status == "ok"))
        return fail(f"node {bad.node_id[:12]} ({bad.host}): {bad.error}", ExitCode.LOAD_FAILED)
    return code
