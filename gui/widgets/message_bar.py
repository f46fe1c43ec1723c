"""A one-line message strip in the window's bottom row: errors, warnings, notes. No tracebacks.

Its row is always there, as tall with a message as without: a message that comes mid-run
never moves the controls under the pointer. A message longer than the row is elided; the
whole of it is its tooltip."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QSizePolicy, QToolButton, QWidget

from modelmon.gui.theme import current_theme
from modelmon.gui.widgets.elided_label import ElidedLabel

LEVELS = ("info", "warning", "error")


class MessageBar(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageBar")
        self.level = "info"
        self.text = ElidedLabel()
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss this message.")
        close.clicked.connect(self.clear)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 0, 2, 0)
        layout.addWidget(self.text, 1)
        layout.addWidget(close)
        policy = self.sizePolicy()
        policy.setRetainSizeWhenHidden(True)  # its row keeps its height without a message
        policy.setHorizontalPolicy(QSizePolicy.Policy.Ignored)  # never widens the window
        self.setSizePolicy(policy)
        # The border a message draws, there without one too: the row is as tall either way.
        self.setStyleSheet("#messageBar { border: 1px solid transparent; border-radius: 4px; }")
        self.hide()

    def show_message(self, text: str, level: str = "info") -> None:
        """Show one message (the first line of ``text``), replacing the previous one."""
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
        self.level = level
        first_line = text.strip().splitlines()[0] if text.strip() else ""
        self.text.setText(first_line)
        self.text.setToolTip(first_line)
        theme = current_theme()
        colour = {"info": theme.foreground, "warning": theme.warning, "error": theme.error}[level]
        self.setStyleSheet(
            f"#messageBar {{ border: 1px solid {colour}; border-radius: 4px; }}"
            f" #messageBar QLabel {{ color: {colour}; }}"
        )
        self.show()

    def message(self) -> str:
        return self.text.text() if self.isVisible() else ""

    def clear(self) -> None:
        self.text.clear()
        self.hide()
