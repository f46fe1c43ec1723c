"""Widgets only draw: no module of gui/widgets (nor gui/plots) runs engine work, starts a
thread or a process, or calls the state's work. They draw what the state holds and say
what the user asked for (signals); the state (gui/state, Qt-free) does the rest.

Read from the source (no Qt needed). The checker is shown failing on a widget that would
run discovery or a load itself, so a pass means something.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WIDGETS = sorted((ROOT / "gui" / "widgets").glob("*.py"))
PLOTS = sorted((ROOT / "gui" / "plots").glob("*.py"))

# What a widget may take from the engine: records it draws and the vocabulary its knobs
# offer. Nothing that reads a file, starts a load or looks at the machine.
ENGINE_NAMES = {
    "ABResult": "a finished A/B, drawn as its verdict",
    "Ceilings": "measured ceilings, drawn as lines and a label",
    "Ceiling": "one measured ceiling, drawn as a line",
    "Discovery": "the models a search found, listed",
    "Model": "a parsed model's files and sizes: the plots' offset axis",
    "LoadResult": "a finished load, drawn as its block timeline",
    "BlockTiming": "a block's load times, drawn as a bar",
    "DescriptorTally": "counts readers per descriptor in the reads it is given (arithmetic)",
    "LoadOptions": "the options record a configuration panel edits",
    "CACHE_MODES": "the cache states a user picks from",
    "FADVISE_HINTS": "a knob's choices",
    "MADVISE_HINTS": "a knob's choices",
    "PARTITIONS": "a knob's choices",
    "PREFETCH_MODES": "a knob's choices",
    "MAX_PARALLEL": "a spin box's limit",
    "DEFAULT_BUDGET_S": "the recommendation budget offered (the CLI's default too)",
    "MIN_BUDGET_S": "a spin box's limit",
    "MAX_BUDGET_S": "a spin box's limit",
    "MIN_QUIET_S": "a spin box's limit",
}
# The engine's vocabulary modules, public beside its root (the names above come from either).
VOCABULARY = ("modelmon.core.errors", "modelmon.core.options", "modelmon.core.limits")
# The engine's public faces beside its root: their names are held to ENGINE_NAMES as the root's.
FACES = tuple(
    f"modelmon.core.{face}"
    for face in ("output", "system", "storage", "measuring", "model", "runs", "configuration")
)
# The state's work: what runs a job, a task or a search. A widget asks for it with a signal.
STATE_WORK = {
    "AppState",
    "Workbench",
    "JobRunner",
    "Job",
    "SingleRun",
    "ABJob",
    "CeilingsJob",
    "RecommendJob",
    "WatchJob",
    "make_session",
    "Task",
    "Tasks",
    "ModelOpener",
    "gather",
    "demo_index",
    "running_processes",
    "watch_request",
}
# Calls that start work on a state object (the state's methods behind the user's requests).
WORK_METHODS = {
    "refresh",
    "open",
    "open_path",
    "use_demo",
    "run",
    "run_ab",
    "measure_ceilings",
    "recommend",
    "watch",
    "cancel",
}
NO_THREADS = {"threading", "multiprocessing", "subprocess", "concurrent", "psutil", "socket"}


def _problems(source: str, strict: bool = True) -> list[str]:
    """What in ``source`` (a widget module) is not drawing; ``strict`` also holds it to
    STATE_WORK and WORK_METHODS (plots are held to the engine names only)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if alias.name.startswith("modelmon.core") or top in NO_THREADS:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [alias.name for alias in node.names]
            if module.split(".")[0] in NO_THREADS:
                found.append(f"line {node.lineno}: from {module} import")
            elif module == "modelmon" and "core" in names:
                found.append(f"line {node.lineno}: the engine as a module")
            elif module in ("modelmon.core", *FACES, *VOCABULARY):
                found += [
                    f"line {node.lineno}: {name} from the engine"
                    for name in names
                    if name not in ENGINE_NAMES
                ]
            elif module.startswith("modelmon.core."):
                found.append(f"line {node.lineno}: {module} (below the engine's root)")
            elif strict and module.startswith("modelmon.gui.state"):
                found += [
                    f"line {node.lineno}: {name}, the state's work"
                    for name in names
                    if name in STATE_WORK
                ]
        elif (
            strict
            and isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in WORK_METHODS
        ):
            found.append(f"line {node.lineno}: calls .{node.func.attr}()")
    return found


def test_no_widget_runs_engine_work():
    offenders = {
        str(path.relative_to(ROOT)): problems
        for path in WIDGETS
        if (problems := _problems(path.read_text()))
    }
    assert not offenders, offenders


def test_plots_take_only_records_from_the_engine():
    offenders = {
        str(path.relative_to(ROOT)): problems
        for path in PLOTS
        if (problems := _problems(path.read_text(), strict=False))
    }
    assert not offenders, offenders


def test_every_widget_module_is_checked():
    names = {path.stem for path in WIDGETS}
    assert {"start_page", "strategy_panel", "watch_dialog", "recommend_dialog"} <= names
    assert len(WIDGETS) >= 12


def test_the_checker_catches_a_widget_that_discovers_or_loads_itself():
    discovering = """
from modelmon.core import discover_models
class StartPage:
    def showEvent(self, event):
        self.discovery = discover_models()
"""
    loading = """
import threading
from modelmon import core
def run_clicked(model):
    threading.Thread(target=lambda: core.measure(model)).start()
"""
    reaching = """
from modelmon.gui.state.tasks import Task
from modelmon.gui.state.model_info import gather
def chosen(self, path, bench):
    Task(lambda: gather(path), "open", print, print).start()
    bench.run("A")
"""
    assert _problems(discovering) == ["line 2: discover_models from the engine"]
    assert _problems(loading) == ["line 2: import threading", "line 3: the engine as a module"]
    assert _problems(reaching) == [
        "line 2: Task, the state's work",
        "line 3: gather, the state's work",
        "line 6: calls .run()",
    ]
