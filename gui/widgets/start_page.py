"""What the window shows before a model is open: the models already on this machine (found
off the GUI thread), the recent ones, Open…, the demo model, and a drop target."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent, QShowEvent
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

from modelmon.core import Discovery, discover_models
from modelmon.gui.state.model_list import COLUMNS, ModelRow, model_row, summary_text, visible_rows
from modelmon.gui.state.recent_entries import recent_label
from modelmon.gui.tasks import BackgroundTask

DISCOVERY_WAIT_S = 5.0  # on close: discovery is bounded by its entry budget, so it ends
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
    demo_requested = Signal()
    model_chosen = Signal(str)  # a reference or path from the list or the recent files

    def __init__(
        self,
        discover: Callable[[], Discovery] = discover_models,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._discover = discover
        self._task: BackgroundTask | None = None
        self.discovery: Discovery | None = None
        self.rows: list[ModelRow] = []
        self.shown_rows: list[ModelRow] = []
        title = QLabel("<h2>Why do your model weights load slowly?</h2>")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = QLabel(
            "Pick a model found on this machine, open one (a .safetensors or .gguf file, a "
            "shard index, or a folder) or drop it here. modelmon loads it with the strategies "
            "you choose, from a verified cold or warm page cache, and plots where the time goes."
        )
        hint.setWordWrap(True)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.open_button = QPushButton("Open model…")
        self.open_button.setToolTip("Choose a model file, a *.safetensors.index.json or a folder.")
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
        buttons = QHBoxLayout()
        for widget in (self.open_button, self.demo_button, self.busy, self.status):
            buttons.addWidget(widget)
        buttons.addStretch(1)

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
        lists = QSplitter(Qt.Orientation.Vertical)
        lists.addWidget(models)
        lists.addWidget(recent)
        lists.setStretchFactor(0, 4)
        lists.setStretchFactor(1, 1)

        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(hint)
        layout.addLayout(buttons)
        layout.addWidget(lists, 1)

        self.open_button.clicked.connect(self.open_requested)
        self.demo_button.clicked.connect(self.demo_requested)
        self.rescan_button.clicked.connect(self.refresh)
        self.filter.textChanged.connect(self._filtered)
        self.filter.down.connect(self._to_list)
        self.filter.returnPressed.connect(self._open_current)
        self.sort.currentIndexChanged.connect(self._show_rows)
        self.table.cellDoubleClicked.connect(lambda row, _column: self._choose(row))
        self.table.activated_row.connect(self._choose)
        self.recent.itemActivated.connect(self._choose_recent)

    # --- discovery, off the GUI thread ---------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.discovery is None and self._task is None:
            self.refresh()

    @property
    def discovering(self) -> bool:
        return self._task is not None

    def refresh(self) -> None:
        """Look for models again (in a thread; the list updates when it is done)."""
        if self._task is not None:
            return
        self.summary.setText("Looking for models…")
        self.rescan_button.setEnabled(False)
        task = BackgroundTask(self._discover, "discovery", self)
        task.succeeded.connect(self._on_discovered)
        task.failed.connect(self._on_failed)
        self._task = task
        task.start()

    def _on_discovered(self, discovery: object) -> None:
        if not isinstance(discovery, Discovery):  # a discover function that broke its word
            self._on_failed(f"discovery returned {type(discovery).__name__}, not a Discovery")
            return
        self._task = None
        self.rescan_button.setEnabled(True)
        self.set_discovery(discovery)

    def _on_failed(self, error: str) -> None:
        self._task = None
        self.rescan_button.setEnabled(True)
        self.summary.setText(f"Could not look for models: {error}")

    def set_discovery(self, discovery: Discovery) -> None:
        self.discovery = discovery
        self.rows = [model_row(model) for model in discovery.models]
        self._show_rows()

    def shutdown(self, timeout_s: float = DISCOVERY_WAIT_S) -> None:
        if self._task is not None:
            self._task.wait(timeout_s)
            self._task = None

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
        if self.discovery is not None:
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
