"""The access-pattern plot keeps its drawing work bounded: decimation beyond its cap."""

from __future__ import annotations

import numpy as np

from modelmon.core.model.records import Model
from modelmon.gui.plots import access_pattern
from modelmon.gui.plots.access_pattern import AccessPatternPlot
from modelmon.gui.state.live import AccessPoints


def test_access_plot_decimates_beyond_its_cap(qtbot, two_file_model: Model):
    plot = AccessPatternPlot()
    qtbot.addWidget(plot)
    plot.set_model(two_file_model)
    count = 60_000
    for start in range(0, 5 * count, count):
        times = np.linspace(start, start + count, count) / 1e5
        plot.add_reads(
            AccessPoints(
                np.arange(count, dtype=np.int32) % 3,
                times,
                times + 1e-6,
                times,
                times + 0.001,
                np.zeros(count, dtype=bool),
            )
        )
    assert plot.segment_count <= access_pattern.MAX_SEGMENTS
    assert plot.stride == 2
    assert plot.segment_count > access_pattern.MAX_SEGMENTS // 2
    # Bounded items: none holds more than a chunk of segments.
    for trace in plot.traces.values():
        assert all(len(item.xData) <= 2 * access_pattern.CHUNK_SEGMENTS for item in trace.items)
