"""A Help ▸ … window: rich text (or Markdown) in a scrollable browser with a Close button;
a few lines (About) in a window as small as they are."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

COMPACT_WIDTH = 380  # px of text in a compact window


class HelpDialog(QDialog):
    def __init__(
        self,
        title: str,
        text: str,
        markdown: bool = False,
        parent: QWidget | None = None,
        compact: bool = False,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(True)
        if markdown:
            self.browser.setMarkdown(text)
        else:
            self.browser.setHtml(text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser, 1)
        layout.addWidget(buttons)
        self.compact = compact
        if compact:  # as tall as its text at a readable width, no scroll bar
            self.browser.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            self.browser.setFrameShape(QFrame.Shape.NoFrame)
            self._fit()
        else:
            self.resize(640, 480)

    def _fit(self) -> None:
        document = self.browser.document()
        document.setDefaultFont(self.browser.font())
        document.setTextWidth(COMPACT_WIDTH)  # the viewport's: no frame, no scroll bar
        self.browser.setFixedSize(COMPACT_WIDTH, math.ceil(document.size().height()) + 1)
        self.adjustSize()

    def showEvent(self, event: QShowEvent) -> None:
        if self.compact:  # the font is the style's once shown: fit the text again
            self._fit()
        super().showEvent(event)
