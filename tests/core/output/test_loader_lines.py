"""The user's loader's lines (``loader_snippets``), the general lines they replace
(``superseded``) and the config file's ``[loader]`` table, from recorded rounds: every line
as it is pasted, with what stands behind it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from modelmon.core.configuration import parse_program
from modelmon.core.measuring import judge
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.output.loader import loader_snippets, loader_table, superseded

from ..measuring.records import advice, candidate, engine_run, run


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    folder = tmp_path_factory.mktemp("loader-lines")
    return open_model(write_safetensors_model(folder, layers=1, hidden=64, vocab=128))


def _file(model: Model) -> str:
    return str(Path(model.files[0].path).resolve())


def test_the_picked_engine_setting_is_the_line_measured(model: Model) -> None:
    loader = engine_run("safetensors", 300, 310, 320)
    pick = engine_run("safetensors backend=pread", 500, 510, 520)
    made = advice(loader, "safetensors", (pick,), pick, candidate("sequential", 900, 905, 910))
    (line,) = loader_snippets(made, model)
    assert line.tool == "safetensors"
    assert line.text == (
        f"import safetensors.numpy; tensors = {{name: t for path in {[_file(model)]!r} for "
        "name, t in safetensors.numpy.load_file(path, backend='pread').items()}"
    )
    assert line.evidence() == (
        "measured here as engine: safetensors backend=pread: 510 MB/s, 3 runs"
    )
    assert superseded(made) == ("safetensors-read",)


def test_nothing_beat_the_loader_its_own_line_as_it_is(model: Model) -> None:
    loader = engine_run("safetensors", 300, 310, 320)
    slower = engine_run("safetensors backend=read", 200, 210, 220)
    made = advice(loader, "safetensors", (slower,), None, candidate("sequential", 900))
    (line,) = loader_snippets(made, model)
    assert line.text == (
        f"import safetensors.numpy; tensors = {{name: t for path in {[_file(model)]!r} for "
        "name, t in safetensors.numpy.load_file(path).items()}"
    )
    assert line.evidence() == "measured here as engine: safetensors: 310 MB/s, 3 runs"
    once = advice(
        engine_run("safetensors", 310), "safetensors", (), None, candidate("sequential", 900)
    )
    assert loader_snippets(once, model)[0].evidence().endswith(": 310 MB/s, 1 run")


def test_llama_cpp_python_and_llama_server_share_the_measured_line(tmp_path: Path) -> None:
    from modelmon.core.model.synth_gguf import write_gguf_model

    gguf = open_model(write_gguf_model(tmp_path / "m.gguf", layers=1, hidden=64, vocab=128))
    loader = engine_run("llamacpp", 100, 101, 102)
    pick = engine_run("llamacpp load_mode=none", 150, 151, 152)
    made = advice(loader, "llamacpp", (pick,), pick, candidate("sequential", 400))
    own, server = loader_snippets(made, gguf)
    path = str(Path(gguf.files[0].path).resolve())
    assert (own.tool, own.text) == (
        "llamacpp",
        f"from llama_cpp import Llama; llm = Llama(model_path={path!r}, use_mmap=False)",
    )
    assert (server.tool, server.text) == ("llama.cpp", f"llama-server -m {path} --load-mode none")
    assert server.evidence() == (
        "measured here as engine: llamacpp load_mode=none: 151 MB/s, 3 runs; the same loader"
    )
    assert superseded(made) == ("llama.cpp-no-mmap", "llama.cpp-direct-io")


def test_an_engine_that_cannot_run_here_gets_its_line_translated(model: Model) -> None:
    loader = engine_run("safetensors", 300, 310, 320)
    pick = dataclasses.replace(
        engine_run("safetensors backend=pread", 500, 510, 520), verdict=judge([1.6, 1.65, 1.7])
    )
    made = dataclasses.replace(
        advice(loader, "safetensors", (pick,), pick, candidate("sequential", 900)),
        for_engine="vllm",
    )
    lines = loader_snippets(made, model)
    assert [line.tool for line in lines] == ["safetensors", "vllm"]
    folder = str(Path(model.files[0].path).resolve().parent)
    assert lines[1].text == f"vllm serve {folder} --safetensors-load-strategy eager"
    assert lines[1].evidence() == (
        "not measured here: vLLM does not run here; translated from engine: safetensors "
        "backend=pread (510 MB/s, 1.65× its default here)"
    )
    assert superseded(made) == ("safetensors-read", "vllm-eager", "vllm-lazy", "vllm-prefetch")


def test_a_command_is_given_back_as_the_user_wrote_it(model: Model) -> None:
    command = Candidate(parse_program("cmd: HF_HUB_OFFLINE=1 python load.py {path}"), "", [
        run(200), run(210), run(220)
    ])  # fmt: skip
    made = advice(command, "safetensors", (), None, candidate("sequential", 900))
    (line,) = loader_snippets(made, model)
    assert (line.tool, line.text) == ("your-loader", "HF_HUB_OFFLINE=1 python load.py {path}")
    assert line.evidence() == f"measured here as {command.spec}: 210 MB/s, 3 runs"


def test_a_loader_that_never_completed_has_no_line(model: Model) -> None:
    failed = Candidate(parse_program("cmd: python load.py {path}"), "", [], reason="exited 1")
    made = advice(failed, "safetensors", (), None, candidate("sequential", 900))
    assert loader_snippets(made, model) == []
    assert loader_table(made)["as_is_ended"] == "exited 1"


def test_the_loader_table_holds_each_run_and_the_gain() -> None:
    loader = engine_run("safetensors", 300, 310, 320)
    pick = dataclasses.replace(
        engine_run("safetensors backend=pread", 500, 510, 520), verdict=judge([1.6, 1.65, 1.7])
    )
    table = loader_table(advice(loader, "safetensors", (pick,), pick, candidate("pread", 900)))
    assert table == {
        "as_is": "engine: safetensors",
        "as_is_mbps": 310.0,
        "as_is_runs": 3,
        "as_is_run_mbps": [300.0, 310.0, 320.0],
        "engine": "safetensors",
        "engine_found": "given",
        "change": "engine: safetensors backend=pread",
        "change_mbps": 510.0,
        "change_runs": 3,
        "change_run_mbps": [500.0, 510.0, 520.0],
        "baseline": "engine: safetensors",
        "gain": 1.65,
        "modelmon": table["modelmon"],
        "modelmon_mbps": 900.0,
        "modelmon_runs": 1,
        "modelmon_run_mbps": [900.0],
        "rounds": 3,
    }
    assert table["modelmon"].startswith("pread")
