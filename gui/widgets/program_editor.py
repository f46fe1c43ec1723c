"""The program side of a configuration panel: the user's command (a line, checked as it is
typed, with a one-line error under it) or an engine's knobs. It draws and says what was
typed or picked; what a command means and whether it parses is the state's
(``gui/state/programs.py``)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QGridLayout, QLabel, QLineEdit, QWidget

from modelmon.gui.state.programs import (
    COMMAND_HINT,
    TIPS,
    EngineChoice,
    command_line_spec,
    command_text,
    engine_settings,
    engine_spec,
    spec_error,
)
from modelmon.gui.theme import current_theme


class ProgramEditor(QWidget):
    """A command line, or the chosen engine's knobs; ``changed`` on every edit."""

    changed = Signal()

    def __init__(self, engines: list[EngineChoice], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engines = {e.name: e for e in engines}
        self.kind = "command"  # "command" | "engine"
        self.engine: str | None = None
        self.command = QLineEdit()
        self.command.setPlaceholderText(COMMAND_HINT)
        self.command.setToolTip(TIPS["command"])
        self.error = QLabel()
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setWordWrap(True)
        self.error.setStyleSheet(f"color: {current_theme().error};")
        self.knobs: dict[str, QComboBox] = {}
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setHorizontalSpacing(8)
        self.command_caption = QLabel("Command:")
        self.command_caption.setToolTip(TIPS["command"])
        self.grid.addWidget(self.command_caption, 0, 0)
        self.grid.addWidget(self.command, 0, 1, 1, 3)
        self.grid.addWidget(self.error, 1, 0, 1, 4)
        self.grid.setColumnStretch(1, 1)
        self.grid.setColumnStretch(3, 1)
        self.command.textChanged.connect(self._edited)

    def spec(self) -> str:
        if self.kind == "engine" and self.engine is not None:
            chosen = {name: str(box.currentText()) for name, box in self.knobs.items()}
            return engine_spec(self.engine, chosen)
        return command_line_spec(self.command.text())

    def choose(self, kind: str, engine: str | None = None) -> None:
        """Show the command line (``kind`` "command") or ``engine``'s knobs."""
        self.kind, self.engine = kind, engine
        is_command = kind == "command"
        self.command_caption.setVisible(is_command)
        self.command.setVisible(is_command)
        self._build_knobs(engine if not is_command else None)
        self._edited()

    def set_spec(self, spec: str) -> None:
        """Draw a program's spec: the command's words, or the engine's knob values."""
        found = engine_settings(spec)
        if found is None:
            text = command_text(spec)
            # What is being typed is not redrawn (the cursor would move, and a space typed
            # last, which no spec keeps, would be taken away as it is typed).
            if self.command.text().strip() != text.strip():
                self.command.blockSignals(True)
                self.command.setText(text)
                self.command.blockSignals(False)
            if self.kind != "command":
                self.choose("command")
            else:
                self._edited()
            return
        engine, settings = found
        if (self.kind, self.engine) != ("engine", engine):
            self.choose("engine", engine)
        for name, value in settings.items():
            box = self.knobs.get(name)
            if box is not None:
                box.blockSignals(True)
                box.setCurrentText(value)
                box.blockSignals(False)
        self._edited()

    def _build_knobs(self, engine: str | None) -> None:
        for box in self.knobs.values():
            self.grid.removeWidget(box)
            box.deleteLater()
        for caption in self.findChildren(QLabel, "knob"):
            self.grid.removeWidget(caption)
            caption.deleteLater()
        self.knobs = {}
        choice = self.engines.get(engine) if engine is not None else None
        if choice is None:
            return
        for row, (name, values, what) in enumerate(choice.knobs, start=2):
            caption = QLabel(f"{name}:")
            caption.setObjectName("knob")
            caption.setToolTip(what)
            box = QComboBox()
            box.addItems(list(values))
            box.setToolTip(f"{what} (the engine's default: {values[0]})")
            box.currentIndexChanged.connect(self._edited)
            self.grid.addWidget(caption, row, 0)
            self.grid.addWidget(box, row, 1, 1, 3)
            self.knobs[name] = box

    def _edited(self) -> None:
        problem = spec_error(self.spec()) if self.kind == "command" else None
        self.error.setText(problem or "")
        self.error.setVisible(problem is not None)
        self.changed.emit()
