"""The throughput plot's ceiling lines: every bound drawn and in range, labels never on top
of each other."""

from __future__ import annotations

import contextlib
import re

from pytestqt.exceptions import TimeoutError as WaitTimeout

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
    plot.resize(1400, 500)
    plot.show()
    qtbot.waitExposed(plot)
    labels = [line.label.toPlainText() for line, _ in plot.ceiling_labels]
    # The four within 15 % of the lowest: one label, the highest first; the fill on its own.
    assert sorted(labels) == [
        "memory fill ceiling 4700 MB/s",
        "warm 1840 MB/s · parallel · storage 1644 MB/s · sequential 1609 MB/s",
    ], labels
    assert plot.anchor_mbps == 4700.0  # the memory-fill bound is drawn inside the range


WALK = (  # the ceilings a new-user walk measured on a sharded model
    _ceiling("storage", 1354.0),
    _ceiling("memory_fill", 744.0),
    _ceiling("sequential_read", 1548.0),
    _ceiling("parallel_read", 968.0),
    _ceiling("parallel_read_warm", 1660.0),
    _ceiling("memcpy", 3267.0),
)


def test_ceiling_labels_fit_the_plot_and_each_other_at_every_width(qtbot) -> None:
    """A label never runs past the plot's edge ("orage 3267 MB/s") nor over another; a
    narrow plot gives shorter words, never a number cut."""
    plot = ThroughputPlot()
    qtbot.addWidget(plot)
    plot.set_ceilings(Ceilings("m", WALK))
    plot.show()
    for width in (1400, 490, 380, 300):
        plot.resize(width, 300)
        qtbot.waitUntil(lambda width=width: plot.width() == width)
        # Laid out and drawn at this width (pyqtgraph places labels as it paints): the
        # labels are inside the data area, or the wait ends and the check below says how.
        with contextlib.suppress(WaitTimeout):
            qtbot.waitUntil(lambda: not label_problems(plot), timeout=3_000)
        assert not (problems := label_problems(plot)), (width, problems)


def label_problems(plot: ThroughputPlot) -> list[str]:
    """Labels past the data area's edges, numbers cut, labels over one another."""
    area = plot.item.vb.sceneBoundingRect()
    problems, boxes = [], []
    for line in plot.ceiling_lines.values():
        if getattr(line, "label", None) is None:
            continue
        box = line.label.sceneBoundingRect()
        text = line.label.toPlainText()
        if not (area.left() <= box.left() and box.right() <= area.right()):
            problems.append(f"{text!r} past the edge")
        # Its own line's rate (the group's highest), whole, and the unit.
        whole = re.search(rf"(?<![\d.]){line.value():.0f}(?![\d.])", text)
        if whole is None or "MB/s" not in text:
            problems.append(f"{text!r} without a whole rate")
        boxes.append((box, text))
    for i, (box, text) in enumerate(boxes):
        problems += [f"{text!r} over {o!r}" for b, o in boxes[i + 1 :] if box.intersects(b)]
    return problems


def test_a_buckets_ceilings_are_not_said_to_be_measured_on_a_file(qtbot) -> None:
    """A bucket's ceilings (no page cache: verified is None) are plain GETs of objects: the
    caption under the plot, on screen and in an exported image, names no file."""
    plot = ThroughputPlot()
    qtbot.addWidget(plot)
    plot.set_ceilings(
        Ceilings(
            "s3://models/lab/",
            tuple(
                Ceiling(name, mbps, (mbps,), f"{n} connection(s), 64 MiB GETs", None)
                for name, mbps, n in (
                    ("sequential_read", 620.0, 1),
                    ("parallel_read", 1290.0, 4),
                    ("storage", 1400.0, 16),
                )
            ),
        )
    )
    caption = plot.caption.text()
    assert caption.startswith("dashed grey lines: ceilings measured on this model"), caption
    assert "file" not in caption and "file" not in plot.toolTip(), plot.toolTip()
