"""Run ▸ Memory limit…: the limit the next runs run under, as a container's would apply. It
only asks: the field is checked as it is typed (the state's ``read_memory_limit``), its one
line why not shown under it with OK greyed; ``apply(text)`` (the state's) takes the text or
says why not, and the dialog stays open with that line until a limit is taken or the user
cancels."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLayout,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from modelmon.gui.state.workbench import read_memory_limit
from modelmon.gui.theme import current_theme

HINT = (
    "Loads, A/Bs, recommendations and watched commands run inside a memory cgroup of this "
    "size, as in a container with that limit: the page cache their reads fill is charged to "
    "it, and a run that needs more is OOM-killed and named so. The Memory plot draws the "
    "limit and what the run's cgroup held. Write it as Kubernetes does (16Gi, 512Mi), {range}; "
    "leave it empty for no limit."
)


class MemoryLimitDialog(QDialog):
    def __init__(
        self,
        current: str,
        limit_range: str,
        apply: Callable[[str], str | None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Memory limit")
        self.apply = apply
        self.field = QLineEdit(current)
        self.field.setPlaceholderText("no limit (e.g. 16Gi, 512Mi)")
        self.field.setClearButtonEnabled(True)
        self.field.setMinimumWidth(320)
        self.field.selectAll()
        hint = QLabel(HINT.format(range=limit_range))
        hint.setWordWrap(True)
        hint.setMinimumWidth(480)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet(f"color: {current_theme().error};")
        self.error.hide()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.field.textChanged.connect(self._typed)
        layout = QVBoxLayout(self)
        layout.setSizeConstraint(QLayout.SizeConstraint.SetFixedSize)  # grows with the error
        layout.addWidget(self.field)
        layout.addWidget(hint)
        layout.addWidget(self.error)
        layout.addWidget(buttons)

    def _typed(self, text: str) -> None:
        _limit, refused = read_memory_limit(text)
        self._say(refused)

    def _say(self, refused: str | None) -> None:
        self.error.setText(refused or "")
        self.error.setVisible(refused is not None)
        self.ok.setEnabled(refused is None)

    def accept(self) -> None:
        refused = self.apply(self.field.text())
        if refused is None:
            super().accept()
            return
        self._say(refused)
        self.field.setFocus()
