"""The access-pattern plot keeps its drawing work bounded: decimation beyond its cap."""

from __future__ import annotations

import numpy as np

from modelmon.core import Model
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
                np.zeros(count, dtype=np.int32),
                np.arange(count, dtype=np.int64) % 3,
                np.full(count, -1, dtype=np.int64),
            )
        )
    assert plot.segment_count <= access_pattern.MAX_SEGMENTS
    assert plot.stride == 2
    assert plot.segment_count > access_pattern.MAX_SEGMENTS // 2
    # Bounded items: none holds more than a chunk of segments.
    for trace in plot.traces.values():
        assert all(len(item.xData) <= 2 * access_pattern.CHUNK_SEGMENTS for item in trace.items)


def _reads(readers: int, descriptors: list[int]) -> AccessPoints:
    times = np.linspace(0, 1, readers)
    return AccessPoints(
        np.zeros(readers, dtype=np.int32),
        times,
        times + 0.01,
        times,
        times + 0.1,
        np.zeros(readers, dtype=bool),
        np.zeros(readers, dtype=np.int32),
        np.arange(readers, dtype=np.int64),
        np.array(descriptors, dtype=np.int64),
    )


def test_access_plot_caption_names_descriptor_sharing(qtbot, two_file_model: Model):
    plot = AccessPatternPlot()
    qtbot.addWidget(plot)
    plot.set_model(two_file_model)
    plot.start_run("run A", "mmap-shared-fd ×4")
    plot.add_reads(_reads(4, [5, 5, 5, 5]))
    # What the readers did first (the finding), on one line; the run's spec in the tooltip.
    assert plot.caption.text() == "4 readers share 1 descriptor · one colour per worker"
    assert "run A: mmap-shared-fd ×4" in plot.plot.toolTip()
    plot.start_run("run B", "pread ×4")
    assert "descriptor" not in plot.caption.text()
    plot.add_reads(_reads(4, [1, 2, 3, 4]))
    assert plot.caption.text().startswith("4 readers, each its own descriptor")
