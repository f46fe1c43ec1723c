"""``modelmon engines``: the engines modelmon runs as their users run them, with their knobs,
and whether each runs here (or which extra installs it). For an engine that runs here, each
knob shows the values the installed version takes, as its own child says (``installed_knobs``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from modelmon.cli.common import ExitCode, add_verb, emit_json

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs
    from modelmon.core.runs import Engine, InstalledKnobs

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
        "--json",
        action="store_true",
        help="one JSON list: name, formats, knobs, here (and, for an engine that runs here, "
        "knobs_here: the values the installed version takes, or probe_error: why unknown)",
    )


def run(args: argparse.Namespace) -> int:
    from modelmon.core import ENGINES
    from modelmon.core.runs import installed_knobs

    here = installed_knobs()
    rows = [row(engine, here.get(engine.name)) for engine in ENGINES.values()]
    if args.json:
        emit_json(rows)
        return ExitCode.OK
    for engine in ENGINES.values():
        print("\n".join(engine_lines(engine, here.get(engine.name))))
    return ExitCode.OK


def row(engine: Engine, installed: InstalledKnobs | None) -> dict[str, Any]:
    """The engine's JSON entry; one that runs here adds what its installed version takes."""
    entry: dict[str, Any] = {
        "name": engine.name,
        "label": engine.label,
        "formats": list(engine.formats),
        "knobs": {knob.name: list(knob.values) for knob in engine.knobs},
        "unavailable": engine.unavailable(),
        "extra": engine.extra,
    }
    if installed is not None:
        values = installed.values
        # Every knob: one whose values the installed version does not restrict (an
        # environment variable that takes any value) has the values modelmon tries.
        entry["knobs_here"] = (
            None
            if values is None
            else {k.name: list(values.get(k.name, k.values)) for k in engine.knobs}
        )
        entry["probe_error"] = installed.error
    return entry


def engine_lines(engine: Engine, installed: InstalledKnobs | None) -> list[str]:
    """The engine in words: a line for it, then one per knob; for one that runs here, each
    knob's values are those the installed version takes (or a line says why not known)."""
    unavailable = engine.unavailable()
    here = "runs here" if unavailable is None else unavailable
    if installed is not None and installed.values is not None:
        here += "; knob values as installed here"
    lines = [f"{engine.name}: {engine.label} ({', '.join(engine.formats)}); {here}"]
    if installed is not None and installed.values is None:
        lines.append(f"    (the values its installed version takes are unknown: {installed.error})")
    for knob in engine.knobs:
        values = knob.values
        if installed is not None and installed.values is not None:
            values = installed.values.get(knob.name, values)
        missing = [] if installed is None else installed.missing(knob.name, knob.values)
        lacks = f" (not here: {'|'.join(missing)})" if missing else ""
        lines.append(f"    {knob.name}={'|'.join(values)}  {knob.what}{lacks}")
    return lines
