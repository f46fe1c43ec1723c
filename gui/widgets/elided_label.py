"""Labels that end in "…" when short of room, instead of widening their window or growing
taller: one line (``ElidedLabel``), or a fixed number of wrapped lines (``ElidedLines``)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QRect, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

MIN_WIDTH = 60


class ElidedLabel(QLabel):
    """Plain text, one line; whatever doesn't fit is elided (give the whole text a tooltip)."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def minimumSizeHint(self) -> QSize:
        return QSize(MIN_WIDTH, super().minimumSizeHint().height())

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(
            self.text(), Qt.TextElideMode.ElideRight, rect.width()
        )
        alignment = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        self.style().drawItemText(
            painter,
            rect,
            int(alignment),
            self.palette(),
            self.isEnabled(),
            shown,
            self.foregroundRole(),
        )


class ElidedLines(QLabel):
    """Plain text wrapped onto at most ``lines`` lines, always that tall: a text that needs
    more is said shorter when it has shorter forms (``set_forms``), else ends in "…" (give
    the whole text a tooltip). Its height never depends on its width
    or its text, so nothing around it moves when either changes."""

    def __init__(self, lines: int = 2, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lines = lines
        self.full = ""
        self.forms: tuple[str, ...] = ("",)  # the text, then shorter ways to say it
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def _lines_height(self) -> int:
        """The height of ``lines`` lines as the text is measured (``_fits``): a bold font's
        lines stand taller than its line spacing says."""
        lines = "\n".join(["Xg"] * self.lines)
        box = self.fontMetrics().boundingRect(
            QRect(0, 0, 1 << 20, 1 << 20), int(Qt.TextFlag.TextWordWrap), lines
        )
        return max(box.height(), self.lines * self.fontMetrics().lineSpacing())

    def line_height(self) -> int:
        margins = self.contentsMargins()
        return self._lines_height() + margins.top() + margins.bottom()

    def sizeHint(self) -> QSize:
        return QSize(MIN_WIDTH, self.line_height())

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def hasHeightForWidth(self) -> bool:
        return False

    def setText(self, text: str) -> None:  # Qt's name
        """Show ``text``, elided to the lines there are (the whole of it is the tooltip)."""
        self.set_forms([text])

    def set_forms(self, forms: Sequence[str]) -> None:
        """Show the first of ``forms`` (the whole text, then shorter ways to say it) that
        fits the lines there are, else the last elided; the first is the tooltip."""
        self.forms = tuple(forms) or ("",)
        self.full = self.forms[0]
        self.setToolTip(self.full)
        self._fit()

    def text(self) -> str:
        """The whole text, however much of it is shown."""
        return self.full

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.setFixedHeight(self.line_height())
            self._fit()

    def _fits(self, text: str, width: int) -> bool:
        # A character's width short of the label's: the label lays its words out by its own
        # text layout, which breaks a line the measure fills to the pixel one word earlier
        # (a key's last word, cut below the lines there are).
        metrics = self.fontMetrics()
        room = max(1, width - metrics.averageCharWidth())
        box = metrics.boundingRect(QRect(0, 0, room, 1 << 20), int(Qt.TextFlag.TextWordWrap), text)
        return box.height() <= self._lines_height()

    def _fit(self) -> None:
        self.setFixedHeight(self.line_height())
        width = max(1, self.contentsRect().width())
        fitting = [form for form in self.forms if self._fits(form, width)]
        text = fitting[0] if fitting else self.forms[-1]
        if not fitting:
            low, high = 0, len(text)  # the longest prefix that fits with "…" after it
            while low < high:
                middle = (low + high + 1) // 2
                if self._fits(text[:middle].rstrip() + "…", width):
                    low = middle
                else:
                    high = middle - 1
            text = text[:low].rstrip() + "…"
        if text != super().text():
            super().setText(text)
