"""The progress strip shows a job's words as written (the bar's format has % codes)."""

from __future__ import annotations

from modelmon.gui.widgets.progress_strip import ProgressStrip


def test_percent_signs_in_a_jobs_words_show_as_written(qtbot) -> None:
    strip = ProgressStrip()
    qtbot.addWidget(strip)
    strip.stopped("A is 21 % faster; %p %v %m stay words")
    shown = strip.bar.text().replace("\u2060", "")
    assert shown == "A is 21 % faster; %p %v %m stay words"
    strip.show_job("100 % of the budget", 0.5)
    assert strip.bar.text().replace("\u2060", "") == "100 % of the budget"
