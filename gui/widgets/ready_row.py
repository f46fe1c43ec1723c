"""When a command that serves is ready: one row under the A/B's controls, shown while a side
runs a command. It draws the state's ready rule (``gui/state/ready_rule.py``) and says what
was picked or typed; whether the rule can be used is the state's, said under it."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QSpinBox, QWidget

from modelmon.gui.state.ready_rule import MAX_TIMEOUT_S, READY_KINDS, ReadyRule
from modelmon.gui.state.ready_rule import READY_TIPS as TIPS
from modelmon.gui.theme import current_theme


class ReadyRow(QWidget):
    """The ready rule's controls; ``edited(kind, value, timeout_s)`` on every change."""

    edited = Signal(str, str, float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = QComboBox()
        for kind, words, _ in READY_KINDS:
            self.kind.addItem(words, kind)
        self.kind.setToolTip(TIPS["kind"])
        self.value = QLineEdit()
        self.value.setToolTip(TIPS["value"])
        self.timeout = QSpinBox()
        self.timeout.setRange(0, int(MAX_TIMEOUT_S))
        self.timeout.setSpecialValueText("default")  # 0: the default for the kind
        self.timeout.setSuffix(" s at most")
        self.timeout.setToolTip(TIPS["timeout"])
        self.error = QLabel()
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setStyleSheet(f"color: {current_theme().error};")
        caption = QLabel("Servers are ready when")
        caption.setToolTip(TIPS["kind"])
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (caption, self.kind):
            layout.addWidget(widget)
        layout.addWidget(self.value, 2)
        layout.addWidget(self.timeout)
        layout.addWidget(self.error, 3)
        self.kind.currentIndexChanged.connect(self._edited)
        self.value.textChanged.connect(self._edited)
        self.timeout.valueChanged.connect(self._edited)
        self._placeholder()

    def show_rule(self, rule: ReadyRule, problem: str | None) -> None:
        """Draw ``rule`` (what is being typed is not redrawn) and its problem, if any."""
        for widget in (self.kind, self.value, self.timeout):
            widget.blockSignals(True)
        index = self.kind.findData(rule.kind)
        if index >= 0:
            self.kind.setCurrentIndex(index)
        if self.value.text() != rule.value:
            self.value.setText(rule.value)
        self.timeout.setValue(round(rule.timeout_s))
        for widget in (self.kind, self.value, self.timeout):
            widget.blockSignals(False)
        self._placeholder()
        self.error.setText(problem or "")
        self.error.setToolTip(problem or "")

    def _placeholder(self) -> None:
        kind = self.kind.currentData()
        hint = next((hint for name, _, hint in READY_KINDS if name == kind), "")
        self.value.setPlaceholderText(hint)
        self.value.setEnabled(kind != "listen")

    def _edited(self) -> None:
        self._placeholder()
        self.edited.emit(str(self.kind.currentData()), self.value.text(), self.timeout.value())
