"""Colours and the application palette: Fusion, dark or light as the platform says.

Every colour the app draws with comes from here, so the A/B colours are the same in the
throughput plot, the block timeline and the results table, and plots match the palette.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from modelmon.gui.state.colours import RUN_COLOURS, worker_colour


@dataclass(frozen=True, slots=True)
class Theme:
    dark: bool
    background: str  # plot background: the palette's Base colour
    foreground: str  # axis text and lines: the palette's Text colour
    grid_alpha: float
    error: str
    warning: str
    ok: str

    def run_colour(self, label: str) -> str:
        return RUN_COLOURS.get(label, self.foreground)

    @staticmethod
    def worker_colour(worker: int) -> str:
        return worker_colour(worker)


def _dark_palette() -> QPalette:
    """Fusion's palette for a dark scheme, for platforms whose theme supplies none."""
    palette = QPalette()
    window, base, text = QColor(45, 45, 48), QColor(30, 30, 32), QColor(225, 225, 225)
    disabled = QColor(130, 130, 130)
    for role, colour in (
        (QPalette.ColorRole.Window, window),
        (QPalette.ColorRole.WindowText, text),
        (QPalette.ColorRole.Base, base),
        (QPalette.ColorRole.AlternateBase, QColor(40, 40, 43)),
        (QPalette.ColorRole.ToolTipBase, QColor(60, 60, 64)),
        (QPalette.ColorRole.ToolTipText, text),
        (QPalette.ColorRole.PlaceholderText, disabled),
        (QPalette.ColorRole.Text, text),
        (QPalette.ColorRole.Button, window),
        (QPalette.ColorRole.ButtonText, text),
        (QPalette.ColorRole.BrightText, QColor(255, 90, 90)),
        (QPalette.ColorRole.Link, QColor(100, 160, 255)),
        (QPalette.ColorRole.Highlight, QColor(61, 139, 253)),
        (QPalette.ColorRole.HighlightedText, QColor(255, 255, 255)),
    ):
        palette.setColor(role, colour)
    for role in (
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
        QPalette.ColorRole.WindowText,
    ):
        palette.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return palette


def _is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def wants_dark(choice: str = "system") -> bool:
    """Dark for "dark"; for "system", what the platform's colour scheme says (Qt 6.5+)."""
    if choice in ("dark", "light"):
        return choice == "dark"
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def apply_palette(app: QApplication, choice: str = "system") -> None:
    """Fusion style, light or dark as ``choice`` says ("system": as the platform says).

    A dark palette of our own when the platform asks for dark but its theme supplies a light
    one (common with plain X11 and Wayland sessions). Widgets and plots get a PaletteChange
    event and recolour themselves.
    """
    app.setStyle("Fusion")
    dark = wants_dark(choice)
    if dark and not _is_dark(app.palette()):
        app.setPalette(_dark_palette())
    elif not dark and _is_dark(app.palette()):
        app.setPalette(app.style().standardPalette())


def current_theme() -> Theme:
    palette = QGuiApplication.palette()
    dark = _is_dark(palette)
    return Theme(
        dark=dark,
        background=palette.color(QPalette.ColorRole.Base).name(),
        foreground=palette.color(QPalette.ColorRole.Text).name(),
        grid_alpha=0.25 if dark else 0.3,
        error="#ff6b6b" if dark else "#c62828",
        warning="#ffb74d" if dark else "#b26a00",
        ok="#81c784" if dark else "#2e7d32",
    )
