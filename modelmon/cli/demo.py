"""``modelmon demo``: write the demo models (once) and print their paths."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, add_verb, emit_json

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "demo"
EXAMPLES = """\
  modelmon demo
  modelmon demo --dir /tmp/modelmon-demo --json
  modelmon load "$(modelmon demo --json | jq -r .safetensors)"
"""


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "write the demo models (once) and print their paths", EXAMPLES)
    parser.add_argument("--dir", help="where to write them (default: the user cache directory)")
    parser.add_argument("--json", action="store_true", help="one JSON object: kind → path")


def run(args: argparse.Namespace) -> int:
    from modelmon.core.model import demo_models

    quiet = args.json or not sys.stderr.isatty()
    paths = demo_models(
        Path(args.dir) if args.dir else None,
        None if quiet else lambda text: print(text, file=sys.stderr),
    )
    if args.json:
        emit_json({kind: str(path) for kind, path in paths.items()})
    else:
        for kind, path in paths.items():
            print(f"{kind:<12} {path}")
    return ExitCode.OK
