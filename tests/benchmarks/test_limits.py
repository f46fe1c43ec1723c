"""The memory-limit bench: a copy under its model's size is refused before it runs, as
modelmon refuses it; a discard load holds with its cgroup's peak under the limit; the section
says each as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import limits

from ..core.loading.sparse import sparse_model
from ..core.system.test_memory_cgroup import REAL

MiB = 1 << 20


@REAL
def test_each_way_of_loading_at_each_limit_as_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sparse_model(tmp_path, tensors=64, tensor_bytes=8 * MiB)  # 512 MiB of zeros
    configs = {c[0]: c for c in limits.CONFIGS}
    chosen = (configs["sequential ×4"], configs["sequential ×4 discard"])
    monkeypatch.setattr(limits, "CONFIGS", chosen)
    monkeypatch.setattr(limits, "FRACTIONS", (None, 1.0, 0.5))
    data = limits.measure(str(path), rounds=1)
    assert data["limits"] == [None, 512 * MiB, 256 * MiB]
    copy, discard = (data["runs"][label] for label in ("sequential ×4", "sequential ×4 discard"))
    assert copy["None"][0]["status"] == "ok" and "peak_bytes" not in copy["None"][0]
    # A copy larger than the limit: refused before it runs, as modelmon load refuses it.
    assert copy["0.5"][0]["status"] == "refused", copy["0.5"]
    # At 100 %, its arrays fit, its interpreters' memory and the reads' cache do not.
    tight = copy["1.0"][0]
    assert tight["status"] == "ok" or tight["oom_killed"], tight
    held = discard["0.5"][0]
    assert held["status"] == "ok" and held["peak_bytes"] <= 256 * MiB, held
    table = "\n".join(limits.section(data, None))
    row = next(line for line in table.splitlines() if line.startswith("| sequential ×4 |"))
    assert row.endswith("| refused before it runs: the model would not fit |"), row
    assert "| no limit | 100% (512 MiB) | 50% (256 MiB) |" in table
    discard_row = next(line for line in table.splitlines() if "discard |" in line)
    assert "MB/s, peak " in discard_row.split("|")[4], discard_row


def test_a_section_not_run_says_why() -> None:
    said = limits.section({"skipped": "cannot run under a memory limit here (not root)"}, None)
    assert said[2] == "Not run: cannot run under a memory limit here (not root)."
    assert limits.section(None, "not run in --smoke")[2] == "Not run: not run in --smoke."
