"""One row per finished run: which configuration, how, from what cache state, how fast."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from modelmon.core.result import LoadResult
from modelmon.gui.formatting import cache_state_text
from modelmon.gui.theme import current_theme

Index = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A finished run as the table (and later the export) sees it."""

    label: str  # "A" | "B"
    spec: str  # format_spec(strategy, options)
    result: LoadResult | None  # None when the run could not start at all
    error: str | None = None  # why it failed or could not start

    @property
    def status(self) -> str:
        return self.result.status if self.result is not None else "failed"

    @property
    def message(self) -> str | None:
        if self.result is not None and self.result.status == "failed":
            return self.result.error
        return self.error


COLUMNS = (
    ("Run", "Which configuration ran."),
    ("Strategy", "The strategy and every option that differs from the defaults."),
    ("Cache before", "Page-cache state measured just before the load started (verified)."),
    ("Seconds", "Wall time from the go signal until the last worker finished."),
    ("MB/s", "Tensor bytes loaded per second (decimal MB)."),
    ("GB", "Tensor bytes loaded (decimal GB)."),
    ("Status", "ok, cancelled, or failed with the reason."),
)


class ResultsModel(QAbstractTableModel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.records: list[RunRecord] = []

    def add(self, record: RunRecord) -> None:
        row = len(self.records)
        self.beginInsertRows(QModelIndex(), row, row)
        self.records.append(record)
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self.records.clear()
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.records)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][0]
        if role == Qt.ItemDataRole.ToolTipRole:
            return COLUMNS[section][1]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        record, column = self.records[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.cell_text(record, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(record, column)
        if role == Qt.ItemDataRole.ForegroundRole:
            return self._colour(record, column)
        if role == Qt.ItemDataRole.TextAlignmentRole and 3 <= column <= 5:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    @staticmethod
    def cell_text(record: RunRecord, column: int) -> str:
        result = record.result
        if column == 0:
            return record.label
        if column == 1:
            return record.spec
        if column == 6:
            return record.status + (f": {record.message}" if record.message else "")
        if result is None:
            return "–"
        if column == 2:
            return cache_state_text(result.cache)
        if result.status != "ok" and not result.bytes:
            return "–"
        if column == 3:
            return f"{result.seconds:.3f}"
        if column == 4:
            return f"{result.mbps:,.0f}"
        return f"{result.bytes / 1e9:.3f}"

    @staticmethod
    def _tooltip(record: RunRecord, column: int) -> str | None:
        result = record.result
        if column == 2 and result is not None:
            cache = result.cache
            tip = (f"requested {cache.requested}; {cache.resident_before:.1%} resident before, "
                   f"{cache.resident_after:.1%} after ({cache.method})")
            return tip + (f"\n{cache.note}" if cache.note else "")
        if column == 6:
            notes = "\n".join(result.notes) if result is not None else ""
            return "\n".join(t for t in (record.message, notes) if t) or None
        return COLUMNS[column][1]

    @staticmethod
    def _colour(record: RunRecord, column: int) -> QColor | None:
        theme = current_theme()
        if column == 0:
            return QColor(theme.run_colour(record.label))
        if column == 6:
            return QColor({"ok": theme.ok, "cancelled": theme.warning}.get(record.status,
                                                                           theme.error))
        if column == 2 and record.result is not None:
            cache = record.result.cache
            unmet = (cache.requested == "cold" and not cache.cold) or (
                cache.requested == "warm" and not cache.warm)
            return QColor(theme.warning) if unmet else None
        return None


class ResultsTable(QTableView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.results = ResultsModel(self)
        self.setModel(self.results)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setVisible(False)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        # Fitted to the contents on each new row, then the user's to change; the status
        # column takes the rest (errors are long).
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.setToolTip("Every finished run, oldest first. Hover a cell for details.")

    def add(self, record: RunRecord) -> None:
        self.results.add(record)
        for column in range(len(COLUMNS) - 1):
            self.resizeColumnToContents(column)
        self.scrollToBottom()
