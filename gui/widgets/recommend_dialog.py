"""Asks for what a recommendation needs: a time budget. Writing its config file is a step of
its own afterwards (File ▸ Export recommended configuration…)."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QSpinBox, QWidget

from modelmon.core import DEFAULT_BUDGET_S, MAX_BUDGET_S, MIN_BUDGET_S

TOML_FILTER = "modelmon config (*.toml);;All files (*)"
TIPS = {
    "budget": "Time the whole search may take, from Measure to its answer: more time "
    "measures more candidates, each more often. The storage's ceilings and a first complete "
    "load always run, so a model one load of which takes longer takes that long.",
    "ok": "Start measuring in the background (the window stays usable; Esc cancels).",
}


class RecommendDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, budget_s: float = DEFAULT_BUDGET_S) -> None:
        super().__init__(parent)
        self.setWindowTitle("Recommend a configuration")
        self.budget = QSpinBox()
        self.budget.setRange(int(MIN_BUDGET_S), int(MAX_BUDGET_S))
        self.budget.setValue(int(budget_s))
        self.budget.setSuffix(" s")
        self.budget.setToolTip(TIPS["budget"])
        intro = QLabel(
            "modelmon takes the ceilings of this storage (those measured on this model, or "
            "measures them), then loads the model with the most promising strategies, each "
            "from a verified cold cache where the storage allows one (a file in RAM cannot be "
            "made cold), and settles the top two in alternating pairs. The Recommendation tab "
            "shows the search as it runs, then the ranking and why; File ▸ Export recommended "
            "configuration… writes the winner, with its evidence, as a config file."
        )
        intro.setWordWrap(True)
        intro.setMinimumWidth(420)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Measure")
        ok.setToolTip(TIPS["ok"])
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow(intro)
        form.addRow("Time budget:", self.budget)
        form.addRow(buttons)

    def budget_s(self) -> float:
        return float(self.budget.value())
