"""View ▸ Theme, View ▸ Sample metrics every, Run ▸ Prime free memory and the Help menu: the
choices the user made (kept in the settings) and the help windows."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import ClassVar

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QApplication, QMainWindow, QMenu

from modelmon.core.options import PRIME_MODES
from modelmon.core.system import set_prime_mode
from modelmon.gui.settings import SAMPLE_CHOICES_MS, THEMES, AppSettings
from modelmon.gui.state.help_text import (
    about_html,
    how_it_measures,
    menu_text,
    shortcuts_html,
)
from modelmon.gui.state.jobs import SAMPLE_INTERVAL_S
from modelmon.gui.theme import apply_palette
from modelmon.gui.widgets.help_dialog import HelpDialog

THEME_TIPS = {
    "system": "Follow the desktop's light or dark setting, also when it changes.",
    "light": "Always the light palette.",
    "dark": "Always the dark palette.",
}


class ThemeMenu(QObject):
    """System / Light / Dark, one checked; the choice is applied and remembered.

    A QObject owned by the View menu: the desktop's colour-scheme signal (application-wide)
    reaches it only while its window lives (``stop`` disconnects it when the window closes).
    """

    def __init__(self, view: QMenu, settings: AppSettings) -> None:
        super().__init__(view)
        self.settings = settings
        self.menu = view.addMenu("&Theme")
        self.menu.setToolTipsVisible(True)
        self.group = QActionGroup(self.menu)
        self.actions: dict[str, QAction] = {}
        for name in THEMES:
            action = QAction(name.capitalize(), self.menu, checkable=True)
            action.setToolTip(THEME_TIPS[name])
            action.setStatusTip(THEME_TIPS[name])
            action.triggered.connect(lambda _=False, name=name: self.choose(name))
            self.group.addAction(action)
            self.menu.addAction(action)
            self.actions[name] = action
        self.actions[settings.theme()].setChecked(True)
        if settings.theme() != "system":  # the application started with the system's
            self.apply()
        # The desktop switched between light and dark while we run: follow it if asked to.
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_changed)

    def stop(self) -> None:
        """The window closes: the desktop's changes are no longer its business."""
        with contextlib.suppress(RuntimeError, TypeError):  # already disconnected
            QGuiApplication.styleHints().colorSchemeChanged.disconnect(self._system_changed)

    def choose(self, name: str) -> None:
        self.settings.set_theme(name)
        self.actions[name].setChecked(True)
        self.apply()

    def apply(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_palette(app, self.settings.theme())

    def _system_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self.settings.theme() == "system":
            self.apply()


class SampleMenu:
    """How often the metrics (IO wait, CPU, memory, device, page cache) are sampled."""

    TIP = (
        "How often a run's metrics are sampled: more often for loads of a second or less, "
        "less often for loads of minutes (the next run uses it)."
    )

    def __init__(self, view: QMenu, settings: AppSettings, on_change: Callable[[float], None]):
        self.settings, self.on_change = settings, on_change
        self.menu = view.addMenu("Sa&mple metrics every")
        self.menu.setToolTipsVisible(True)
        self.group = QActionGroup(self.menu)
        self.actions: dict[int, QAction] = {}
        for ms in SAMPLE_CHOICES_MS:
            action = QAction(f"{ms} ms", self.menu, checkable=True)
            action.setToolTip(self.TIP)
            action.setStatusTip(self.TIP)
            action.triggered.connect(lambda _=False, ms=ms: self.choose(ms))
            self.group.addAction(action)
            self.menu.addAction(action)
            self.actions[ms] = action
        chosen = settings.sample_ms()
        self.actions[chosen or round(SAMPLE_INTERVAL_S * 1000)].setChecked(True)
        if chosen is not None:
            on_change(chosen / 1000)

    def choose(self, ms: int) -> None:
        self.settings.set_sample_ms(ms)
        self.actions[ms].setChecked(True)
        self.on_change(ms / 1000)


class PrimeMenu:
    """Whether free memory is primed before each measured load (``core.system.host_memory``):
    the choice is remembered and is this process's priming mode from then on."""

    TIPS: ClassVar[dict[str, str]] = {
        "auto": "Where a VM's host takes freed memory back, touch the memory a load's arrays "
        "will take just before it starts (at most half the memory available, never under "
        "memory pressure), so the host's faults stay out of the timing.",
        "on": "Prime wherever, also where no such host is seen.",
        "off": "Never prime: loads pay whatever the host makes them pay.",
    }

    def __init__(self, menu: QMenu, settings: AppSettings) -> None:
        self.settings = settings
        self.menu = menu.addMenu("&Prime free memory")
        self.menu.setToolTipsVisible(True)
        self.group = QActionGroup(self.menu)
        self.actions: dict[str, QAction] = {}
        for mode in PRIME_MODES:
            action = QAction(mode.capitalize(), self.menu, checkable=True)
            action.setToolTip(self.TIPS[mode])
            action.setStatusTip(self.TIPS[mode])
            action.triggered.connect(lambda _=False, mode=mode: self.choose(mode))
            self.group.addAction(action)
            self.menu.addAction(action)
            self.actions[mode] = action
        self.actions[settings.prime_memory()].setChecked(True)
        set_prime_mode(settings.prime_memory())

    def choose(self, mode: str) -> None:
        self.settings.set_prime_memory(mode)
        self.actions[mode].setChecked(True)
        set_prime_mode(mode)


def _shortcuts(window: QMainWindow) -> list[tuple[str, str, str]]:
    rows = []
    for top in window.menuBar().actions():
        menu = top.menu()
        if not isinstance(menu, QMenu):
            continue
        pending = [(menu_text(top.text()), menu)]
        while pending:
            title, current = pending.pop(0)
            for action in current.actions():
                sub = action.menu()
                if isinstance(sub, QMenu):
                    pending.append((f"{title} ▸ {menu_text(action.text())}", sub))
                elif not action.shortcut().isEmpty():
                    key = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
                    rows.append((title, menu_text(action.text()).rstrip("…"), key))
    return rows


class HelpMenu:
    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        self.menu = window.menuBar().addMenu("&Help")
        self.menu.setToolTipsVisible(True)
        self.dialog: HelpDialog | None = None  # the one shown last (tests look at it)
        for text, shortcut, slot, tip in (
            ("&How it measures", "F1", self.show_how, "What cold means, what is timed, checks."),
            ("&Keyboard shortcuts", None, self.show_shortcuts, "Every key the menus answer to."),
            ("&About modelmon", None, self.show_about, "Version, Qt version and links."),
        ):
            action = QAction(text, window)
            if shortcut:
                action.setShortcut(QKeySequence(shortcut))
            action.setToolTip(tip)
            action.setStatusTip(tip)
            action.triggered.connect(slot)
            self.menu.addAction(action)

    def _show(
        self, title: str, text: str, markdown: bool = False, compact: bool = False
    ) -> HelpDialog:
        self.dialog = HelpDialog(title, text, markdown, self.window, compact)
        self.dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.dialog.show()
        return self.dialog

    def show_how(self) -> HelpDialog:
        return self._show("How modelmon measures", how_it_measures(), markdown=True)

    def show_shortcuts(self) -> HelpDialog:
        return self._show("Keyboard shortcuts", shortcuts_html(_shortcuts(self.window)))

    def show_about(self) -> HelpDialog:
        return self._show("About modelmon", about_html(f"PySide6 {pyside_version}"), compact=True)
