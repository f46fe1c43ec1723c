"""A/B × n and the ceilings: the controls, and the verdict shown large when an A/B ends.

It draws the state's A/B banner and ceilings; the pairs, the A/B and the ceilings it is
asked for are intents the state acts on."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSpinBox, QWidget

from modelmon.core import ABResult, Ceilings
from modelmon.gui.state.ab_session import DEFAULT_PAIRS, MAX_PAIRS, ABBanner
from modelmon.gui.state.formatting import ab_detail_lines, ceilings_forms, verdict_text
from modelmon.gui.state.model_sessions import ceiling_lines, measured_when
from modelmon.gui.theme import current_theme
from modelmon.gui.widgets.elided_label import ElidedLines

TIPS = {
    "pairs": "How many A-then-B pairs to run: the verdict needs every pair to agree, so more "
    "pairs separate a real difference from noise.",
    "ab": "Run A, B, A, B … from the same verified cache state and judge the pairs (Esc cancels).",
    "ceilings": "Measure what this storage and this memory give on this very file, by plain "
    "readers that are none of modelmon's strategies (the storage's best, filling fresh "
    "memory, sequential, parallel and warm reads, memcpy): the dashed lines, and the bound "
    "each run is held against in the % of bound column.",
    "verdict": "The A/B verdict: the median over pairs of the faster side's MB/s over the "
    "other's, the range of the pairs, and how close to that median half of the pairs are "
    "(their noise).",
}


class CompareBar(QWidget):
    ab_requested = Signal()  # the cache state is A's and B's own Cache setting
    ceilings_requested = Signal()
    pairs_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pairs = QSpinBox()
        self.pairs.setRange(1, MAX_PAIRS)
        self.pairs.setValue(DEFAULT_PAIRS)
        self.pairs.setSuffix(" pairs")
        self.pairs.setToolTip(TIPS["pairs"])
        self.ab_button = QPushButton()
        self.ab_button.setToolTip(TIPS["ab"])
        self.ceilings_button = QPushButton("Measure ceilings")
        self.ceilings_button.setToolTip(TIPS["ceilings"])
        # The verdict and the ceilings may be long: they wrap onto the lines of the room there
        # is and never widen the window (their whole text is in their tooltips too). Three
        # lines of the bold text font hold a verdict and its reasons (the pairs' range, their
        # noise) whole in a 1000 px window, 8 px taller than two of a larger font: the most
        # a 700 px window spares while its runs table keeps four rows in sight.
        self.verdict = ElidedLines(3)
        self.verdict.setToolTip(TIPS["verdict"])
        font = self.verdict.font()
        font.setBold(True)
        self.verdict.setFont(font)
        self.ceilings_label = ElidedLines(2)
        self.ceilings_label.setText("no ceilings measured")
        self.ceilings_label.setToolTip(TIPS["ceilings"])
        caption = QLabel("A/B ×")
        caption.setToolTip(TIPS["pairs"])
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        for widget in (caption, self.pairs, self.ab_button):
            layout.addWidget(widget)
        layout.addSpacing(16)
        # Most of the row is the verdict's: the ceilings' figures are the plots' dashed lines
        # and their tooltip too.
        layout.addWidget(self.verdict, 3)
        layout.addWidget(self.ceilings_label, 1)
        layout.addWidget(self.ceilings_button)
        self.pairs.valueChanged.connect(self._name_button)
        self.pairs.valueChanged.connect(self.pairs_changed)
        self.ab_button.clicked.connect(self.ab_requested)
        self.ceilings_button.clicked.connect(self.ceilings_requested)
        self._name_button()

    def _name_button(self) -> None:
        self.ab_button.setText(f"Run A/B × {self.pairs.value()}")

    def set_enabled(self, ready: bool) -> None:
        """Buttons work when a model is open and nothing runs."""
        self.ab_button.setEnabled(ready)
        self.ceilings_button.setEnabled(ready)

    def set_pairs(self, pairs: int) -> None:
        if pairs != self.pairs.value():
            self.pairs.setValue(pairs)

    def show_banner(self, banner: ABBanner) -> None:
        if banner.kind == "verdict" and banner.ab is not None:
            self.show_verdict(banner.ab)
        elif banner.kind == "running":
            self.verdict.setStyleSheet("")
            self.verdict.setText(banner.text)
            self.verdict.setToolTip(TIPS["verdict"])
        elif banner.kind == "failure":
            self.show_failure(banner.text)
        else:
            self.clear_verdict()

    def show_verdict(self, ab: ABResult) -> None:
        verdict = ab.verdict
        theme = current_theme()
        colour = {"A faster": theme.run_colour("A"), "B faster": theme.run_colour("B")}.get(
            verdict.text, theme.foreground
        )
        self.verdict.setStyleSheet(f"color: {colour};")
        text = verdict_text(verdict, min(ab.a.runs, ab.b.runs))  # its note said in it
        self.verdict.setText(text)
        self.verdict.setToolTip("\n".join([text, TIPS["verdict"], *ab_detail_lines(ab)]))

    def show_failure(self, text: str) -> None:
        self.verdict.setStyleSheet(f"color: {current_theme().warning};")
        self.verdict.setText(text)
        self.verdict.setToolTip(TIPS["verdict"])

    def clear_verdict(self) -> None:
        self.verdict.setText("")
        self.verdict.setToolTip(TIPS["verdict"])

    def show_ceilings(self, ceilings: Ceilings | None) -> None:
        if ceilings is None or not ceilings.items:
            self.ceilings_label.setText("no ceilings measured")
            self.ceilings_label.setToolTip(TIPS["ceilings"])
            return
        # One set per model and session, from "Measure ceilings" or a recommendation: when
        # and how each was measured is part of what it means.
        # The bounds first when all of them do not fit the room: the rest are in the tooltip.
        self.ceilings_label.set_forms(ceilings_forms(ceilings, measured_when(ceilings)))
        self.ceilings_label.setToolTip(
            "Ceilings measured on this model (the dashed lines), one set per model and "
            "storage, kept across sessions (Measure ceilings and recommendations share it):\n"
            + "\n".join(ceiling_lines(ceilings))
        )
