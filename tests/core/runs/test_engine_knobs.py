"""Each engine adapter's knobs change what the engine really does, as the watch sees it: a
mapped load brings the model in through page faults, a load with the mapping turned off
through read calls (the tree's rchar grows by the model's size), and what the engine still
maps once loaded is seen mapped. Engines not installed here skip, naming their extra."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from modelmon.core import ProgramResult, open_model, run_program, write_safetensors_model
from modelmon.core.configuration import parse_program
from modelmon.core.loaders.registry import CHILD
from modelmon.core.runs import get_engine

from .conftest import needs

Held = Callable[..., ProgramResult]
WHOLE = 0.9  # of the model's bytes: read calls that carried it, beyond the other run's


def _ok(outcome: ProgramResult) -> ProgramResult:
    assert outcome.result.status == "ok", outcome.result.error
    assert outcome.result.cache.cold, outcome.result.cache.note
    assert outcome.watch is not None and outcome.own is not None
    return outcome


def _model_file(outcome: ProgramResult) -> tuple[bool, int]:
    """Whether the engine was seen mapping the model file, and the bytes that arrived."""
    assert outcome.watch is not None
    (file,) = outcome.watch.files
    return file.mapped, file.arrived_bytes


def _read_whole_beyond(read: ProgramResult, mapped: ProgramResult, size: int) -> None:
    """The reading run's read calls carried the model; the mapping run's did not (the same
    imports on both sides cancel out)."""
    assert read.watch is not None and mapped.watch is not None
    assert read.watch.read_chars - mapped.watch.read_chars >= WHOLE * size


def test_safetensors_backend_maps_or_reads(held: Held, llama_folder: Path) -> None:
    needs("safetensors")
    model = open_model(llama_folder)
    mapped = _ok(held(model, "engine: safetensors"))
    read = _ok(held(model, "engine: safetensors backend=read"))
    size = model.files[0].size
    for outcome in (mapped, read):
        assert _model_file(outcome)[1] == size  # every byte arrived, cold
        assert outcome.own is not None and outcome.own["bytes"] == model.total_bytes
    _read_whole_beyond(read, mapped, size)
    if "pread" in (mapped.own or {})["features"]["backend"]:
        pread = _ok(held(model, "engine: safetensors backend=pread"))
        _read_whole_beyond(pread, mapped, size)


def test_llama_cpp_load_mode_maps_reads_or_goes_direct(held: Held, gguf_file: Path) -> None:
    needs("llamacpp")
    model = open_model(gguf_file)
    mapped = _ok(held(model, "engine: llamacpp"))
    read = _ok(held(model, "engine: llamacpp load_mode=none"))
    size = model.files[0].size
    assert _model_file(mapped)[0] is True  # the model stays mapped while loaded
    assert _model_file(read)[0] is False
    _read_whole_beyond(read, mapped, size)
    if "dio" in (mapped.own or {})["features"]["load_mode"]:
        direct = _ok(held(model, "engine: llamacpp load_mode=dio"))
        assert _model_file(direct)[0] is False
        assert any(n.startswith("direct I/O") for n in direct.result.notes)
        assert direct.result.bytes >= WHOLE * size  # counted from storage, not the page cache


def test_transformers_disable_mmap_reads_each_file_whole(held: Held, llama_folder: Path) -> None:
    needs("transformers")
    model = open_model(llama_folder)
    mapped = _ok(held(model, "engine: transformers", str(llama_folder)))
    read = _ok(held(model, "engine: transformers disable_mmap=true", str(llama_folder)))
    _read_whole_beyond(read, mapped, model.files[0].size)
    assert (read.own or {})["settings"] == {"disable_mmap": "true"}


def test_diffusers_disable_mmap_reads_instead_of_mapping(held: Held, vae_folder: Path) -> None:
    needs("diffusers")
    model = open_model(vae_folder)
    mapped = _ok(held(model, "engine: diffusers", str(vae_folder)))
    read = _ok(held(model, "engine: diffusers disable_mmap=true", str(vae_folder)))
    for outcome in (mapped, read):
        assert _model_file(outcome)[1] == model.files[0].size  # every byte arrived, cold
        assert (outcome.own or {})["bytes"] == model.total_bytes
    _read_whole_beyond(read, mapped, model.files[0].size)


def test_diffusers_from_single_file_maps_or_reads_the_checkpoint(
    held: Held, vae_folder: Path
) -> None:
    """One checkpoint file, its config.json beside it: from_single_file loads every byte of
    it, mapped by default and with read calls under disable_mmap."""
    needs("diffusers")
    (file,) = vae_folder.glob("*.safetensors")
    model = open_model(file)
    single = "engine: diffusers method=from_single_file"
    mapped = _ok(held(model, single))
    read = _ok(held(model, f"{single} disable_mmap=true"))
    for outcome in (mapped, read):
        assert _model_file(outcome)[1] == model.files[0].size
        assert (outcome.own or {})["bytes"] == model.total_bytes
        assert (outcome.own or {})["settings"]["method"] == "from_single_file"
    _read_whole_beyond(read, mapped, model.files[0].size)


def test_diffusers_from_single_file_without_a_config_is_a_failed_run_that_says_so(
    tmp_path: Path,
) -> None:
    """A lone checkpoint: diffusers would ask the hub for its config; modelmon's run never
    does, and fails with one line naming what is missing."""
    needs("diffusers")
    lone = write_safetensors_model(tmp_path, layers=1, hidden=256, vocab=256, seed=5)
    outcome = run_program(
        open_model(lone), parse_program("engine: diffusers method=from_single_file")
    )
    assert outcome.result.status == "failed" and outcome.result.bytes == 0
    assert outcome.result.error == (
        "exit code 2: modelmon engine diffusers: from_single_file needs the model's diffusers "
        f"config.json beside {lone} (modelmon never asks the hub for one)"
    )


def test_diffusers_from_single_file_refuses_a_knob_it_does_not_read(vae_folder: Path) -> None:
    needs("diffusers")
    (file,) = vae_folder.glob("*.safetensors")
    spec = "engine: diffusers method=from_single_file HF_ENABLE_PARALLEL_LOADING=yes"
    outcome = run_program(open_model(file), parse_program(spec))
    assert outcome.result.status == "failed"
    assert outcome.result.error == (
        "exit code 2: modelmon engine diffusers: diffusers here does not read "
        "HF_ENABLE_PARALLEL_LOADING=yes"
    )


@pytest.mark.parametrize(
    "argv",
    [["--features", "safetensors", "backend"], ["safetensors", "m.safetensors", "backend"]],
    ids=["probe", "load"],
)
def test_a_knob_word_that_is_not_knob_equals_value_is_one_line_and_exit_code_2(
    argv: list[str],
) -> None:
    """The child run by path, as modelmon runs it: a word without a value ends it as a knob
    value the installed version lacks does, before any engine is imported."""
    child = subprocess.run(
        [sys.executable, str(CHILD), *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (child.returncode, child.stdout) == (2, "")
    assert child.stderr == "modelmon engine safetensors: 'backend' is not KNOB=VALUE\n"


def test_an_engine_that_is_not_installed_says_which_extra_installs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether or not it is installed here: its module is hidden from the lookup."""
    import importlib.util

    find_spec = importlib.util.find_spec
    hidden = "runai_model_streamer"
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == hidden else find_spec(name, *a),
    )
    assert get_engine("runai").unavailable() == (
        "Run:ai Model Streamer is not installed here (runai_model_streamer not found): "
        "pip install 'modelmon[runai]'"
    )
