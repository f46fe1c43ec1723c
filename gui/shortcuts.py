"""Menu shortcuts that work whatever has the keyboard focus.

A text field claims some Ctrl keys for editing before any menu sees them: on X11 a line
edit (and a spin box, which holds one) takes Ctrl+E as "end of line", so Run ▸ Recommend's
Ctrl+E did nothing while the pairs or a filter had the focus. Qt asks the focused widget
first with a ShortcutOverride event; this filter answers that question for the keys of the
actions it keeps, so the widget never claims them and the menu's action runs.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QWidget


class KeptShortcuts(QObject):
    """Installed on the application: in ``window`` (not in its dialogs, whose fields keep
    their keys), the shortcuts of ``actions`` are never overridden."""

    def __init__(self, actions: list[QAction], window: QWidget) -> None:
        super().__init__(window)
        self.actions, self.window = actions, window

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.ShortcutOverride or not isinstance(event, QKeyEvent):
            return False
        if not isinstance(watched, QWidget) or watched.window() is not self.window:
            return False
        pressed = QKeySequence(event.keyCombination())
        for action in self.actions:
            shortcut = action.shortcut()
            if not shortcut.isEmpty() and pressed.matches(shortcut) == (
                QKeySequence.SequenceMatch.ExactMatch
            ):
                event.ignore()  # not the widget's: the shortcut map gets the key
                return True
        return False
