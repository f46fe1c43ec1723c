"""``modelmon recommend PATH --server "cmd: ..."``: the user's server as it is and with each
change that may make it ready sooner (their ``--variant``s, its engine's loading settings,
its caches), each start timed to ready, in rounds within the budget; the answer first (ready
in X s instead of Y s with ..., the line to paste), then the evidence.

Not a verb: ``recommend``'s run when it is given a server."""

from __future__ import annotations

import argparse
import sys
import threading

from modelmon.cli.common import ExitCode, cancel_on_interrupt, emit_json, fail

# A server's start takes a minute or more (vLLM's CPU build here: 70 s for a tiny model):
# three of the server as it is, a screening of its variants and three of the finalists.
DEFAULT_SERVER_BUDGET_S = 1800.0


def run(args: argparse.Namespace) -> int:
    from modelmon.cli.flags import ready_options
    from modelmon.core import open_model, recommend_server
    from modelmon.core.configuration import named_path, parse_program
    from modelmon.core.errors import BUDGET_NOT_KEPT, LoadError, OptionsError
    from modelmon.core.model import require_tensor_bytes
    from modelmon.core.output import render_server_answer

    for flag, given in (("--loader", args.loader), ("--engine", args.engine), ("-o", args.output)):
        if given is not None:
            raise OptionsError(
                f"--server and {flag}: a server's answer is its command with the change, to "
                "paste, not a config file or a loader's (--json for a document)"
            )
    if args.ranks > 1:
        raise OptionsError("--server watches its ranks itself: leave --ranks out")
    ready, ready_timeout = ready_options(args)
    server = parse_program(args.server)
    model = open_model(args.path)
    require_tensor_bytes(model)
    path = named_path(args.path, model.path)
    budget = args.budget if getattr(args, "budget_given", False) else DEFAULT_SERVER_BUDGET_S
    cancel = threading.Event()

    def progress(text: str) -> None:
        if not text.startswith(BUDGET_NOT_KEPT):
            print(f"modelmon: {text}", file=sys.stderr)

    with cancel_on_interrupt(cancel.set):
        try:
            advice = recommend_server(
                model,
                server,
                budget,
                changes=list(args.variant or []),
                path=path,
                ready=ready,
                ready_timeout_s=ready_timeout,
                progress=progress,
                cancel=cancel,
            )
        except LoadError:
            if cancel.is_set():
                return fail("cancelled", ExitCode.CANCELLED)
            raise
    if args.json:
        emit_json({**advice.to_dict(), "answer": render_server_answer(advice, path)})
    else:
        print("\n".join(render_server_answer(advice, path)))
    return ExitCode.OK
