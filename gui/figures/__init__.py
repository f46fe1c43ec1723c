"""Publication figures of the app's plots, drawn with matplotlib from the runs' data. Qt-free.

A plot exported as SVG or PDF is drawn again here, not painted from the screen: the same
runs, series, axes, units and labels as the plot shows (``FigureRuns`` says which runs and
ranges), by a library made for figures, so every viewer renders it alike. The PNG export
stays a picture of the plot as it is on screen (``gui/plots/image_export.py``).
"""

from __future__ import annotations

from modelmon.gui.figures.canvas import VECTOR_FORMATS, FigureRuns
from modelmon.gui.figures.draw import DRAWN, drawn, figure_bytes

__all__ = ["DRAWN", "VECTOR_FORMATS", "FigureRuns", "drawn", "figure_bytes"]
