"""The start page's models in a bucket: the prefix the user names (``s3://models/``, kept in
the settings), the models under it, and why they could not be listed. It draws the state's
``BucketState`` (the listing runs there, off the GUI thread); a click is an intent."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from modelmon.gui.state.bucket import BucketState
from modelmon.gui.state.model_list import COLUMNS
from modelmon.gui.theme import current_theme

SHOWN = ("Name", "Format", "Files", "Size", "Reference")  # "Where" is the prefix, above


class BucketList(QWidget):
    prefix_entered = Signal(str)  # the text typed: the state parses it
    refresh_requested = Signal()
    model_chosen = Signal(str)  # a model's URL

    def __init__(self, state: BucketState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.prefix = QLineEdit(state.prefix or "")
        self.prefix.setPlaceholderText("s3://bucket/models/  (a bucket prefix to list)")
        self.prefix.setClearButtonEnabled(True)
        self.prefix.setToolTip(
            "An s3:// prefix: the models in its folders are listed. Credentials come from "
            "your AWS configuration, never from the URL; only the URL is kept."
        )
        self.list_button = QPushButton("List")
        self.list_button.setToolTip("List the models under the prefix (again).")
        self.table = QTableWidget(0, len(SHOWN))
        self.table.setHorizontalHeaderLabels(list(SHOWN))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.setToolTip("Double-click or press Enter to open a model.")
        self.summary = QLabel("Name a bucket prefix to list the models in it.")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        controls = QHBoxLayout()
        controls.addWidget(self.prefix, 1)
        controls.addWidget(self.list_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("<b>Models in a bucket</b>"))
        layout.addLayout(controls)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.summary)
        self.prefix.returnPressed.connect(self._entered)
        self.list_button.clicked.connect(self._entered)
        self.table.cellDoubleClicked.connect(lambda row, _column: self._choose(row))
        self.table.itemActivated.connect(lambda item: self._choose(item.row()))

    def _entered(self) -> None:
        text = self.prefix.text().strip()
        if text and text == self.state.prefix:
            self.refresh_requested.emit()
        elif text:
            self.prefix_entered.emit(text)

    def _choose(self, row: int) -> None:
        if 0 <= row < len(self.state.rows):
            self.model_chosen.emit(self.state.rows[row].reference)

    def show_state(self) -> None:
        """Draw the state: listing, its models, or why they could not be listed."""
        state = self.state
        if state.prefix and self.prefix.text().strip() != state.prefix and not state.error:
            self.prefix.setText(state.prefix)
        self.list_button.setEnabled(not state.listing)
        self.summary.setStyleSheet(f"color: {current_theme().error};" if state.error else "")
        self.table.setRowCount(len(state.rows))
        for index, row in enumerate(state.rows):
            cells = dict(zip(COLUMNS, row.cells(), strict=True))
            for column, name in enumerate(SHOWN):
                item = QTableWidgetItem(cells[name])
                item.setToolTip(row.tip)
                if name in ("Files", "Size"):
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.table.setItem(index, column, item)
        if state.listing:
            self.summary.setText(f"Listing {state.prefix}…")
        elif state.error is not None:
            self.summary.setText(f"Could not list the models: {state.error}")
        elif state.prefix is None:
            self.summary.setText("Name a bucket prefix to list the models in it.")
        else:
            count = len(state.rows)
            self.summary.setText(
                f"{count} model{'s' if count != 1 else ''} under {state.prefix}"
                if count
                else f"No model under {state.prefix} (.safetensors, index or .gguf)"
            )
