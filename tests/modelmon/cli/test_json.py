"""Every verb's ``--json``: strict JSON (no NaN or Infinity) with a schema version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import modelmon.cli
from modelmon.core import write_safetensors_model
from modelmon.core.model import DEMO_RECIPE as RECIPE
from modelmon.core.output import SCHEMA_VERSION

# {model}: a tiny safetensors model; {demo}: a folder that already holds the demo models;
# {folder}: the tiny model's folder.
VERBS = {
    "inspect": ["inspect", "{model}"],
    "load": ["load", "{model}", "-w", "2"],
    "load --samples": ["load", "{model}", "--samples", "--interval-ms", "20"],
    "load --ranks": ["load", "{model}", "--ranks", "2"],
    "bench": ["bench", "{model}", "--a", "pread --workers 2", "--b", "sequential", "-n", "1"],
    "strategies": ["strategies"],
    "demo": ["demo", "--dir", "{demo}"],
    "models": ["models", "--dir", "{folder}"],
    # The reader of the pipe starts late, so cat's load lasts longer than a sample.
    "watch --samples": [
        "watch", "--samples", "--interval-ms", "10", "--",
        "sh", "-c", "cat {model} | (sleep 0.1; cat > /dev/null)",
    ],
}  # fmt: skip


def strict(text: str) -> Any:
    def reject(constant: str) -> Any:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=reject)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(tmp_path_factory.mktemp("tiny"), layers=1, hidden=64, vocab=128)


def demo_folder(folder: Path) -> Path:
    """Stand-ins for the demo models under their recipe, so ``demo`` reuses them: the verb's
    output is under test here, not ~700 MB of generated weights."""
    (folder / "llama-demo-f16").mkdir()
    (folder / "llama-demo-f16" / "model.safetensors.index.json").write_text("{}")
    (folder / "llama-demo-q8_0.gguf").write_bytes(b"")
    (folder / "recipe.json").write_text(json.dumps(RECIPE))
    return folder


def test_every_verb_is_covered() -> None:
    # fleet's JSON needs a Ray cluster: tests/modelmon/fleet/test_cluster.py parses it strictly.
    # engines' is parsed strictly by test_engines.py, and recommend's by
    # tests/core/measuring/test_recommend.py, which run them anyway.
    not_here = {"gui", "fleet", "engines", "recommend"}
    assert {name.split()[0] for name in VERBS} == {v.VERB for v in modelmon.cli.VERBS} - not_here


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verb_prints_strict_versioned_json(
    modelmon, tiny_model: Path, tmp_path: Path, verb: str
) -> None:
    demo = demo_folder(tmp_path)
    folder = tiny_model.parent
    args = [word.format(model=tiny_model, demo=demo, folder=folder) for word in VERBS[verb]]
    # --json goes before a watched command's "--": after it, it would be the command's.
    at = args.index("--") if "--" in args else len(args)
    done = modelmon(*args[:at], "--json", *args[at:], timeout=120)
    assert done.returncode == 0, done.stderr
    data = strict(done.stdout)
    if verb == "strategies":  # a list: each entry a strategy
        assert isinstance(data, list) and all("name" in entry for entry in data)
        return
    assert next(iter(data)) == "schema_version" and data["schema_version"] == SCHEMA_VERSION
    if verb == "bench":
        assert data["a"]["spec"] == "pread workers=2" and data["b"]["spec"] == "sequential"
    if verb == "demo":
        assert data["gguf"] == str(demo / "llama-demo-q8_0.gguf")
    if verb == "load --samples":
        assert data["samples"]["series"]
    if verb == "watch --samples":
        assert data["bytes_read"] == tiny_model.stat().st_size and data["samples"]["series"]
