"""LoadController: a job in a thread, its events delivered in the GUI thread, the end."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication

from modelmon.core import ABResult, Config, LoadOptions, MemoryFacts, open_model
from modelmon.gui.bridge import LoadController
from modelmon.gui.state.jobs import ABJob, RunStart, SingleRun
from modelmon.gui.state.records import RunRecord

from .conftest import SLOW_OPTIONS, worker_processes


def test_a_load_ends_with_its_record_then_the_jobs_end(qtbot, small_model: Path):
    controller = LoadController()
    model = open_model(small_model)
    seen: list[object] = []
    controller.run_started.connect(seen.append)
    controller.run_finished.connect(seen.append)
    controller.job_finished.connect(lambda end: seen.append(controller.running))
    with qtbot.waitSignal(controller.job_finished, timeout=20_000) as finished:
        controller.start(SingleRun(model, "A", "sequential", LoadOptions(workers=2, cache="cold")))
    end = finished.args[0]
    assert end.kind == "run" and end.error is None and not end.cancelled
    result = end.value.result
    assert result.status == "ok" and result.bytes == model.total_bytes
    start, record, running = seen
    assert isinstance(start, RunStart) and start.session.load.reads.bytes == model.total_bytes
    assert isinstance(record, RunRecord) and record.outcome is end.value
    assert running is False  # the job no longer runs when job_finished is emitted
    assert not controller.running


def test_an_unknown_strategy_fails_in_one_line(qtbot, small_model: Path):
    controller = LoadController()
    ends = []
    controller.run_finished.connect(ends.append)
    with qtbot.waitSignal(controller.job_finished, timeout=5_000) as finished:
        controller.start(SingleRun(open_model(small_model), "A", "teleport", LoadOptions()))
    error = finished.args[0].error
    assert "unknown strategy 'teleport'" in error and "\n" not in error
    assert ends and ends[0].outcome is None and ends[0].error == error


def test_refusing_a_load_larger_than_ram_becomes_failed(qtbot, small_model: Path, monkeypatch):
    tiny = MemoryFacts(
        total=1 << 20,
        available=1 << 20,
        page_cache=0,
        cgroup_limit=None,
        cgroup_used=None,
        usable=1 << 20,
    )
    monkeypatch.setattr("modelmon.core.loading.preflight.memory_facts", lambda: tiny)
    controller = LoadController()
    with qtbot.waitSignal(controller.job_finished, timeout=10_000) as finished:
        controller.start(SingleRun(open_model(small_model), "A", "sequential", LoadOptions()))
    assert "would not fit" in finished.args[0].error and "\n" not in finished.args[0].error
    assert not controller.running


def test_an_ab_job_reports_each_run_by_side_and_pair(qtbot, small_model: Path):
    controller = LoadController()
    starts: list[RunStart] = []
    records: list[RunRecord] = []
    controller.run_started.connect(starts.append)
    controller.run_finished.connect(records.append)
    job = ABJob(
        open_model(small_model),
        Config("sequential", LoadOptions(workers=2)),
        Config("pread", LoadOptions(workers=2)),
        n=2,
        cache="cold",
    )
    with qtbot.waitSignal(controller.job_finished, timeout=30_000) as finished:
        controller.start(job)
    ab = finished.args[0].value
    assert isinstance(ab, ABResult), finished.args[0].error
    assert [(s.label, s.pair, s.pairs) for s in starts] == [
        ("A", 0, 2),
        ("B", 0, 2),
        ("A", 1, 2),
        ("B", 1, 2),
    ]
    assert [r.spec.split()[0] for r in records] == ["sequential", "pread"] * 2
    assert [r.result for r in records] == [result for _, result in ab.runs]


def test_shutdown_mid_load_stops_workers_and_thread(qtbot, slow_model: Path):
    controller = LoadController()
    starts: list[RunStart] = []
    finished: list[object] = []
    controller.run_started.connect(starts.append)
    controller.job_finished.connect(finished.append)
    controller.start(SingleRun(open_model(slow_model), "A", "sequential", SLOW_OPTIONS))
    qtbot.waitUntil(lambda: bool(starts) and starts[0].session.load.reads.bytes > 0, timeout=20_000)
    assert worker_processes()
    assert controller.shutdown()
    assert not controller.running
    assert worker_processes() == []
    QCoreApplication.processEvents()  # what the job posted before it stopped is dropped
    assert finished == []


def test_a_new_job_may_start_from_the_last_jobs_end(qtbot, small_model: Path):
    controller = LoadController()
    model = open_model(small_model)
    ends = []

    def again(end: object) -> None:
        ends.append(end)
        if len(ends) == 1:
            controller.start(SingleRun(model, "B", "pread", LoadOptions(workers=1)))

    controller.job_finished.connect(again)
    controller.start(SingleRun(model, "A", "sequential", LoadOptions(workers=1)))
    qtbot.waitUntil(lambda: len(ends) == 2, timeout=20_000)
    assert [e.error for e in ends] == [None, None] and not controller.running
