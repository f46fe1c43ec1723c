"""Every knob explains itself; every menu action says what it does; the main ones have keys."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QComboBox, QLineEdit

from modelmon.gui.main_window import MainWindow
from modelmon.gui.widgets.compare_bar import CompareBar
from modelmon.gui.widgets.recommend_dialog import RecommendDialog

KNOBS = (QAbstractButton, QAbstractSpinBox, QComboBox, QLineEdit)


def test_compare_bar_and_recommend_dialog_knobs_have_one_sentence_tips(qtbot):
    bar, dialog = CompareBar(), RecommendDialog()
    for widget in (bar, dialog):
        qtbot.addWidget(widget)
        knobs = [k for kind in KNOBS for k in widget.findChildren(kind)]
        assert knobs
        for knob in knobs:
            if knob.parent() is not None and isinstance(knob.parent(), QAbstractSpinBox):
                continue  # a spin box's own line edit
            if type(knob).__name__ == "QPushButton" and knob.text() in ("OK", "Cancel"):
                continue  # the dialog's standard buttons
            tip = knob.toolTip()
            assert tip.endswith(".") and len(tip) > 20, (
                type(knob).__name__,
                knob.text() if hasattr(knob, "text") else "",
            )


def test_menu_actions_have_tips_and_the_main_ones_shortcuts(qtbot, window: MainWindow):
    menus = {
        action.text().replace("&", ""): action.menu()
        for action in window.menuBar().actions()
        if action.menu() is not None
    }
    for title in ("File", "Run", "View"):
        for action in menus[title].actions():
            if action.isSeparator() or action.menu() is not None:
                continue
            assert action.statusTip(), action.text()
    for action in (
        window.menus.run_a_action,
        window.menus.run_b_action,
        window.menus.ab_action,
        window.menus.ceilings_action,
        window.menus.cancel_action,
        window.menus.recommend_action,
        window.menus.ab_config_action,
        window.menus.json_action,
        window.menus.csv_action,
    ):
        assert not action.shortcut().isEmpty(), action.text()
    shortcuts = [
        a.shortcut().toString()
        for m in menus.values()
        for a in m.actions()
        if not a.shortcut().isEmpty()
    ]
    assert len(shortcuts) == len(set(shortcuts)), "two actions share a shortcut"
    # Nothing to run or export before a model is open.
    assert not window.menus.ab_action.isEnabled() and not window.menus.json_action.isEnabled()
