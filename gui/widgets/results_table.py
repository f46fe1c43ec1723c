"""One row per finished run: which configuration, how, from what cache state, how fast."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from modelmon.core import Ceilings
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.results_rows import (
    CACHE,
    CEILING_COLUMN,
    COLUMNS,
    NUMERIC,
    RUN,
    STATUS,
    cache_unmet,
    cell_text,
    cell_tip,
)
from modelmon.gui.theme import current_theme

Index = QModelIndex | QPersistentModelIndex


class ResultsModel(QAbstractTableModel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.records: list[RunRecord] = []
        self.ceilings: Ceilings | None = None

    def add(self, record: RunRecord) -> None:
        row = len(self.records)
        self.beginInsertRows(QModelIndex(), row, row)
        self.records.append(record)
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self.records.clear()
        self.ceilings = None
        self.endResetModel()

    def set_ceilings(self, ceilings: Ceilings | None) -> None:
        """New ceilings: every row's "% of bound" is worked out again."""
        self.ceilings = ceilings
        if self.records:
            self.dataChanged.emit(
                self.index(0, CEILING_COLUMN), self.index(len(self.records) - 1, CEILING_COLUMN)
            )

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.records)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
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
            return cell_text(record, column, self.ceilings)
        if role == Qt.ItemDataRole.ToolTipRole:
            return cell_tip(record, column, self.ceilings)
        if role == Qt.ItemDataRole.ForegroundRole:
            return self._colour(record, column)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def cell_text(self, record: RunRecord, column: int) -> str:
        return cell_text(record, column, self.ceilings)

    @staticmethod
    def _colour(record: RunRecord, column: int) -> QColor | None:
        theme = current_theme()
        if column == RUN:
            return QColor(theme.run_colour(record.label))
        if column == STATUS:
            return QColor(
                {"ok": theme.ok, "cancelled": theme.warning}.get(record.status, theme.error)
            )
        if column == CACHE and cache_unmet(record):
            return QColor(theme.warning)
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
        # Compact rows: an A/B × 3 (six runs) fits without scrolling at 1400×900.
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        # Fitted to the contents on each new row, then the user's to change; the status
        # column takes the rest (errors are long).
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.setToolTip("Every finished run, oldest first. Hover a cell for details.")

    def add(self, record: RunRecord) -> None:
        self.results.add(record)
        self.fit_columns()
        self.scrollToBottom()

    def set_ceilings(self, ceilings: Ceilings | None) -> None:
        self.results.set_ceilings(ceilings)
        self.resizeColumnToContents(CEILING_COLUMN)

    def fit_columns(self) -> None:
        for column in range(len(COLUMNS) - 1):
            self.resizeColumnToContents(column)
