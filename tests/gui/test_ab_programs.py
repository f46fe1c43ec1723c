"""The window with a program as a configuration: "Your command…" typed into B's panel (a
bad line said under it in one line), the A/B against a strategy watched and judged; and
Run ▸ Recommend… with the user's loader, whose rounds lead the Recommendation tab."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model
from modelmon.core.output import answered
from modelmon.core.output import recommendation_answer as answer
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.programs import COMMAND_CHOICE, PROGRAM_OPTIONS

from .conftest import open_model, wait_idle


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(
        tmp_path_factory.mktemp("ab-programs"), layers=2, hidden=512, vocab=4096, seed=4
    )


def test_a_command_typed_key_by_key_keeps_its_spaces(qtbot, window: MainWindow):
    from PySide6.QtTest import QTest

    panel = window.workspace.panels["A"]
    panel.strategy_box.setCurrentText(COMMAND_CHOICE)
    typed = 'python3 -c "import sys; print(sys.argv)"  load.py {path} '
    QTest.keyClicks(panel.program.command, typed)
    assert panel.program.command.text() == typed
    assert window.workspace.bench.configs.configs["A"][0] == f"cmd: {typed.strip()}"


def test_your_command_as_b_runs_an_a_b_against_a_strategy(qtbot, window: MainWindow, model: Path):
    open_model(qtbot, window, model)
    workspace = window.workspace
    panel = workspace.panels["B"]
    panel.strategy_box.setCurrentText(COMMAND_CHOICE)
    assert panel.program.isVisible() and not panel.workers.isEnabled()
    panel.program.command.setText("cat 'unclosed {path}")
    assert panel.program.error.isVisible()
    assert panel.program.error.text().startswith("cmd:") and "\n" not in panel.program.error.text()
    panel.program.command.setText("cat {path}")
    assert not panel.program.error.isVisible()
    assert workspace.bench.configs.configs["B"] == ("cmd: cat {path}", PROGRAM_OPTIONS)
    assert panel.spec_line.text() == "cmd: cat {path}"
    workspace.compare.pairs.setValue(1)
    workspace.compare.ab_button.click()
    wait_idle(qtbot, window)
    ab = workspace.bench.ab.history.result
    assert ab is not None, window.messages.message()
    assert ab.b.spec == "cmd: cat {path}"
    b_run = workspace.bench.records[-1]
    assert b_run.label == "B" and b_run.status == "ok" and b_run.watched is not None
    assert workspace.throughput.point_count("B") > 0  # plotted as the watch plots


def test_an_engine_as_a_with_its_knob(window: MainWindow):
    panel = window.workspace.panels["A"]
    panel.strategy_box.setCurrentText("engine: safetensors")
    assert set(panel.program.knobs) == {"framework", "backend"}
    assert window.bench.configs.strategy("A") == "engine: safetensors"
    panel.program.knobs["backend"].setCurrentText("read")
    assert window.bench.configs.strategy("A") == "engine: safetensors backend=read"
    assert panel.program.knobs["backend"].currentText() == "read"  # redrawn as it is
    panel.strategy_box.setCurrentText("sequential")
    assert not panel.program.isVisible() and panel.workers.isEnabled()


def test_engines_that_cannot_run_here_are_greyed_with_why(window: MainWindow):
    box = window.workspace.panels["A"].strategy_box
    row = box.findText("engine: vllm")
    item = box.model().item(row)
    assert not item.isEnabled() and "GPU" in box.itemData(row, 3)  # 3: the tooltip role
    assert box.model().item(box.findText("engine: safetensors")).isEnabled()


def test_the_recommendation_with_your_loader_shows_it_in_the_ranking(
    qtbot, window: MainWindow, model: Path
):
    open_model(qtbot, window, model)
    window.bench.recommend(5.0, "engine: safetensors")
    wait_idle(qtbot, window, timeout_ms=180_000)
    shown = window.bench.recommendation.shown
    assert shown.phase == "done" and shown.advice is not None, shown.text
    view = window.workspace.recommendation
    specs = [view.ranking.item(r, 1).text() for r in range(view.ranking.rowCount())]
    assert any(s.startswith("engine: safetensors backend=") for s in specs)  # its knob
    # modelmon's best, in the same rounds, named apart from its row of the search's rounds
    assert f"{shown.advice.modelmon.spec} (in your loader's rounds)" in specs
    # One row in bold: what the answer says to run, one of the loader's rounds.
    bold = [r for r in range(len(specs)) if view.ranking.item(r, 1).font().bold()]
    chosen = answered(shown.advice)
    assert chosen is not None and bold == [0], (bold, specs)  # the answer leads
    assert "engine: safetensors" in specs[:2]  # the loader as it is, first or after the answer
    advice = shown.advice
    named = "yours" if chosen is advice.loader else "modelmon" if chosen is advice.modelmon else ""
    assert view.ranking.item(bold[0], 0).text() == (named or "change")
    assert view.ranking.item(bold[0], 5).text().endswith(("the answer", "the answer, keep it"))
    # The search's pick is modelmon's best there, never "the pick" beside the answer's row.
    texts = [view.ranking.item(r, c).text() for r in range(len(specs)) for c in (5, 6, 7)]
    assert not any("the pick" in t for t in texts), texts
    tools = [view.snippets.item(r, 0).text() for r in range(view.snippets.rowCount())]
    assert tools[0] == "safetensors"
    assert view.snippets.item(0, 2).text().startswith("measured here as engine: safetensors")
    # The headline is the one answer: with your loader, about your loader.
    found = answer(shown.recommendation, "modelmon.toml", shown.advice)
    assert view.summary.text().startswith(f"{found.action} {found.gain}")
    assert found.action.startswith(("Change your loader", "Keep your loader", "Load with"))


def test_a_program_configuration_is_remembered_as_typed(window: MainWindow):
    window.settings.set_config("B", "cmd: python load.py {path}", PROGRAM_OPTIONS)
    assert window.settings.config("B") == ("cmd: python load.py {path}", PROGRAM_OPTIONS)
    window.settings.set_config("A", "cmd: 'unclosed", PROGRAM_OPTIONS)  # said when it runs
    assert window.settings.config("A") == ("cmd: 'unclosed", PROGRAM_OPTIONS)


def test_two_servers_as_an_a_b_are_ready_side_by_side(qtbot, window: MainWindow, model: Path):
    """Two commands of the test bed server, B's weights read paced: the A/B compares their
    time to ready, says where the difference is, and draws both cold starts on one axis."""
    import sys

    from modelmon.gui.state.formatting import ab_detail_lines

    bed = Path(__file__).resolve().parents[1] / "serve_bed.py"
    line = f"{sys.executable} {bed} {{path}} --import-s 0.2 --other-mb 1 --post-s 0.2"
    open_model(qtbot, window, model)
    workspace = window.workspace
    for side, extra in (("A", ""), ("B", " --pace-mbps 8")):
        panel = workspace.panels[side]
        panel.strategy_box.setCurrentText(COMMAND_CHOICE)
        panel.program.command.setText(line + extra)
    workspace.compare.pairs.setValue(1)
    workspace.compare.ab_button.click()
    wait_idle(qtbot, window)
    ab = workspace.bench.ab.history.result
    assert ab is not None, window.messages.message()
    assert ab.by == "ready" and (ab.b.median_ready_s or 0) > (ab.a.median_ready_s or 0)
    details = ab_detail_lines(ab)
    assert details[0].startswith("A: cmd:") and ": ready in " in details[0]
    assert details[-1].startswith("where: the weights ")
    assert "ready" in workspace.compare.verdict.text()
    shown = workspace.cold_start.shown
    assert shown is not None and [name for name, _ in shown.readies] == ["A ready", "B ready"]
    labels = [lane.label for lane in shown.lanes]
    assert labels[0] == "A · phases" and "B · phases" in labels
    assert any(label.startswith("B · rank 0") for label in labels)


def test_a_server_is_run_to_the_ready_the_user_set(qtbot, window: MainWindow, model: Path):
    """The ready row appears once a side is a command; a run of the server ends when the line
    set is printed (timed by the line, not a socket's poll), and a pattern that cannot be
    used is said under it and refused in one line before anything runs."""
    import sys

    bed = Path(__file__).resolve().parents[1] / "serve_bed.py"
    open_model(qtbot, window, model)
    workspace = window.workspace
    row = workspace.ready_row
    assert not row.isVisibleTo(window)
    panel = workspace.panels["A"]
    panel.strategy_box.setCurrentText(COMMAND_CHOICE)
    panel.program.command.setText(f"{sys.executable} {bed} {{path}} --import-s 0.1 --post-s 0.3")
    assert row.isVisibleTo(window) and not row.value.isEnabled()
    row.kind.setCurrentIndex(row.kind.findData("line"))
    row.value.setText("(unclosed")
    assert row.error.text().startswith("the ready line is not a regular expression")
    runs = len(workspace.bench.records)
    panel.run_button.click()
    assert len(workspace.bench.records) == runs and not workspace.bench.running
    assert "Servers' ready: the ready line" in window.messages.message()
    row.value.setText("serve_bed: ready")
    assert row.error.text() == ""
    panel.run_button.click()
    wait_idle(qtbot, window)
    record = workspace.bench.records[-1]
    assert record.label == "A" and record.status == "ok", record.error
    cold = record.watched.cold_start if record.watched else None
    assert cold is not None and cold.ready_by == "line" and cold.ready_s is not None
