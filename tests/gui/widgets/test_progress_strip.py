"""The progress strip shows a job's words as written (the bar's format has % codes)."""

from __future__ import annotations

import numpy as np

from modelmon.core.output import priming_plan_text
from modelmon.core.system import Primed
from modelmon.gui.state.live import AccessPoints, LiveUpdate
from modelmon.gui.state.live_run import Shown
from modelmon.gui.widgets.progress_strip import ProgressStrip


def test_percent_signs_in_a_jobs_words_show_as_written(qtbot) -> None:
    strip = ProgressStrip()
    qtbot.addWidget(strip)
    strip.stopped("A is 21 % faster; %p %v %m stay words")
    shown = strip.bar.text().replace("\u2060", "")
    assert shown == "A is 21 % faster; %p %v %m stay words"
    strip.show_job("100 % of the budget", 0.5)
    assert strip.bar.text().replace("\u2060", "") == "100 % of the budget"


def preparing(priming: str) -> LiveUpdate:
    return LiveUpdate(
        phase="preparing cache",
        workers_ready=1,
        workers=1,
        bytes_done=0,
        bytes_total=1,
        elapsed_s=0.0,
        bin_s=0.01,
        load_mbps=np.empty(0),
        prefetch_mbps=np.empty(0),
        new_reads=AccessPoints.empty(),
        priming=priming,
    )


def test_while_the_cache_is_prepared_it_says_what_priming_touches_and_why(qtbot) -> None:
    strip = ProgressStrip()
    qtbot.addWidget(strip)
    strip.started(Shown("A", "run A", "sequential"))
    strip.show_update(preparing(""))
    assert strip.bar.text() == "Run A: preparing the page cache…"
    plan = Primed(bytes=2_500_000_000, wanted=2_500_000_000, why="the load's arrays")
    strip.show_update(preparing(priming_plan_text(plan)))
    shown = strip.bar.text().replace("\u2060", "")
    assert shown == "Run A: priming 2.5 GB of free memory (the load's arrays)…"
