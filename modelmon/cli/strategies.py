"""``modelmon strategies``: the load strategies, one line each."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, add_verb, emit_json

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "strategies"
EXAMPLES = """\
  modelmon strategies
  modelmon strategies --json
  modelmon load model.safetensors --strategy mmap-view      use one
"""


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "list the load strategies", EXAMPLES)
    parser.add_argument(
        "--json", action="store_true", help="one JSON list: name, summary, options each uses"
    )


def run(args: argparse.Namespace) -> int:
    from modelmon.core import STRATEGIES
    from modelmon.core.runs import get_strategy

    get_strategy("sequential")  # imports and registers them all
    if args.json:
        emit_json(
            [
                {"name": n, "summary": c.summary, "options": sorted(c.uses)}
                for n, c in STRATEGIES.items()
            ]
        )
    else:
        width = max(map(len, STRATEGIES))
        for name, cls in STRATEGIES.items():
            print(f"{name:<{width}}  {cls.summary}")
    return ExitCode.OK
