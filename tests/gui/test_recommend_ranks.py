"""Run ▸ Recommend… for N ranks under the window's memory limit: the dialog takes the ranks and
says the limit, the search measures each way under it, the tab shows every way with what it
needs of the node (those that cannot fit refused, never run), and the export is the ranks
config the command line writes."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer

from modelmon.core import write_safetensors_model
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.ranks_answer_view import WAYS_COLUMNS
from modelmon.gui.widgets.recommend_dialog import RecommendDialog

from ..core.system.test_memory_cgroup import REAL
from .conftest import open_model, wait_idle
from .test_export import export

pytestmark = REAL  # every way runs under the limit, in a memory cgroup


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """68 MB: four whole copies need more than 256 MiB; a slice or one copy far less."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("ranked"), layers=2, hidden=1024, vocab=4096, seed=31
    )


def ask_for_ranks(window: MainWindow, ranks: int, budget_s: int) -> list[str]:
    """Run ▸ Recommend… with ``ranks`` and ``budget_s``; what the dialog said (its memory
    limit, whether the loader could still be chosen)."""
    said: list[str] = []

    def answer() -> None:
        dialog = window.dialog
        assert isinstance(dialog, RecommendDialog)
        dialog.budget.setValue(budget_s)
        dialog.ranks.setValue(ranks)
        limit = dialog.findChildren(type(dialog.intro))
        said.extend(label.text() for label in limit if "Memory limit" in label.text())
        said.append(f"loader enabled: {dialog.loader_box.isEnabled()}")
        dialog.accept()

    QTimer.singleShot(0, answer)
    window.menus.recommend_action.trigger()
    return said


def test_ranks_are_recommended_under_the_limit_and_exported(
    qtbot, window: MainWindow, model: Path, tmp_path: Path
):
    open_model(qtbot, window, model)
    assert window.bench.set_memory_limit("256Mi") is None
    said = ask_for_ranks(window, 4, 5)
    assert "loader enabled: False" in said  # N ranks: modelmon's ways and Run:ai's
    assert window.bench.running
    tab = window.workspace.recommendation
    qtbot.waitUntil(lambda: "for 4 ranks" in tab.summary.text(), timeout=10_000)
    wait_idle(qtbot, window, 240_000)
    found = window.bench.recommendation.ranks_found
    assert found is not None, window.messages.message()
    assert found.pick is not None and found.memory_limit == 256 * 2**20
    assert window.messages.message().startswith("Load the 4 ranks ")
    # The tab: the answer, its line, and every way with what it needs of the node.
    assert tab.summary.text().startswith(f"Load the 4 ranks {found.pick.way.mode} ")
    assert f"--ranks 4 --ranks-mode {found.pick.way.mode}" in tab.paste.text()
    table = tab.ranking
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers == list(WAYS_COLUMNS)
    rows = {
        table.item(r, 1).text(): [table.item(r, c).text() for c in range(table.columnCount())]
        for r in range(table.rowCount())
    }
    for strategy in ("sequential", "direct"):
        (whole,) = [row for spec, row in rows.items() if spec.startswith(f"whole · {strategy}")]
        assert whole[-1].startswith("does not fit: needs more than") and whole[3] == "0"
    picked = rows[found.pick.way.spec]
    assert picked[5] == "the pick" and picked[-1] == "held" and picked[6] != "–"
    assert table.item(0, 1).font().bold()  # the pick leads, in bold
    # Exported: the command line's ranks config, the paste line naming the file whole.
    assert window.menus.export_recommendation_action.isEnabled()
    out = tmp_path / "ranks.toml"
    ok, text = export(qtbot, window, window.workspace.exporter.export_recommendation, out)
    assert ok, text
    document = tomllib.loads(out.read_text())
    assert document["ranks"]["ranks"] == 4 and document["ranks"]["fits"] is True
    assert document["ranks"]["mode"] == found.pick.way.mode
    assert document["ranks"]["memory_limit_bytes"] == 256 * 2**20
    assert f"--config {out}" in document["apply"]["modelmon"]
    assert str(out) in tab.summary.text()


def test_ranks_that_cannot_fit_say_what_would(qtbot, window: MainWindow, model: Path):
    open_model(qtbot, window, model)
    assert window.bench.set_memory_limit("16Mi") is None
    ask_for_ranks(window, 2, 5)
    wait_idle(qtbot, window, 60_000)
    found = window.bench.recommendation.ranks_found
    assert found is not None and found.pick is None
    assert all(way.runs == () for way in found.ways)  # refused before any ran
    summary = window.workspace.recommendation.summary.text()
    assert summary.startswith("Does not fit within 16 MiB: 2 ranks of this model hold more than ")
    assert "What would fit: a limit well above " in summary
    assert window.messages.level == "warning"
    assert not window.workspace.recommendation.paste_row.isVisible()
