"""The library API: modelmon.core's root, and its load / measure."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import safetensors.numpy

import modelmon.core
from modelmon.core import errors
from modelmon.core.api import load
from modelmon.core.errors import (
    ConfigError,
    LoadCancelled,
    LoadError,
    OptionsError,
    ReadaheadError,
    ReadaheadSkippedWarning,
)
from modelmon.core.faces import where
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
# The root, and the public modules beside it with a face of their own (core/faces.py).
FACES = {
    name: importlib.import_module(name)
    for name in (
        "modelmon.core",
        "modelmon.core.output",
        "modelmon.core.system",
        "modelmon.core.storage",
        "modelmon.core.measuring",
        "modelmon.core.model",
        "modelmon.core.runs",
    )
}


def _typed_imports(package: ModuleType) -> dict[str, tuple[str, str]]:
    """{name: (module, attribute)} of a face's ``if TYPE_CHECKING:`` imports."""
    tree = ast.parse(Path(str(package.__file__)).read_text())
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


@pytest.mark.parametrize("package", FACES)
def test_a_faces_names_are_its_typed_imports_and_each_resolves(package: str) -> None:
    """What type checkers read and what ``__getattr__`` imports are the same names, from the
    same places; each is there, none listed twice, none hides a module of its package (a
    submodule imported later would replace the name)."""
    face = FACES[package]
    words = [word for _, names in face._EXPORTS for word in names.split()]
    assert len(words) == len(set(words)), "a name listed twice in _EXPORTS"
    assert _typed_imports(face) == where(face._EXPORTS)
    assert face.__all__ == sorted(where(face._EXPORTS))
    folder = Path(str(face.__file__)).parent
    modules = {p.stem for p in folder.iterdir() if not p.name.startswith("_")}
    assert not modules & set(face.__all__)
    for name in face.__all__:
        assert getattr(face, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = face.nothing_here


def test_the_root_fits_on_a_screen_and_holds_every_error() -> None:
    """The root is the library's face: its verbs, their records, the configurations and
    every error and warning class of modelmon.core.errors, the very classes raised."""
    assert len(modelmon.core.__all__) <= 80
    classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, (errors.ModelmonError, Warning))
        if value.__module__ == errors.__name__
    }
    assert classes <= set(modelmon.core.__all__), sorted(classes - set(modelmon.core.__all__))
    for name in classes:
        assert getattr(modelmon.core, name) is getattr(errors, name)
    with pytest.raises(modelmon.core.ModelmonError):
        modelmon.core.open_model("/nonexistent/model.safetensors")


IMPORT_ROOT = """
import json, sys
from modelmon.core.output import human_bytes
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
        "modelmon.core.faces",
        "modelmon.core.limits",
        "modelmon.core.options",
        "modelmon.core.output",
        "modelmon.core.units",
    ]


# The root's names no front end imports, each there for the library's users: a verb, or the type
# of what a public verb returns or hands to a callback (a caller builds, matches or annotates it).
# The error classes are there whoever imports them: a library user catches them first.
FOR_LIBRARY_USERS = {
    "measure": "the library's verb: a load in worker processes, only its measurement back",
    "watch": "the library's verb: another program's load, measured from outside",
    "RanksAB": "what run_ranks_ab returns",
    "LoaderRecommendation": "what recommend_with_loader returns",
}
# The names of a public module no front end imports, each with why it is there.
FACE_NAMES_FOR_LIBRARY_USERS = {
    "modelmon.core.runs": {
        "Run": "the protocol every run_for result keeps",
        "WorkerReady": "a message on_message receives",
        "WorkerDone": "a message on_message receives",
    },
    "modelmon.core.measuring": {
        "LoaderAdvice": "LoaderRecommendation.advice",
        "ServerAdvice": "what recommend_server returns",
        "BudgetUse": "Recommendation.budget",
        "judge": "a Verdict of one's own runs, as run_ab judges them",
        "candidates": "the grid recommend searches, for a given model and memory",
    },
    "modelmon.core.model": {"DEMO_RECIPE": "what the demo models are made of"},
    "modelmon.core.system": {
        "evict": "drop a model's pages from the page cache, as cold runs do",
        "residency_of": "how much of a file the page cache holds",
        "prime_mode": "set_prime_mode's other half",
        "Primed": "LoadRun.priming",
        "max_memory_limit": "memory_limit_range's upper end",
    },
    "modelmon.core.storage": {
        "PacePoint": "ReadStats.pace: the connections and part size at each change",
        "ObjectURL": "parse_object_url's result",
        "ObjectFacts": "a remote model file's facts (ModelFile.remote)",
    },
}


def _front_end_names(package: str) -> set[str]:
    """Every name the CLI, the app, the fleet and the benchmarks import from ``package``."""
    repo = ROOT_INIT.parent.parent
    used = set()
    for folder in ("modelmon", "gui", "benchmarks"):
        for path in (repo / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == package:
                    used.update(alias.name for alias in node.names)
    return used


@pytest.mark.parametrize("package", FACES)
def test_every_name_of_a_face_has_a_user(package: str) -> None:
    """A face holds what a front end imports, and what a library user needs beside it (named
    above with why): process internals and tuning stay in their layers."""
    names = set(FACES[package].__all__)
    if package == "modelmon.core":
        names -= {n for n in names if n.endswith(("Error", "Warning", "Cancelled"))}
        for_users = FOR_LIBRARY_USERS
    else:
        for_users = FACE_NAMES_FOR_LIBRARY_USERS.get(package, {})
    used = _front_end_names(package)
    assert used <= set(FACES[package].__all__)
    unused = names - used
    assert unused == set(for_users), (
        f"no user: {sorted(unused - set(for_users))}; "
        f"used by a front end now: {sorted(set(for_users) - unused)}"
    )
