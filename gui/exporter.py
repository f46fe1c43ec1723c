"""The File ▸ Export actions: results (JSON, CSV), the A/B winner and the recommendation as a
config, plots.

Files are assembled and written in a background task (a config reads the head of every
model file for its fingerprint, which takes a while on a network mount); the outcome is
one line in the message bar. A plot as PNG is painted from the screen in the GUI thread (Qt
painting); as SVG or PDF it is drawn again from the runs it shows (``gui/figures``, with
matplotlib) in the background: every kind of run the plot shows, a watched program's too.
Every write goes through the guard (``core.system.outputs``) with the open model's files as
the inputs it must never replace: atomically, the previous file kept on failure. File ▸
Export asks the same guard first and says no in a dialog (``export_dialogs``); the check
here is the one at write time. What is exported is read from the state (``Workbench``);
nothing here measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from modelmon.core.errors import ModelmonError
from modelmon.core.system import kept_answer_path
from modelmon.gui.figures import VECTOR_FORMATS, FigureRuns, figure_bytes
from modelmon.gui.plots.image_export import export_plot
from modelmon.gui.state.events import Post
from modelmon.gui.state.export_format import (
    ExportError,
    plot_heading,
    results_csv,
    results_json,
    write_export,
)
from modelmon.gui.state.recommending import RecommendationShown
from modelmon.gui.state.tasks import Tasks

if TYPE_CHECKING:
    from modelmon.core import ABResult
    from modelmon.gui.plots.style import ThemedPlot
    from modelmon.gui.state.records import RunRecord
    from modelmon.gui.state.workbench import Workbench

TASK_WAIT_S = 5.0


class Exporter(QObject):
    finished = Signal(bool, str)  # ok, the line shown

    def __init__(
        self,
        bench: Workbench,
        plots: Callable[[], dict[str, ThemedPlot]],
        post: Post,
        parent: QObject | None = None,
        bring_up: Callable[[ThemedPlot], None] = lambda _plot: None,
    ) -> None:
        super().__init__(parent)
        self.bench = bench
        self.plots = plots
        # Lays a plot out and lets it draw what it has not yet (its tab not shown since).
        self.bring_up = bring_up
        self.tasks = Tasks(post)
        bench.recommendation.changed.connect(self._keep_answer)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The files the open model is read from: no export may replace one."""
        info = self.bench.info
        return info.model.paths if info is not None else ()

    @property
    def can_export_results(self) -> bool:
        return bool(self.bench.records)

    @property
    def ab_to_export(self) -> tuple[str, ABResult] | None:
        """The A/B whose winner File ▸ Export A/B winner writes, with its session's name: the
        last one with a verdict, also after a later A/B that was cancelled or failed."""
        return self.bench.ab.history.verdict if self.bench.info is not None else None

    @property
    def can_export_ab(self) -> bool:
        return self.ab_to_export is not None

    @property
    def can_export_recommendation(self) -> bool:
        return self.bench.recommendation.exportable

    def export_results(self, path: str) -> None:
        """JSON or CSV by the file name's suffix (.csv → CSV, anything else → JSON)."""
        bench = self.bench
        if not bench.records:
            self._report(False, "No results to export yet: run A, B or an A/B first.")
            return
        records, ceilings = list(bench.records), bench.ceilings.current
        # The last A/B with a verdict, even when a later one was cancelled.
        session, ab = bench.ab.history.verdict or (None, None)
        model = bench.info.path if bench.info is not None else ""
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
        bench = self.bench
        found = self.ab_to_export
        if found is None or bench.info is None:
            self._report(False, "No A/B verdict yet: run A/B × n first, then export its winner.")
            return
        session, ab = found
        from modelmon.gui.state.ab_config import ab_document, pick, program_winner, shared_fd_note

        ceilings, model = bench.ceilings.current, bench.info.model
        chosen = pick(ab)
        refused = program_winner(ab, chosen)
        if refused is not None:
            self._report(False, refused)
            return
        side = chosen.side
        caveat = shared_fd_note(ab, chosen)

        def work() -> Path:
            from modelmon.core.output import write_config

            # The paste line names the file wherever it is pasted: its whole path.
            document = ab_document(model, ab, ceilings, str(Path(path).absolute()))
            return write_config(path, document, model.paths)

        spec = (ab.a if side == "A" else ab.b).spec
        written = f"Configuration {side} ({spec}) of {session} written to {path}"
        if caveat:  # as the recommendation says it, never as a plain success
            self._background(work, f"{written}. Caveat: {caveat}.", "warning")
        else:
            self._background(work, written)

    def export_recommendation(self, path: str) -> None:
        """The last recommendation's pick, with its evidence, as a modelmon config (TOML)."""
        answer, work = self._answer_writer(path)
        if answer is None:
            self._report(False, "No recommendation yet: Run ▸ Recommend… first, then export it.")
            return
        state = self.bench.recommendation

        def written() -> None:
            if answer in (state.recommendation, state.ranks_found):
                state.exported(path)

        self._background(work, f"Recommended configuration written to {path}", then=written)

    def _keep_answer(self, shown: RecommendationShown) -> None:
        """A new answer's config file, kept at once in modelmon's state folder: the line to
        paste names a file that exists before any export. Quiet (no message, no ``finished``:
        the user asked for nothing); where it cannot be written, the line names none."""
        if shown.phase != "done" or shown.kept_to or shown.exported_to:
            return
        info = self.bench.info
        path = str(kept_answer_path(info.name if info is not None else "model"))
        answer, work = self._answer_writer(path)
        if answer is None:
            return
        state = self.bench.recommendation

        def keep() -> None:
            Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            work()

        def done(_result: object, error: str | None) -> None:
            if error is None:
                state.kept(path, answer)

        self.tasks.start(keep, "keep", done)

    def _answer_writer(self, path: str) -> tuple[object | None, Callable[[], None]]:
        """(the answer to write, the work that writes its config file at ``path``): the
        recommendation's pick with its evidence, or a ranks answer's mode and memory; the
        paste lines name the file's whole path. (None, …) when there is no answer."""
        state, inputs = self.bench.recommendation, self.inputs
        shown, found, rec = state.shown, state.ranks_found, state.recommendation
        target = str(Path(path).absolute())

        def ranks() -> None:
            from modelmon.core.output import render_ranks_config

            write_export(path, render_ranks_config(found, target).encode(), inputs)

        def single() -> None:
            from modelmon.core.output import recommendation_document, render_config

            document = recommendation_document(
                rec, target, shown.memory_limit, shown.advice, shown.loader_note
            )
            write_export(path, render_config(document).encode(), inputs)

        if found is not None:
            return found, ranks
        return rec, single

    def export_plot(self, name: str, path: str) -> None:
        """``name`` as PNG (painted), SVG or PDF (drawn again): the runs its heading names are
        the runs the state says the plot shows (``Workbench.plot_runs``), and the plot is
        brought up to them first, whichever tab is on screen."""
        plot = self.plots().get(name)
        if plot is None:
            self._report(False, f"No plot named {name!r}.")
            return
        bench = self.bench
        runs = bench.plot_runs(name)
        heading = plot_heading(
            bench.info.name if bench.info is not None else "no model",
            runs,
            time.strftime("%Y-%m-%d %H:%M"),
        )
        fmt = VECTOR_FORMATS.get(Path(path).suffix.lower())
        if fmt is not None and bench.running:
            # The figure is drawn from finished runs: the live one has none yet.
            self._report(
                False,
                f"a run is in progress: export {Path(path).name} once it ends "
                "(a PNG shows the plot as it is now)",
            )
            return
        self.bring_up(plot)
        if fmt is not None:
            figure, inputs = self.figure_runs(plot, runs), self.inputs
            self._background(
                lambda: write_export(path, figure_bytes(name, figure, fmt, heading), inputs),
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

    def figure_runs(self, plot: ThemedPlot, runs: list[RunRecord] | None = None) -> FigureRuns:
        """What a figure of ``plot`` draws: ``runs`` (by default the runs the state says it
        shows, those that left something to draw), its visible ranges, its size and
        caption."""
        bench = self.bench
        if runs is None:
            name = next(n for n, p in self.plots().items() if p is plot)
            runs = bench.plot_runs(name)
        (x0, x1), (y0, y1) = plot.item.vb.viewRange()
        order = getattr(plot, "order", None)  # the Blocks plot's rows
        return FigureRuns(
            tuple(runs),
            bench.info.model if bench.info is not None else None,
            bench.ceilings.current,
            x_range=(float(x0), float(x1)),
            y_range=None if order is not None else (float(y0), float(y1)),
            size_px=(plot.plot.width(), plot.plot.height()),
            block_order=tuple(order or ()),
            extra={"caption": plot.caption.text(), "spec": getattr(plot, "run_spec", "")},
        )

    def _background(
        self,
        work: Callable[[], object],
        success: str,
        level: str = "info",
        then: Callable[[], None] | None = None,
    ) -> None:
        def done(_result: object, error: str | None) -> None:
            if error is not None:
                self._report(False, error)
                return
            if then is not None:
                then()
            self._report(True, success, level)

        self.tasks.start(work, "export", done)

    def _report(self, ok: bool, text: str, level: str = "info") -> None:
        self.bench.message.emit(text if ok else f"Export failed: {text}", level if ok else "error")
        self.finished.emit(ok, text)

    def shutdown(self, timeout_s: float = TASK_WAIT_S) -> None:
        """Let writes in progress finish: a half-written export is worse than a late close."""
        self.tasks.wait_all(timeout_s)


__all__ = ["ExportError", "Exporter"]
