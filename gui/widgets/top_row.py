"""The workspace's top row: the model's facts, then configurations A and B side by side; in
a window too narrow for all three, A and B side by side with the facts under them.

Both configurations keep their whole width (no option is ever cut), and the row never needs
scrolling sideways; the workspace scrolls it up and down when the window is short.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QGridLayout, QSizePolicy, QWidget

SPACING = 6


class TopRow(QWidget):
    def __init__(
        self, facts: QWidget, panels: tuple[QWidget, QWidget], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.facts, self.panels = facts, panels
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(SPACING)
        self.narrow: bool | None = None
        self._arrange(False)

    @property
    def wide_width(self) -> int:
        """The width the three need side by side."""
        widths = [w.minimumSizeHint().width() for w in (self.facts, *self.panels)]
        widths[0] = max(widths[0], self.facts.minimumWidth())
        return sum(widths) + 2 * SPACING

    def _arrange(self, narrow: bool) -> None:
        if narrow == self.narrow:
            return
        self.narrow = narrow
        for widget in (self.facts, *self.panels):
            self.grid.removeWidget(widget)
        a, b = self.panels
        for column in range(3):
            self.grid.setColumnStretch(column, 0)
        # Beside the configurations the facts are as tall as they are and scroll when taller
        # (their height never makes the row taller: the results' rows would pay for it); under
        # them, the facts' own height counts.
        policy = self.facts.sizePolicy()
        policy.setVerticalPolicy(
            QSizePolicy.Policy.Preferred if narrow else QSizePolicy.Policy.Ignored
        )
        self.facts.setSizePolicy(policy)
        if narrow:
            self.grid.addWidget(a, 0, 0)
            self.grid.addWidget(b, 0, 1)
            self.grid.addWidget(self.facts, 1, 0, 1, 2)
            stretches = (1, 1, 0)
        else:
            self.grid.addWidget(self.facts, 0, 0)
            self.grid.addWidget(a, 0, 1)
            self.grid.addWidget(b, 0, 2)
            stretches = (5, 4, 4)
        for column, stretch in enumerate(stretches):
            self.grid.setColumnStretch(column, stretch)

    def fit(self, width: int) -> bool:
        """Arrange for ``width``; whether the arrangement changed."""
        before = self.narrow
        self._arrange(width < self.wide_width)
        return before != self.narrow

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Follows the width of the scroll area's viewport it sits in (``watch``)."""
        if event.type() == QEvent.Type.Resize and isinstance(watched, QWidget):
            self.fit(watched.width())
        return False

    def watch(self, viewport: QWidget) -> None:
        viewport.installEventFilter(self)
