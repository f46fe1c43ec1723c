"""House rules about structure: the layers and boundaries (import-linter's contracts, in
pyproject.toml), no import cycles, a Qt-free engine, small modules, and a CLI that answers
--version without loading the heavy libraries (its start-up time is a benchmark's business)."""

from __future__ import annotations

import ast
import importlib
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

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


def test_core_has_a_small_root_and_no_command_line():
    """At core/'s root the public API and the vocabulary every layer shares (errors, options,
    limits, units); the rest lives in its layer, each placed by the layers contract."""
    root = sorted(p.name for p in (ROOT / "core").glob("*.py"))
    assert len(root) <= 8, f"core/ has {len(root)} loose modules: {root}"
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
    sources = _python_files("core", "gui", "modelmon", "benchmarks")
    sizes = {path: len(path.read_text().splitlines()) for path in sources}
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


def test_version_answers_without_importing_anything_heavy():
    script = shutil.which("modelmon", path=str(Path(sys.executable).parent))
    assert script, f"no `modelmon` console script next to {sys.executable}: pip install -e ."
    result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    from modelmon import __version__

    assert __version__ in result.stdout + result.stderr
    heavy = subprocess.run(
        [sys.executable, "-c", VERSION_IMPORTS], capture_output=True, text=True, timeout=30
    )
    assert heavy.returncode == 0, heavy.stderr
    loaded = json.loads(heavy.stdout.splitlines()[-1])
    assert not loaded, f"modelmon --version imported {loaded}: import them lazily"


PYPROJECT = ROOT / "pyproject.toml"
SOURCE_PACKAGES = ("modelmon", "benchmarks")
LINT = """
import json, sys
import grimp, modelmon, benchmarks
from importlinter.cli import lint_imports
here = [modelmon.__file__, benchmarks.__file__]
graph = grimp.build_graph(*%r, cache_dir=None)
print(json.dumps({"files": here, "modules": sorted(graph.modules)}), flush=True)
sys.exit(lint_imports(config_filename=%r, no_cache=True, no_logo=True))
"""


def _wheel_layout(folder: Path) -> Path:
    """The source packages as the wheel installs them, as links in ``folder``: grimp finds
    modules by walking a package's folder, and modelmon.core's folder is core/, which the
    editable install maps through an import hook grimp cannot follow."""
    mapped = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    top = folder / "modelmon"
    top.mkdir()
    for entry in (ROOT / mapped["modelmon"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for name, source in mapped.items():
        if name != "modelmon":
            (folder / name.replace(".", "/")).symlink_to(ROOT / source)
    (folder / "benchmarks").symlink_to(ROOT / "benchmarks")
    return folder


def _modules_in_source() -> set[str]:
    """Every module of the source packages, named as it is imported."""
    mapped = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    found = set()
    for name, source in [*mapped.items(), ("benchmarks", "benchmarks")]:
        for path in _python_files(source):
            parts = path.relative_to(ROOT / source).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.add(".".join([name, *parts]))
    return found


def test_the_import_contracts_hold_and_see_every_module(tmp_path: Path):
    """pyproject.toml's [tool.importlinter] contracts: the engine's layers, the front ends on
    the root API only, Qt kept out of the engine and the app's state, no import cycles. The
    graph they are checked on holds every module of the source (a contract over an empty
    graph would pass whatever the code does)."""
    tree = _wheel_layout(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", LINT % (SOURCE_PACKAGES, str(PYPROJECT))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tree,  # first on sys.path: the packages are imported from the links
    )
    first, _, report = done.stdout.partition("\n")
    seen = json.loads(first)
    assert all(file.startswith(str(tree)) for file in seen["files"]), seen["files"]
    missing = _modules_in_source() - set(seen["modules"])
    assert not missing, f"modules the contracts cannot see: {sorted(missing)}"
    assert done.returncode == 0, report + done.stderr


def test_the_front_end_contract_names_every_front_end():
    """Every package of modelmon but the engine is a source of the contract that keeps the
    front ends on the root API: a new one is held to it as well."""
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c["id"] == "front-ends-use-the-root-api")
    children = {
        "modelmon." + (p.stem if p.suffix == ".py" else p.name)
        for p in [*(ROOT / "modelmon").iterdir(), ROOT / "gui", ROOT / "resources"]
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert set(contract["source_modules"]) == (children | {"benchmarks"})


def test_the_front_ends_may_reach_below_the_root_only_for_the_vocabulary():
    """The contract forbids every module and package of the engine but the vocabulary
    (errors, options, limits, configuration), and everything below the faces of the public
    modules (output, system, storage, measuring, model, runs): a new layer is closed to the
    front ends from the start."""
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c["id"] == "front-ends-use-the-root-api")
    layers = {
        "modelmon.core." + (p.stem if p.suffix == ".py" else p.name)
        for p in (ROOT / "core").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    open_layers = {f"modelmon.core.{v}" for v in (*VOCABULARY, *FACES)}
    assert set(contract["forbidden_modules"]) == (layers - open_layers) | {
        f"modelmon.core.{face}.*" for face in FACES
    }


FRONT_END_TESTS = ("tests/modelmon", "tests/gui", "tests/benchmarks")
# The engine's public modules beside its root: the vocabulary every layer shares (whole), and
# the packages whose face (their __init__) the front ends use, nothing below it.
VOCABULARY = ("errors", "options", "limits", "configuration")
FACES = ("output", "system", "storage", "measuring", "model", "runs")


def _deeper_than_the_root(module: str) -> bool:
    """``modelmon.core.loading.runner`` and ``modelmon.core.system.cache`` are;
    ``modelmon.core.load`` (``from modelmon.core import load``, as ``_imports`` names
    it), a face's name (``modelmon.core.system.check_output``) and the vocabulary's modules
    are not."""
    import modelmon.core

    parts = module.split(".")
    if parts[:2] != ["modelmon", "core"] or len(parts) == 2:
        return False
    if parts[2] in VOCABULARY:
        return False
    if len(parts) == 3:
        return parts[2] not in (*FACES, *modelmon.core.__all__)
    if parts[2] in FACES and len(parts) == 4:
        return parts[3] not in importlib.import_module(".".join(parts[:3])).__all__
    return True


def test_the_front_ends_tests_use_the_root_api_too():
    """Tests of the CLI, fleet, app and benchmarks import the engine as those do: from
    ``modelmon.core`` only (tests/core/ tests the engine's internals and may reach them)."""
    offenders = {
        f"{path.relative_to(ROOT)}:{line}": module
        for path in _python_files(*FRONT_END_TESTS)
        for line, module in _imports(path)
        if _deeper_than_the_root(module)
    }
    lines = [f"{where}: {module}" for where, module in offenders.items()]
    assert not lines, "import these from modelmon.core:\n  " + "\n  ".join(lines)
