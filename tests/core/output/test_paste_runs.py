"""Every Python line the answer offers to paste loads what it says when pasted as it is: run
in a fresh namespace (and modelmon's own in a fresh ``python -c``) against a small written
model, it returns every tensor with the bytes of the file; a line whose library is not
installed here names nothing it does not import or assign."""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.loaders.registry import ENGINES
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.model.synth_gguf import write_gguf_model
from modelmon.core.output.config import build_document
from modelmon.core.output.config_text import write_config
from modelmon.core.output.paste import is_shell, pasteable
from modelmon.core.output.snippets import snippets

from ..measuring.records import candidate

WINNER = candidate("pread", 900, 910, 905, workers=2)
LIBRARY = candidate("library", 400, 410, 405, role="baseline")
WHOLE = candidate("sequential", 500, 505, 510, workers=1, chunk=16 << 20)
# Lines that cannot name everything they use, and why: each says so beside it.
UNRESOLVED = {
    "flashpack": {"model"},  # the user's torch module, which flashpack fills
    # The model class its config.json names (diffusers.ModelClass) and that config's folder.
    "diffusers from_single_file": {"CONFIG_FOLDER"},
}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def unbound(code: str) -> set[str]:
    """The names ``code`` reads that it neither imports nor assigns, nor are builtins."""
    tree = ast.parse(code)
    bound: set[str] = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
    return read - bound


def _file_bytes(model: Model) -> dict[str, bytes]:
    """Each tensor's bytes as the file holds them: what a whole load must return."""
    out = {}
    for extent in model.extents:
        with open(extent.file, "rb") as file:
            file.seek(extent.offset)
            out[extent.name] = file.read(extent.length)
    return out


def _tensor_bytes(tensor: Any) -> bytes:
    if isinstance(tensor, np.ndarray):
        return np.ascontiguousarray(tensor).tobytes()
    import torch

    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _run(code: str) -> dict[str, Any]:
    """``code`` run in a namespace of its own, as a fresh interpreter has it."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(code, "<pasted>", "exec"), namespace)  # the line, as pasted
    return namespace


def _every_tensor(model: Model, tensors: dict[str, Any]) -> None:
    expected = _file_bytes(model)
    assert sorted(tensors) == sorted(expected)
    for name, tensor in tensors.items():
        assert _tensor_bytes(tensor) == expected[name], name


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Model]:
    folder = tmp_path_factory.mktemp("pasted model")  # a space: every line must quote it
    return {
        "sharded": open_model(
            write_safetensors_model(folder / "sharded", layers=2, hidden=64, vocab=256, shards=3)
        ),
        "bf16": open_model(
            write_safetensors_model(
                folder / "bf16", layers=1, hidden=64, vocab=128, dtype="BF16", shards=2
            )
        ),
        "single": open_model(
            write_safetensors_model(folder / "one", layers=1, hidden=64, vocab=128)
        ),
        "gguf": open_model(
            write_gguf_model(folder / "m.gguf", layers=1, hidden=64, vocab=128, tensor_type="F16")
        ),
    }


@pytest.mark.parametrize("kind", ["sharded", "bf16", "single"])
def test_the_safetensors_lines_load_every_tensor_of_every_shard(
    models: dict[str, Model], kind: str
) -> None:
    """The library's own read (what ``library threads=1`` measured: numpy), the same read
    into torch where torch is installed, and the read of each file whole: each loads every
    tensor of every file, by the files' whole paths."""
    model = models[kind]
    lines = {s.tool: s for s in snippets(model, WINNER, (WINNER, LIBRARY, WHOLE))}
    assert lines["safetensors"].measured_as == LIBRARY.spec
    assert "safetensors.numpy" in lines["safetensors"].text  # the framework measured
    assert ("safetensors-torch" in lines) == _installed("torch")
    for tool in ("safetensors", "safetensors-torch", "safetensors-read"):
        if tool in lines:
            _every_tensor(model, _run(lines[tool].text)["tensors"])


def test_modelmons_own_lines_run_as_pasted(models: dict[str, Model], tmp_path: Path) -> None:
    """modelmon's line imports what it names: pasted into a fresh ``python -c`` it loads the
    model by the config written; its torch form too, in a fresh namespace."""
    model = models["sharded"]
    config = tmp_path / "m.toml"
    document = build_document(
        model,
        WINNER,
        [WINNER, LIBRARY],
        None,
        ["Best: pread."],
        config_name=str(config),
        cache="cold",
        usable_ram=1 << 30,
    )
    write_config(config, document)
    own = document["apply"]["modelmon"]
    check = f"{own}; print(len(tensors), sum(a.nbytes for a in tensors.values()))"
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lengths = [e.length for e in model.extents]
    assert done.stdout.split() == [str(len(lengths)), str(sum(lengths))]
    _every_tensor(model, _run(own)["tensors"])
    if _installed("torch"):
        _every_tensor(model, _run(document["apply"]["torch"])["tensors"])


def _engine_lines() -> list[tuple[str, str, str]]:
    """(engine, tool, template) of every engine's lines, at its defaults and at each other
    value of each knob."""
    out = []
    for engine in ENGINES.values():
        defaults = {knob.name: knob.values[0] for knob in engine.knobs}
        variants = [defaults] + [
            defaults | {knob.name: value} for knob in engine.knobs for value in knob.values[1:]
        ]
        for settings in variants:
            out.append((engine.name, engine.name, engine.snippet(settings)))
            out += [(engine.name, tool, line(settings)) for tool, line in engine.also]
    return sorted(set(out))


@pytest.mark.parametrize(("engine", "tool", "template"), _engine_lines())
def test_every_engine_line_names_only_what_it_imports_or_assigns(
    models: dict[str, Model], engine: str, tool: str, template: str
) -> None:
    model = models["gguf" if ENGINES[engine].formats == ("gguf",) else "single"]
    code = pasteable(template, model).code
    if is_shell(code):
        return
    if "torchrun" in code:  # what each rank of a torchrun job runs: said as such
        assert "not a line to paste" in template
        return
    key = "diffusers from_single_file" if "from_single_file" in code else engine
    assert unbound(code) == UNRESOLVED.get(key, set()), code
    assert re.search(r"\bPATHS?\b", code) is None  # every placeholder filled


def _python_lines(models: dict[str, Model], tmp_path: Path) -> list[tuple[str, str]]:
    pipeline = tmp_path / "pipeline"
    pipeline.mkdir()
    (pipeline / "model_index.json").write_text('{"_class_name": "StableDiffusionPipeline"}')
    served = write_safetensors_model(
        tmp_path / "served", layers=1, hidden=64, vocab=128, transformers_config=True
    )
    kinds = [
        *models.values(),
        open_model(write_safetensors_model(pipeline / "unet", layers=1, hidden=64, vocab=128)),
        open_model(served),
    ]
    return [
        (line.tool, line.text)
        for model in kinds
        for line in snippets(model, WINNER, (WINNER, LIBRARY, WHOLE))
        if not is_shell(line.text)
    ]


def test_every_general_python_line_names_only_what_it_imports_or_assigns(
    models: dict[str, Model], tmp_path: Path
) -> None:
    lines = _python_lines(models, tmp_path)
    assert {tool for tool, _ in lines} >= {"modelmon", "torch", "safetensors", "diffusers"}
    for tool, code in lines:
        assert unbound(code) == set(), (tool, code)


@pytest.mark.parametrize("knobs", ["", "backend=pread", "backend=read", "framework=torch"])
def test_the_safetensors_engines_line_loads_every_tensor(
    models: dict[str, Model], knobs: str
) -> None:
    if "torch" in knobs and not _installed("torch"):
        pytest.skip("torch is not installed here")
    settings = parse_engine(f"safetensors {knobs}".strip()).settings
    model = models["sharded"]
    code = pasteable(ENGINES["safetensors"].snippet(settings), model).code
    _every_tensor(model, _run(code)["tensors"])


def test_the_gguf_readers_line_loads_every_tensor(models: dict[str, Model]) -> None:
    model = models["gguf"]
    code = pasteable(ENGINES["gguf-reader"].snippet({}), model).code
    tensors = _run(code)["tensors"]
    assert sorted(tensors) == sorted(e.name for e in model.extents)
    expected = _file_bytes(model)
    for name, array in tensors.items():
        assert np.ascontiguousarray(array).tobytes() == expected[name], name


@pytest.mark.parametrize("engine", ["runai", "fastsafetensors"])
def test_a_streamers_line_loads_every_tensor(models: dict[str, Model], engine: str) -> None:
    module = {"runai": "runai_model_streamer", "fastsafetensors": "fastsafetensors"}[engine]
    if not (_installed(module) and _installed("torch")):
        pytest.skip(f"{module} or torch is not installed here")
    defaults = {knob.name: knob.values[0] for knob in ENGINES[engine].knobs}
    model = models["sharded"]
    code = pasteable(ENGINES[engine].snippet(defaults), model).code
    _every_tensor(model, _run(code)["tensors"])


def test_a_bfloat16_models_numpy_line_imports_numpys_bfloat16(models: dict[str, Model]) -> None:
    """numpy has no bfloat16 of its own: the library's read of such a model imports ml_dtypes
    (run above, it loads every tensor)."""
    line = {s.tool: s.text for s in snippets(models["bf16"], WINNER, (WINNER,))}["safetensors"]
    assert line.startswith("import ml_dtypes, numpy, safetensors.numpy; tensors = ")


def test_a_model_whose_folder_is_named_path_keeps_its_paths(tmp_path: Path) -> None:
    """PATH and PATHS are the lines' placeholders: a folder with that word in its name stays
    as it is in every line, modelmon's own included."""
    model = open_model(
        write_safetensors_model(tmp_path / "PATHS PATH", layers=1, hidden=64, vocab=128, shards=2)
    )
    lines = {s.tool: s.text for s in snippets(model, WINNER, (WINNER, LIBRARY, WHOLE))}
    assert f"modelmon.core.load({model.path!r}, " in lines["modelmon"]
    assert f"modelmon.core.load({model.path!r}, " in lines["torch"]
    _every_tensor(model, _run(lines["safetensors"])["tensors"])
