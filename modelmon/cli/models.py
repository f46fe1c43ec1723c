"""``modelmon models``: the models already on this machine, and the reference that opens each.

Lists what the Hugging Face cache, Ollama, LM Studio and llama.cpp hold, plus the folders
given with ``--dir`` or in MODELMON_MODEL_DIRS. Every reference works with every verb:
``modelmon inspect hf:org/name``, ``modelmon load ollama:llama3:8b``.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from modelmon.cli.common import ExitCode, add_verb, emit_json

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs
    from modelmon.core import DiscoveredModel, Discovery

VERB = "models"
EXAMPLES = """\
  modelmon models
  modelmon models --dir /data/models --dir ~/weights --json
  modelmon inspect hf:org/name                 open one by its reference
"""


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(
        verbs,
        VERB,
        "list the models in the HF cache, Ollama, LM Studio, llama.cpp and your folders",
        EXAMPLES,
    )
    parser.description = (
        "List the models already on this machine, with the reference that opens each "
        "(modelmon inspect REFERENCE). Offline and read-only."
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--dir",
        action="append",
        type=existing_folder,
        default=[],
        metavar="DIR",
        help=f"also search DIR and its subfolders (repeatable; MODELMON_MODEL_DIRS adds "
        f"folders separated by {os.pathsep!r})",
    )


def existing_folder(text: str) -> str:
    """An argparse type: a folder that exists (a mistyped --dir is said, not searched as an
    empty place)."""
    if not os.path.isdir(text):
        why = "not a folder" if os.path.exists(text) else "no such folder"
        raise argparse.ArgumentTypeError(f"{why}: {text!r}")
    return text


def run(args: argparse.Namespace) -> int:
    from modelmon.core import discover_models

    discovery = discover_models(args.dir)
    if args.json:
        emit_json(
            {
                "models": [asdict(model) for model in discovery.models],
                "searched": list(discovery.searched),
                "skipped": list(discovery.skipped),
                "truncated": discovery.truncated,
            }
        )
    else:
        print(render_models(discovery))
    if not args.json:  # in JSON they are in "skipped"
        for line in discovery.skipped:
            print(f"modelmon: skipped {line}", file=sys.stderr)
    if discovery.truncated:
        print(
            f"modelmon: stopped after {discovery.entries_visited} directory entries; "
            "some folders were not fully searched",
            file=sys.stderr,
        )
    return ExitCode.OK


def where(model: DiscoveredModel) -> str:
    """Short storage words: "ext4, local", "nfs4, network", "fuse.rclone, FUSE (network?)"."""
    facts = model.storage
    if facts is None:
        return "unknown"
    if facts.is_fuse:
        kind = "FUSE (network?)" if facts.is_network else "FUSE, local"
    else:
        kind = "network" if facts.is_network else "local"
    return f"{facts.fs_type}, {kind}"


def render_models(discovery: Discovery) -> str:
    from modelmon.core.model import nothing_found
    from modelmon.core.output import human_bytes

    if not discovery.models:
        said = nothing_found(len(discovery.searched))
        if discovery.searched:
            return f"{said}: {', '.join(discovery.searched)}"
        return f"{said}; name a folder with --dir DIR (or MODELMON_MODEL_DIRS)"
    header = ("REFERENCE", "NAME", "FORMAT", "FILES", "SIZE", "WHERE")
    rows = [header] + [
        (
            model.reference,
            model.name,
            model.format,
            str(len(model.files)),
            human_bytes(model.bytes),
            where(model),
        )
        for model in discovery.models
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    right = {3, 4}  # numbers line up on the right
    lines = [
        "  ".join(
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "\n".join(lines)
