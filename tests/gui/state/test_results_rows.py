"""The runs table's rows (Qt-free): a run under a memory limit says so in its own column."""

from __future__ import annotations

import dataclasses

from modelmon.core.runs import SessionResult
from modelmon.core.system import MemoryLimit
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.results_rows import COLUMNS, LIMIT, cell_text, cell_tip

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
