"""The main window: menus, drag and drop, and the wiring between the pages. No logic of its own."""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtCore import QSettings, QSize, Qt
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QProgressBar,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from modelmon.core import Discovery, discover_models
from modelmon.gui.export_dialogs import ExportDialogs
from modelmon.gui.model_loader import ModelLoader
from modelmon.gui.recent import RecentFiles
from modelmon.gui.settings import AppSettings, open_settings
from modelmon.gui.state.jobs import job_name
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.recent_entries import recent_label
from modelmon.gui.view_menus import HelpMenu, PrimeMenu, SampleMenu, ThemeMenu
from modelmon.gui.widgets.message_bar import MessageBar
from modelmon.gui.widgets.start_page import StartPage
from modelmon.gui.workspace import Workspace

MODEL_FILTER = "Models (*.safetensors *.gguf *.json);;All files (*)"
# Below this the model facts, the two configurations and a plot no longer fit side by side
# even with the panels scrolling; the default size is larger, the screen permitting.
MINIMUM_SIZE = QSize(800, 500)
DEFAULT_SIZE = QSize(1400, 900)


def drop_action(possible: Qt.DropAction) -> Qt.DropAction | None:
    """A drop is taken as a copy (or a link), never a move: the model is only read, and a
    source told "moved" may delete its file. None when the source offers neither."""
    for action in (Qt.DropAction.CopyAction, Qt.DropAction.LinkAction):
        if possible & action:
            return action
    return None


class MainWindow(QMainWindow):
    def __init__(
        self,
        settings: QSettings | None = None,
        loader: ModelLoader | None = None,
        parent: QWidget | None = None,
        discover: Callable[[], Discovery] = discover_models,
    ) -> None:
        """``settings``: where to remember things (default: ``open_settings()``);
        ``discover``: how the start page finds models (tests give a fake home)."""
        super().__init__(parent)
        self.setWindowTitle("modelmon")
        self.setMinimumSize(MINIMUM_SIZE)
        self.setAcceptDrops(True)
        self.settings = AppSettings(settings if settings is not None else open_settings())
        self.recent = RecentFiles(self.settings.qsettings)
        self.loader = loader or ModelLoader(self)
        self.messages = MessageBar()
        self.start_page = StartPage(discover)
        self.start_page.set_recent(self.recent.paths())
        self.workspace = Workspace()
        self.pages = QStackedWidget()
        self.pages.addWidget(self.start_page)
        self.pages.addWidget(self.workspace)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 0)
        layout.addWidget(self.pages, 1)
        self.setCentralWidget(central)
        # Messages in the bottom row, which is there with or without one: nothing moves.
        self.statusBar().addWidget(self.messages, 1)
        self.busy = QProgressBar(maximumWidth=160, textVisible=False)
        self.busy.setRange(0, 0)
        self.busy_text = QLabel()
        self.statusBar().addPermanentWidget(self.busy_text)
        self.statusBar().addPermanentWidget(self.busy)
        self.busy.hide()
        self._pending_open: str | None = None
        self.confirmation: QMessageBox | None = None  # while asking (tests answer it)
        self.exports = ExportDialogs(self, self.settings, self.workspace)
        self._make_menus()
        self._wire()
        self._restore()

    def _make_menus(self) -> None:
        files = self.menuBar().addMenu("&File")
        self.open_action = self._action(
            files,
            "&Open model…",
            QKeySequence.StandardKey.Open,
            self.choose_file,
            "Open a model file or shard index.",
        )
        self._action(
            files,
            "Open &folder…",
            "Ctrl+Shift+O",
            self.choose_folder,
            "Open the model in a folder (its index, or its one model file).",
        )
        self.recent_menu = files.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self._action(
            files,
            "Use &demo model",
            None,
            self.loader.use_demo,
            "Open a ~480 MB Llama-shaped demo model (written once to your cache).",
        )
        files.addSeparator()
        self.recommend_action = self._action(
            files,
            "Export &recommended configuration…",
            "Ctrl+E",
            self.exports.export_recommended,
            "Search for the fastest configuration within a time budget and write it as TOML.",
        )
        self.ab_config_action = self._action(
            files,
            "Export A/B &winner as configuration…",
            "Ctrl+Shift+E",
            self.exports.export_ab_config,
            "Write the faster side of the last A/B, with its evidence, as a TOML config.",
        )
        self.json_action = self._action(
            files,
            "Export results as &JSON…",
            "Ctrl+Shift+J",
            lambda: self.exports.export_results("json"),
            "Write every run (with its metric series), the ceilings and the A/B as JSON.",
        )
        self.csv_action = self._action(
            files,
            "Export results as &CSV…",
            "Ctrl+Shift+C",
            lambda: self.exports.export_results("csv"),
            "Write the results table, one run a row, as CSV.",
        )
        plots = files.addMenu("Export &plot")
        plots.setToolTipsVisible(True)
        self.plot_actions = [
            self._action(
                plots,
                f"{name}…",
                None,
                lambda _=False, name=name: self.exports.export_plot(name),
                f"Save the {name.lower()} plot: PNG as it is on screen, SVG or PDF drawn "
                "from the runs' data for print.",
            )
            for name in self.workspace.plots
        ]
        files.addSeparator()
        self._action(files, "&Quit", QKeySequence.StandardKey.Quit, self.close, "Quit modelmon.")
        runs = self.menuBar().addMenu("&Run")
        self.run_a_action = self._action(
            runs,
            "Run &A",
            "Ctrl+R",
            lambda: self.workspace.run("A"),
            "Load the model once with configuration A.",
        )
        self.run_b_action = self._action(
            runs,
            "Run &B",
            "Ctrl+Shift+R",
            lambda: self.workspace.run("B"),
            "Load the model once with configuration B.",
        )
        self.ab_action = self._action(
            runs,
            "Run A/B × &n",
            "Ctrl+T",
            self._run_ab,
            "Run A, B, A, B … from the same verified cache state and give the verdict.",
        )
        self.ceilings_action = self._action(
            runs,
            "&Measure ceilings",
            "Ctrl+Shift+M",
            self.workspace.measure_ceilings,
            "Measure what this storage gives on this file.",
        )
        self.cancel_action = self._action(
            runs, "&Cancel", "Esc", self.workspace.cancel, "Stop the running job and its workers."
        )
        runs.addSeparator()
        self.prime_menu = PrimeMenu(runs, self.settings)
        view = self.menuBar().addMenu("&View")
        tabs = self.workspace.tabs
        for index in range(tabs.count()):
            title = tabs.tabText(index).replace("&&", "&")
            self._action(
                view,
                tabs.tabText(index),
                f"Ctrl+{index + 1}",
                lambda _=False, index=index: tabs.setCurrentIndex(index),
                f"Show the {title} tab: {tabs.tabToolTip(index)}",
            )
        view.addSeparator()
        self.theme_menu = ThemeMenu(view, self.settings)
        self.sample_menu = SampleMenu(view, self.settings, self._set_sample_interval)
        self.help_menu = HelpMenu(self)
        for menu in (files, runs, view):
            menu.setToolTipsVisible(True)
        self._on_running(False)

    def _action(
        self,
        menu: QMenu,
        text: str,
        shortcut: QKeySequence.StandardKey | str | None,
        slot: Callable[[], object],
        tip: str,
    ) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _wire(self) -> None:
        self.start_page.open_requested.connect(self.choose_file)
        self.start_page.demo_requested.connect(self.loader.use_demo)
        self.start_page.model_chosen.connect(self.open_path)
        self.loader.loaded.connect(self._on_loaded)
        self.loader.failed.connect(lambda error: self.messages.show_message(error, "error"))
        self.loader.busy.connect(self._on_busy)
        self.workspace.message.connect(self.messages.show_message)
        self.workspace.running_changed.connect(self._on_running)
        self.workspace.state_changed.connect(self._update_actions)

    # --- opening ------------------------------------------------------------------------------

    def open_path(self, path: str) -> None:
        """Open a model; while a job runs, ask, then cancel it and open when it has stopped.
        (Results of the model open now are kept: opening it again brings them back.)"""
        if self.workspace.running:
            if not self.confirm_stop(path):
                return
            self._pending_open = path
            self.workspace.cancel()
            return
        self.messages.clear()
        self.loader.open(path)

    def confirm_stop(self, path: str) -> bool:
        """Ask before opening ``path`` stops the running job (its runs so far are lost)."""
        self.confirmation = QMessageBox(
            QMessageBox.Icon.Question,
            "Stop the running job?",
            f"{job_name(self.workspace.controller.job)} is running. Opening "
            f"{os.path.basename(path.rstrip('/')) or path} stops it, and what it has not "
            "finished is lost.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self,
        )
        self.confirmation.button(QMessageBox.StandardButton.Yes).setText("Stop and open")
        self.confirmation.setDefaultButton(QMessageBox.StandardButton.Cancel)
        answer = self.confirmation.exec()
        self.confirmation = None
        return answer == QMessageBox.StandardButton.Yes

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open model", "", MODEL_FILTER)
        if path:
            self.open_path(path)

    def choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open model folder")
        if path:
            self.open_path(path)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.recent.paths():
            action = self.recent_menu.addAction(recent_label(path))
            action.setToolTip(path)
            action.triggered.connect(lambda _=False, path=path: self.open_path(path))
        if self.recent_menu.isEmpty():
            self.recent_menu.addAction("(none yet)").setEnabled(False)

    def _on_loaded(self, info: ModelInfo) -> None:
        self.workspace.set_model(info)
        self.pages.setCurrentWidget(self.workspace)
        self.setWindowTitle(f"modelmon — {info.name}")
        self.recent.add(info.path)
        self.start_page.set_recent(self.recent.paths())

    def _on_busy(self, text: str | None) -> None:
        self.start_page.set_busy(text)
        self.busy.setVisible(text is not None)
        self.busy_text.setText(text or "")

    def _on_running(self, running: bool) -> None:
        self._update_actions()
        if running:  # the last job's banner (a cancel, a failure) is not about this one
            self.messages.clear()
        if not running and self._pending_open is not None:
            path, self._pending_open = self._pending_open, None
            self.open_path(path)

    def _update_actions(self) -> None:
        running, ready = self.workspace.running, self.workspace.info is not None
        for action in (
            self.run_a_action,
            self.run_b_action,
            self.ab_action,
            self.ceilings_action,
            self.recommend_action,
        ):
            action.setEnabled(ready and not running)
        self.cancel_action.setEnabled(running)
        self.ab_config_action.setEnabled(self.workspace.exporter.can_export_ab)
        for action in (self.json_action, self.csv_action):
            action.setEnabled(self.workspace.exporter.can_export_results)
        for action in self.plot_actions:
            action.setEnabled(ready)

    def _set_sample_interval(self, seconds: float) -> None:
        self.workspace.sample_interval_s = seconds

    def _run_ab(self) -> None:
        self.workspace.run_ab(self.workspace.compare.pairs.value())

    # --- settings -----------------------------------------------------------------------------

    def _restore(self) -> None:
        """The geometry, configurations A and B and the pairs of the last session."""
        geometry = self.settings.geometry()
        if geometry is None or not self.restoreGeometry(geometry):
            screen = self.screen().availableGeometry().size()
            self.resize(DEFAULT_SIZE.boundedTo(screen).expandedTo(MINIMUM_SIZE))
        for label, panel in self.workspace.panels.items():
            config = self.settings.config(label)
            if config is not None:
                panel.set_config(*config)
        pairs = self.settings.pairs()
        if pairs is not None:
            self.workspace.compare.pairs.setValue(pairs)

    def _remember(self) -> None:
        self.settings.set_geometry(self.saveGeometry())
        for label, panel in self.workspace.panels.items():
            self.settings.set_config(label, panel.strategy(), panel.options())
        self.settings.set_pairs(self.workspace.compare.pairs.value())

    # --- drag and drop, closing -----------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        urls = event.mimeData().urls()
        action = drop_action(event.possibleActions())
        if urls and urls[0].isLocalFile() and action is not None:
            event.setDropAction(action)
            event.accept()

    def dropEvent(self, event: QDropEvent) -> None:
        """A dropped file or folder opens; of several, the first (one model at a time)."""
        urls = [url for url in event.mimeData().urls() if url.isLocalFile()]
        action = drop_action(event.possibleActions())
        if urls and action is not None:
            event.setDropAction(action)
            event.accept()
            self.open_path(urls[0].toLocalFile())
            if len(urls) > 1:
                self.messages.show_message(
                    f"{len(urls)} items dropped: opening the first, {urls[0].fileName()}.",
                    "info",
                )

    def closeEvent(self, event: QCloseEvent) -> None:
        self._remember()
        self.theme_menu.stop()
        # Stop the load and its workers before the window goes: nothing may outlive it.
        self.workspace.shutdown()
        self.loader.shutdown()
        self.start_page.shutdown()
        event.accept()
