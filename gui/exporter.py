"""The File ▸ Export actions: results (JSON, CSV), the A/B winner as a config, plots.

Files are assembled and written in a background thread (a config reads the head of every
model file for its fingerprint, which takes a while on a network mount); the outcome is
one line in the message bar. A plot as PNG is painted from the screen in the GUI thread (Qt
painting); as SVG or PDF it is drawn again from the runs it shows (``gui/figures``, with
matplotlib) in the background. Every write goes through the guard (``core.system.outputs``)
with the open model's files as the inputs it must never replace: atomically, the previous
file kept on failure. File ▸ Export asks the same guard first and says no in a dialog
(``export_dialogs``); the check here is the one at write time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from modelmon.core import ModelmonError
from modelmon.gui.figures import VECTOR_FORMATS, FigureRuns, figure_bytes
from modelmon.gui.plots.image_export import export_plot
from modelmon.gui.state.export_format import (
    ExportError,
    plot_heading,
    results_csv,
    results_json,
    write_export,
)
from modelmon.gui.tasks import BackgroundTask

if TYPE_CHECKING:
    from modelmon.core import Ceilings
    from modelmon.gui.plots.style import ThemedPlot
    from modelmon.gui.state.ab_session import ABHistory
    from modelmon.gui.state.model_info import ModelInfo
    from modelmon.gui.state.records import RunRecord
    from modelmon.gui.widgets.strategy_panel import StrategyPanel

TASK_WAIT_S = 5.0


class ExportSource(Protocol):
    """What the exports read of the window's workspace (``gui/workspace.py``), which owns
    the exporter: named here so that the exporter does not import the workspace."""

    message: SignalInstance
    info: ModelInfo | None
    ceilings: Ceilings | None
    ab_history: ABHistory
    panels: dict[str, StrategyPanel]

    @property
    def records(self) -> list[RunRecord]: ...

    @property
    def plots(self) -> dict[str, ThemedPlot]: ...

    @property
    def running(self) -> bool: ...


class Exporter(QObject):
    finished = Signal(bool, str)  # ok, the line shown

    def __init__(self, workspace: ExportSource, parent: QObject) -> None:
        super().__init__(parent)
        self.w = workspace
        self._tasks: list[BackgroundTask] = []

    @property
    def inputs(self) -> tuple[str, ...]:
        """The files the open model is read from: no export may replace one."""
        return self.w.info.model.paths if self.w.info is not None else ()

    @property
    def can_export_results(self) -> bool:
        return bool(self.w.records)

    @property
    def can_export_ab(self) -> bool:
        return self.w.ab_history.result is not None and self.w.info is not None

    def export_results(self, path: str) -> None:
        """JSON or CSV by the file name's suffix (.csv → CSV, anything else → JSON)."""
        w = self.w
        if not w.records:
            self._report(False, "No results to export yet: run A, B or an A/B first.")
            return
        records, ceilings = list(w.records), w.ceilings
        # The last A/B with a verdict, even when a later one was cancelled.
        completed = w.ab_history.completed
        session, ab = completed[-1] if completed else (None, None)
        model = w.info.path if w.info is not None else ""
        inputs = self.inputs
        if Path(path).suffix.lower() == ".csv":
            self._background(
                lambda: write_export(path, results_csv(records, ceilings), inputs),
                f"Results written to {path} (CSV)",
            )
        else:
            self._background(
                lambda: write_export(
                    path, results_json(model, records, ceilings, ab, session), inputs
                ),
                f"Results written to {path} (JSON)",
            )

    def export_ab_config(self, path: str) -> None:
        """The faster side of the last A/B, with its evidence, as a modelmon config (TOML)."""
        w = self.w
        if w.ab_history.result is None or w.info is None:
            self._report(False, "No A/B yet: run A/B × n first, then export its winner.")
            return
        from modelmon.gui.state.ab_config import ab_document, pick, shared_fd_note

        ab, ceilings, model = w.ab_history.result, w.ceilings, w.info.model
        chosen = pick(ab)
        side = chosen.side
        caveat = shared_fd_note(ab, chosen)

        def work() -> Path:
            from modelmon.core import write_config

            document = ab_document(model, ab, ceilings, Path(path).name)
            return write_config(path, document, model.paths)

        written = f"Configuration {side} ({(ab.a if side == 'A' else ab.b).spec}) written to {path}"
        if caveat:  # as the recommendation says it, never as a plain success
            self._background(work, f"{written}. Caveat: {caveat}.", "warning")
        else:
            self._background(work, written)

    def export_plot(self, name: str, path: str) -> None:
        plot = self.w.plots.get(name)
        if plot is None:
            self._report(False, f"No plot named {name!r}.")
            return
        w = self.w
        heading = plot_heading(
            w.info.name if w.info is not None else "no model",
            {label: panel.spec() for label, panel in w.panels.items()},
            time.strftime("%Y-%m-%d %H:%M"),
        )
        fmt = VECTOR_FORMATS.get(Path(path).suffix.lower())
        if fmt is not None:
            if w.running:  # the figure is drawn from finished runs: the live one has none yet
                self._report(
                    False,
                    f"a run is in progress: export {Path(path).name} once it ends "
                    "(a PNG shows the plot as it is now)",
                )
                return
            runs, inputs = self.figure_runs(plot), self.inputs
            self._background(
                lambda: write_export(path, figure_bytes(name, runs, fmt, heading), inputs),
                f"Plot {name!r} written to {path} ({fmt.upper()})",
            )
            return
        try:
            export_plot(plot, path, heading, self.inputs)
        except ModelmonError as exc:
            self._report(False, str(exc))
        except OSError as exc:
            self._report(False, f"{path}: {exc.strerror or exc}")
        else:
            self._report(True, f"Plot {name!r} written to {path}")

    def figure_runs(self, plot: ThemedPlot) -> FigureRuns:
        """What a figure of ``plot`` draws: the latest run of each label it shows, its
        visible ranges, its size and caption."""
        latest = {r.label: r for r in self.w.records if r.outcome is not None}
        (x0, x1), (y0, y1) = plot.item.vb.viewRange()
        order = getattr(plot, "order", None)  # the Blocks plot's rows
        return FigureRuns(
            tuple(latest[label] for label in plot.run_labels if label in latest),
            self.w.info.model if self.w.info is not None else None,
            self.w.ceilings,
            x_range=(float(x0), float(x1)),
            y_range=None if order is not None else (float(y0), float(y1)),
            size_px=(plot.plot.width(), plot.plot.height()),
            block_order=tuple(order or ()),
            extra={"caption": plot.caption.text(), "spec": getattr(plot, "run_spec", "")},
        )

    def _background(self, work: Callable[[], object], success: str, level: str = "info") -> None:
        task = BackgroundTask(work, "export", self)
        task.succeeded.connect(lambda _result: self._report(True, success, level))
        task.failed.connect(lambda error: self._report(False, error))
        self._tasks = [t for t in self._tasks if t.running]
        self._tasks.append(task)
        task.start()

    def _report(self, ok: bool, text: str, level: str = "info") -> None:
        self.w.message.emit(text if ok else f"Export failed: {text}", level if ok else "error")
        self.finished.emit(ok, text)

    def shutdown(self, timeout_s: float = TASK_WAIT_S) -> None:
        """Let writes in progress finish: a half-written export is worse than a late close."""
        for task in self._tasks:
            task.wait(timeout_s)
        self._tasks = [t for t in self._tasks if t.running]


__all__ = ["ExportError", "Exporter"]
