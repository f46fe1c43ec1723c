"""The library API: modelmon.core's root, and its load / measure."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import modelmon.core
from modelmon.core.api import load
from modelmon.core.errors import (
    ConfigError,
    LoadCancelled,
    LoadError,
    OptionsError,
    ReadaheadError,
    ReadaheadSkippedWarning,
)
from modelmon.core.loading import preflight
from modelmon.core.system.memory import MemoryFacts


def test_load_returns_every_tensor_in_file_order(sharded_model: Path) -> None:
    tensors = modelmon.core.load(sharded_model, threads=3, workers=2)
    model = modelmon.core.open_model(sharded_model)
    assert list(tensors) == [e.name for e in model.extents]
    first = safetensors.numpy.load_file(model.files[0].path)
    for name, array in first.items():
        np.testing.assert_array_equal(tensors[name], array)


def test_load_refuses_what_does_not_fit(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = MemoryFacts(
        total=1 << 30,
        available=4096,
        page_cache=0,
        cgroup_limit=None,
        cgroup_used=None,
        usable=4096,
    )
    monkeypatch.setattr(preflight, "memory_facts", lambda: tiny)
    with pytest.raises(LoadError, match="would not fit") as caught:
        modelmon.core.load(sharded_model)
    assert "\n" not in str(caught.value)
    # The engine's words serve every front end: the CLI's --discard and the app's discard
    # box alike, no flag of one of them.
    assert "turn discard on" in str(caught.value) and "--" not in str(caught.value)
    assert modelmon.core.load(sharded_model, discard=True, verify=True) == {}


def test_stop_flag_cancels_an_in_process_load(sharded_model: Path) -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(LoadCancelled):
        modelmon.core.load(sharded_model, "pread", stop=stop)


def test_bad_names_are_options_errors(sharded_model: Path) -> None:
    with pytest.raises(OptionsError, match="unknown strategy"):
        modelmon.core.load(sharded_model, "teleport")
    with pytest.raises(OptionsError, match="unknown option 'thread'"):
        modelmon.core.load(sharded_model, thread=4)


def test_measure_runs_in_workers(sharded_model: Path) -> None:
    result = modelmon.core.measure(sharded_model, "sequential", workers=2, cache="cold")
    assert result.status == "ok" and result.cache.cold and len(result.workers) == 2


def test_a_configs_readahead_is_skipped_where_it_cannot_be_set(
    model_without_readahead: Path, tmp_path: Path
) -> None:
    model = model_without_readahead
    config = tmp_path / "modelmon.toml"
    config.write_text(
        'format_version = 1\n[recommended]\nstrategy = "sequential"\nreadahead = 4096\n'
    )
    with pytest.warns(ReadaheadSkippedWarning, match="readahead of 4096 KiB is not applied"):
        assert load(model, config=config)  # tmpfs has no readahead: loaded as it is
    with pytest.raises(ReadaheadError):
        load(model, config=config, readahead=4096)  # asked for explicitly: refused


def test_a_config_that_keeps_nothing_is_refused_by_load(
    sharded_model: Path, tmp_path: Path
) -> None:
    """A discard configuration measures the storage; load() of it would return nothing."""
    config = tmp_path / "modelmon.toml"
    config.write_text(
        'format_version = 1\n[recommended]\nstrategy = "sequential"\ndiscard = true\n'
    )
    with pytest.raises(ConfigError, match="discards what it reads") as caught:
        load(sharded_model, config=config)
    assert "\n" not in str(caught.value)
    assert load(sharded_model, config=config, discard=False)  # the weights, as asked
    assert load(sharded_model, config=config, discard=True) == {}  # asked for: measured
    assert modelmon.core.measure(sharded_model, config=config).status == "ok"


def test_load_of_a_rank_is_its_tensor_parallel_part(sharded_model: Path) -> None:
    whole = load(sharded_model)
    parts = [load(sharded_model, rank=(rank, 2)) for rank in range(2)]
    for name, array in whole.items():
        if array.ndim < 2:
            assert all(np.array_equal(part[name], array) for part in parts)
            continue
        axis = 1 if "o_proj" in name or "down_proj" in name else 0
        joined = np.concatenate([part[name] for part in parts], axis=axis)
        assert np.array_equal(joined, array), name


ROOT_INIT = Path(modelmon.core.__file__)


def _typed_imports() -> dict[str, tuple[str, str]]:
    """{name: (module, attribute)} of the root's ``if TYPE_CHECKING:`` imports."""
    tree = ast.parse(ROOT_INIT.read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        if node.test.id == "TYPE_CHECKING"
    )
    return {
        alias.asname or alias.name: (node.module or "", alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_roots_names_are_its_typed_imports_and_each_resolves() -> None:
    """What type checkers read and what ``__getattr__`` imports are the same names, from the
    same places; each is there, none listed twice, none hides a module of the engine."""
    words = [word for _, names in modelmon.core._EXPORTS for word in names.split()]
    assert len(words) == len(set(words)), "a name listed twice in _EXPORTS"
    assert _typed_imports() == modelmon.core._WHERE
    assert modelmon.core.__all__ == sorted(modelmon.core._WHERE)
    layers = {p.stem for p in ROOT_INIT.parent.iterdir() if not p.name.startswith("_")}
    assert not layers & set(modelmon.core.__all__)
    for name in modelmon.core.__all__:
        assert getattr(modelmon.core, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = modelmon.core.nothing_here


IMPORT_ROOT = """
import json, sys
from modelmon.core import human_bytes
from modelmon.core.options import LoadOptions
from modelmon.core.errors import OptionsError
from modelmon.core.limits import range_text
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("modelmon.core.", "numpy")))))
"""


def test_the_root_imports_only_what_is_asked_for() -> None:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ROOT], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert loaded == [
        "modelmon.core.errors",
        "modelmon.core.limits",
        "modelmon.core.options",
        "modelmon.core.units",
    ]


# The root's names no front end imports, each there for the library's users: a verb, or the type
# of what a public verb returns or hands to a callback (a caller builds, matches or annotates it).
FOR_LIBRARY_USERS = {
    "measure": "the library's verb: a load in worker processes, only its measurement back",
    "watch": "the library's verb: another program's load, measured from outside",
    "LoaderAdvice": "LoaderRecommendation.advice",
    "Run": "the protocol every run_for result keeps",
    "RanksResult": "what RanksRun.run returns",
    "LoaderRecommendation": "what recommend_with_loader returns",
    "BudgetUse": "Recommendation.budget",
    "SideSummary": "ABResult's sides",
    "judge": "a Verdict of one's own runs, as run_ab judges them",
    "candidates": "the grid recommend searches, for a given model and memory",
    "Primed": "LoadRun.priming",
    "prime_mode": "set_prime_mode's other half",
    "WorkerReady": "a message on_message receives",
    "WorkerDone": "a message on_message receives",
    "Reference": "WatchResult's storage references",
    "DEMO_RECIPE": "what the demo models are made of",
    "evict": "drop a model's pages from the page cache, as cold runs do",
    "residency_of": "how much of a file the page cache holds",
    "max_memory_limit": "memory_limit_range's upper end",
    "ObjectURL": "parse_object_url's result",
    "ObjectFacts": "a remote model file's facts (ModelFile.remote)",
}


def _front_end_names() -> set[str]:
    """Every name the CLI, the app, the fleet and the benchmarks import from the root."""
    repo = ROOT_INIT.parent.parent
    used = set()
    for folder in ("modelmon", "gui", "benchmarks"):
        for path in (repo / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "modelmon.core":
                    used.update(alias.name for alias in node.names)
    return used


def test_the_root_is_a_face_every_name_of_it_has_a_user():
    """The root holds what a front end imports, and what a library user needs beside it (named
    above with why): process plumbing, tuning and internals stay in their layers."""
    used = _front_end_names()
    assert used <= set(modelmon.core.__all__)
    unused = set(modelmon.core.__all__) - used
    assert unused == set(FOR_LIBRARY_USERS), (
        f"no user: {sorted(unused - set(FOR_LIBRARY_USERS))}; "
        f"used by a front end now: {sorted(set(FOR_LIBRARY_USERS) - unused)}"
    )
