"""The throughput plot's ceiling lines: every bound drawn and in range, labels never on top
of each other."""

from __future__ import annotations

from modelmon.core import Ceiling, Ceilings
from modelmon.gui.plots.throughput import ThroughputPlot


def _ceiling(name: str, mbps: float) -> Ceiling:
    return Ceiling(name, mbps, (mbps,), f"how {name} was measured", True)


def test_close_ceilings_share_a_label_and_both_bounds_are_in_range(qtbot) -> None:
    plot = ThroughputPlot()
    qtbot.addWidget(plot)
    plot.set_ceilings(
        Ceilings(
            "m",
            (
                _ceiling("sequential_read", 1609.0),
                _ceiling("parallel_read", 1644.0),
                _ceiling("storage", 1644.0),
                _ceiling("memory_fill", 4700.0),
                _ceiling("parallel_read_warm", 1840.0),  # 1.14x the lowest: the same label
            ),
        )
    )
    lines = plot.ceiling_lines
    assert set(lines) == {
        "sequential_read",
        "parallel_read",
        "storage",
        "memory_fill",
        "parallel_read_warm",
    }
    labels = [line.label.toPlainText() for line in lines.values() if hasattr(line, "label")]
    # The four within 15 % of the lowest: one label, the highest first; the fill on its own.
    assert sorted(labels) == [
        "memory fill ceiling 4700 MB/s",
        "warm 1840 MB/s · storage 1644 MB/s · parallel 1644 MB/s · sequential 1609 MB/s (ceilings)",
    ], labels
    assert plot.anchor_mbps == 4700.0  # the memory-fill bound is drawn inside the range
