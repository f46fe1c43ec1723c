"""Models the engines load (made here, small), the skip of an engine that is not installed
(naming the extra that installs it), and a run held loaded so the watch can look at it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from modelmon.core import (
    Model,
    ProgramResult,
    open_model,
    write_gguf_model,
    write_safetensors_model,
)
from modelmon.core.configuration import parse_program
from modelmon.core.runs import ProgramRun, engine_unavailable

WAIT_S = 120.0


def needs(engine: str) -> None:
    """Skip, naming the extra that installs it, where ``engine`` cannot run here."""
    why = engine_unavailable(engine)
    if why is not None:
        pytest.skip(why)


@pytest.fixture(scope="session")
def llama_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 40 MB Llama-shaped checkpoint with the config.json that transformers loads."""
    folder = tmp_path_factory.mktemp("llama-hf")
    write_safetensors_model(
        folder, layers=2, hidden=1024, vocab=4096, seed=11, transformers_config=True
    )
    return folder


@pytest.fixture(scope="session")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 22 MB Llama-shaped Q8_0 GGUF that llama.cpp loads (it has a vocabulary)."""
    return write_gguf_model(
        tmp_path_factory.mktemp("llama-gguf") / "m.gguf", layers=2, hidden=1024, vocab=4096
    )


@pytest.fixture(scope="session")
def vae_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 13 MB diffusers AutoencoderKL folder (config.json and one safetensors file), made by
    diffusers in a child process: a class that both from_pretrained and from_single_file
    load."""
    needs("diffusers")
    folder = tmp_path_factory.mktemp("vae")
    make = (
        "import sys; from diffusers import AutoencoderKL; AutoencoderKL(block_out_channels="
        "(64, 128), layers_per_block=2, down_block_types=('DownEncoderBlock2D',) * 2, "
        "up_block_types=('UpDecoderBlock2D',) * 2).save_pretrained(sys.argv[1])"
    )
    subprocess.run([sys.executable, "-c", make, str(folder)], check=True, timeout=300)
    return folder


def run_held(
    tmp_path: Path, model: Model | Path, spec: str, path: str | None = None
) -> ProgramResult:
    """One engine run that, once loaded, waits (``MODELMON_ENGINE_HOLD``) until the watch has
    looked at it twice more, so what it holds (a mapping) is seen whatever the timing."""
    hold = tmp_path / f"hold-{time.monotonic_ns()}"
    hold.mkdir()
    opened = model if isinstance(model, Model) else open_model(model)
    run = ProgramRun(opened, parse_program(spec), path=path)
    outcome: dict[str, object] = {}

    def go() -> None:
        try:
            outcome["result"] = run.run()
        except BaseException as error:
            outcome["error"] = error

    previous = os.environ.get("MODELMON_ENGINE_HOLD")
    os.environ["MODELMON_ENGINE_HOLD"] = str(hold)
    thread = threading.Thread(target=go, name="test-engine-run")
    try:
        thread.start()
        _wait(lambda: (hold / "loaded").exists() or not thread.is_alive(), "the load")
        watch = run.watch
        if watch is not None and thread.is_alive():
            looks = watch.progress().looks
            _wait(lambda: watch.progress().looks >= looks + 2 or not thread.is_alive(), "looks")
    finally:
        (hold / "release").touch()
        thread.join(WAIT_S)
        if previous is None:
            os.environ.pop("MODELMON_ENGINE_HOLD", None)
        else:
            os.environ["MODELMON_ENGINE_HOLD"] = previous
    assert not thread.is_alive(), "the run did not end"
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    result = outcome["result"]
    assert isinstance(result, ProgramResult)
    return result


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def held(tmp_path: Path) -> Callable[..., ProgramResult]:
    return lambda model, spec, path=None: run_held(tmp_path, model, spec, path)
