"""File ▸ Export asks the one guard first: the open model's files under any name, a FIFO or
a folder that cannot take the file are refused in a dialog, before anything is written. The
exporter asks again when it writes. A recommendation whose export fails is still there to
export elsewhere (recommending measures, exporting writes)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from modelmon.core import read_config, write_gguf_model, write_safetensors_model
from modelmon.gui.main_window import MainWindow

from .conftest import open_model, wait_idle


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """An index and two shards of its own: an export that got through would destroy them."""
    return write_safetensors_model(tmp_path / "model", layers=2, hidden=64, vocab=256, shards=2)


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the refusal dialogs said (QMessageBox.warning, answered at once)."""
    said: list[str] = []

    def warning(_parent: object, _title: str, text: str, *_: object) -> object:
        said.append(text)
        return QMessageBox.StandardButton.Ok

    monkeypatch.setattr(QMessageBox, "warning", warning)
    return said


def digests(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "special"
        for path in sorted(folder.iterdir())
    }


def targets(model: Path, tmp_path: Path) -> dict[Path, str]:
    """Names of the model's files (and a FIFO, a copy of another model), and what the
    refusal must say."""
    shard = next(model.parent.glob("*-00001-of-*.safetensors"))
    (tmp_path / "link.json").symlink_to(shard)
    os.link(model, tmp_path / "hard.json")
    os.mkfifo(tmp_path / "fifo.json")
    other = write_gguf_model(tmp_path / "other" / "other.gguf", layers=1, hidden=32, vocab=64)
    shutil.copyfile(other, tmp_path / "copy.csv")
    return {
        tmp_path / "copy.csv": "is a GGUF model, which a report never replaces",
        model: "is the input",
        shard: "is the input",
        tmp_path / "link.json": "is the input",
        tmp_path / "hard.json": "is the input",
        tmp_path / "fifo.json": "not a regular file",
    }


def test_every_file_export_refuses_the_open_model_and_special_files_in_a_dialog(
    qtbot,
    window: MainWindow,
    model: Path,
    tmp_path: Path,
    warnings: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    open_model(qtbot, window, model)
    window.bench.run_ab(1)  # results, an A/B winner and plots: every export has data
    wait_idle(qtbot, window)
    assert window.bench.ab.history.result is not None, window.messages.message()
    exporter = window.workspace.exporter
    called: list[str] = []
    for name in ("export_results", "export_ab_config", "export_plot", "export_recommendation"):
        monkeypatch.setattr(exporter, name, lambda *a, name=name: called.append(name))
    exports: dict[str, Callable[[], None]] = {
        "results JSON": lambda: window.exports.export_results("json"),
        "results CSV": lambda: window.exports.export_results("csv"),
        "A/B configuration": window.exports.export_ab_config,
        "recommended configuration": window.exports.export_recommended,
        "plot": lambda: window.exports.export_plot("Throughput"),
    }
    names = targets(model, tmp_path)
    before = digests(model.parent)
    for target, says in names.items():

        def chosen(*_: object, path: str = str(target)) -> str:
            return path

        monkeypatch.setattr("modelmon.gui.export_dialogs.save_file", chosen)
        for what, export in exports.items():
            count = len(warnings)
            export()
            assert len(warnings) == count + 1, (what, target)
            assert says in warnings[-1] and "\n" not in warnings[-1], (what, warnings[-1])
    assert called == []  # nothing was handed to the writer
    assert digests(model.parent) == before
    assert (tmp_path / "copy.csv").read_bytes()[:4] == b"GGUF"
    assert stat.S_ISFIFO((tmp_path / "fifo.json").stat().st_mode)


def test_the_exporter_asks_the_guard_again_when_it_writes(
    qtbot, window: MainWindow, model: Path
) -> None:
    """A path that became an input after the dialog (or any caller of the exporter)."""
    open_model(qtbot, window, model)
    window.bench.run("A")
    wait_idle(qtbot, window)
    before = digests(model.parent)
    exporter = window.workspace.exporter
    with qtbot.waitSignal(exporter.finished, timeout=20_000) as done:
        exporter.export_results(str(model))
    ok, text = done.args
    assert not ok and "is the input" in text
    assert window.messages.level == "error"
    assert digests(model.parent) == before


def test_a_recommendation_export_that_fails_keeps_it_for_another_try(
    qtbot, window: MainWindow, model: Path, tmp_path: Path
) -> None:
    """Recommending measures, exporting writes: an export into a folder that is gone fails
    in one line, and the recommendation is still there to export elsewhere."""
    open_model(qtbot, window, model)
    window.bench.recommend(1.0)
    wait_idle(qtbot, window, 90_000)
    rec = window.bench.recommendation.recommendation
    assert rec is not None, window.messages.message()
    exporter = window.workspace.exporter
    gone = tmp_path / "gone"
    with qtbot.waitSignal(exporter.finished, timeout=20_000) as done:
        exporter.export_recommendation(str(gone / "recommended.toml"))
    ok, text = done.args
    assert not ok and "recommended.toml" in text and "\n" not in text
    assert window.messages.level == "error" and not gone.exists()
    assert window.bench.recommendation.recommendation is rec
    with qtbot.waitSignal(exporter.finished, timeout=20_000) as done:
        exporter.export_recommendation(str(tmp_path / "recommended.toml"))
    assert done.args[0], done.args[1]
    assert read_config(tmp_path / "recommended.toml").document["evidence"]["runs"] >= 1
