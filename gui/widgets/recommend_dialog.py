"""Asks for what a recommendation needs: a time budget. Writing its config file is a step of
its own afterwards (File ▸ Export recommended configuration…)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLayout,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from modelmon.core.limits import DEFAULT_BUDGET_S, MAX_BUDGET_S, MIN_BUDGET_S
from modelmon.gui.state.programs import COMMAND_CHOICE, SideChoice, engine_choices
from modelmon.gui.theme import current_theme
from modelmon.gui.widgets.program_editor import ProgramEditor

MAX_RANKS = 64  # ranks of one node: GPUs per node, with room
TOML_FILTER = "modelmon config (*.toml);;All files (*)"
TIPS = {
    "budget": "Time the whole search may take, from Measure to its answer: more time "
    "measures more candidates, each more often. The storage's ceilings and a first complete "
    "load always run, so a model one load of which takes longer takes that long.",
    "loader": "Your loader as you run it (a command, or an engine with its knobs): measured as "
    "it is, with each setting of its engine that changes how it reads the weights, and "
    "against modelmon's best, in the same cold rounds; the answer leads with the best change "
    "you can make in it.",
    "ranks": "How many ranks (tensor-parallel processes) of this node load the model: with "
    "more than one, modelmon measures each way they can get their weights (every rank the "
    "whole model, each its own slice, one reader for all) that keeps every byte and holds "
    "under the memory limit, and says which is fastest, what each needs of the node, and the "
    "smallest limit the pick holds at.",
    "ok": "Start measuring in the background (the window stays usable; Esc cancels).",
}


class BudgetBox(QSpinBox):
    """Whole seconds. Enter on text the box cannot take (under the least budget) is
    swallowed: a spin box would swap that text for its last value as editing ends, and the
    dialog would then start a search of a budget other than the one shown."""

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not self.hasAcceptableInput():
            event.accept()
            return
        super().keyPressEvent(event)


class RecommendDialog(QDialog):
    def __init__(
        self,
        parent: QWidget | None = None,
        budget_s: float = DEFAULT_BUDGET_S,
        model_format: str | None = None,
        memory_limit_text: str = "",
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Recommend a configuration")
        self.budget = BudgetBox()
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
        self.intro = intro
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Measure")
        ok.setToolTip(TIPS["ok"])
        self.measure = ok
        # Text the budget cannot take is said, and starts nothing, until it is one.
        self.budget_error = QLabel()
        self.budget_error.setWordWrap(True)
        self.budget_error.setStyleSheet(f"color: {current_theme().error};")
        self.budget_error.hide()
        self.budget.lineEdit().textChanged.connect(self._budget_typed)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        outer = QVBoxLayout(self)
        # Never smaller than what it holds: the knob rows a loader adds would otherwise cut the
        # wrapped introduction above them.
        outer.setSizeConstraint(QLayout.SizeConstraint.SetMinimumSize)
        outer.addWidget(intro)
        form = QFormLayout()
        outer.addLayout(form)
        form.addRow("Time budget:", self.budget)
        form.addRow(self.budget_error)
        self.ranks = QSpinBox()
        self.ranks.setRange(1, MAX_RANKS)
        self.ranks.setValue(1)
        self.ranks.setToolTip(TIPS["ranks"])
        self.ranks.valueChanged.connect(self._ranks_chosen)
        form.addRow("Ranks on this node:", self.ranks)
        limit = QLabel(
            f"{memory_limit_text} (Run ▸ Memory limit… changes it)"
            if memory_limit_text
            else "none (Run ▸ Memory limit… sets one, as a container's)"
        )
        limit.setToolTip("What every candidate must hold under, as the runs' memory cgroup.")
        form.addRow("Memory limit:", limit)
        self.loader_box = QComboBox()
        self.loader_box.setToolTip(TIPS["loader"])
        # What each row chooses: none (modelmon's strategies only), the command, an engine.
        self.choices = [SideChoice("strategy"), SideChoice("command")]
        self.loader_box.addItem("modelmon's strategies only")
        self.loader_box.addItem(COMMAND_CHOICE)
        engines = engine_choices(model_format)
        for engine in engines:
            row = self.loader_box.count()
            self.loader_box.addItem(engine.title)
            self.choices.append(SideChoice("engine", engine.name))
            tip = engine.why_not or TIPS["loader"]
            self.loader_box.setItemData(row, tip, Qt.ItemDataRole.ToolTipRole)
            if engine.why_not is not None:
                self.loader_box.model().item(row).setEnabled(False)  # type: ignore[attr-defined]
        self.program = ProgramEditor(engines)
        self.program.hide()
        self.loader_box.currentIndexChanged.connect(self._loader_chosen)
        form.addRow("With your loader:", self.loader_box)
        form.addRow(self.program)
        outer.addWidget(buttons)

    def _loader_chosen(self) -> None:
        choice = self._choice()
        self.program.setVisible(choice.kind != "strategy")
        if choice.kind != "strategy":
            self.program.choose(choice.kind, choice.name)
        # Grows with the loader's rows and shrinks back without them; a wrapped label's height
        # for its width is not a layout's minimum, so it is set as one at the width it has.
        self.adjustSize()
        self.intro.setMinimumHeight(self.intro.heightForWidth(self.intro.width()))
        self.adjustSize()

    def _budget_typed(self) -> None:
        taken = self.budget.hasAcceptableInput()
        self.budget_error.setText(
            ""
            if taken
            else f"Not a budget: {self.budget.text().strip()}. A search takes "
            f"{MIN_BUDGET_S:.0f} to {MAX_BUDGET_S:.0f} s, in whole seconds."
        )
        self.budget_error.setVisible(not taken)
        self.measure.setEnabled(taken)

    def _ranks_chosen(self, ranks: int) -> None:
        # N ranks are measured as modelmon's ways and Run:ai's; a server's own ranks are
        # watched (Run ▸ Watch…), not searched.
        several = ranks > 1
        if several:
            self.loader_box.setCurrentIndex(0)
        self.loader_box.setEnabled(not several)
        self.loader_box.setToolTip(
            "With more than one rank, modelmon measures its own ways and Run:ai's; watch "
            "your server's ranks with Run ▸ Watch…"
            if several
            else TIPS["loader"]
        )

    def ranks_count(self) -> int:
        return int(self.ranks.value())

    def loader(self) -> str | None:
        """The loader to measure beside the search (``cmd: ...`` / ``engine: ...``), or None."""
        return None if self._choice().kind == "strategy" else self.program.spec()

    def _choice(self) -> SideChoice:
        return self.choices[max(0, self.loader_box.currentIndex())]

    def budget_s(self) -> float:
        return float(self.budget.value())
