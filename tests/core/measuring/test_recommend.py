"""recommend: a config that reads back, applies byte-identically, and knows RAM limits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import modelmon.core
import modelmon.core.output
from modelmon.core.errors import DoesNotFitError
from modelmon.core.loading.config_file import read_config
from modelmon.core.loading.strategies import get_strategy
from modelmon.core.measuring.recommend import recommend
from modelmon.core.measuring.search_space import candidates
from modelmon.core.model.formats import open_model

from ..system.test_memory_cgroup import plan_only


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``modelmon`` in ``cwd``: without -o, recommend writes its config there."""
    return subprocess.run(
        [sys.executable, "-m", "modelmon", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@pytest.fixture(scope="module")
def recommended(sharded_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    output = tmp_path_factory.mktemp("rec") / "modelmon.toml"
    # 15 s: the ceilings, the first load and the library (the baseline, second in the grid)
    # fit with seconds to spare while other processes keep both cores busy (7 s did not);
    # more only buys runs nothing here reads.
    done = run_cli(
        "recommend",
        str(sharded_model),
        "-o",
        str(output),
        "--budget",
        "15",
        "--workers",
        "2",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    return output, json.loads(done.stdout, parse_constant=_not_strict)


def _not_strict(constant: str) -> object:
    raise ValueError(f"not strict JSON: {constant}")


def test_json_is_strict_and_versioned(recommended: tuple[Path, dict]) -> None:
    """recommend's part of tests/modelmon/cli/test_json.py, on this search (one fewer)."""
    _, document = recommended
    assert next(iter(document)) == "schema_version"
    assert document["schema_version"] == modelmon.core.output.SCHEMA_VERSION
    assert document["format_version"] == 1 and document["recommended"]["strategy"]


def test_config_reads_back_and_applies_byte_identically(
    sharded_model: Path, recommended: tuple[Path, dict]
) -> None:
    output, document = recommended
    config = read_config(output)
    assert config.strategy == document["recommended"]["strategy"]
    assert config.options.cache == "keep"  # measured cold, applied without evicting anything
    assert document["evidence"]["all_runs_verified"] is True
    assert document["evidence"]["runs"] >= 1 and document["explanation"]
    assert document["apply"]["modelmon"].startswith(
        "import modelmon.core; tensors = modelmon.core.load("
    )
    tensors = modelmon.core.load(sharded_model, config=output)
    model = open_model(sharded_model)
    expected: dict[str, np.ndarray] = {}
    for file in model.files:
        expected.update(safetensors.numpy.load_file(file.path))
    assert set(tensors) == set(expected)
    for name, array in expected.items():
        assert tensors[name].tobytes() == array.tobytes() and tensors[name].dtype == array.dtype


def test_failure_mode_and_baseline_are_explained(recommended: tuple[Path, dict]) -> None:
    _, document = recommended
    text = " ".join(document["explanation"])
    assert "library" in text and "bound" in text
    # A role leads a note; why one ranked above the pick is not the pick may follow it.
    roles = {a.get("note", "").split("; ")[0] for a in document["alternatives"]}
    if document["recommended"]["strategy"] != "library":
        assert "baseline" in roles


def test_a_model_larger_than_its_memory_is_answered_that_it_does_not_fit(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recommendation is a way to load the weights: a limit below them is answered with
    what a load needs and what would fit, before anything is measured, never with a load
    that keeps nothing."""
    plan_only(monkeypatch)
    model = open_model(sharded_model)
    measured: list[object] = []
    monkeypatch.setattr("modelmon.core.measuring.recommend.search_ceilings", measured.append)
    with pytest.raises(DoesNotFitError, match="does not fit") as caught:
        recommend(model, budget_s=6, memory_limit=model.total_bytes // 2, workers=2)
    assert measured == []  # refused before the ceilings
    found = caught.value
    assert found.needs_bytes > model.total_bytes and found.allowed_bytes == model.total_bytes // 2
    words = str(found)
    assert "\n" not in words and "--memory-limit" in words and "--ranks" in words


def test_candidates_keep_the_weights() -> None:
    class FakeModel:
        total_bytes = 10

    grid = candidates(FakeModel(), 4)  # type: ignore[arg-type]
    assert any(c.strategy == "warmup" for c in grid)
    assert not any(c.options.discard for c in grid)


def test_each_way_of_loading_is_screened_before_a_second_copying_reader() -> None:
    """A search whose budget fits three candidates beside the baseline and the failure mode
    measures loading without a copy before a second way of reading into arrays."""

    class FakeModel:
        total_bytes = 10

    grid = candidates(FakeModel(), 4)  # type: ignore[arg-type]
    plain = [c for c in grid if not c.role]
    allocating = [i for i, c in enumerate(plain) if get_strategy(c.strategy).allocates]
    views = next(i for i, c in enumerate(plain) if not get_strategy(c.strategy).allocates)
    assert views < allocating[1]


def test_cli_memory_limit_says_why(sharded_model: Path, tmp_path: Path) -> None:
    done = run_cli(
        "recommend",
        str(sharded_model),
        "--budget",
        "5",
        "--workers",
        "2",
        "--memory-limit",
        "1MiB",
        cwd=tmp_path,
    )
    # The weights outgrow 1 MiB: said before anything is measured, with what would fit.
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "does not fit" in done.stderr
    assert "--memory-limit" in done.stderr and "discard=true" not in done.stdout
    assert not list(tmp_path.glob("*.toml"))  # no configuration of a load that keeps nothing
