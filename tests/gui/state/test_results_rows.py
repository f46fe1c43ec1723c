"""The runs table's rows (Qt-free): a run under a memory limit says so in its own column."""

from __future__ import annotations

import dataclasses

from modelmon.core.runs import SessionResult
from modelmon.core.system import MemoryLimit
from modelmon.gui.state.export_format import plot_heading
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.results_rows import (
    COLUMNS,
    LIMIT,
    PEAK_RSS,
    RUN,
    SECONDS,
    STRATEGY,
    cell_text,
    cell_tip,
    fitted_widths,
)

from ...core.measuring.records import run

MiB = 1 << 20


def _record(limit: int | None) -> RunRecord:
    result = run(500.0)
    if limit is not None:
        held = MemoryLimit(
            limit, 300 * MiB, 200 * MiB, 100 * MiB, 0, 200 * MiB, 100 * MiB, 0, False, 0, 0,
            None, "/sys/fs/cgroup/modelmon-run", 2,
        )  # fmt: skip
        result = dataclasses.replace(result, memory_limit=held)
    return RunRecord("A", "pread", None, SessionResult(result, 0.1, {}, {}, {}, {}))


def test_a_runs_memory_limit_has_a_column_of_its_own() -> None:
    assert COLUMNS[LIMIT][0] == "Limit"
    assert cell_text(_record(512 * MiB), LIMIT) == "512 MiB"  # as it was given
    assert cell_text(_record(4 << 30), LIMIT) == "4 GiB"
    assert cell_text(_record(None), LIMIT) == "–"  # no cgroup: unlimited
    tip = cell_tip(_record(512 * MiB), LIMIT)
    assert tip is not None and tip.startswith("Its memory limit 512 MiB") and "peak" in tip


def test_a_narrow_table_narrows_its_words_and_keeps_its_figures() -> None:
    natural = [180, 620, 110, 60, 80, 80, 170, 70]  # the columns before the status
    assert fitted_widths(natural, sum(natural), 80) == natural  # room for all: as they are
    room = 800
    widths = fitted_widths(natural, room, 80)
    assert sum(widths) <= room
    # The figures and the limit keep their widths; the words share what is left, the
    # narrowest (the cache state) keeping its own.
    assert widths[SECONDS:PEAK_RSS] == natural[SECONDS:PEAK_RSS] and widths[LIMIT] == 70
    assert widths[2] == 110 and widths[RUN] == widths[STRATEGY] == widths[PEAK_RSS] < 170
    # Never below the least: the table then scrolls sideways rather than show nothing.
    assert fitted_widths(natural, 300, 80)[STRATEGY] == 80


def test_a_cell_of_words_is_whole_in_its_tooltip() -> None:
    record = RunRecord(
        "B", "sequential workers=8 chunk=64MiB fadvise=sequential", 1,
        SessionResult(run(500.0), 0.1, {}, {}, {}, {}), session="A/B 12 at 14:03:55",
    )  # fmt: skip
    for column in (RUN, STRATEGY):
        tip = cell_tip(record, column)
        assert tip is not None and tip.startswith(cell_text(record, column) + "\n"), tip


def test_an_exported_plots_heading_names_a_runs_memory_limit() -> None:
    """A run in a 4 GiB cgroup and one without: the heading tells them apart, as the table's
    Limit column does."""
    limited, free = _record(4 << 30), _record(None)
    _, first, second = plot_heading("m", [limited, free], "now")
    assert first == "A: pread under a 4 GiB memory limit — 500 MB/s in 2.00 s", first
    assert "limit" not in second


def test_under_a_limit_the_peak_cell_shows_the_cgroups_peak_beside_the_rss() -> None:
    """The seventh walk read "4.37 GB · all 5.72 GB" in a row whose limit was 4 GiB: summed
    RSS counts shared pages in each process. Under a limit the second figure is what the
    limit counts, the cgroup's peak."""
    limited = _record(512 * MiB)
    assert cell_text(limited, PEAK_RSS).startswith("cgroup 300 MiB · ")
    assert "cgroup" not in cell_text(_record(None), PEAK_RSS)


def test_the_peak_cell_says_how_much_of_the_workers_memory_is_mapped_page_cache() -> None:
    """The fourteenth walk read "4.1 GiB · cgroup 4.0 GiB" under a 4 GiB limit (mmap-shared-fd,
    4 workers, a 2.35 GiB model) as a load needing more than its limit: the workers' RSS
    holds the model's pages they map, page cache the limit reclaims. The cell says that
    share, at the sample where their RSS peaked."""
    import numpy as np

    GiB = 1 << 30
    times = np.array([0.1, 0.2, 0.3])
    series = {
        "workers_rss": (times, np.array([1.0, 4.1, 3.0]) * GiB),
        "workers_mapped": (times, np.array([0.2, 1.8, 1.9]) * GiB),
    }
    limited = _record(4 << 30)
    assert limited.sampled is not None
    mapped = RunRecord(
        "B", "mmap-shared-fd", None, dataclasses.replace(limited.sampled, series=series)
    )
    assert mapped.peak_mapped() == int(1.8 * GiB)
    assert cell_text(mapped, PEAK_RSS) == "cgroup 300 MiB · 4.1 GiB (1.8 mapped)"
    tip = cell_tip(mapped, PEAK_RSS)
    assert tip is not None and "which a memory limit reclaims" in tip
    # A mapped share under a tenth (libraries' code) is left to the tooltip.
    small = {**series, "workers_mapped": (times, np.array([0.01, 0.3, 0.3]) * GiB)}
    plain = RunRecord("B", "pread", None, dataclasses.replace(limited.sampled, series=small))
    assert cell_text(plain, PEAK_RSS) == "cgroup 300 MiB · 4.1 GiB"


def test_a_run_stopped_before_the_sampler_looked_says_how_it_ended() -> None:
    """The Peak RSS tip of a run with no sample: a cancelled or failed run was not "over"
    before the sampler looked; it was stopped, as its status cell says."""
    for status, ended in (("ok", "was over"), ("cancelled", "was cancelled"), ("failed", "failed")):
        result = dataclasses.replace(run(500.0), status=status)
        record = RunRecord("B", "pread", None, SessionResult(result, 0.1, {}, {}, {}, {}))
        tip = cell_tip(record, PEAK_RSS)
        assert tip is not None and tip.startswith(
            f"No sample of the workers' memory: the load {ended} before the sampler looked"
        ), tip
