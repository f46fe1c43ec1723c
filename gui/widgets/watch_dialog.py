"""File ▸ Watch a command… / Watch a process…: what to watch load the open model.

A command line (split like a shell's words, never run by one; ``{path}`` is the open
model's path) or a running process picked from a list (the state's ``ProcessList``, read off
the GUI thread, filtered as you type); the page cache to start a command from; whether to
end once the program has gone quiet. The dialog draws (``draw_processes`` whenever the list
changes) and asks: ``refresh_requested`` for the list, ``check`` (the window's) for whether
what was entered can be watched.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from modelmon.core.limits import MIN_QUIET_S
from modelmon.core.options import CACHE_MODES
from modelmon.gui.state.process_list import ProcessEntry, ProcessList, filtered
from modelmon.gui.state.watch_job import WatchInput
from modelmon.gui.theme import current_theme

TIPS = {
    "command": "The command to run and watch, split into words as a shell would (quotes "
    "group words) but never run by a shell: no pipes, no $VARIABLES. {path} is the open "
    "model's path.",
    "filter": "Show the processes whose pid, command line or user has every word typed here.",
    "refresh": "List the running processes again.",
    "cache": "The page-cache state of the model's files before the command starts, verified: "
    "cold (dropped), warm (read in) or keep (as found).",
    "quiet": "End the watch once the model has arrived and the program has been quiet this "
    "long (a server that loaded and now waits); a command is then stopped.",
}
PROCESS_COLUMNS = ("PID", "User", "Command line")
QUIET_DEFAULT_S = 5.0


Check = Callable[[WatchInput], str | None]  # why it cannot be watched, else None


class WatchDialog(QDialog):
    refresh_requested = Signal()  # list the running processes (again)

    def __init__(
        self,
        processes: ProcessList,
        model_path: str,
        check: Check,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Watch a program load the model")
        self.processes, self.check = processes, check
        self.shown: list[ProcessEntry] = []
        self.tabs = QTabWidget()
        self.command = QLineEdit()
        self.command.setPlaceholderText("python load.py {path}")
        self.command.setToolTip(TIPS["command"])
        self.command.setMinimumWidth(520)
        hint = QLabel(
            f"{{path}} is {model_path}. The line is split into words as a shell would, and "
            "run without one. Its output is discarded and the last line of its errors shown if it "
            "fails; only the open model's files count."
        )
        hint.setTextFormat(Qt.TextFormat.PlainText)
        hint.setWordWrap(True)
        command_page = QWidget()
        command_layout = QVBoxLayout(command_page)
        command_layout.addWidget(QLabel("Command:"))
        command_layout.addWidget(self.command)
        command_layout.addWidget(hint)
        command_layout.addStretch(1)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter: pid, command, user (every word must match)")
        self.filter.setClearButtonEnabled(True)
        self.filter.setToolTip(TIPS["filter"])
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip(TIPS["refresh"])
        self.table = QTableWidget(0, len(PROCESS_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(PROCESS_COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.setMinimumHeight(240)
        self.listing = QLabel("")
        filter_row = QHBoxLayout()
        filter_row.addWidget(self.filter, 1)
        filter_row.addWidget(self.refresh_button)
        process_page = QWidget()
        process_layout = QVBoxLayout(process_page)
        process_layout.addLayout(filter_row)
        process_layout.addWidget(self.table, 1)
        process_layout.addWidget(self.listing)
        self.tabs.addTab(command_page, "Command")
        self.tabs.addTab(process_page, "Running process")
        self.cache = QComboBox()
        self.cache.addItems(list(CACHE_MODES))
        self.cache.setToolTip(TIPS["cache"])
        self._command_cache = "cold"  # the command's choice while the process page shows
        self.quiet = QCheckBox("End once quiet for")
        self.quiet.setToolTip(TIPS["quiet"])
        self.quiet_s = QDoubleSpinBox()
        self.quiet_s.setRange(MIN_QUIET_S, 3600.0)
        self.quiet_s.setValue(QUIET_DEFAULT_S)
        self.quiet_s.setSuffix(" s")
        self.quiet_s.setToolTip(TIPS["quiet"])
        quiet_row = QHBoxLayout()
        quiet_row.addWidget(self.quiet)
        quiet_row.addWidget(self.quiet_s)
        quiet_row.addStretch(1)
        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        self.problem.setStyleSheet(f"color: {current_theme().error};")
        self.problem.hide()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Watch")
        ok.setToolTip("Start the watch; its plots fill live, Esc stops it.")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Cache before a command:", self.cache)
        form.addRow(quiet_row)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.filter.textChanged.connect(self.draw_processes)
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.tabs.currentChanged.connect(self._tab_changed)
        self.table.cellDoubleClicked.connect(lambda _row, _column: self.accept())

    def show_tab(self, process: bool) -> None:
        """Open on the command's page, or on the processes' (asking for the list)."""
        self.tabs.setCurrentIndex(1 if process else 0)
        self._tab_changed(self.tabs.currentIndex())
        (self.filter if process else self.command).setFocus()

    def _tab_changed(self, index: int) -> None:
        attached = index == 1
        # Attached, the program has already read what it read: its cache is as found.
        if attached and self.cache.isEnabled():
            self._command_cache = self.cache.currentText()
            self.cache.setCurrentText("keep")
        elif not attached and not self.cache.isEnabled():
            self.cache.setCurrentText(self._command_cache)
        self.cache.setEnabled(not attached)
        self.cache.setToolTip(
            TIPS["cache"]
            + (" Attached to a running process, the cache is kept." if attached else "")
        )
        self.quiet.setChecked(attached)  # attached: the watch detaches once it is quiet
        if attached and not self.processes.entries and not self.processes.listing:
            self.refresh_requested.emit()
        self.draw_processes()

    def draw_processes(self) -> None:
        state = self.processes
        self.refresh_button.setEnabled(not state.listing)
        if state.error is not None:
            self.listing.setText(f"Could not list the processes: {state.error}")
        self.shown = filtered(state.entries, self.filter.text())
        self.table.setRowCount(len(self.shown))
        for row, entry in enumerate(self.shown):
            for column, text in enumerate((str(entry.pid), entry.user, entry.command)):
                item = QTableWidgetItem(text)
                item.setToolTip(entry.command)
                self.table.setItem(row, column, item)
        if state.error is None:
            total = len(state.entries)
            self.listing.setText(
                "Listing the processes…"
                if state.listing
                else f"{len(self.shown)} of {total} processes (this app's own are not listed)"
            )

    def picked(self) -> ProcessEntry | None:
        row = self.table.currentRow()
        return self.shown[row] if 0 <= row < len(self.shown) else None

    def entered(self) -> WatchInput:
        quiet = self.quiet_s.value() if self.quiet.isChecked() else None
        if self.tabs.currentIndex() == 1:
            entry = self.picked()
            return WatchInput(
                None,
                entry.pid if entry is not None else None,
                entry.command if entry is not None else "",
                "keep",
                quiet,
            )
        return WatchInput(self.command.text(), None, "", self.cache.currentText(), quiet)

    def accept(self) -> None:
        problem = self.check(self.entered())
        if problem is not None:
            self.problem.setText(problem)
            self.problem.show()
            return
        super().accept()
