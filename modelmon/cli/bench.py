"""``modelmon bench``: an A/B of two configurations from the command line."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING, NoReturn

from modelmon.cli.common import (
    ExitCode,
    add_path,
    add_verb,
    cancel_on_interrupt,
    emit_json,
    fail,
    note,
)
from modelmon.cli.flags import (
    PAIRS,
    add_load_options,
    ignored_options,
    load_options,
    number_in,
)
from modelmon.core.errors import OptionsError
from modelmon.core.limits import MAX_AB_PAIRS, MAX_BUDGET_S
from modelmon.core.options import LoadOptions, option_text, parse_spec

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs
    from modelmon.core import ABResult, Configuration, LoadResult, ProgramResult, WatchResult
    from modelmon.core.runs import RunOutcome

VERB = "bench"
DEFAULT_RUN_LIMIT_S = 1800.0  # half an hour: a slow disk's tens of GB, not a server's forever
MIN_RUN_LIMIT_S = 1.0
EXAMPLES = """\
  modelmon bench model.safetensors --a "mmap-shared-fd workers=4" --b "sequential workers=4" -n 3
  modelmon bench model.gguf --a "mmap -w 4" --b "sequential -w 4 --chunk-mib 16" --json
  modelmon bench model.safetensors --a sequential --b "sequential readahead=4096" --cache warm
  modelmon bench model.gguf --a "engine: llamacpp" --b "engine: llamacpp load_mode=none"
  modelmon bench ./my-model --a "cmd: python serve.py --model {path}" --b "sequential workers=4"
  modelmon bench ./llama --a "cmd: vllm serve {path}" --ready-url http://127.0.0.1:8000/health \\
      --b "cmd: vllm serve {path} --load-format runai_streamer"       two servers, to ready
  modelmon bench model.gguf --a mmap --b "sequential --discard" --memory-limit 8Gi
  modelmon bench model.safetensors --a sequential --b sequential --ranks 4 --b-ranks-mode one-reader
"""
SPEC_HELP = (
    "configuration {side}, e.g. {example} (name=value, or load's flags: {flags}); or a program: "
    '"cmd: COMMAND ARGS" ({{path}} is the model) or "engine: NAME knob=value" '
    "(modelmon engines lists them), run watched, from a cold cache. A program seen ready "
    "(a server: see the ready options) is stopped there and timed to ready"
)


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "A/B: two configurations, alternating, n pairs", EXAMPLES)
    add_path(parser)
    parser.add_argument(
        "--a",
        required=True,
        metavar="SPEC",
        help=SPEC_HELP.format(
            side="A", example='"mmap-shared-fd workers=4"', flags='"mmap-shared-fd --workers 4"'
        ),
    )
    parser.add_argument(
        "--b",
        required=True,
        metavar="SPEC",
        help=SPEC_HELP.format(
            side="B",
            example='"sequential workers=4 chunk=16MiB"',
            flags='"sequential -w 4 --chunk-mib 16"',
        ),
    )
    parser.add_argument(
        "-n", type=PAIRS, default=3, help=f"pairs to run, 1 to {MAX_AB_PAIRS} (default 3)"
    )
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold")
    parser.add_argument(
        "--time-limit",
        type=number_in(MIN_RUN_LIMIT_S, MAX_BUDGET_S, "s"),
        default=DEFAULT_RUN_LIMIT_S,
        metavar="SECONDS",
        help="stop a run still going this long after its start, and the A/B with it "
        f"(default {DEFAULT_RUN_LIMIT_S:g}). A program that keeps running once its whole "
        "model has arrived (a server that loaded) is ended when nothing more has arrived for "
        "a few seconds, and timed as any other",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    from modelmon.cli.flags import add_storage_timeout_option

    add_storage_timeout_option(parser)
    from modelmon.cli.flags import add_memory_limit_option

    add_memory_limit_option(parser, "every run (its workers, or its program)")
    from modelmon.cli.priming import add_prime_option

    add_prime_option(parser)
    from modelmon.cli.bench_ranks import add_options as add_ranks_options

    add_ranks_options(parser)
    from modelmon.cli.flags import add_ready_options

    add_ready_options(parser)


class _SpecParser(argparse.ArgumentParser):
    """Reports a bad flag as an ``OptionsError`` (exit code 2, one line), not by exiting.
    Its prog is the flag's place (``bench --b``): the line is already "modelmon: ..."."""

    def error(self, message: str) -> NoReturn:
        raise OptionsError(f"{self.prog}: {message}")


def parse_config_spec(spec: str, flag: str) -> Configuration:
    """A ``bench`` configuration: ``"sequential workers=4"`` (``name=value``, the syntax of
    ``core.options.parse_spec``), ``"sequential --workers 4"`` (``load``'s flags), or both;
    or a program (``cmd: ...``, ``engine: ...``)."""
    from modelmon.core import StrategyConfig
    from modelmon.core.configuration import parse_program, program_kind

    if program_kind(spec) is not None:
        try:
            return parse_program(spec)
        except OptionsError as exc:
            raise OptionsError(f"{VERB} {flag}: {exc}") from None
    parser = _SpecParser(prog=f"{VERB} {flag}", add_help=False)
    # Only the flags the spec names: the rest keep parse_spec's defaults, so both syntaxes
    # give the same options (load's defaults differ: it starts cold).
    for action in add_load_options(parser):
        action.default = argparse.SUPPRESS
    flags, words = parser.parse_known_args(spec.split())
    unknown = next((word for word in words if word.startswith("-")), None)
    if unknown is not None:
        raise OptionsError(f"{parser.prog}: unknown option {unknown!r} (see modelmon load --help)")
    given = vars(flags)
    if "strategy" in given:
        words.insert(0, given.pop("strategy"))
    strategy, options = parse_spec(" ".join(words))
    return StrategyConfig(strategy, load_options(given, options))


def unused_by_bench(config: Configuration, cache: str) -> list[str]:
    """A spec's options that do nothing in this A/B: those the strategy does not use, and its
    own ``cache=`` (every run starts from bench's ``--cache`` state). A program has none."""
    from modelmon.core import StrategyConfig

    if not isinstance(config, StrategyConfig):
        return []
    options = config.options
    unused = ignored_options(config.strategy, options)
    if options.cache != LoadOptions().cache and options.cache != cache:
        unused.append(option_text("cache", options.cache))
    return unused


def render_ab(
    ab: ABResult,
    watched: dict[str, list[WatchResult]] | None = None,
    configs: tuple[Configuration, Configuration] | None = None,
) -> str:
    from modelmon.core.output import pairs_lines, ram_text, rate_span_text, rate_text

    if ab.by == "ready":  # servers: compared by their time to ready
        from modelmon.core.output import render_server_ab

        lines = render_server_ab(ab, *(configs or (None, None)))
        for side, watches in (watched or {}).items():
            lines += watched_lines(side, watches)
        return "\n".join(lines)

    rows = [
        (
            "side",
            "configuration",
            "median",
            "min–max",
            "median s",
            "peak RSS: workers / all",
        )
    ]
    for side, summary in (("A", ab.a), ("B", ab.b)):
        tree = summary.process_tree_peak_rss
        rows.append(
            (
                side,
                summary.spec,
                rate_text(summary.median_mbps),
                # One run has no range: its own figure is the median's.
                rate_span_text(summary.min_mbps, summary.max_mbps) if summary.runs > 1 else "–",
                f"{summary.median_seconds:.3f}",
                f"{ram_text(summary.peak_rss)} / " + (ram_text(tree) if tree is not None else "–"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines += pairs_lines(ab.ratios, ab.verdict, min(ab.a.runs, ab.b.runs))
    lines += shared_device_lines(ab)
    for side, watches in (watched or {}).items():
        lines += watched_lines(side, watches)
    return "\n".join(lines)


def watched_lines(side: str, watches: list[WatchResult]) -> list[str]:
    """What the watch saw of a program side: its loader, and each finding once."""
    if not watches:
        return []
    last = watches[-1]
    lines = [f"{side} watched: {last.loader.label}; " + _use(last)]
    said: set[str] = set()
    for watch in watches:
        for finding in watch.findings:
            if finding.code not in said:
                said.add(finding.code)
                lines.append(f"  {finding.code}: {finding.text} Fix: {finding.fix}")
    return lines


def _use(watch: WatchResult) -> str:
    connections = watch.connections
    if connections is not None:  # a model in a bucket: seen on its sockets
        return (
            f"streamed the model over {connections.held_text(endpoint=False)} "
            f"({connections.received_bytes / 1e6:,.0f} MB received), "
            f"{watch.cpu_seconds:.1f} s of CPU"
        )
    mapped = any(f.mapped for f in watch.files)
    opened = any(f.opened for f in watch.files)
    how = (
        "mapped the model"
        if mapped
        else "read the model"
        if opened
        else "was not seen with the model open"
    )
    read = watch.read_chars / 1e6
    return f"{how}, {watch.major_faults:,} major faults, {read:,.0f} MB through read calls"


def shared_device_lines(ab: ABResult) -> list[str]:
    """A line naming the runs that shared the device with other modelmon runs, if any."""
    counts = {"A": 0, "B": 0}
    shared, others = [], []
    for side, result in ab.runs:
        counts[side] += 1
        if result.overlapped_by:
            shared.append(f"{side} run {counts[side]}")
            others.append(result.overlapped_by)
    if not shared:
        return []
    return [
        f"note: {', '.join(shared)} shared the device with other modelmon runs "
        f"({'; '.join(dict.fromkeys(others))}): the verdict rests on them too"
    ]


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.bench_ranks import run as run_ranks
    from modelmon.cli.bench_ranks import wanted as ranks_wanted
    from modelmon.cli.flags import ready_options, say_memory_limit
    from modelmon.cli.priming import apply_prime_option
    from modelmon.cli.progress import progress_bars
    from modelmon.core import ProgramResult, open_model, run_ab
    from modelmon.core.configuration import named_path
    from modelmon.core.measuring import ABFailed
    from modelmon.core.model import require_tensor_bytes
    from modelmon.core.output import rate_text
    from modelmon.core.runs import get_engine

    apply_prime_option(args)
    ready, ready_timeout = ready_options(args)
    a = parse_config_spec(args.a, "--a")
    b = parse_config_spec(args.b, "--b")
    ignored = {
        flag: unused_by_bench(config, args.cache) for flag, config in (("--a", a), ("--b", b))
    }
    said = "; ".join(f"{flag} {', '.join(names)}" for flag, names in ignored.items() if names)
    if said:
        note(f"ignored (not used by the strategy, or set by bench --cache): {said}")
    if ranks_wanted(args):
        return run_ranks(args, a, b)
    model = open_model(args.path)
    require_tensor_bytes(model)
    path = named_path(args.path, model.path)
    for flag, config in (("--a", a), ("--b", b)):  # before anything runs, as recommend does
        engine = getattr(config, "engine", None)
        why = get_engine(engine).cannot_load(model.format, path) if engine else None
        if why is not None:
            raise OptionsError(f"{flag} {config.spec}: {why}")
    limit = say_memory_limit(args.memory_limit)
    cancel = threading.Event()
    watched: dict[str, list[WatchResult]] = {}
    programs: dict[tuple[str, int], ProgramResult] = {}

    def on_outcome(side: str, pair: int, outcome: RunOutcome) -> None:
        if not isinstance(outcome, ProgramResult):
            return
        programs[side, pair] = outcome
        if outcome.watch is not None:
            watched.setdefault(side, []).append(outcome.watch)

    with progress_bars() as bars, cancel_on_interrupt(cancel.set):
        task = bars.runs_task(f"A/B × {args.n}", 2 * args.n)

        def on_result(side: str, pair: int, result: LoadResult) -> None:
            bars.advance(task, 1)
            if result.status != "ok":  # why is the line that ends the A/B
                bars.log(f"{side} run {pair + 1}: {result.status}")
                return
            state = (
                "cold ✓"
                if result.cache.cold
                else "warm ✓"
                if result.cache.warm
                else f"{args.cache}, not verified"
                if result.cache.unseen
                else (f"NOT {args.cache}: {result.cache.resident_before:.1%} resident")
            )
            limited = result.memory_limit
            within = f"; {limited.held_text()}" if limited is not None else ""
            bars.log(
                f"{side} run {pair + 1}: {rate_text(result.mbps)} in {result.seconds:.3f} s "
                f"({state}{within})"
            )

        try:
            ab = run_ab(
                model,
                a,
                b,
                n=args.n,
                cache=args.cache,
                on_result=on_result,
                cancel=cancel,
                on_outcome=on_outcome,
                path=path,
                on_warm=bars.log,
                time_limit_s=args.time_limit,
                memory_limit=limit,
                serving={"ready": ready, "ready_timeout_s": ready_timeout},
            )
        except ABFailed as exc:
            if cancel.is_set():  # the user's Ctrl+C; a run stopped at its time limit is not
                return fail("cancelled", ExitCode.CANCELLED)
            return fail(f"A/B stopped: {exc}", ExitCode.LOAD_FAILED)
    if args.json:
        document = ab.to_dict()
        pairs = {"A": 0, "B": 0}
        for run_dict in document["runs"]:
            side = run_dict["side"]
            outcome = programs.get((side, pairs[side]))
            pairs[side] += 1
            if outcome is not None and outcome.watch is not None:
                run_dict["watched"] = outcome.watch.to_dict()
        emit_json(document)
    else:
        print(render_ab(ab, watched, (a, b)))
    return ExitCode.OK
