"""OtherReaders on its own: real processes outside the watched tree with the model's files
open or mapped, and those that only look like them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.core.watching.files import ModelFiles
from modelmon.core.watching.others import OtherReaders

# Opens (or maps) the file it is given, says so, and waits for its stdin to close.
HOLDER = """
import mmap, sys
f = open(sys.argv[1], "rb")
held = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) if sys.argv[2] == "map" else None
if held is not None:
    f.close()
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def files(tmp_path: Path) -> ModelFiles:
    model = tmp_path / "model.safetensors"
    model.write_bytes(b"\1" * 65536)
    found = ModelFiles()
    found.add_named([str(model)])
    return found


@pytest.fixture
def holding() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        process.wait(30)
        process.stdout.close()


def hold(holding: list[subprocess.Popen[str]], path: str, how: str) -> int:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path, how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    holding.append(process)
    assert process.stdout is not None and process.stdout.readline() == "holding\n"
    return process.pid


def test_a_process_with_the_file_open_and_one_with_it_mapped(files, holding) -> None:
    path = files.files[0].path
    opener, mapper = hold(holding, path, "open"), hold(holding, path, "map")
    others = OtherReaders()
    others.scan(files.files, belongs=lambda pid: False)
    found = {reader.pid: reader for reader in others.report(files.files)}
    assert set(found) >= {opener, mapper}
    assert found[opener].files == (path,) and not found[opener].mapped
    assert found[mapper].files == (path,) and found[mapper].mapped
    assert found[opener].name.startswith("python")


def test_the_watched_tree_is_not_another_reader(files, holding) -> None:
    ours = hold(holding, files.files[0].path, "open")
    others = OtherReaders()
    others.scan(files.files, belongs=lambda pid: pid == ours)
    assert ours not in {reader.pid for reader in others.report(files.files)}


def test_a_file_of_the_same_name_elsewhere_is_not_the_model(files, holding, tmp_path) -> None:
    twin = tmp_path / "twin" / "model.safetensors"
    twin.parent.mkdir()
    twin.write_bytes(b"\2" * 65536)
    stranger = hold(holding, str(twin), "map")
    others = OtherReaders()
    others.scan(files.files, belongs=lambda pid: False)
    assert stranger not in {reader.pid for reader in others.report(files.files)}


def test_no_files_no_scan() -> None:
    others = OtherReaders()
    others.scan([], belongs=lambda pid: False)
    assert others.scans == 0 and others.report([]) == ()
