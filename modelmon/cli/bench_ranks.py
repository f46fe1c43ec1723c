"""``modelmon bench PATH --a SPEC --b SPEC --ranks N [--a-ranks-mode M] [--b-ranks-mode M]``:
an A/B of N ranks a side on this node (``modelmon.core.run_ranks_ab``), e.g. every rank
reading the whole model (``whole``, vLLM's default under tensor parallelism) against one
shared copy (``one-reader``). The figure compared is the slowest rank's time; beside it, the
node's memory per side.

Not a verb: ``bench``'s options and run when it is asked for ranks. The ranks' own modes are
flags, not words of a spec: a spec is one loader's configuration (``load``'s flags), and the
mode is how N of them share the node.
"""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, cancel_on_interrupt, emit_json, fail
from modelmon.cli.flags import whole_in
from modelmon.cli.ranks import MODES
from modelmon.core.errors import OptionsError
from modelmon.core.options import MAX_PARALLEL

if TYPE_CHECKING:
    from modelmon.core import Configuration, RanksResult, StrategyConfig


def add_options(
    parser: argparse.ArgumentParser, where: str = "on this node", sides: bool = True
) -> None:
    """The options for N ranks (``where``) a side, or of a ``fleet load`` without ``sides``."""
    parser.add_argument(
        "--ranks",
        type=whole_in(1, MAX_PARALLEL),
        default=None,
        metavar="N",
        help=f"run {'each side' if sides else 'the load'} as N ranks {where} from one barrier "
        f"(as a tensor-parallel server's, 1 to {MAX_PARALLEL}), the spec's workers per rank "
        "(a one-reader's: its reader's): the slowest rank's time counts, the node's memory "
        "is shown beside it. modelmon's strategies only",
    )
    modes = ", ".join(MODES)
    parser.add_argument(
        "--ranks-mode",
        choices=MODES,
        default=None,
        help=f"with --ranks: how the ranks get their weights ({modes}; see load --help)"
        + (", unless a side's own is given" if sides else "")
        + "; default whole",
    )
    for side in ("a", "b") if sides else ():
        parser.add_argument(
            f"--{side}-ranks-mode",
            choices=MODES,
            default=None,
            metavar="MODE",
            help=f"with --ranks: side {side.upper()}'s mode ({modes})",
        )


def wanted(args: argparse.Namespace) -> bool:
    """Whether the A/B runs ranks; a mode without ``--ranks`` is refused in one line."""
    given = [
        flag
        for flag, value in (
            ("--ranks-mode", args.ranks_mode),
            ("--a-ranks-mode", getattr(args, "a_ranks_mode", None)),
            ("--b-ranks-mode", getattr(args, "b_ranks_mode", None)),
        )
        if value is not None
    ]
    if args.ranks is None and given:
        raise OptionsError(f"{given[0]} is how --ranks N ranks get their weights: give --ranks")
    return args.ranks is not None


def mode_of(args: argparse.Namespace, flag: str = "") -> str:
    """The ranks mode of the side ``flag`` names (``--a``, ``--b``; none: the only one)."""
    own = getattr(args, f"{flag.lstrip('-')}_ranks_mode", None) if flag else None
    return str(own or args.ranks_mode or "whole")


def strategy_of(config: Configuration, flag: str) -> StrategyConfig:
    """``config``, a strategy's; a program's refused in one line (``flag`` is its side's)."""
    from modelmon.core import StrategyConfig

    if not isinstance(config, StrategyConfig):
        raise OptionsError(
            f"{flag} {config.spec}: --ranks runs modelmon's strategies as N ranks; a program "
            "starts its own processes: leave --ranks out, or watch its ranks with modelmon watch"
        )
    return config


def run(args: argparse.Namespace, a: Configuration, b: Configuration) -> int:
    """The ranks A/B of the specs ``a`` and ``b`` (strategies: a program runs its own
    processes, which modelmon does not divide into ranks)."""
    from modelmon.cli.flags import say_memory_limit
    from modelmon.cli.progress import progress_bars
    from modelmon.core import RanksSide, open_model, run_ranks_ab
    from modelmon.core.measuring import ABFailed
    from modelmon.core.model import require_tensor_bytes
    from modelmon.core.output import ranks_run_line, render_ranks_ab

    sides = [
        RanksSide(mode_of(args, flag), strategy_of(config, flag))  # type: ignore[arg-type]
        for flag, config in (("--a", a), ("--b", b))
    ]
    model = open_model(args.path)
    require_tensor_bytes(model)
    limit = say_memory_limit(args.memory_limit)
    cancel = threading.Event()
    with progress_bars() as bars, cancel_on_interrupt(cancel.set):
        task = bars.runs_task(f"A/B of {args.ranks} ranks × {args.n}", 2 * args.n)

        def on_result(side: str, pair: int, result: RanksResult) -> None:
            bars.advance(task, 1)
            if result.status != "ok":  # why is the line that ends the A/B
                bars.log(f"{side} run {pair + 1}: {result.status}")
                return
            state = result.cache
            said = (
                f"{args.cache} ✓"
                if (state.cold if args.cache == "cold" else state.warm)
                else f"{args.cache}, not verified"
                if state.unseen
                else f"NOT {args.cache}: {state.resident_before:.1%} resident"
            )
            bars.log(f"{side} run {pair + 1}: {ranks_run_line(result, said)}")

        try:
            ab = run_ranks_ab(
                model,
                sides[0],
                sides[1],
                args.ranks,
                args.n,
                args.cache,
                on_result=on_result,
                cancel=cancel,
                time_limit_s=args.time_limit,
                memory_limit=limit,
            )
        except ABFailed as exc:
            if cancel.is_set():  # the user's Ctrl+C; a run that failed is not
                return fail("cancelled", ExitCode.CANCELLED)
            return fail(f"A/B stopped: {exc}", ExitCode.LOAD_FAILED)
    if args.json:
        emit_json(ab.to_dict())
    else:
        print(render_ranks_ab(ab))
    return ExitCode.OK
