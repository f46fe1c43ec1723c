"""``modelmon engines``: every engine with its knobs; for one that runs here, the values its
installed version takes, as that version says in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from modelmon.cli.engines import engine_lines
from modelmon.core import ENGINES
from modelmon.core.runs import installed_knobs

from .test_json import strict

# What the installed versions take, worked out here from the libraries themselves.
SAFETENSORS_TAKES = """
import importlib.util, inspect, json, safetensors.numpy
pread = "backend" in inspect.signature(safetensors.numpy.load_file).parameters
torch = importlib.util.find_spec("torch") is not None
print(json.dumps({"framework": ["numpy"] + ["torch"] * torch,
                  "backend": ["mmap"] + ["pread"] * pread + ["read"]}))
"""
TRANSFORMERS_TAKES = """
import inspect, json
from transformers import PreTrainedModel
takes = "disable_mmap" in inspect.signature(PreTrainedModel.from_pretrained).parameters
print(json.dumps({"disable_mmap": ["false"] + ["true"] * takes}))
"""


def takes(script: str) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout)


def runs_here(name: str) -> bool:
    return ENGINES[name].unavailable() is None


def test_engines_shows_what_the_installed_versions_take(modelmon) -> None:
    # Its --json is strict too (test_json.py leaves this verb to this test: each run of it
    # starts every installed engine's probe, torch and all).
    done = modelmon("engines", "--json")
    assert done.returncode == 0, done.stderr
    data = strict(done.stdout)
    assert isinstance(data, list)
    rows = {row["name"]: row for row in data}
    assert list(rows) == list(ENGINES)
    expected = {"safetensors": takes(SAFETENSORS_TAKES)}
    if runs_here("transformers"):
        expected["transformers"] = takes(TRANSFORMERS_TAKES)
    for name, knobs in expected.items():
        assert rows[name]["probe_error"] is None
        assert {k: rows[name]["knobs_here"][k] for k in knobs} == knobs
    for name, engine in ENGINES.items():
        row = rows[name]
        assert row["knobs"] == {knob.name: list(knob.values) for knob in engine.knobs}
        assert ("knobs_here" in row) == runs_here(name)

    text = modelmon("engines").stdout
    for name, engine in ENGINES.items():
        header = next(line for line in text.splitlines() if line.startswith(f"{name}: "))
        assert header.endswith("; knob values as installed here") == runs_here(name)
        here = rows[name].get("knobs_here")
        for knob in engine.knobs:
            values = knob.values if here is None else here[knob.name]
            lacks = [value for value in knob.values if value not in values]
            line = f"    {knob.name}={'|'.join(values)}  {knob.what}"
            assert (line + f" (not here: {'|'.join(lacks)})" if lacks else line) in text


def test_a_probe_out_of_time_says_so_in_one_line_and_every_knob_is_still_listed() -> None:
    # No engine's child can start Python, let alone answer, in no time at all.
    installed = installed_knobs(["safetensors", "vllm"], timeout_s=0)
    assert list(installed) == ["safetensors"]  # vLLM does not run here: nothing to ask
    probe = installed["safetensors"]
    assert probe.values is None and probe.error == "its probe did not answer within 0 s"
    engine = ENGINES["safetensors"]
    lines = engine_lines(engine, probe)
    assert lines[1] == f"    (the values its installed version takes are unknown: {probe.error})"
    assert lines[2:] == engine_lines(engine, None)[1:]  # the registry's values, as known


def test_the_engines_modelmon_cannot_run_say_why_in_one_line(modelmon) -> None:
    text = modelmon("engines").stdout
    lines = {line.split(":", 1)[0]: line for line in text.splitlines() if line[:1] != " "}
    assert lines["instanttensor"] == (
        "instanttensor: InstantTensor (safetensors); InstantTensor loads onto CUDA devices only "
        "(its safe_open(device='cpu') raises 'InstantTensor only supports CUDA devices for "
        "now'): modelmon does not run it on a CPU"
    )
    assert lines["flashpack"] == (
        "flashpack: flashpack (flashpack); flashpack loads its own .flashpack files (made by "
        "flashpack convert), a format modelmon does not open yet: modelmon does not run it"
    )


def test_instanttensor_refuses_a_cpu_as_the_registry_says() -> None:
    # The registry's reason, seen again with the version installed here: when a version
    # loads onto a CPU, this fails and the engine gets a child loader instead.
    if subprocess.run([sys.executable, "-c", "import instanttensor"]).returncode != 0:
        pytest.skip("instanttensor is not installed here: pip install instanttensor")
    tried = """
import sys, instanttensor
try:
    instanttensor.safe_open(sys.argv[1], framework="pt", device="cpu")
except ValueError as exc:
    print(exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", tried, "/nonexistent.safetensors"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "InstantTensor only supports CUDA devices for now"
