"""House rules about structure: the engine is Qt-free, modules are small, the CLI starts fast."""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QT = {"PySide6", "shiboken6", "pyqtgraph", "PyQt5", "PyQt6"}
MAX_LINES = 450  # the house rule says about 400


def _python_files(*folders: str) -> list[Path]:
    return sorted(
        path
        for folder in folders
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    )


def _imports(path: Path, package: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, a module of ``package``.

    ``from a import b`` yields both ``a`` and ``a.b`` (b may be a module). Relative imports
    are resolved against ``package``, or skipped without one.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level and package is None:
                continue
            if node.level:  # relative: resolve against the module's package
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def _package_of(path: Path) -> str:
    """The package a file under core/ imports in: core/model/formats/gguf.py -> ...model.formats."""
    rel = path.relative_to(ROOT / "core").parent.parts
    return ".".join(("modelmon", "core", *rel))


def test_core_source_never_imports_qt_or_gui():
    offenders = {}
    for path in _python_files("core"):
        for line, module in _imports(path, _package_of(path)):
            if module.split(".")[0] in QT or f"{module}.".startswith("modelmon.gui."):
                offenders.setdefault(f"{path.relative_to(ROOT)}:{line}", module)
    lines = [f"{where}: {module}" for where, module in offenders.items()]
    assert not lines, "modelmon.core must stay Qt-free:\n  " + "\n  ".join(lines)


WALK_CORE = """
import importlib, json, pkgutil, sys
import modelmon.core
failed = {}
names = ["modelmon.core"]
def onerror(name):
    failed[name] = repr(sys.exc_info()[1])
for info in pkgutil.walk_packages(modelmon.core.__path__, "modelmon.core.", onerror=onerror):
    if info.name.rsplit(".", 1)[-1] == "__main__":
        continue
    names.append(info.name)
    try:
        importlib.import_module(info.name)
    except Exception as error:
        failed[info.name] = repr(error)
qt = sorted(m for m in sys.modules if m.split(".")[0] in %r)
print(json.dumps({"imported": names, "failed": failed, "qt": qt}))
"""


def test_importing_all_of_core_loads_no_qt():
    result = subprocess.run(
        [sys.executable, "-c", WALK_CORE % sorted(QT)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT / "tests",  # not the repo root: `core` must not import as a top-level name
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert not report["failed"], f"modules of modelmon.core that fail to import: {report['failed']}"
    assert not report["qt"], (
        f"importing {len(report['imported'])} modules of modelmon.core loaded {report['qt']}"
    )


def test_gui_state_is_qt_free():
    """gui/state/ is the app's logic without Qt: tested without a QApplication, reusable."""
    offenders = {}
    for path in _python_files("gui/state"):
        for line, module in _imports(path, "modelmon.gui.state"):
            top = module.split(".")[0]
            qt_module = f"{module}.".startswith("modelmon.gui.") and not f"{module}.".startswith(
                "modelmon.gui.state."
            )
            if top in QT or qt_module:
                offenders.setdefault(f"{path.relative_to(ROOT)}:{line}", module)
    lines = [f"{where}: {module}" for where, module in offenders.items()]
    assert not lines, "modelmon.gui.state must stay Qt-free:\n  " + "\n  ".join(lines)


def test_core_is_in_layers_with_a_small_root():
    """At core/'s root only the public API, errors and options; the rest lives in its layer."""
    root = sorted(p.name for p in (ROOT / "core").glob("*.py"))
    assert len(root) <= 8, f"core/ has {len(root)} loose modules: {root}"
    layers = {p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").exists()}
    assert layers == {"model", "loading", "system", "measuring", "watching", "output"}, layers
    cli = [str(p.relative_to(ROOT)) for p in _python_files("core") if "cli" in p.stem]
    assert not cli, f"the command line belongs in modelmon/cli, not in the engine: {cli}"


def test_nothing_imports_the_source_folders_by_their_folder_name():
    """``import core`` works only from the repo root; installed, the package is modelmon.core."""
    offenders = {}
    for path in _python_files("core", "gui", "resources", "modelmon", "tests", "benchmarks"):
        for line, module in _imports(path):
            if module.split(".")[0] in {"core", "gui", "resources"}:
                offenders.setdefault(f"{path.relative_to(ROOT)}:{line}", module)
    lines = [f"{where}: {module}" for where, module in offenders.items()]
    assert not lines, "import modelmon.core / modelmon.gui instead:\n  " + "\n  ".join(lines)


def test_modules_are_small():
    sizes = {path: len(path.read_text().splitlines()) for path in _python_files("core", "gui")}
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p, n in sorted(sizes.items()) if n > MAX_LINES]
    assert not big, f"modules over {MAX_LINES} lines (split them, ~400 max):\n  " + "\n  ".join(big)


VERSION_IMPORTS = """
import json, sys
from modelmon.cli import main
try:
    main(["--version"])
except SystemExit:
    pass
heavy = ("numpy", "PySide6", "pyqtgraph", "safetensors", "gguf")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def test_version_answers_fast_and_imports_nothing_heavy():
    if importlib.util.find_spec("modelmon.cli") is None:
        pytest.skip("modelmon.cli does not exist yet (the `modelmon` script calls it)")
    script = shutil.which("modelmon", path=str(Path(sys.executable).parent))
    assert script, f"no `modelmon` console script next to {sys.executable}: pip install -e ."
    times = []
    for _ in range(3):
        start = time.perf_counter()
        result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=30)
        times.append(time.perf_counter() - start)
        assert result.returncode == 0, result.stderr
    from modelmon import __version__

    assert __version__ in result.stdout + result.stderr
    assert statistics.median(times) < 0.5, f"modelmon --version took {times} s"
    heavy = subprocess.run(
        [sys.executable, "-c", VERSION_IMPORTS], capture_output=True, text=True, timeout=30
    )
    assert heavy.returncode == 0, heavy.stderr
    loaded = json.loads(heavy.stdout.splitlines()[-1])
    assert not loaded, f"modelmon --version imported {loaded}: import them lazily"
