"""Progress of the running load or watch: bytes of total, MB/s, ETA, and the Cancel button;
between loads, the running job's line or how the last one ended (the state's ``StatusLine``)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QSizePolicy, QWidget

from modelmon.gui.state.formatting import bar_text, duration_text, human_bytes, rate_text
from modelmon.gui.state.live import LiveUpdate
from modelmon.gui.state.live_run import Shown
from modelmon.gui.state.run_list import IDLE, StatusLine
from modelmon.gui.widgets.elided_label import ElidedLabel

BAR_PADDING_PX = 12  # the style's room either side of a progress bar's text


class OneLineBar(QProgressBar):
    """A progress bar whose text stays on one line, ending in "…" when the bar is too narrow
    (its tooltip says it whole): a long outcome never grows the strip taller."""

    explanation = ""  # what the bar measures, after its text in the tooltip

    def setFormat(self, text: str) -> None:  # Qt's name
        super().setFormat(text)
        whole = text.replace("%p", str(self.value() * 100 // max(1, self.maximum())))
        whole = whole.replace("%%", "%").replace("%\u2060", "%")
        self.setToolTip(f"{whole}\n{self.explanation}" if self.explanation else whole)

    def text(self) -> str:  # Qt's virtual: what the bar paints
        whole = super().text()
        room = max(0, self.width() - BAR_PADDING_PX)
        return self.fontMetrics().elidedText(whole, Qt.TextElideMode.ElideRight, room)


class ProgressStrip(QWidget):
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = self.spec = ""
        self.watched = False  # the live run is a watched program's
        self.bar = OneLineBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(True)
        self.bar.explanation = "Tensor bytes loaded so far of the model's total."
        self.bar.setFormat(IDLE)
        # The detail (the spec, or MB/s and the ETA) shares the row with the bar, and gives
        # way first, ending in "…".
        self.detail = ElidedLabel("")
        self.detail.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.detail.setToolTip("Throughput over the last second and the time left at that rate.")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the running load (Esc); its workers are stopped.")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel_requested)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar, 3)
        layout.addWidget(self.detail, 2)
        layout.addWidget(self.cancel_button)

    def started(self, shown: Shown) -> None:
        self.watched = shown.watched
        self.label = "Watch" if shown.name == "watch" else f"Run {shown.name.removeprefix('run ')}"
        self.spec = shown.spec
        self.bar.setValue(0)
        self.bar.setFormat(bar_text(f"{self.label}: starting…"))
        self.detail.setText(shown.spec)
        self.cancel_button.setEnabled(True)

    def show_update(self, update: LiveUpdate) -> None:
        label = self.label
        if self.watched:
            self._show_watch(update)
            return
        if update.phase == "starting workers":
            self.bar.setFormat(
                f"{label}: starting workers ({update.workers_ready}/{update.workers} ready)"
            )
            return
        if update.phase == "preparing cache":
            # On a VM whose host takes free pages back this includes priming free memory,
            # a few seconds (core/system/host_memory.py): said with how much and why.
            doing = update.priming or "preparing the page cache"
            self.bar.setFormat(bar_text(f"{label}: {doing}…"))
            return
        self.bar.setValue(int(update.fraction * 1000))
        self.bar.setFormat(
            f"{label}: {human_bytes(update.bytes_done)} of {human_bytes(update.bytes_total)} (%p%)"
        )
        if update.phase == "done":
            self.detail.setText(self.spec)
        else:
            self.detail.setText(
                f"{rate_text(update.recent_mbps)} · {duration_text(update.elapsed_s)} "
                f"elapsed · ETA {duration_text(update.eta_s)}"
            )

    def _show_watch(self, update: LiveUpdate) -> None:
        """A watch: what has arrived of the model so far (there is no total it must reach:
        a program may load part of it), its rate, how long it has run."""
        if update.phase == "preparing cache":
            self.bar.setFormat("Watch: preparing the page cache, then starting the command…")
            return
        self.bar.setValue(int(update.fraction * 1000))
        self.bar.setFormat(
            bar_text(
                f"Watch: {human_bytes(update.bytes_done)} of the model's "
                f"{human_bytes(update.bytes_total)} arrived"
            )
        )
        if update.phase == "done":
            self.detail.setText(self.spec)
        else:
            self.detail.setText(
                f"{rate_text(update.recent_mbps)} · {duration_text(update.elapsed_s)} · "
                f"{update.workers} process{'es' if update.workers != 1 else ''}"
            )

    def show_line(self, line: StatusLine) -> None:
        """The state's line: a job's (and how far it is), or how the last one ended."""
        if line.new_model:
            self.detail.setText("")
        if line.ended:
            self.stopped(line.text)
        else:
            self.show_job(line.text, line.fraction)

    def show_job(self, text: str, fraction: float | None = None) -> None:
        """A job without a live load (ceilings, a recommendation): its line, and how far."""
        self.cancel_button.setEnabled(True)
        if fraction is not None:
            self.bar.setValue(int(min(1.0, max(0.0, fraction)) * 1000))
        self.bar.setFormat(bar_text(text))
        self.detail.setText("")

    def stopped(self, text: str) -> None:
        """The job ended: its outcome in words beside an empty bar (nothing is running)."""
        self.cancel_button.setEnabled(False)
        self.bar.setValue(0)
        self.bar.setFormat(bar_text(text))

    def reset(self) -> None:
        """A job starts: nothing of the last one's fill or words stays."""
        self.bar.setValue(0)
        self.bar.setFormat("starting…")
        self.detail.setText("")
