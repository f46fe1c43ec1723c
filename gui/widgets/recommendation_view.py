"""The recommendation in the window: the search's progress while it runs, then the pick, the
explanation's sentences, the ranking (each candidate against the pick) and the apply snippets.

What it shows comes from ``gui.state.recommendation_view``; this only lays it out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFont, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from modelmon.gui.state.ranks_answer_view import (
    WAYS_COLUMNS,
    WAYS_HEADER_TIPS,
    WAYS_TIP,
    ranks_headline,
    ranks_notes,
    ranks_paste,
    ranks_snippet_rows,
    ways_rows,
)
from modelmon.gui.state.recommendation_view import (
    RANKING_COLUMNS,
    SNIPPET_COLUMNS,
    answer_texts,
    left_out_text,
    ranking_rows,
    snippet_rows,
)
from modelmon.gui.state.recommending import RecommendationShown

EMPTY = (
    "No recommendation yet: Run ▸ Recommend… measures the candidates within a time budget "
    "and shows here what it found and why; File ▸ Export recommended configuration… then "
    "writes it as a config file."
)
RANKING_TIP = (
    "Every candidate, by median. 'vs the pick': what loading with it instead of the "
    "pick gains or loses here (the regret): for the runner-up run in alternation with "
    "the pick in two pairs or more, the median of those pairs (the figure the explanation "
    "gives), else the ratio of the medians; 'paired with the pick': those pairs, as in an A/B."
)
CONFIG_NAME = "modelmon.toml"  # the file name the snippets load it by, until it is exported
# A column whose words are wider than this shares the table's width with the others like
# it and wraps; narrower ones (figures) keep their own width. A 1000 px window's tab then
# shows every column of the ways, the ranking and the snippets, none cut at its edge.
WRAP_FROM_PX = 240
COPIED, COPIED_MS = "Copied ✓", 2000  # what the Copy button says, and how long, once it copied
MAX_TABLE_HEIGHT = 400  # taller, the table scrolls within the tab


class FittedTable(QTableWidget):
    """A table whose long-text columns share the width there is, wrapped, and that stands as
    tall as its rows (up to ``MAX_TABLE_HEIGHT``): the tab scrolls, not each table."""

    def __init__(self, columns: tuple[str, ...]) -> None:
        super().__init__(0, len(columns))
        self.setHorizontalHeaderLabels(list(columns))
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().hide()
        self.horizontalHeader().setStretchLastSection(False)
        self.setWordWrap(True)

    def fit(self) -> None:
        """Columns to their contents, the wide ones sharing the rest; rows to their lines."""
        header = self.horizontalHeader()
        wide = [c for c in range(self.columnCount()) if self.sizeHintForColumn(c) > WRAP_FROM_PX]
        for column in range(self.columnCount()):
            stretch = column in wide or (not wide and column == self.columnCount() - 1)
            mode = (
                QHeaderView.ResizeMode.Stretch
                if stretch
                else QHeaderView.ResizeMode.ResizeToContents
            )
            header.setSectionResizeMode(column, mode)
        self._fit_rows()

    def _fit_rows(self) -> None:
        self.resizeRowsToContents()
        height = self.horizontalHeader().height() + 2 * self.frameWidth()
        height += sum(self.rowHeight(r) for r in range(self.rowCount()))
        if self.horizontalScrollBar().isVisible():
            height += self.horizontalScrollBar().height()
        self.setMinimumHeight(min(height, MAX_TABLE_HEIGHT))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_rows()  # narrower, the wrapped columns take more lines


def _columns(
    table: QTableWidget, columns: tuple[str, ...], tips: Mapping[str, str] | None = None
) -> None:
    if table.columnCount() != len(columns) or table.horizontalHeaderItem(1).text() != columns[1]:
        table.setColumnCount(len(columns))
        table.setHorizontalHeaderLabels(list(columns))
    for column, name in enumerate(columns):
        table.horizontalHeaderItem(column).setToolTip((tips or {}).get(name, ""))


def _fill(table: FittedTable, rows: list[tuple[str, ...]], bold: Collection[int] = ()) -> None:
    table.setRowCount(len(rows))
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            if r in bold:
                font = QFont(item.font())
                font.setBold(True)
                item.setFont(font)
            table.setItem(r, c, item)
    table.fit()


class RecommendationView(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        # Over an earlier answer shown again: why the newer search gave none.
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.hide()
        self.summary = QLabel(EMPTY)
        self.summary.setWordWrap(True)
        font = self.summary.font()
        font.setBold(True)
        self.summary.setFont(font)
        self.progress_lines: list[str] = []
        self.progress = QLabel()
        self.progress.setWordWrap(True)
        self.progress.setTextFormat(Qt.TextFormat.PlainText)
        self.explanation = QLabel()
        self.explanation.setWordWrap(True)
        self.explanation.setTextFormat(Qt.TextFormat.PlainText)
        self.explanation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.ranking = FittedTable(RANKING_COLUMNS)
        self.ranking.setToolTip(RANKING_TIP)
        self.snippets = FittedTable(SNIPPET_COLUMNS)
        self.snippets.setToolTip(
            "How to get the same loading in the tools people use; 'measured here' names the "
            "candidate that stood for it, or says it was not measured."
        )
        # The line to paste, whole and selectable, with a button that copies it.
        self.paste = QLabel()
        self.paste.setTextFormat(Qt.TextFormat.PlainText)
        self.paste.setWordWrap(True)
        self.paste.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.paste.setFont(QFont("monospace"))
        self.copy = QPushButton("Copy")
        self.copy.setToolTip("Copy the line to paste to the clipboard")
        # As wide as its longer word: the line beside it does not move when it says "Copied".
        metrics = self.copy.fontMetrics()
        self.copy.setMinimumWidth(
            metrics.horizontalAdvance(COPIED) + 4 * metrics.averageCharWidth()
        )
        self.copy.clicked.connect(self._copy_paste)
        self.paste_evidence = QLabel()
        self.paste_evidence.setWordWrap(True)
        self.paste_row = QWidget()
        row = QHBoxLayout(self.paste_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("<b>Paste</b>"))
        row.addWidget(self.paste, 1)
        row.addWidget(self.copy)
        # Why: folded under the answer, one click away.
        self.why = QToolButton()
        self.why.setText("Why")
        self.why.setCheckable(True)
        self.why.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.why.setArrowType(Qt.ArrowType.RightArrow)
        self.why.toggled.connect(self._fold_why)
        # Why a loader people use has no line above (vLLM's for weights it cannot serve).
        self.left_out = QLabel()
        self.left_out.setWordWrap(True)
        self.left_out.setTextFormat(Qt.TextFormat.PlainText)
        self.captions = [self.why, QLabel("<b>Ranking</b>"), QLabel("<b>Apply</b>")]
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.addWidget(self.note)
        layout.addWidget(self.summary)
        layout.addWidget(self.paste_row)
        layout.addWidget(self.paste_evidence)
        layout.addWidget(self.progress)
        layout.addWidget(self.captions[0])
        layout.addWidget(self.explanation)
        layout.addWidget(self.captions[1])
        layout.addWidget(self.ranking)
        layout.addWidget(self.captions[2])
        layout.addWidget(self.snippets)
        layout.addWidget(self.left_out)
        layout.addStretch(1)
        self.setWidget(body)
        self.clear()

    def _show_result_parts(self, visible: bool) -> None:
        for widget in (*self.captions, self.ranking, self.snippets):
            widget.setVisible(visible)
        shown = visible and bool(self.paste.text())
        self.left_out.setVisible(visible and bool(self.left_out.text()))
        self.paste_row.setVisible(shown)
        self.paste_evidence.setVisible(shown)
        self.explanation.setVisible(visible and self.why.isChecked())

    def _fold_why(self, unfolded: bool) -> None:
        self.why.setArrowType(Qt.ArrowType.DownArrow if unfolded else Qt.ArrowType.RightArrow)
        self.explanation.setVisible(unfolded and self.ranking.isVisible())

    def _copy_paste(self) -> None:
        """Copy the line, and say so on the button for a moment (a copy shows nothing else)."""
        QApplication.clipboard().setText(self.paste.text())
        self.copy.setText(COPIED)
        QTimer.singleShot(COPIED_MS, lambda: self.copy.setText("Copy"))

    def clear(self, text: str = EMPTY) -> None:
        self.summary.setText(text)
        self.progress_lines = []
        self.progress.clear()
        self.progress.hide()
        self._show_result_parts(False)

    def draw(self, shown: RecommendationShown) -> None:
        """Draw the state's recommendation: none, the search running, its answer, or why
        it stopped."""
        self.note.setText(shown.note)
        self.note.setVisible(bool(shown.note))
        if shown.phase == "none":
            self.clear()
            return
        if shown.phase == "running":
            if not shown.lines:
                mine = f" with your loader ({shown.loader})" if shown.loader else ""
                mine = f" for {shown.ranks} ranks" if shown.ranks > 1 else mine
                self.clear(
                    f"Recommending{mine}: a {shown.budget_s:.0f} s budget; the progress "
                    "below says what runs, and any run past it (Esc cancels)…"
                )
            self.progress.show()
            self._show_lines(list(shown.lines))
            return
        if shown.phase == "stopped":
            self.summary.setText(shown.text)
            return
        if shown.ranks_found is not None:
            self._draw_ranks(shown)
            return
        rec = shown.recommendation
        if rec is None:
            return
        _columns(self.ranking, RANKING_COLUMNS)
        self.captions[1].setText("<b>Ranking</b>")
        self.ranking.setToolTip(RANKING_TIP)
        name = shown.exported_to or shown.kept_to or CONFIG_NAME
        headline, line, evidence = answer_texts(
            rec, shown.exported_to, shown.advice, name, shown.kept_to
        )
        self.summary.setText(headline)
        self.paste.setText(line)
        self.paste_evidence.setText(evidence)
        self.progress.hide()
        self.explanation.setText("\n".join(shown.explanation))
        rows = ranking_rows(rec, shown.advice)
        _fill(self.ranking, [r.cells for r in rows], {i for i, r in enumerate(rows) if r.picked})
        apply = snippet_rows(rec, name, shown.advice, shown.apply_tools)
        _fill(self.snippets, apply)
        self.left_out.setText(left_out_text(rec, apply))
        self._show_result_parts(True)

    def _draw_ranks(self, shown: RecommendationShown) -> None:
        """A ranks answer: the way to load, its line, then every way with what it needs of
        the node (or why it does not fit)."""
        found = shown.ranks_found
        where = shown.exported_to or shown.kept_to
        self.summary.setText(ranks_headline(found, shown.exported_to, shown.kept_to))
        line, evidence = ranks_paste(found, where)
        self.paste.setText(line)
        self.paste_evidence.setText(evidence)
        self.progress.hide()
        notes = ranks_notes(found)
        self.explanation.setText("\n".join(notes) if notes else "Every way was measured.")
        rows = ways_rows(found)
        _columns(self.ranking, WAYS_COLUMNS, WAYS_HEADER_TIPS)
        self.captions[1].setText("<b>Ways</b>")
        self.ranking.setToolTip(WAYS_TIP)
        _fill(self.ranking, [r.cells for r in rows], {i for i, r in enumerate(rows) if r.picked})
        _fill(self.snippets, ranks_snippet_rows(found, where))
        self.left_out.clear()
        self._show_result_parts(True)

    def _show_lines(self, lines: list[str]) -> None:
        self.progress_lines = lines
        self.progress.setText("\n".join(f"· {line}" for line in lines))
