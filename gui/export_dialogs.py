"""File ▸ Export, the asking part: where each export goes; the exporter then writes it.

Save dialogs start in the last folder exported to (``state/save_location``), never the
model's, and the folder chosen is remembered for the next export. A path the guard refuses
(``core.system.outputs``: the open model's files under any name, a FIFO or device, a folder
that cannot take the file) is refused here in a dialog, before anything is written. The
writing is ``Exporter``'s (``gui/exporter.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMessageBox, QWidget

from modelmon.core.errors import ModelmonError
from modelmon.gui.settings import AppSettings
from modelmon.gui.state.export_format import check_export
from modelmon.gui.state.save_location import save_start
from modelmon.gui.widgets.file_dialogs import save_file
from modelmon.gui.widgets.recommend_dialog import TOML_FILTER

if TYPE_CHECKING:
    from modelmon.gui.exporter import Exporter

REFUSED_TITLE = "Cannot export there"
RESULT_FILTERS = {"json": "JSON (*.json);;All files (*)", "csv": "CSV (*.csv);;All files (*)"}
PLOT_FILTER = "PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"


class ExportDialogs:
    """The dialogs behind the File ▸ Export actions, shown over ``window``."""

    def __init__(self, window: QWidget, settings: AppSettings, exporter: Exporter) -> None:
        self.window, self.settings, self.exporter = window, settings, exporter

    def refusal(self, path: str) -> str | None:
        """Why the guard refuses an export to ``path``, else None."""
        try:
            check_export(path, self.exporter.inputs)
        except ModelmonError as exc:
            return str(exc)
        return None

    def _save_path(self, title: str, name: str, filters: str) -> str:
        """Ask where to save, starting in the last export folder; remember the folder. A
        path the guard refuses is said in a dialog, and nothing is exported ("")."""
        start = save_start(self.settings.export_folder(), name)
        path = save_file(self.window, title, start, filters)
        if not path:
            return ""
        refused = self.refusal(path)
        if refused is not None:
            QMessageBox.warning(self.window, REFUSED_TITLE, refused)
            return ""
        self.settings.set_export_folder(os.path.dirname(os.path.abspath(path)))
        return path

    def export_recommended(self) -> None:
        path = self._save_path("Export recommended configuration", "modelmon.toml", TOML_FILTER)
        if path:
            self.exporter.export_recommendation(path)

    def export_ab_config(self) -> None:
        path = self._save_path("Export A/B winner", "modelmon.toml", TOML_FILTER)
        if path:
            self.exporter.export_ab_config(path)

    def export_results(self, kind: str) -> None:
        path = self._save_path("Export results", f"modelmon-results.{kind}", RESULT_FILTERS[kind])
        if path:
            self.exporter.export_results(path)

    def export_plot(self, name: str) -> None:
        default = name.lower().replace(" ", "-") + ".png"
        path = self._save_path(f"Export plot: {name}", default, PLOT_FILTER)
        if path:
            self.exporter.export_plot(name, path)
