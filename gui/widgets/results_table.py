"""One row per finished run: which configuration, how, from what cache state, how fast."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QColor, QResizeEvent
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
    fitted_widths,
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


# Room kept, in average characters, for the status (it takes the rest of the width) and
# for each column of words that a narrow table narrows (``fitted_widths``).
STATUS_LEAST_CHARS = 16
ELASTIC_LEAST_CHARS = 10


class ResultsTable(QTableView):
    run_picked = Signal(object)  # RunRecord: the user selected (or clicked) its row

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
        # Fitted to the contents on each new row and to the table's width as it changes,
        # then the user's to change; the status column takes the rest (errors are long).
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.natural: list[int] = []  # each column's width for its text, the status's aside
        self.user_sized = False  # the user dragged a column's edge: the widths are theirs
        self._fitting = False
        header.sectionResized.connect(self._section_resized)
        self.setToolTip(
            "Every finished run, oldest first. Hover a cell for details; select a row to "
            "draw its run in the plots (in place of the last of its configuration)."
        )
        # A row selected (by the mouse or the arrow keys), or clicked again once a newer run
        # of its configuration took its place; not the current index alone, which focus
        # moves without a selection.
        self.selectionModel().selectionChanged.connect(self._selected)
        self.clicked.connect(self._pick)

    def _selected(self) -> None:
        rows = self.selectionModel().selectedRows()
        if len(rows) == 1:
            self._pick(rows[0])

    def _pick(self, index: QModelIndex | QPersistentModelIndex) -> None:
        if index.isValid() and index.row() < len(self.results.records):
            self.run_picked.emit(self.results.records[index.row()])

    def add(self, record: RunRecord) -> None:
        self.results.add(record)
        self.fit_columns()
        self.scrollToBottom()

    def set_ceilings(self, ceilings: Ceilings | None) -> None:
        self.results.set_ceilings(ceilings)
        self.fit_columns()

    def fit_columns(self) -> None:
        """Each column as wide as its text, then narrowed to the table's width where it is
        narrower: the words end in "…" (whole in their tooltips) and the figures, the limit
        and the status stay in sight, with no scrolling sideways (a 1000 px window)."""
        self._fitting = True
        try:
            for column in range(STATUS):
                self.resizeColumnToContents(column)
            self.natural = [self.columnWidth(column) for column in range(STATUS)]
            self.user_sized = False
            self._fit_width()
        finally:
            self._fitting = False

    def _fit_width(self) -> None:
        average = self.fontMetrics().averageCharWidth()
        header = self.horizontalHeader()
        # The last section stretches, but never below the header's default section size.
        status = max(STATUS_LEAST_CHARS * average, header.defaultSectionSize())
        room = self.viewport().width() - status
        for column, width in enumerate(
            fitted_widths(self.natural, room, ELASTIC_LEAST_CHARS * average)
        ):
            if self.columnWidth(column) != width:
                self.setColumnWidth(column, width)

    def _section_resized(self, column: int, _old: int, _new: int) -> None:
        if not self._fitting and column != STATUS:  # the status follows the table's width
            self.user_sized = True

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.natural and not self.user_sized:
            self._fitting = True
            try:
                self._fit_width()
            finally:
                self._fitting = False
