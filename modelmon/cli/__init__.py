"""The ``modelmon`` command: the desktop app by default, headless verbs for servers without a
display. ``main`` builds the parser from the verb modules and runs the verb asked for.

Import rule: the CLI imports the engine from ``modelmon.core``'s root only, whose names load on
first use. At module level it takes only the names the parser needs (errors, options and
their ranges, the reference syntax, strict JSON: modules without numpy); every other name,
and the app, is imported inside the verb's ``run``. So ``modelmon --version`` builds the
whole parser without loading numpy or Qt. No verb module imports another verb module or
this package.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator

from modelmon import __version__
from modelmon.cli import (
    bench,
    demo,
    engines,
    fleet,
    gui,
    inspect,
    load,
    models,
    recommend,
    strategies,
    watch,
)
from modelmon.cli.common import (
    EPILOG,
    EXPECTED_ERRORS,
    ExitCode,
    OneLineParser,
    exit_code_for,
    fail_on,
    silence_stdout,
    stdout_closed,
    stop_on_sigterm,
    warnings_as_lines,
)
from modelmon.cli.progress import is_terminal
from modelmon.core.errors import printable

# In the order ``--help`` lists them; ``gui`` is also what runs without a verb.
VERBS = (gui, inspect, load, bench, recommend, watch, models, strategies, engines, demo, fleet)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="modelmon",
        description="Why do your model weights load slowly? Measure it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"modelmon {__version__}")
    parser.add_argument(
        "--demo", action="store_true", help="open the app on the demo model (generated once)"
    )
    parser.add_argument(
        "--install-desktop",
        action="store_true",
        help="put modelmon in your desktop's application menu (launcher and icon, this user)",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        verb.add_parser(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``modelmon`` with ``argv`` (default: the command line); the exit code.

    A reader of stdout that goes away (``modelmon models | head -1``) ends the command
    quietly with ``ExitCode.PIPE_CLOSED``, as SIGPIPE ends other tools."""
    started = time.monotonic()  # a verb's budget (recommend --budget) counts from here
    try:
        try:
            return _main(argv, started)
        finally:
            # What is still buffered is written here, where a closed stdout is handled,
            # not by Python's flush at exit ("Exception ignored ... BrokenPipeError").
            sys.stdout.flush()
    except BrokenPipeError:
        if not stdout_closed():
            raise  # some other pipe: a bug, with its traceback
        silence_stdout()
        return int(ExitCode.PIPE_CLOSED)


def _main(argv: list[str] | None, started: float) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    by_name = {verb.VERB: verb for verb in VERBS}
    # `modelmon FILE` opens the app on FILE: route a bare path to the gui verb.
    if words and words[0] not in by_name and not words[0].startswith("-"):
        words = [gui.VERB, *words]
    args = build_parser().parse_args(words)
    args.started = started
    verb = by_name[args.verb or gui.VERB]
    if verb is not gui:  # the app stops on signals by its own path (gui.app.StopSignals)
        stop_on_sigterm()
    try:
        with warnings_as_lines(), storage_waits(args):
            return exit_code_for(int(verb.run(args)))
    except EXPECTED_ERRORS as error:
        return exit_code_for(int(fail_on(error)))


@contextlib.contextmanager
def storage_waits(args: argparse.Namespace) -> Iterator[None]:
    """The verb's reads of object storage: their timeout (``--storage-timeout``, for this
    process and the workers it starts), and on a terminal a line as soon as an endpoint
    keeps one waiting for an answer (piped, nothing is said until the end)."""
    with contextlib.ExitStack() as stack:
        seconds = getattr(args, "storage_timeout", None)
        if seconds is not None:
            from modelmon.core.storage import storage_timeout

            stack.enter_context(storage_timeout(seconds))
        if args.verb not in (None, gui.VERB) and is_terminal(sys.stderr):
            from modelmon.core.storage import notice_storage_waits

            stack.enter_context(notice_storage_waits(say_waiting))
        yield


def say_waiting(endpoint: str) -> None:
    print(f"modelmon: waiting for {printable(endpoint)} (no answer yet)…", file=sys.stderr)
