"""The main window: menus, dialogs, drag and drop, and the two pages (the start page, the open
model's workspace). What they show is the app's Qt-free state (``AppState``); the window
makes it (with the one thread crossing, ``GuiPoster``), draws it and hands it the user's
requests. No logic of its own."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from modelmon.core import Discovery, discover_models
from modelmon.core.errors import ModelmonError, redact_urls
from modelmon.core.limits import DEFAULT_BUDGET_S
from modelmon.gui.bridge import GuiPoster
from modelmon.gui.export_dialogs import ExportDialogs
from modelmon.gui.menus import MenuParts, Menus, WindowActions
from modelmon.gui.recent import RecentFiles
from modelmon.gui.session_settings import MINIMUM_SIZE, remember_session, restore_session
from modelmon.gui.settings import AppSettings, open_settings
from modelmon.gui.shortcuts import KeptShortcuts
from modelmon.gui.state.app_state import AppState
from modelmon.gui.state.bucket import Listing
from modelmon.gui.state.jobs import job_name
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.model_opening import demo_index
from modelmon.gui.state.process_list import ProcessList
from modelmon.gui.state.programs import model_path
from modelmon.gui.state.recent_entries import recent_label, window_title
from modelmon.gui.state.watch_job import WatchInput, watch_request
from modelmon.gui.url_opening import URLOpening
from modelmon.gui.widgets.file_dialogs import open_file, open_folder
from modelmon.gui.widgets.memory_limit_dialog import MemoryLimitDialog
from modelmon.gui.widgets.message_bar import MessageBar
from modelmon.gui.widgets.recommend_dialog import RecommendDialog
from modelmon.gui.widgets.start_page import StartPage
from modelmon.gui.widgets.watch_dialog import WatchDialog
from modelmon.gui.workspace import Workspace

MODEL_FILTER = "Models (*.safetensors *.gguf *.json);;All files (*)"


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
        parent: QWidget | None = None,
        discover: Callable[[], Discovery] = discover_models,
        make_demo: Callable[[], Path] = demo_index,
        list_bucket: Callable[[str], Iterable[Listing]] | None = None,
    ) -> None:
        """``settings``: where to remember things (default: ``open_settings()``);
        ``discover``: how the start page finds models (tests give a fake home);
        ``make_demo``: how the demo model is made (tests give their own);
        ``list_bucket``: how the start page lists a bucket prefix (default: by s3 listing)."""
        super().__init__(parent)
        self.setWindowTitle("modelmon")
        self.setMinimumSize(MINIMUM_SIZE)
        self.setAcceptDrops(True)
        self.settings = AppSettings(settings if settings is not None else open_settings())
        self.recent = RecentFiles(self.settings.qsettings)
        self.post = GuiPoster(self)
        self.state = AppState(
            self.post,
            discover,
            make_demo,
            self.settings,
            self.settings.set_bucket_prefix,
            list_bucket,
        )
        self.bench = self.state.bench
        self.processes = ProcessList(self.post)
        self.messages = MessageBar()
        self.state.bucket.restore(self.settings.bucket_prefix())
        self.start_page = StartPage(self.state.discovery, self.state.bucket)
        self.start_page.set_recent(self.recent.paths())
        self.workspace = Workspace(self.bench, self.post)
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
        self.confirmation: QMessageBox | None = None  # while asking (tests answer it)
        self.dialog: QWidget | None = None  # the Recommend or Watch dialog while it asks
        self.url_opening = URLOpening(
            self,
            self.settings,
            self.state,
            self._ask,
            self._open,
            lambda error: self.messages.show_message(error, "error"),
        )
        self.exports = ExportDialogs(self, self.settings, self.workspace.exporter)
        self.menus = Menus(
            MenuParts(
                self,
                self.state,
                self.settings,
                self.exports,
                self.workspace.exporter,
                tuple(self.workspace.plots),
                self.workspace.tabs,
                WindowActions(
                    self.choose_file,
                    self.choose_folder,
                    self.choose_url,
                    self.fill_recent,
                    lambda process: self.watch(process=process),
                    self.recommend,
                    self.choose_memory_limit,
                    self.show_model_tab,
                    self.set_sample_interval,
                    self.quit,
                ),
            )
        )
        self.update_actions()
        self.kept_shortcuts = KeptShortcuts(self.menus.global_actions, self)  # Ctrl+E etc.
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self.kept_shortcuts)
        self._wire()
        restore_session(self, self.settings, self.bench, self.workspace.panels)

    def _wire(self) -> None:
        state, bench, page = self.state, self.bench, self.start_page
        page.open_requested.connect(self.choose_file)
        page.url_requested.connect(self.choose_url)
        page.bucket.prefix_entered.connect(state.bucket.set_prefix)
        page.bucket.refresh_requested.connect(state.bucket.refresh)
        state.bucket.changed.connect(page.bucket.show_state)
        bench.memory_limit_changed.connect(
            lambda _limit: self.menus.show_memory_limit(bench.memory_limit_words)
        )
        page.demo_requested.connect(state.use_demo)
        page.model_chosen.connect(self.open_path)
        page.refresh_requested.connect(state.discovery.refresh)
        page.back_requested.connect(lambda: state.show_page("model"))
        state.discovery.changed.connect(page.show_discovery)
        # The state shows an opened model (model_shown); the URL opening says why one failed.
        state.opener.busy.connect(self._on_busy)
        state.model_shown.connect(self._on_model_shown)
        state.page_changed.connect(self._show_page)
        bench.message.connect(self.messages.show_message)
        bench.running_changed.connect(self._on_running)
        self.workspace.recommend_button.clicked.connect(self.recommend)
        bench.exports_changed.connect(self.update_actions)

    # --- opening ------------------------------------------------------------------------------

    def open_path(self, path: str) -> None:
        """Open a model (the one open already is just shown); while a job runs, ask, then
        cancel it and open when it has stopped. (Results of the model open now are kept:
        opening it again brings them back.)"""
        self._open(path)

    def _open(self, path: str) -> bool:
        """``open_path``: whether ``path`` opens (or is shown); False when the user keeps the
        running job."""
        if not self.state.is_open(path):
            self.messages.clear()
        if self.state.open_path(path):
            return True
        if self.confirm_stop(path):
            self.state.stop_and_open(path)
            return True
        return False

    def confirm_stop(self, path: str) -> bool:
        """Ask before opening ``path`` stops the running job (its runs so far are lost)."""
        shown = redact_urls(path)
        return self._confirm(
            f"Opening {os.path.basename(shown.rstrip('/')) or shown} stops it", "Stop and open"
        )

    def confirm_quit(self) -> bool:
        """Ask before closing the window stops the running job (its runs so far are lost)."""
        return self._confirm("Quitting stops it", "Stop and quit")

    def _confirm(self, what: str, stop: str) -> bool:
        """Whether the user lets ``what`` stop the running job (``stop``: the button that
        does); True at once when no job runs."""
        if not self.bench.running:
            return True
        self.confirmation = QMessageBox(
            QMessageBox.Icon.Question,
            "Stop the running job?",
            f"{job_name(self.bench.runner.job)} is running. {what}, and what it has not "
            "finished is lost.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self,
        )
        self.confirmation.button(QMessageBox.StandardButton.Yes).setText(stop)
        self.confirmation.setDefaultButton(QMessageBox.StandardButton.Cancel)
        answer = self.confirmation.exec()
        self.confirmation = None
        return answer == QMessageBox.StandardButton.Yes

    def choose_file(self) -> None:
        path = open_file(self, "Open model", "", MODEL_FILTER)
        if path:
            self.open_path(path)

    def choose_folder(self) -> None:
        path = open_folder(self, "Open model folder")
        if path:
            self.open_path(path)

    def choose_url(self) -> None:
        self.url_opening.choose()

    def fill_recent(self) -> None:
        menu = self.menus.recent_menu
        menu.clear()
        for path in self.recent.paths():
            action = menu.addAction(recent_label(path))
            action.setToolTip(path)
            action.triggered.connect(lambda _=False, path=path: self.open_path(path))
        if menu.isEmpty():
            menu.addAction("(none yet)").setEnabled(False)

    def _on_model_shown(self, info: ModelInfo) -> None:
        demo = info.path == self.state.opener.demo_path
        self.setWindowTitle(window_title(info.path, demo))
        if info.keepable:
            self.recent.add(info.path)
        self.start_page.set_recent(self.recent.paths())
        self.start_page.set_open_model(info.name)
        self.update_actions()

    def _show_page(self, page: str) -> None:
        self.pages.setCurrentWidget(self.workspace if page == "model" else self.start_page)

    def set_sample_interval(self, seconds: float) -> None:
        self.bench.sample_interval_s = seconds

    def show_model_tab(self, index: int) -> None:
        self.state.show_page("model")
        self.workspace.tabs.setCurrentIndex(index)

    def _on_busy(self, text: str | None) -> None:
        self.start_page.set_busy(text)
        self.busy.setVisible(text is not None)
        self.busy_text.setText(text or "")

    def _on_running(self, running: bool) -> None:
        self.update_actions()
        if running:  # the last job's banner (a cancel, a failure) is not about this one
            self.messages.clear()

    def update_actions(self) -> None:
        self.menus.update(self.bench.info is not None, self.bench.running)

    # --- dialogs that start jobs --------------------------------------------------------------

    def _ask(self, dialog: QWidget, run: Callable[[], bool]) -> bool:
        """Run ``dialog`` (modal); then give the focus back where it was, never to
        whichever field comes first in the window (where keys would change a setting)."""
        before = QApplication.focusWidget()
        self.dialog = dialog
        try:
            answered = run()
        finally:
            self.dialog = None
        target = before if before is not None and before.isVisible() else self.pages
        target.setFocus(Qt.FocusReason.OtherFocusReason)
        return answered

    def recommend(self) -> None:
        """Run ▸ Recommend…: the budget, then the search (exporting it is a step of its own)."""
        if self.bench.running or self.bench.info is None:
            return
        dialog = RecommendDialog(
            self,
            budget_s=self.settings.recommend_budget() or DEFAULT_BUDGET_S,
            model_format=self.bench.info.model.format,
            memory_limit_text=self.bench.memory_limit_words,
        )
        if self._ask(dialog, lambda: bool(dialog.exec())):
            self.settings.set_recommend_budget(dialog.budget_s())  # offered the next time
            self.bench.recommend(dialog.budget_s(), dialog.loader(), dialog.ranks_count())

    def choose_memory_limit(self) -> None:
        """Run ▸ Memory limit…: the limit the next runs run under (the state takes it)."""
        if self.bench.running:
            return
        bench = self.bench
        dialog = MemoryLimitDialog(
            bench.memory_limit_text, bench.memory_limit_range(), bench.set_memory_limit, self
        )
        self._ask(dialog, lambda: bool(dialog.exec()))

    def watch(self, process: bool = False) -> None:
        """File ▸ Watch a command… (or a process…): what to watch, then the watch."""
        info = self.bench.info
        if self.bench.running or info is None:
            return
        model = info.model

        def check(given: WatchInput) -> str | None:
            try:
                watch_request(given, model)
            except ModelmonError as exc:
                return str(exc)
            return None

        dialog = WatchDialog(self.processes, model_path(model), check, self)
        dialog.refresh_requested.connect(self.processes.refresh)
        self.processes.changed.connect(dialog.draw_processes)
        try:
            dialog.show_tab(process)
            answered = self._ask(dialog, lambda: bool(dialog.exec()))
        finally:
            self.processes.changed.disconnect(dialog.draw_processes)
        if answered:
            self.bench.watch(watch_request(dialog.entered(), model))
            self.state.show_page("model")

    # --- drag and drop, showing, closing ------------------------------------------------------

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

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        discovery = self.state.discovery
        if discovery.discovery is None and not discovery.searching and discovery.error is None:
            discovery.refresh()  # the start page lists what it finds
        bucket = self.state.bucket
        if bucket.prefix is not None and bucket.listed is None and not bucket.listing:
            bucket.refresh()  # and the models under the prefix kept from the last session

    def quit(self) -> None:
        """File ▸ Quit: as the window's close button, asking first while a job runs."""
        if self.confirm_quit():
            self.close()

    def closeEvent(self, event: QCloseEvent) -> None:
        # The user's close (the title bar's button, the window manager's) asks while a job
        # runs, as opening another model does; a close by a program (a stop signal, a
        # session ending, File ▸ Quit once it has asked) stops the job without asking.
        if event.spontaneous() and not self.confirm_quit():
            event.ignore()
            return
        remember_session(self, self.settings, self.bench, self.workspace.panels)
        self.menus.theme_menu.stop()
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self.kept_shortcuts)
        # Stop the load (or the watched command) before the window goes: nothing may
        # outlive it.
        self.workspace.shutdown()
        self.state.shutdown()
        self.processes.shutdown()
        self.url_opening.access.restore()
        event.accept()
