"""``modelmon recommend --engine / --loader``: the user's loader measured as it is, its
engine's settings, and modelmon's best, in the same cold rounds; the explanation leads with
the loader, and the engine's snippet is marked measured with its MB/s and runs."""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from modelmon.core import read_config, write_safetensors_model
from modelmon.core.limits import EVIDENCE_RUNS
from modelmon.core.runs import engine_unavailable

from .conftest import MODELMON, RunCli

READER = "import sys; f = open(sys.argv[1], 'rb', buffering=0)\nwhile f.read(1 << 20): pass"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(
        tmp_path_factory.mktemp("recommend-loader"), layers=2, hidden=512, vocab=4096, seed=9
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--engine", "llamacpp"], "llama-cpp-python loads gguf models; this one is safetensors"),
        (["--engine", "teleport"], "unknown engine 'teleport'"),
        (["--loader", "cmd:"], "needs a command"),
        (["--engine", "transformers disable_mmap=maybe"], "disable_mmap must be one of"),
    ],
)
def test_a_loader_that_cannot_be_measured_is_refused_before_measuring(
    modelmon: RunCli, model: Path, args: list[str], said: str
) -> None:
    done = modelmon("recommend", str(model), *args, "-o", str(model.parent / "x.toml"))
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and not (model.parent / "x.toml").exists()


def test_an_engine_missing_what_it_needs_beside_the_weights_is_refused(
    modelmon: RunCli, model: Path
) -> None:
    """transformers loads a folder with its config.json: without one, or without
    transformers here, it is said before anything is measured, naming what is missing."""
    done = modelmon("recommend", str(model), "--engine", "transformers")
    assert done.returncode == 2, done.stderr
    missing = engine_unavailable("transformers")
    said = missing if missing is not None else "loads a folder holding config.json"
    assert said in done.stderr


def test_recommend_with_a_command_or_an_engine_as_the_loader(
    modelmon: RunCli, model: Path, tmp_path: Path
) -> None:
    """A command as the loader, measured as it is; and an engine (``engine_search``). The two
    searches run side by side (each spends its budget; the loader's evidence rounds run
    where its overrun holds them, and a budget that held fewer says so), the engine's on a
    copy of the model, so that neither evicts or reads the files the other's runs must find
    cold."""
    loader = f'cmd: {sys.executable} -c "{READER}" {{path}}'
    done = modelmon(
        "recommend", str(model), "--loader", loader, "--budget", "5", "-o", "-", "--json",
    )  # fmt: skip
    assert done.returncode == 2 and "-o - and --json" in done.stderr
    flags = ("--budget", "5", "--json", "-o", str(model.parent / "out.toml"))
    with_command = subprocess.Popen(
        [*MODELMON, "recommend", str(model), "--loader", loader, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        engine_search(modelmon, tmp_path)
        stdout, stderr = with_command.communicate(timeout=300)
    finally:
        if with_command.poll() is None:
            with_command.kill()
            with_command.communicate()
    assert with_command.returncode == 0, stderr
    document = json.loads(stdout)
    assert document["loader"]["as_is"].startswith("cmd: ")
    assert_evidence_said(document["loader"]["as_is_runs"], document["explanation"])
    assert document["apply"]["your-loader"].startswith(f"{sys.executable} -c ")


def assert_evidence_said(runs: int, explanation: list[str]) -> None:
    """The loader's runs: the evidence's three, or as many as the budget (5 s here) held,
    and then the explanation says so."""
    assert runs >= 1
    if runs < EVIDENCE_RUNS:
        held = f"The budget held {runs} cold run{'s' if runs != 1 else ''} of each finalist"
        assert any(line.startswith(held) for line in explanation), explanation


def engine_search(modelmon: RunCli, tmp_path: Path) -> None:
    """vLLM cannot run here: the safetensors library stands for it, measured as users run it,
    with each of its settings and against modelmon's best; its own snippet is marked
    measured, vLLM's is translated from it and said not measured."""
    model = write_safetensors_model(tmp_path / "model", layers=2, hidden=512, vocab=4096, seed=9)
    config = tmp_path / "modelmon.toml"
    done = modelmon(
        "recommend", str(model), "--engine", "vllm", "--budget", "5", "-o", str(config),
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = tomllib.loads(config.read_text())
    assert read_config(config).document["loader"] == written["loader"]  # it still applies
    loader = written["loader"]
    assert loader["for_engine"] == "vllm"
    assert loader["as_is"] == "engine: safetensors"
    assert 1 <= loader["as_is_runs"] <= loader["rounds"]
    assert 1 <= loader["modelmon_runs"] <= loader["rounds"]
    assert_evidence_said(loader["as_is_runs"], written["explanation"])
    for entry in ("as_is", "modelmon"):  # each run's figure, and the median is theirs
        runs = loader[f"{entry}_run_mbps"]
        assert len(runs) == loader[f"{entry}_runs"]
        assert abs(statistics.median(runs) - loader[f"{entry}_mbps"]) <= 0.1
    # One record: modelmon's best's evidence is its runs in the loader's rounds, everywhere.
    evidence_of = written["evidence"]
    assert (evidence_of["runs"], evidence_of["median_mbps"]) == (
        loader["modelmon_runs"],
        loader["modelmon_mbps"],
    )
    # The line to paste names the file written, from the root.
    assert f"config={str(config)!r}" in written["apply"]["modelmon"]
    first, second = written["explanation"][:2]
    assert first.startswith("vLLM loads onto a GPU")
    assert second.startswith(("Change your loader:", "No setting of your loader was measured"))
    measured = loader.get("change", loader["as_is"])
    evidence = written["apply_evidence"]
    assert "PATH" not in written["apply"]["safetensors"]  # pasted as it is
    assert f"measured here as {measured}: " in evidence["safetensors"]
    runs = loader["change_runs"] if "change" in loader else loader["as_is_runs"]
    assert evidence["safetensors"].endswith(f", {runs} run{'s' if runs != 1 else ''}")
    if "change" in loader:  # the change is measured against its baseline in every round
        assert loader["change_runs"] >= loader["as_is_runs"] and loader["gain"] >= 1.05
        if loader["change_runs"] < EVIDENCE_RUNS:  # all a short budget held: said so
            assert "Not certain" in done.stdout.split("\n\n", 1)[0], done.stdout
    assert "safetensors-read" not in written["apply"]  # replaced by the measured line
    translated = written["apply"]["vllm"]
    served = shlex.quote(str(model if model.is_dir() else model.parent))
    assert translated.startswith(f"vllm serve {served} --safetensors-load-strategy ")
    assert evidence["vllm"].startswith(
        f"not measured here: vLLM does not run here; translated from {measured}"
    )
    assert not any(key.startswith("vllm-") for key in written["apply"])
    # The answer leads the output; the explanation's sentences follow under "Why:".
    assert done.stdout.splitlines()[0].startswith(
        ("Change your loader:", "Keep your loader", "Load with")
    )
    assert "\nWhy:\n  " + first[:60] in done.stdout
