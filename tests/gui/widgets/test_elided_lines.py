"""A label of a fixed number of wrapped lines: a text that fits them is shown whole, in a
bold and larger font too (whose lines stand taller than its line spacing says)."""

from __future__ import annotations

from modelmon.gui.widgets.compare_bar import CompareBar

VERDICT = (
    "B is 0.7 % faster by the median pair; not certain: the pairs disagree on which is faster "
    "(B/A per pair 0.98–1.18×, half the pairs within ±2 % of the median)"
)


def test_a_verdict_that_fits_two_lines_is_shown_whole(qtbot) -> None:
    bar = CompareBar()
    qtbot.addWidget(bar)
    bar.resize(1400, 80)
    bar.show()
    qtbot.waitExposed(bar)
    bar.verdict.setText(VERDICT)
    width = bar.verdict.contentsRect().width()
    assert bar.verdict.fontMetrics().horizontalAdvance(VERDICT) < 2 * width - 100  # it fits
    shown = super(type(bar.verdict), bar.verdict).text()
    assert shown == VERDICT and bar.verdict.text() == VERDICT
    bar.resize(500, 80)  # too narrow for two lines: cut, and whole in the tooltip
    qtbot.waitUntil(lambda: bar.verdict.width() < width)
    assert super(type(bar.verdict), bar.verdict).text().endswith("…")
    assert bar.verdict.toolTip() == VERDICT
