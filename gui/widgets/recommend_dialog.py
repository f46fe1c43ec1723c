"""Asks for what a recommendation needs: a time budget, and where to write the config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QWidget,
)

from modelmon.core import DEFAULT_BUDGET_S, MAX_BUDGET_S, MIN_BUDGET_S

TOML_FILTER = "modelmon config (*.toml);;All files (*)"
TIPS = {
    "budget": "Time the whole search may take, from Measure to its answer: more time "
    "measures more candidates, each more often. The storage's ceilings and a first complete "
    "load always run, so a model one load of which takes longer takes that long.",
    "path": "Where the TOML config goes; an existing file is replaced only once the new one is "
    "completely written.",
    "browse": "Choose the config file's folder and name.",
    "ok": "Start measuring in the background (the window stays usable; Esc cancels).",
}


Refusal = Callable[[str], str | None]  # why a config path must not be written, else None


class RecommendDialog(QDialog):
    """``refusal``: the guard's answer for the path; a refused path keeps the dialog open
    (with a message saying why), so nothing is measured for a file that cannot be written."""

    def __init__(
        self, folder: str = "", parent: QWidget | None = None, refusal: Refusal | None = None
    ) -> None:
        super().__init__(parent)
        self.refusal = refusal
        self.setWindowTitle("Export recommended configuration")
        self.budget = QSpinBox()
        self.budget.setRange(int(MIN_BUDGET_S), int(MAX_BUDGET_S))
        self.budget.setValue(int(DEFAULT_BUDGET_S))
        self.budget.setSuffix(" s")
        self.budget.setToolTip(TIPS["budget"])
        self.path = QLineEdit(str(Path(folder or Path.home()) / "modelmon.toml"))
        self.path.setToolTip(TIPS["path"])
        self.path.setMinimumWidth(380)
        browse = QPushButton("Browse…")
        browse.setToolTip(TIPS["browse"])
        browse.clicked.connect(self._browse)
        where = QHBoxLayout()
        where.addWidget(self.path, 1)
        where.addWidget(browse)
        intro = QLabel(
            "modelmon takes the ceilings of this storage (those measured on this model "
            "in this session, or measures them), then loads the model with the most "
            "promising strategies, each from a verified cold cache where the storage allows "
            "one (a file in RAM cannot be made cold), settles the top two in alternating "
            "pairs, and writes the winner with its evidence. The Recommendation tab shows the "
            "search as it runs, then the ranking and why."
        )
        intro.setWordWrap(True)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Measure and export")
        ok.setToolTip(TIPS["ok"])
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow(intro)
        form.addRow("Time budget:", self.budget)
        form.addRow("Config file:", where)
        form.addRow(buttons)

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Config file", self.path.text(), TOML_FILTER)
        if path:
            self.path.setText(path)

    def accept(self) -> None:
        path = self.path.text().strip()
        refused = "name the config file" if not path else None
        if refused is None and self.refusal is not None:
            refused = self.refusal(path)
        if refused is not None:
            QMessageBox.warning(self, "Cannot write the config there", refused)
            return
        super().accept()

    def values(self) -> tuple[float, str]:
        return float(self.budget.value()), self.path.text().strip()
