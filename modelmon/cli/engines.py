"""``modelmon engines``: the engines modelmon runs as their users run them, with their knobs,
and whether each runs here (or which extra installs it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, add_verb, emit_json

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "engines"
EXAMPLES = """\
  modelmon engines
  modelmon engines --json
  modelmon bench model.gguf --a "engine: llamacpp" --b "engine: llamacpp load_mode=none"
  modelmon recommend ./my-model --engine transformers
"""


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(
        verbs, VERB, "list the engines (as configurations: engine: NAME knob=value)", EXAMPLES
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON list: name, formats, knobs, here"
    )


def run(args: argparse.Namespace) -> int:
    from modelmon.core import ENGINES

    rows = [
        {
            "name": engine.name,
            "label": engine.label,
            "formats": list(engine.formats),
            "knobs": {knob.name: list(knob.values) for knob in engine.knobs},
            "unavailable": engine.unavailable(),
            "extra": engine.extra,
        }
        for engine in ENGINES.values()
    ]
    if args.json:
        emit_json(rows)
        return ExitCode.OK
    for engine, row in zip(ENGINES.values(), rows, strict=True):
        here = "runs here" if row["unavailable"] is None else row["unavailable"]
        print(f"{engine.name}: {engine.label} ({', '.join(engine.formats)}); {here}")
        for knob in engine.knobs:
            values = "|".join(knob.values)
            print(f"    {knob.name}={values}  {knob.what}")
    return ExitCode.OK
