"""The wheel ships every package and file that the editable install lets us import.

The import names come from folders through ``package-dir`` (``modelmon.core`` is ``core/``)
and an explicit ``packages`` list. An editable install imports a folder that isn't listed,
so everything works here and the wheel silently lacks it: these tests build the real wheel.
"""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
PACKAGE_DIR: dict[str, str] = SETUPTOOLS["package-dir"]
SKIP_DIRS = {"__pycache__", "build", "dist"}


def _folders() -> dict[str, Path]:
    """Every folder under the package-dir roots, by the dotted name it imports as."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIR.items():
        root = ROOT / folder
        found[package] = root
        for sub in sorted(p for p in root.rglob("*") if p.is_dir()):
            rel = sub.relative_to(root).parts
            if any(part in SKIP_DIRS or part.startswith(".") or "." in part for part in rel):
                continue
            found[".".join((package, *rel))] = sub
    return found


def _wheel_path(package: str) -> str:
    return package.replace(".", "/")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """Build the wheel from a copy of the tree, so no build/ or *.egg-info lands in the repo."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    for name in {"pyproject.toml", "README.md", "LICENSE", *PACKAGE_DIR.values()}:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        elif path.exists():
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"wheel build failed:\n{result.stdout}\n{result.stderr}"
    (built,) = out.glob("*.whl")
    with zipfile.ZipFile(built) as whl:
        yield whl


def test_packages_list_matches_folders_with_init():
    with_init = {name for name, path in _folders().items() if (path / "__init__.py").exists()}
    listed = set(SETUPTOOLS["packages"])
    unlisted = sorted(with_init - listed)
    stale = sorted(listed - with_init)
    assert not unlisted, (
        f"folders with __init__.py missing from [tool.setuptools] packages in pyproject.toml "
        f"(they import in editable mode but are not in the wheel): {unlisted}"
    )
    assert not stale, f"[tool.setuptools] packages lists packages with no __init__.py: {stale}"


def test_every_python_file_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    missing: dict[str, list[str]] = {}
    for package, folder in _folders().items():
        for source in sorted(folder.glob("*.py")):
            if f"{_wheel_path(package)}/{source.name}" not in names:
                missing.setdefault(package, []).append(source.name)
    assert not missing, (
        "Python files missing from the wheel (each folder needs an __init__.py and its "
        "dotted name in [tool.setuptools] packages):\n"
        + "\n".join(f"  {pkg} ({_folders()[pkg]}): {files}" for pkg, files in missing.items())
    )


def test_resource_files_are_in_the_wheel(wheel):
    patterns = SETUPTOOLS.get("package-data", {}).get("modelmon.resources", [])
    root = ROOT / PACKAGE_DIR["modelmon.resources"]
    names = set(wheel.namelist())
    missing = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if any(part in SKIP_DIRS for part in rel.parts) or path.suffix in {".py", ".pyc"}:
            continue
        if f"modelmon/resources/{rel.as_posix()}" not in names:
            covered = any(fnmatch(path.name, pattern) for pattern in patterns)
            missing.append(
                f"{rel}" + ("" if covered else f" (no package-data pattern of {patterns})")
            )
    assert not missing, f"resources missing from the wheel: {missing}"


def test_console_script_and_main_module(wheel):
    names = set(wheel.namelist())
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel.read(entry_points).decode())
    scripts = dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}
    assert "modelmon" in scripts, f"no 'modelmon' console script in the wheel: {scripts}"
    module = scripts["modelmon"].split(":")[0]
    candidates = {f"{_wheel_path(module)}.py", f"{_wheel_path(module)}/__init__.py"}
    assert candidates & names, f"console script target {module} not in wheel"
    assert "modelmon/__main__.py" in names, "python -m modelmon would not work from the wheel"


FROM_WHEEL = """
import json, importlib.resources, modelmon, modelmon.resources as r
names = [r.ICON_SVG, r.ICON_PNG, r.DESKTOP_ENTRY]
files = importlib.resources.files("modelmon.resources")
print(json.dumps({n: files.joinpath(n).is_file() for n in names} | {"file": modelmon.__file__}))
"""


def test_wheel_installs_into_a_fresh_venv(wheel, tmp_path: Path):
    """The wheel alone (no source tree): resources found, the script answers --version.

    ``--no-deps`` keeps the test offline and quick: neither check imports a dependency.
    """
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel.filename],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    found = subprocess.run(
        [python, "-c", FROM_WHEEL], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert str(venv) in report.pop("file"), "imported modelmon from the tree, not the wheel"
    assert all(report.values()), f"resources missing from the installed wheel: {report}"
    version = subprocess.run(
        [venv / "bin" / "modelmon", "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() or version.stderr.strip(), "modelmon --version printed nothing"
