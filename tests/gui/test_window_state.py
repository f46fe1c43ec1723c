"""What the window keeps and shows stays true to the state: ceilings kept across restarts
with their age, the start page reachable with a model open, the open model reopened without
stopping anything, a cancelled run exported as cancelled, and Run ▸ Recommend… on a key that
works whatever has the focus."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from PySide6.QtCore import QEvent, QSettings, Qt, QTimer
from PySide6.QtWidgets import QApplication, QLineEdit

from modelmon.core import write_safetensors_model
from modelmon.core.limits import DEFAULT_BUDGET_S
from modelmon.core.measuring import CEILINGS
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.ceilings_state import storage_key
from modelmon.gui.state.model_info import gather
from modelmon.gui.state.recent_entries import recent_label
from modelmon.gui.widgets.recommend_dialog import RecommendDialog

from .conftest import SLOW_OPTIONS, empty_home_discovery, open_model, wait_idle, wait_loading


def new_window(qtbot, path: Path, home: Path) -> MainWindow:
    window = MainWindow(
        settings=QSettings(str(path), QSettings.Format.IniFormat),
        discover=empty_home_discovery(home),
    )
    qtbot.addWidget(window)
    window.show()
    return window


def test_ceilings_are_kept_across_restarts_per_model_and_storage_with_their_age(
    qtbot, tmp_path: Path, small_model: Path
):
    other = write_safetensors_model(tmp_path / "other", layers=1, hidden=64, vocab=256)
    first = new_window(qtbot, tmp_path / "kept.ini", tmp_path)
    open_model(qtbot, first, small_model)
    first.bench.ceiling_repeats = 1
    first.bench.measure_ceilings()
    wait_idle(qtbot, first)
    measured = first.bench.ceilings.current
    assert measured is not None and len(measured.items) == len(CEILINGS), first.messages.message()
    first.close()

    second = new_window(qtbot, tmp_path / "kept.ini", tmp_path)
    open_model(qtbot, second, other)
    assert second.bench.ceilings.current is None  # another model: its own (none yet)
    open_model(qtbot, second, small_model)
    kept = second.bench.ceilings.current
    assert kept is not None and kept.items == measured.items  # figures and times, as measured
    assert second.workspace.compare.ceilings_label.text().endswith(")")
    assert "(measured " in second.workspace.compare.ceilings_label.text()
    assert set(second.workspace.throughput.ceiling_lines) == {c.name for c in kept.items}
    second.close()

    # Three days on, they still count, and say how old they are.
    settings = QSettings(str(tmp_path / "kept.ini"), QSettings.Format.IniFormat)
    key = storage_key(gather(str(small_model)))
    document = json.loads(settings.value(f"ceilings/{key}"))
    for ceiling in document["ceilings"]:
        ceiling["measured_at"] -= 3 * 86_400
    settings.setValue(f"ceilings/{key}", json.dumps(document))
    settings.sync()
    third = new_window(qtbot, tmp_path / "kept.ini", tmp_path)
    open_model(qtbot, third, small_model)
    assert "measured 3 days ago, " in third.workspace.compare.ceilings_label.text()
    third.close()


def test_ceilings_are_keyed_by_the_storage_the_model_lives_on(small_model: Path):
    info = gather(str(small_model))
    moved = dataclasses.replace(
        info,
        storage=tuple(
            dataclasses.replace(f, source="/dev/other", mount_point="/mnt/other")
            for f in info.storage
        ),
    )
    assert storage_key(info) == storage_key(gather(str(small_model)))
    assert storage_key(moved) != storage_key(info)


def test_the_start_page_is_reachable_with_a_model_open_and_leads_back(
    qtbot, window: MainWindow, small_model: Path
):
    open_model(qtbot, window, small_model)
    assert window.pages.currentWidget() is window.workspace
    window.menus.start_page_action.trigger()
    page = window.start_page
    assert window.pages.currentWidget() is page
    assert page.back_button.isVisibleTo(window) and small_model.name in page.back_button.text()
    page.back_button.click()
    assert window.pages.currentWidget() is window.workspace
    window.menus.start_page_action.trigger()
    window.show_model_tab(0)  # View ▸ Throughput (Ctrl+1) shows the model's page too
    assert window.pages.currentWidget() is window.workspace


def test_reopening_the_open_model_while_a_job_runs_just_shows_it(
    qtbot, window: MainWindow, slow_model: Path, monkeypatch
):
    open_model(qtbot, window, slow_model)
    asked: list[str] = []
    monkeypatch.setattr(window, "confirm_stop", lambda path: asked.append(path) or True)
    window.bench.configs.set("A", "sequential", SLOW_OPTIONS)
    window.bench.run("A")
    wait_loading(qtbot, window.workspace)
    window.state.show_page("start")
    for name in (str(slow_model), str(slow_model.parent / "." / slow_model.name)):
        window.open_path(name)
        assert asked == [] and window.bench.running
        assert window.pages.currentWidget() is window.workspace
    window.bench.cancel()
    wait_idle(qtbot, window)


def test_an_exported_plot_says_its_run_was_cancelled(
    qtbot, window: MainWindow, slow_model: Path, tmp_path: Path
):
    open_model(qtbot, window, slow_model)
    window.bench.configs.set("A", "sequential", SLOW_OPTIONS)
    window.bench.run("A")
    wait_loading(qtbot, window.workspace)
    window.bench.cancel()
    wait_idle(qtbot, window)
    (record,) = window.bench.records
    assert record.status == "cancelled"
    target = tmp_path / "throughput.svg"
    with qtbot.waitSignal(window.workspace.exporter.finished, timeout=20_000) as done:
        window.workspace.exporter.export_plot("Throughput", str(target))
    assert done.args[0], done.args[1]
    svg = target.read_text()
    # The heading says how the run it shows ended.
    assert "A: sequential" in svg and "— CANCELLED" in svg
    assert "run A (cancelled)" in svg  # the curve's key too


class ClaimsEveryKey(QLineEdit):
    """A text field that claims every key for editing, as X11's line edit claims Ctrl+E."""

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride:
            event.accept()
            return True
        return super().event(event)


def test_recommend_is_in_the_run_menu_on_a_key_that_works_from_any_focus(
    qtbot, window: MainWindow, small_model: Path, monkeypatch
):
    open_model(qtbot, window, small_model)
    action = window.menus.recommend_action
    assert action in window.menus.runs.actions() and action.shortcut().toString() == "Ctrl+E"
    asked: list[float] = []

    def answer(dialog: RecommendDialog) -> int:
        asked.append(dialog.budget_s())
        return 0  # Cancel

    monkeypatch.setattr(RecommendDialog, "exec", answer)
    field = ClaimsEveryKey(window.workspace)
    field.show()
    qtbot.waitActive(window)
    for focus in (window.workspace.compare.pairs, field):
        focus.setFocus()
        qtbot.waitUntil(lambda focus=focus: QApplication.focusWidget() is focus)
        qtbot.keyClick(
            QApplication.focusWidget(), Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier
        )
        assert len(asked) == (1 if focus is not field else 2), focus
        assert not window.bench.running  # cancelled: nothing measured
    assert asked == [DEFAULT_BUDGET_S, DEFAULT_BUDGET_S]


def test_recommend_has_a_button_in_sight_beside_its_tab(
    qtbot, window: MainWindow, small_model: Path, monkeypatch
):
    open_model(qtbot, window, small_model)
    button = window.workspace.recommend_button
    assert button.isVisible() and button.isEnabled()
    asked: list[float] = []
    monkeypatch.setattr(RecommendDialog, "exec", lambda d: asked.append(d.budget_s()) or 0)
    button.click()
    assert asked == [DEFAULT_BUDGET_S] and not window.bench.running
    window.bench.configs.set("A", "pread", window.bench.configs.configs["A"][1])
    window.bench.run("A")
    assert not button.isEnabled()  # one job at a time, as the menu's
    wait_idle(qtbot, window)
    assert button.isEnabled()


def test_after_the_recommend_dialog_the_focus_goes_back_where_it_was(
    qtbot, window: MainWindow, small_model: Path
):
    open_model(qtbot, window, small_model)
    qtbot.waitActive(window)
    results = window.workspace.results
    for before in (results, None):
        if before is None:
            focused = QApplication.focusWidget()
            if focused is not None:
                focused.clearFocus()
        else:
            before.setFocus()
            qtbot.waitUntil(lambda: QApplication.focusWidget() is results)

        def cancel() -> None:
            dialog = window.dialog
            if isinstance(dialog, RecommendDialog) and dialog.isVisible():
                dialog.reject()
            else:
                QTimer.singleShot(10, cancel)

        QTimer.singleShot(0, cancel)
        window.recommend()
        # Where the keys go once the window is active again (an offscreen window may take
        # a moment to be activated after the dialog).
        focused = window.focusWidget()
        assert focused is not window.workspace.compare.pairs
        assert focused is not window.workspace.compare.pairs.lineEdit()
        assert focused is (before if before is not None else window.pages)
    assert not window.bench.running


def test_the_apps_recommend_budget_is_the_command_lines(qtbot):
    from modelmon.cli import build_parser

    defaults = build_parser().parse_args(["recommend", "model.safetensors"])
    dialog = RecommendDialog()
    qtbot.addWidget(dialog)
    assert dialog.budget_s() == defaults.budget == DEFAULT_BUDGET_S


def test_the_recommend_dialog_grows_with_a_loaders_rows_and_cuts_no_text(qtbot):
    from PySide6.QtWidgets import QLabel

    dialog = RecommendDialog(model_format="safetensors")
    qtbot.addWidget(dialog)
    dialog.show()
    intro = dialog.findChildren(QLabel)[0]
    for choice in ("engine: safetensors", "modelmon's strategies only", "Your command…"):
        index = dialog.loader_box.findText(choice)
        assert index >= 0, choice
        dialog.loader_box.setCurrentIndex(index)
        qtbot.wait(50)  # the layout settles on the event loop
        needed = intro.heightForWidth(intro.width())
        assert intro.height() >= needed, (choice, intro.height(), needed)


def test_an_engine_that_cannot_load_the_opened_format_is_put_back_and_greyed(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    from modelmon.core import write_gguf_model

    gguf = tmp_path / "g.gguf"
    write_gguf_model(gguf, layers=1, hidden=64, vocab=128)
    open_model(qtbot, window, small_model)
    window.bench.configs.set("A", "engine: safetensors", window.bench.configs.configs["A"][1])
    open_model(qtbot, window, gguf)
    strategy, _ = window.bench.configs.configs["A"]
    assert strategy == "sequential"
    assert window.messages.message().startswith("Configuration A is back to sequential ")
    assert "loads safetensors models, not gguf" in window.messages.message()
    box = window.workspace.panels["A"].strategy_box
    assert not box.model().item(box.findText("engine: safetensors")).isEnabled()


def test_opening_another_model_says_where_the_runs_went_and_which_came_back(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    other = write_safetensors_model(tmp_path / "other", layers=1, hidden=64, vocab=128)
    open_model(qtbot, window, small_model)
    window.bench.run("A")
    wait_idle(qtbot, window)
    open_model(qtbot, window, other)
    assert window.bench.records == []
    said = window.messages.message()
    # Named with its folder: every sharded model is "model.safetensors.index.json".
    kept = recent_label(str(small_model))
    # Kept in this window (a new one starts empty): said so, as the fourteenth walk asked.
    assert said == f"1 run of {kept} is kept for when it is opened again in this window.", said
    window.bench.run("A")
    wait_idle(qtbot, window)
    open_model(qtbot, window, small_model)
    assert len(window.bench.records) == 1  # back with its model, and said so
    assert window.messages.message() == (
        f"1 run of {recent_label(str(other))} is kept for when it is opened again in this "
        "window; 1 of this model's came back."
    )


def test_a_run_started_from_the_recommendation_tab_is_shown_where_it_is_drawn(
    qtbot, window: MainWindow, small_model: Path
):
    open_model(qtbot, window, small_model)
    tabs = window.workspace.tabs
    window.show_model_tab(tabs.indexOf(window.workspace.recommendation))
    window.bench.run("A")
    qtbot.waitUntil(lambda: tabs.currentIndex() == 0, timeout=30_000)  # Throughput
    wait_idle(qtbot, window)


def test_the_recommend_dialog_offers_the_budget_last_measured_with(
    qtbot, small_model: Path, tmp_path: Path, monkeypatch
):
    settings = tmp_path / "modelmon.ini"
    window = new_window(qtbot, settings, tmp_path / "home")
    open_model(qtbot, window, small_model)
    offered: list[float] = []

    def measure_with_45_s(dialog: RecommendDialog) -> int:
        offered.append(dialog.budget_s())
        dialog.budget.setValue(45)
        return 1  # Measure

    monkeypatch.setattr(RecommendDialog, "exec", measure_with_45_s)
    window.recommend()
    assert window.bench.running  # the search started with it
    window.bench.cancel()
    wait_idle(qtbot, window)
    # Cancelled, the dialog keeps nothing: the next time it offers the last budget measured.
    monkeypatch.setattr(RecommendDialog, "exec", lambda d: offered.append(d.budget_s()) or 0)
    window.recommend()
    window.close()
    again = new_window(qtbot, settings, tmp_path / "home")  # and in the next session
    open_model(qtbot, again, small_model)
    again.recommend()
    assert offered == [DEFAULT_BUDGET_S, 45, 45]
    again.close()
    # A budget the dialog cannot take (written by hand, by another version) is not offered.
    written = QSettings(str(settings), QSettings.Format.IniFormat)
    written.setValue("recommend/budget_s", "lots")
    written.sync()
    third = new_window(qtbot, settings, tmp_path / "home")
    open_model(qtbot, third, small_model)
    third.recommend()
    assert offered[-1] == DEFAULT_BUDGET_S
    third.close()


def test_a_budget_the_dialog_cannot_take_is_refused_in_sight_not_swapped(qtbot):
    """Walk 23: the budget field showed "1 s", Enter started "Recommending: a 60 s budget":
    a spin box swaps text it cannot take for its last value as editing ends, without a word.
    The dialog says why the text is no budget, Measure is greyed and Enter starts nothing,
    until the field holds one."""
    from PySide6.QtWidgets import QDialogButtonBox

    dialog = RecommendDialog(budget_s=60)
    qtbot.addWidget(dialog)
    dialog.show()
    measure = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    dialog.budget.setFocus()
    dialog.budget.selectAll()
    qtbot.keyClicks(dialog.budget, "1")
    assert dialog.budget.text() == "1 s"
    assert dialog.budget_error.isVisible() and not measure.isEnabled()
    assert dialog.budget_error.text() == (
        "Not a budget: 1 s. A search takes 5 to 86400 s, in whole seconds."
    )
    qtbot.keyClick(dialog.budget, Qt.Key.Key_Return)
    assert dialog.isVisible() and dialog.result() == 0
    assert dialog.budget.text() == "1 s"  # what was typed stays, to be corrected
    qtbot.keyClicks(dialog.budget, "0")
    assert not dialog.budget_error.isVisible() and measure.isEnabled()
    assert dialog.budget_s() == 10.0
