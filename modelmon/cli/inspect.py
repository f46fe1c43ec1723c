"""``modelmon inspect``: format, tensors, blocks, dtypes, and the storage and memory facts."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING

from modelmon.cli.common import PATH_HELP, ExitCode, add_path, add_verb, emit_json

if TYPE_CHECKING:
    from modelmon.cli.common import Verbs

VERB = "inspect"
EXAMPLES = """\
  modelmon inspect model.safetensors
  modelmon inspect model.safetensors.index.json --json
  modelmon inspect hf:org/name
  modelmon inspect ollama:llama3:8b
  modelmon inspect s3://bucket/models/llama/            the model under a prefix
  modelmon inspect s3://bucket/model.gguf --json        its header by ranged GETs
  modelmon inspect https://host/path/model.safetensors  a server that honours ranges
  modelmon inspect model.safetensors --memory-limit 16Gi   which ways of loading fit a pod
"""
# The object-storage part of PATH's help: only inspect reads objects so far.
URL_HELP = (
    "; or an object: s3://BUCKET/KEY, s3://BUCKET/PREFIX/ or https://host/path (the AWS "
    "configuration as the AWS CLI reads it: AWS_PROFILE, AWS_ENDPOINT_URL, AWS_REGION...)"
)


def add_parser(verbs: Verbs) -> None:
    parser = add_verb(verbs, VERB, "format, tensors, blocks, dtypes, storage facts", EXAMPLES)
    add_path(parser, PATH_HELP + URL_HELP)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    from modelmon.cli.flags import add_storage_timeout_option

    add_storage_timeout_option(parser)
    from modelmon.cli.flags import memory_limit

    parser.add_argument(
        "--memory-limit",
        type=memory_limit,
        metavar="SIZE",
        help="say, before loading, whether each way of loading fits a memory limit of this "
        "size (16Gi, 512Mi): a copy's arrays, a copy with its page cache, a mapping, a stream",
    )


def run(args: argparse.Namespace) -> int:
    from modelmon.core import open_model
    from modelmon.core.output import model_summary, render_inspect
    from modelmon.core.storage import object_storage
    from modelmon.core.system import memory_facts, memory_limit_ways, storage_by_folder

    model = open_model(args.path)
    info = model_summary(model)
    files = [f.path for f in model.files if f.remote is None]
    objects = [f.remote for f in model.files if f.remote is not None]
    info["storage"] = [asdict(facts) for facts in storage_by_folder(files)]
    info["storage"] += [asdict(facts) for facts in object_storage(objects)]
    info["memory"] = asdict(memory_facts())
    if args.memory_limit is not None:
        ways = memory_limit_ways(info["tensor_bytes"], args.memory_limit)
        info["memory_limit"] = {"limit_bytes": args.memory_limit, "ways": ways}
    if args.json:
        emit_json(info)
    else:
        print(render_inspect(info))
    return ExitCode.OK
