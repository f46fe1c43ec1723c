"""``modelmon load --ranks N [--ranks-mode MODE]``: N ranks on this machine, from one barrier.

Not a verb: the options and the run of ``load`` when it is asked for more than one rank
(``modelmon.core.RanksRun``). The fleet of machines is ``modelmon fleet``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, cancel_on_interrupt, emit_json, fail, fail_on
from modelmon.cli.flags import whole_in
from modelmon.core.options import MAX_PARALLEL

# The ways N ranks of a tensor-parallel job get their weights (RANKS_MODES of the engine: the
# engine's names; written here so --help needs no engine import).
MODES = ("whole", "slice", "one-reader")

if TYPE_CHECKING:
    from modelmon.core import Model
    from modelmon.core.options import LoadOptions


def add_options(parser: argparse.ArgumentParser) -> None:
    """``load``'s options for several loaders on this node."""
    parser.add_argument(
        "--ranks",
        type=whole_in(1, MAX_PARALLEL),
        default=None,
        metavar="N",
        help="N loaders at once on this node, started together, each with its own --workers "
        f"(1 to {MAX_PARALLEL}); default: a --config's [ranks], else 1",
    )
    parser.add_argument(
        "--ranks-mode",
        choices=MODES,
        default=None,
        help="with --ranks: how they get their weights: whole (each reads every byte into "
        "its own memory and keeps its part, as engines that narrow each tensor do; the "
        "default), slice (each reads only its tensor-parallel part), one-reader (one "
        "process reads one shared copy, every rank maps it); default: a --config's [ranks]",
    )
    parser.add_argument(
        "--ranks-split",
        action="store_true",
        help="the same as --ranks-mode slice",
    )


def wanted(args: argparse.Namespace) -> bool:
    """Whether the load runs ranks; a mode without ``--ranks`` is refused in one line, as
    every verb refuses it."""
    from modelmon.core.errors import OptionsError

    if args.ranks_split and args.ranks_mode not in (None, "slice"):
        raise OptionsError(f"--ranks-split is --ranks-mode slice, not {args.ranks_mode}")
    mode = "--ranks-split" if args.ranks_split else "--ranks-mode" if args.ranks_mode else None
    if args.ranks is None and mode is not None:
        raise OptionsError(f"{mode} is how --ranks N ranks get their weights: give --ranks")
    return args.ranks is not None and args.ranks != 1


def from_config(args: argparse.Namespace, section: dict[str, object], config: str) -> list[str]:
    """The ranks of a config's ``[ranks]`` (``recommend --ranks``) applied where the flags
    leave them: its mode, and its rank count where none is given; a flag that contradicts
    it is said (it wins)."""
    said: list[str] = []
    mode, count = section.get("mode"), section.get("ranks")
    if not isinstance(mode, str) or not isinstance(count, int):
        return said
    given = "slice" if args.ranks_split else args.ranks_mode
    if given is not None and given != mode:
        said.append(f"--ranks-mode {given}, not {config}'s {mode} (measured for {count} ranks)")
    if args.ranks is not None and args.ranks != count:
        said.append(f"--ranks {args.ranks}: {config}'s {mode} was measured for {count} ranks")
    if args.ranks is None:
        args.ranks = count
    if given is None and args.ranks != 1:
        args.ranks_mode = mode
    held, limit = section.get("node_held_bytes"), getattr(args, "memory_limit", None)
    same = args.ranks == count and args.ranks_mode == mode
    if same and isinstance(held, int) and limit is not None and held > limit:
        from modelmon.core.errors import DoesNotFitError
        from modelmon.core.output import limit_text, ram_text

        holds = section.get("holds_at_bytes")
        at = f"; it holds at {ram_text(holds)}" if isinstance(holds, int) else ""
        raise DoesNotFitError(
            f"{config}'s {count} ranks {mode} held {ram_text(held)} that no reclaim frees "
            f"(measured): --memory-limit {limit_text(limit)} is below it{at}",
            held,
            limit,
        )
    return said


def mode_of(args: argparse.Namespace) -> str:
    if args.ranks_split and args.ranks_mode not in (None, "slice"):
        raise ValueError(f"--ranks-split is --ranks-mode slice, not {args.ranks_mode}")
    return "slice" if args.ranks_split else args.ranks_mode or "whole"


def run(args: argparse.Namespace, model: Model, strategy: str, options: LoadOptions) -> int:
    """``modelmon load PATH --ranks N [--ranks-mode MODE]``: every rank loads ``model`` with
    ``strategy`` and ``options`` (load's flags over its --config), under --memory-limit for
    the whole node."""
    from modelmon.cli.flags import say_memory_limit
    from modelmon.core import RanksRun
    from modelmon.core.output import render_ranks

    if getattr(args, "samples", False):
        return fail("--samples is for one loader; leave it out with --ranks", ExitCode.USAGE)
    try:
        mode = mode_of(args)
    except ValueError as exc:
        return fail(str(exc), ExitCode.USAGE)
    loaders = RanksRun(
        model,
        strategy,
        options,
        args.ranks,
        mode,  # type: ignore[arg-type]
        memory_limit=say_memory_limit(args.memory_limit),
    )
    with cancel_on_interrupt(loaders.cancel):
        result = loaders.run()
    if args.json:
        emit_json(result.to_dict())
    else:
        print(render_ranks(result))
    if result.status == "cancelled":
        return fail(f"cancelled ({result.error})", ExitCode.CANCELLED)
    if result.storage_error is not None:  # in the storage's words, as when opening
        return fail_on(result.storage_error)
    if result.status != "ok":
        return fail(f"load failed: {result.error}", ExitCode.LOAD_FAILED)
    return ExitCode.OK
