"""The ``dev`` script's optional test engines: one function installs each (issue #66), and
it says which tests skip when an install fails, without stopping the run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DEV = Path(__file__).resolve().parents[1] / "dev"


def function(name: str) -> str:
    """A shell function of the dev script, as written there."""
    found = re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", DEV.read_text(), re.M | re.S)
    assert found is not None, f"dev has no function {name}"
    return found.group(0)


def run_install(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = (
        'say() { printf "dev: %s\\n" "$*" >&2; }\n'
        + function("install_test_engine")
        + 'install_test_engine "$@"\n'
    )
    return subprocess.run(
        ["bash", "-c", script, "dev", *args],
        env={"VENV": str(venv), "PATH": "/usr/bin:/bin", "PIP_NO_INDEX": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_engine_that_imports_is_not_installed_again(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    done = run_install(tmp_path, "json", "its tests", "no-such-distribution")
    assert done.returncode == 0 and done.stderr == ""
    assert not (tmp_path / "pip.log").exists()


def test_a_failed_install_says_which_tests_skip(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    wheel = str(tmp_path / "absent.whl")  # a local file that is not there: no index asked
    done = run_install(tmp_path, "modelmon_absent_module", "its engine tests", wheel)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"dev: pip install {wheel} (for its engine tests)",
        "dev: WARNING: installing modelmon_absent_module failed (.venv/pip.log): its engine "
        "tests skip",
    ]
    assert (tmp_path / "pip.log").read_text()


def test_every_optional_engine_is_installed_by_the_one_function() -> None:
    body = function("ensure_test_engines")
    assert "pip install" not in body and "-m pip" not in body
    installed = re.findall(r"install_test_engine (\w+)", body)
    assert installed == [
        "transformers",
        "diffusers",
        "fastapi",  # transformers serve: the suite's real server
        "runai_model_streamer_s3",
        "fastsafetensors",
        "instanttensor",
        "ray",
        "llama_cpp",
    ]
