"""``modelmon recommend``: measure, pick, explain, and write the config file.

The config goes to ``-o FILE`` (``-o -``: standard output, the explanation then on stderr),
else to ``modelmon.toml`` in the current folder, or the first free ``modelmon-N.toml`` when
that exists: a measurement is never thrown away, and no file of the user's is replaced
unasked. Where it goes is checked before measuring (``system.outputs``); a save that fails
after the measurement keeps the config beside the target or in modelmon's state folder, says
where, and exits NOT_SAVED.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from modelmon.cli.common import ExitCode, add_path, add_verb, cancel_on_interrupt, emit_json, fail
from modelmon.cli.flags import (
    OVERWRITE_MODEL,
    add_overwrite_model_option,
    memory_limit,
    number_in,
    whole_in,
)
from modelmon.core.limits import (
    DEFAULT_BUDGET_S,
    EVIDENCE_OVERRUN,
    EVIDENCE_RUNS,
    LOADER_MAX_ROUNDS,
    LOADER_MEDIAN_ERROR,
    MAX_BUDGET_S,
    MAX_SEARCH_WORKERS,
    MIN_BUDGET_S,
    MIN_MEMORY_LIMIT,
    SEARCH_WIDTH,
    STORAGE_REST_S,
    range_text,
)
from modelmon.core.options import MiB

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs
    from modelmon.core.output import Answer
    from modelmon.core.system import Output

VERB = "recommend"
EXAMPLES = """\
  modelmon recommend model.safetensors -o modelmon.toml
  modelmon recommend model.gguf --budget 600 --memory-limit 16GiB -o modelmon.toml
  modelmon recommend hf:org/name --json > recommendation.json
  modelmon recommend model.gguf --engine llamacpp               your llama-cpp-python, measured
  modelmon recommend ./llama --loader "cmd: python serve.py --model {path}"
  modelmon recommend ./llama --server "cmd: vllm serve {path}" --variant "--dtype float16"
  modelmon load model.safetensors --config modelmon.toml    apply what it wrote
"""
WRAP = 100  # the explanation's sentences are wrapped to this width, under "Why:"
DESCRIPTION_CHARS = 40  # a longer step is logged above the bar, not squeezed into it
DEFAULT_NAME = "modelmon.toml"
BUDGET_HELP = (
    f"how long the whole command may take, from its start to its answer: "
    f"{range_text(MIN_BUDGET_S, MAX_BUDGET_S)} s (default {DEFAULT_BUDGET_S:g}). Every run is "
    "planned to end within it, but the storage's ceilings, a first complete load and the "
    "baseline's (the library's own read, a plain download of a bucket: the answer's gain is "
    "against it) always run: where the budget cannot hold them, the progress says so before "
    "the search starts; the pick's runs toward its evidence may go up to "
    f"{EVIDENCE_OVERRUN * 100:.0f}%% over"  # argparse expands %: %% is one
    f". With --loader/--engine, {EVIDENCE_RUNS} cold rounds of your loader, its best change "
    "and modelmon's best always run: where they need more than is left, the progress says "
    "how much more, up front"
)


class GivenBudget(argparse.Action):
    """--budget, remembering that it was given (a server's search has a default of its own)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.budget_given = True


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(
        verbs,
        VERB,
        "measure strategies within a budget, pick the best, explain it, write a config",
        EXAMPLES,
    )
    add_path(parser)
    parser.add_argument(
        "-o",
        "--output",
        help="write the config here (TOML), atomically; - for standard output "
        "(default: modelmon.toml in this folder, or modelmon-2.toml … when it exists)",
    )
    parser.add_argument(
        "--budget",
        type=number_in(MIN_BUDGET_S, MAX_BUDGET_S, "s"),
        default=DEFAULT_BUDGET_S,
        action=GivenBudget,
        metavar="SECONDS",
        help=BUDGET_HELP,
    )
    parser.add_argument(
        "--memory-limit",
        type=memory_limit,
        metavar="SIZE",
        help="RAM the loaded model may take, e.g. 16Gi, 2GiB, from "
        f"{MIN_MEMORY_LIMIT // MiB} MiB to this machine's RAM (default: what is available "
        "now); weights larger than it are answered that they do not fit, and what would, "
        "before anything is measured (a load that keeps nothing is no answer). Every "
        "candidate runs "
        "in a memory cgroup of this size, as in a container: one OOM-killed or re-reading "
        "its model there (thrashing) is out",
    )
    parser.add_argument(
        "--workers",
        type=whole_in(1, MAX_SEARCH_WORKERS),
        help=f"parallelism to try, {range_text(1, MAX_SEARCH_WORKERS)} (the search also "
        f"tries {SEARCH_WIDTH}× it; default max(4, CPUs))",
    )
    parser.add_argument(
        "--loader",
        metavar="SPEC",
        help='your loader as you run it: "cmd: COMMAND ARGS" ({path} is the model; quoted as '
        'in a shell, never run through a shell) or "engine: NAME knob=value": measured as it '
        "is, with its engine's settings, and against modelmon's best, in the same cold rounds "
        f"(the finalists run to {EVIDENCE_RUNS} cold runs each where the budget, and "
        f"{EVIDENCE_OVERRUN * 100:.0f}%% past it, holds them, else the answer says it is not "
        "certain; "
        f"and up to {LOADER_MAX_ROUNDS} while one's median is known less finely than "
        f"±{LOADER_MEDIAN_ERROR * 100:.0f}%% (its standard error); on network storage each run "
        f"starts {STORAGE_REST_S:g} s after the last ended, so that none is timed with help the "
        "last left in the filesystem's client)",
    )
    parser.add_argument(
        "--engine",
        metavar="NAME",
        help="the engine you load with (modelmon engines lists them: safetensors, "
        "transformers, diffusers, llamacpp, runai, vllm, sglang), optionally with your "
        'settings ("transformers disable_mmap=true"); alone, it is your loader',
    )
    parser.add_argument(
        "--ranks",
        type=whole_in(1, 256),
        default=1,
        metavar="N",
        help="N ranks on this node (a tensor-parallel server): measure the ways they may get "
        "their weights (whole, slice, one-reader; each keeps every byte) under "
        "--memory-limit for the whole node, pick the fastest that holds, and say the "
        "smallest limit it holds at",
    )
    add_overwrite_model_option(parser, "-o")
    parser.add_argument("--json", action="store_true", help="print the config document as JSON")
    server = parser.add_argument_group(
        "a server",
        "recommend for a serving program by its time to ready: the command as it is and "
        "with each change that may make it ready sooner, each start from a cold page cache "
        "and fresh compile caches (a new pod's), stopped at ready; the answer is the command "
        "with the change, to paste",
    )
    server.add_argument(
        "--server",
        metavar="SPEC",
        help='your server as you run it: "cmd: COMMAND ARGS" ({path} is the model), e.g. '
        '"cmd: vllm serve {path} --port 8000". Its engine\'s loading settings (vLLM, '
        "SGLang, llama.cpp's server) and its caches (a kept compile cache, a pre-warmed "
        "page cache) are measured as variants; default budget 1800 s",
    )
    server.add_argument(
        "--variant",
        action="append",
        metavar="CHANGE",
        help='a change of yours to measure, repeatable: flags ("--load-format '
        'runai_streamer", "--dtype=float16": each replaces the same flag of the command, '
        'or is added) or NAME=VALUE words first ("OMP_NUM_THREADS=2")',
    )
    from modelmon.cli.flags import add_ready_options

    add_ready_options(parser)
    from modelmon.cli.flags import add_storage_timeout_option

    add_storage_timeout_option(parser)
    from modelmon.cli.priming import add_prime_option

    add_prime_option(parser)


def default_output(inputs: tuple[str, ...]) -> Output:
    """``modelmon.toml`` here, else the first free ``modelmon-N.toml``, through the guard."""
    from modelmon.core.errors import ModelmonError, OptionsError
    from modelmon.core.system import check_output, free_name

    try:
        return check_output(free_name(Path("."), DEFAULT_NAME), inputs, OptionsError)
    except ModelmonError as exc:
        hint = "name the config file with -o FILE, or -o - to print it"
        raise OptionsError(f"{exc} ({hint})") from None


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.priming import apply_prime_option
    from modelmon.cli.progress import progress_bars
    from modelmon.core import open_model, recommend
    from modelmon.core.errors import (
        BUDGET_NOT_KEPT,
        ConfigError,
        LoadError,
        ModelmonError,
        OptionsError,
    )
    from modelmon.core.model import require_tensor_bytes
    from modelmon.core.output import (
        as_told,
        recommendation_document,
        render_config,
        search_memory_text,
        search_time_text,
    )
    from modelmon.core.output import recommendation_answer as answer
    from modelmon.core.system import check_output, kept_answer_path, write_or_keep

    apply_prime_option(args)
    if args.server is not None:
        from modelmon.cli.recommend_server import run as run_server

        return run_server(args)
    if args.variant:
        raise OptionsError("--variant is a change of a server's command: give --server too")
    model = open_model(args.path)
    require_tensor_bytes(model)
    with_loader = args.loader is not None or args.engine is not None
    if with_loader:
        from modelmon.core.configuration import named_path
        from modelmon.core.output import loader_config

        # Refused before any measuring.
        loader_config(args.loader, args.engine, model, named_path(args.path, model.path))
    from modelmon.cli.flags import say_memory_limit

    limit = say_memory_limit(args.memory_limit) if args.memory_limit is not None else None
    if args.ranks > 1:
        from modelmon.cli.recommend_ranks import run as run_ranks

        return run_ranks(args, limit)
    # Refused before minutes of measuring, not after.
    if args.output is not None:
        output = check_output(
            args.output,
            model.paths,
            OptionsError,
            replace_models=args.overwrite_model,
            override=OVERWRITE_MODEL,
        )
    else:
        output = default_output(model.paths)
    if output.is_stdout and args.json:
        raise OptionsError("-o - and --json both write standard output; choose one")
    cancel = threading.Event()
    with progress_bars() as bars, cancel_on_interrupt(cancel.set):
        task = bars.budget_task("recommending", args.budget)

        def progress(text: str) -> None:
            if text.startswith(BUDGET_NOT_KEPT):  # a warning's line says it, terminal or not
                return
            bars.log(f"  {text}")
            bars.describe(task, text if len(text) <= DESCRIPTION_CHARS else "recommending")

        try:
            advice, loader_note = None, ""
            if with_loader:
                from modelmon.core import recommend_with_loader
                from modelmon.core.configuration import named_path

                advised = recommend_with_loader(
                    model,
                    args.budget,
                    loader=args.loader,
                    engine=args.engine,
                    path=named_path(args.path, model.path),
                    memory_limit=limit,
                    workers=args.workers,
                    progress=progress,
                    cancel=cancel,
                    started=getattr(args, "started", None),
                )
                rec, advice, loader_note = advised.recommendation, advised.advice, advised.note
            else:
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
    rec = as_told(rec, advice)  # the one record the answer, the file and the memory line tell
    if args.output is None:
        # Picked again: another run may have taken the name while this one measured.
        with contextlib.suppress(ModelmonError):
            output = default_output(model.paths)
    documents: dict[str, dict[str, Any]] = {}

    def config_bytes(name: str) -> bytes:
        documents[name] = recommendation_document(rec, name, limit, advice, loader_note)
        return render_config(documents[name]).encode()

    saved = write_or_keep(
        output.named,
        model.paths,
        config_bytes,
        ConfigError,
        DEFAULT_NAME,
        replace_models=args.overwrite_model,
        override=OVERWRITE_MODEL,
        # Into a pipe or a terminal, the config names a copy kept of it: a file that exists.
        stdout_copy=kept_answer_path(os.path.basename(args.path.rstrip("/")) or "model"),
    )
    document = documents[saved.named]
    code = ExitCode.OK
    if saved.failure is not None:
        code = fail(f"{saved.failure}; {kept_line(saved.where, output)}", ExitCode.NOT_SAVED)
    if args.json:
        emit_json(document)
        return code
    text = sys.stderr if output.is_stdout else sys.stdout  # stdout carries the config then
    print_answer(document, answer(rec, saved.named, advice), text)
    print(f"memory: {search_memory_text(rec)}", file=text)
    print(f"time: {search_time_text(rec)}", file=text)
    if saved.where is None:  # nowhere to keep it: the measurement is not lost
        print(f"\n# {saved.name}, as it would have been written:", file=text)
        print(render_config(document), end="", file=text)
    elif saved.failure is None and not output.is_stdout:
        print(f"\nwritten to {saved.where}", file=text)
    elif saved.failure is None and saved.copy is not None:
        print(
            f"\nwritten to standard output; a copy, the file the lines to paste name, is kept "
            f"in {saved.copy}",
            file=text,
        )
    return code


def print_answer(document: dict[str, Any], found: Answer, text: TextIO) -> None:
    """The answer first (what to do, its gain, the line to paste), then why, then the other
    loaders' lines with what stands behind each: one figure per configuration throughout."""
    for line in found.lines():
        print(line, file=text)
    if found.paste is not None:
        print(f"  ({found.paste.evidence()})", file=text)
    print("\nWhy:", file=text)
    for sentence in document["explanation"]:
        for part in textwrap.wrap(sentence, WRAP, subsequent_indent="    "):
            print(f"  {part}", file=text)
    print("\nThe same for other loaders (the config's [apply]):", file=text)
    evidence = document.get("apply_evidence", {})
    for tool, snippet in document["apply"].items():
        print(f"  {tool:<19} {snippet}", file=text)
        if tool in evidence:
            print(f"  {'':<19} # {evidence[tool]}", file=text)
    for why in document.get("apply_left_out", {}).values():  # a loader with no line, and why
        for part in textwrap.wrap(why, WRAP, subsequent_indent="    "):
            print(f"  {part}", file=text)


def kept_line(where: str | None, output: Output) -> str:
    if where is None:
        stream = "standard error" if output.is_stdout else "standard output"
        return f"nowhere else could keep the config either: it follows on {stream}"
    return f"the config is kept in {where}"
