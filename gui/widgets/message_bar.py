"""A one-line message strip in the window's bottom row: errors, warnings, notes. No tracebacks.

Its row is always there, as tall with a message as without: a message that comes mid-run
never moves the controls under the pointer. A message longer than the row is elided; the
whole of it is its tooltip, and a More… button beside it shows it whole (a tooltip shows
only on hover, and only in the active window)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QMessageBox,
    QSizePolicy,
    QToolButton,
    QWidget,
)

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
        # There only while the message is cut short: the whole of it, in a box to read (and
        # to copy from).
        self.more = QToolButton()
        self.more.setText("More…")
        self.more.setAutoRaise(True)
        self.more.setToolTip("Show the whole message.")
        self.more.clicked.connect(self.show_whole)
        self.more.hide()
        self.box: QMessageBox | None = None  # the whole message, while it is shown
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 0, 2, 0)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.more)
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
        self._offer_whole()

    def _offer_whole(self) -> None:
        """The More… button while the message does not fit its row (the room it would have
        without the button counted, so that the button never hides itself)."""
        room = self.text.contentsRect().width()
        if self.more.isVisible():
            room += self.more.width() + self.layout().spacing()
        cut = self.fontMetrics().horizontalAdvance(self.text.text()) > room
        if cut != self.more.isVisible():
            self.more.setVisible(cut)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._offer_whole()

    def show_whole(self) -> None:
        """The whole message in a box, its text selectable."""
        icons = {
            "info": QMessageBox.Icon.Information,
            "warning": QMessageBox.Icon.Warning,
            "error": QMessageBox.Icon.Critical,
        }
        # The window's child, not the bar's: the bar's colours are its row's, not the box's.
        self.box = QMessageBox(
            icons[self.level], "modelmon", self.text.text(), parent=self.window()
        )
        self.box.setTextFormat(Qt.TextFormat.PlainText)
        self.box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        try:
            self.box.exec()
        finally:
            self.box = None

    def message(self) -> str:
        return self.text.text() if self.isVisible() else ""

    def clear(self) -> None:
        self.text.clear()
        self.more.hide()
        self.hide()
