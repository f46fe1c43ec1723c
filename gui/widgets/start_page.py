"""What the window shows before a model is open (and whenever asked for, View ▸ Start page):
the models already on this machine, the recent ones, Open…, the demo model, a drop target,
and the way back to the open model.

It draws the state's ``DiscoveryState`` (the search runs there, off the GUI thread); a
click is an intent: ``refresh_requested``, ``model_chosen``..."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from modelmon.core import Discovery
from modelmon.gui.state.bucket import BucketState
from modelmon.gui.state.discovery import DiscoveryState
from modelmon.gui.state.model_list import COLUMNS, ModelRow, summary_text, visible_rows
from modelmon.gui.state.recent_entries import recent_label
from modelmon.gui.widgets.bucket_list import BucketList

SORTS = {"Name": ("name", False), "Size, largest first": ("size", True)}
SIZE_COLUMN, NAME_COLUMN = COLUMNS.index("Size"), COLUMNS.index("Name")


class ModelTable(QTableWidget):
    """The discovered models; Enter (like a double click) opens the current one."""

    activated_row = Signal(int)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.currentRow() >= 0:
            self.activated_row.emit(self.currentRow())
            return
        super().keyPressEvent(event)


class FilterBox(QLineEdit):
    """The list's filter: Down goes on to the list, Enter opens the model the list has
    current (the first that matches, unless another was chosen), as in a search box."""

    down = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Down:
            self.down.emit()
            return
        super().keyPressEvent(event)


class StartPage(QWidget):
    open_requested = Signal()
    url_requested = Signal()  # File ▸ Open URL…
    demo_requested = Signal()
    refresh_requested = Signal()
    back_requested = Signal()  # to the open model's page
    model_chosen = Signal(str)  # a reference or path from the list or the recent files

    def __init__(
        self, discovery: DiscoveryState, bucket: BucketState, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.state = discovery
        self.rows: list[ModelRow] = []
        self.shown_rows: list[ModelRow] = []
        title = QLabel("<h2>Why do your model weights load slowly?</h2>")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = QLabel(
            "Pick a model found on this machine or in a bucket, open one (a .safetensors or "
            ".gguf file, a shard index, a folder, or an s3:// or https:// URL) or drop it here. "
            "modelmon loads it with the strategies "
            "you choose, from a verified cold or warm page cache, and plots where the time goes."
        )
        hint.setWordWrap(True)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.open_button = QPushButton("Open model…")
        self.open_button.setToolTip("Choose a model file, a *.safetensors.index.json or a folder.")
        self.url_button = QPushButton("Open URL…")
        self.url_button.setToolTip("Open a model in object storage: s3://… or https://….")
        self.demo_button = QPushButton("Use demo model")
        self.demo_button.setToolTip(
            "A Llama-shaped ~480 MB fp16 model in 2 shards, written once "
            "to your cache folder (a few seconds the first time)."
        )
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)  # indeterminate: a busy indicator
        self.busy.setMaximumWidth(240)
        self.busy.setTextVisible(False)
        self.busy.hide()
        self.status = QLabel("")
        self.back_button = QPushButton()
        self.back_button.setToolTip("Back to the open model's measurements (Ctrl+1).")
        self.back_button.hide()
        buttons = QHBoxLayout()
        for widget in (
            self.open_button,
            self.url_button,
            self.demo_button,
            self.busy,
            self.status,
        ):
            buttons.addWidget(widget)
        buttons.addStretch(1)
        buttons.addWidget(self.back_button)

        self.filter = FilterBox()
        self.filter.setPlaceholderText("Filter: name, format, store… (every word must match)")
        self.filter.setClearButtonEnabled(True)
        self.sort = QComboBox()
        self.sort.addItems(list(SORTS))
        self.sort.setToolTip("Order of the list (a click on the Name or Size header too).")
        self.rescan_button = QPushButton("Search again")
        self.rescan_button.setToolTip(
            "Look again in the Hugging Face cache, Ollama, LM Studio, llama.cpp's cache "
            "and the folders in MODELMON_MODEL_DIRS."
        )
        self.summary = QLabel("Looking for models…")
        self.summary.setWordWrap(True)  # where to look next, when none was found
        controls = QHBoxLayout()
        controls.addWidget(self.filter, 1)
        controls.addWidget(self.sort)
        controls.addWidget(self.rescan_button)
        self.table = ModelTable(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)  # one line a model; long names end in "…" (tooltip: all)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)  # the reference takes the rest of the width
        header.sectionClicked.connect(self._header_clicked)
        self.table.setToolTip("Double-click or press Enter to open a model.")
        models = QWidget()
        models_layout = QVBoxLayout(models)
        models_layout.setContentsMargins(0, 0, 0, 0)
        models_layout.addWidget(QLabel("<b>Models on this machine</b>"))
        models_layout.addLayout(controls)
        models_layout.addWidget(self.table, 1)
        models_layout.addWidget(self.summary)
        self.recent = QListWidget()
        self.recent.setToolTip("Double-click or press Enter to open a recent model.")
        recent = QWidget()
        recent_layout = QVBoxLayout(recent)
        recent_layout.setContentsMargins(0, 0, 0, 0)
        recent_layout.addWidget(QLabel("<b>Recent</b>"))
        recent_layout.addWidget(self.recent, 1)
        self.bucket = BucketList(bucket)
        lists = QSplitter(Qt.Orientation.Vertical)
        lists.addWidget(models)
        lists.addWidget(self.bucket)
        lists.addWidget(recent)
        lists.setStretchFactor(0, 4)
        lists.setStretchFactor(1, 2)
        lists.setStretchFactor(2, 1)

        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(hint)
        layout.addLayout(buttons)
        layout.addWidget(lists, 1)

        self.open_button.clicked.connect(self.open_requested)
        self.url_button.clicked.connect(self.url_requested)
        self.bucket.model_chosen.connect(self.model_chosen)
        self.demo_button.clicked.connect(self.demo_requested)
        self.rescan_button.clicked.connect(self.refresh_requested)
        self.back_button.clicked.connect(self.back_requested)
        self.filter.textChanged.connect(self._filtered)
        self.filter.down.connect(self._to_list)
        self.filter.returnPressed.connect(self._open_current)
        self.sort.currentIndexChanged.connect(self._show_rows)
        self.table.cellDoubleClicked.connect(lambda row, _column: self._choose(row))
        self.table.activated_row.connect(self._choose)
        self.recent.itemActivated.connect(self._choose_recent)

    # --- what the search found ---------------------------------------------------------------

    @property
    def discovery(self) -> Discovery | None:
        return self.state.discovery

    def show_discovery(self) -> None:
        """Draw the state's search: running, its rows, or why it failed."""
        state = self.state
        self.rescan_button.setEnabled(not state.searching)
        if state.searching:
            self.summary.setText("Looking for models…")
            return
        if state.error is not None:
            self.summary.setText(f"Could not look for models: {state.error}")
            return
        self.rows = list(state.rows)
        self._show_rows()

    def set_open_model(self, name: str | None) -> None:
        """The model open now (the way back to it), or None."""
        self.back_button.setVisible(name is not None)
        self.back_button.setText(f"Back to {name} ▸" if name else "")

    # --- the list -------------------------------------------------------------------------------

    def set_sort(self, name: str) -> None:
        self.sort.setCurrentText(name)

    def _header_clicked(self, column: int) -> None:
        if column == SIZE_COLUMN:
            self.set_sort("Size, largest first")
        elif column == NAME_COLUMN:
            self.set_sort("Name")

    def _show_rows(self) -> None:
        key, descending = SORTS[self.sort.currentText()]
        self.shown_rows = visible_rows(self.rows, self.filter.text(), key, descending)
        self.table.setRowCount(len(self.shown_rows))
        for index, row in enumerate(self.shown_rows):
            for column, text in enumerate(row.cells()):
                item = QTableWidgetItem(text)
                item.setToolTip(row.tip)
                if column in (SIZE_COLUMN, COLUMNS.index("Files")):
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.table.setItem(index, column, item)
        if self.discovery is not None and not self.state.searching:
            self.summary.setText(
                summary_text(
                    len(self.shown_rows),
                    len(self.rows),
                    len(self.discovery.searched),
                    self.discovery.truncated,
                )
            )
            self.summary.setToolTip(
                "Searched:\n" + "\n".join(self.discovery.searched)
                if self.discovery.searched
                else "No model store exists on this machine."
            )

    def _filtered(self) -> None:
        """The rows that match; the first of them current (what Down and Enter go to)."""
        self._show_rows()
        if self.table.rowCount():
            self.table.setCurrentCell(0, NAME_COLUMN)

    def _to_list(self) -> None:
        if self.table.rowCount():
            if self.table.currentRow() < 0:
                self.table.setCurrentCell(0, NAME_COLUMN)
            self.table.setFocus()

    def _open_current(self) -> None:
        self._choose(max(0, self.table.currentRow()))

    def _choose(self, row: int) -> None:
        if 0 <= row < len(self.shown_rows):
            self.model_chosen.emit(self.shown_rows[row].reference)

    # --- recent models ----------------------------------------------------------------------------

    def set_recent(self, entries: list[str]) -> None:
        self.recent.clear()
        for entry in entries:
            item = QListWidgetItem(recent_label(entry))
            item.setToolTip(entry)
            item.setData(Qt.ItemDataRole.UserRole, entry)
            self.recent.addItem(item)
        if not entries:
            item = QListWidgetItem("(none yet)")
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.recent.addItem(item)

    def _choose_recent(self, item: QListWidgetItem) -> None:
        entry = item.data(Qt.ItemDataRole.UserRole)
        if isinstance(entry, str):
            self.model_chosen.emit(entry)

    def set_busy(self, text: str | None) -> None:
        """Show the busy indicator with ``text``, or hide it (None)."""
        self.busy.setVisible(text is not None)
        self.status.setText(text or "")
        self.demo_button.setEnabled(text is None)
        self.open_button.setEnabled(text is None)
        self.url_button.setEnabled(text is None)
