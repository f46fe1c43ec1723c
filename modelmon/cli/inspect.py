"""``modelmon inspect``: format, tensors, blocks, dtypes, and the storage and memory facts."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, add_path, add_verb, emit_json

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "inspect"
EXAMPLES = """\
  modelmon inspect model.safetensors
  modelmon inspect model.safetensors.index.json --json
  modelmon inspect hf:org/name
  modelmon inspect ollama:llama3:8b
"""


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "format, tensors, blocks, dtypes, storage facts", EXAMPLES)
    add_path(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    from modelmon.core import (
        memory_facts,
        model_summary,
        open_model,
        render_inspect,
        storage_by_folder,
    )

    model = open_model(args.path)
    info = model_summary(model)
    info["storage"] = [asdict(facts) for facts in storage_by_folder(f.path for f in model.files)]
    info["memory"] = asdict(memory_facts())
    if args.json:
        emit_json(info)
    else:
        print(render_inspect(info))
    return ExitCode.OK
