"""JobRunner without Qt: a job in a thread, its events delivered in the state's thread (here a
CallQueue the test drains), the end; shutdown stops the workers."""

from __future__ import annotations

import threading
from pathlib import Path

from modelmon.core import ABResult, MemoryFacts, StrategyConfig, open_model
from modelmon.core.options import LoadOptions
from modelmon.gui.state.events import CallQueue
from modelmon.gui.state.job_runner import JobRunner
from modelmon.gui.state.jobs import ABJob, JobEnd, RunStart, SingleRun
from modelmon.gui.state.records import RunRecord

from ..conftest import SLOW_OPTIONS, pump, worker_processes


def side(strategy: str, options: LoadOptions) -> StrategyConfig:
    return StrategyConfig(strategy, options)


def runner_with_ends() -> tuple[JobRunner, CallQueue, list[JobEnd]]:
    queue = CallQueue()
    runner = JobRunner(queue)
    ends: list[JobEnd] = []
    runner.job_finished.connect(ends.append)
    return runner, queue, ends


def test_a_load_ends_with_its_record_then_the_jobs_end(small_model: Path):
    runner, queue, ends = runner_with_ends()
    model = open_model(small_model)
    seen: list[object] = []
    runner.run_started.connect(seen.append)
    runner.run_finished.connect(seen.append)
    runner.job_finished.connect(lambda end: seen.append(runner.running))
    threads = {threading.get_ident()}
    runner.run_finished.connect(lambda _record: threads.add(threading.get_ident()))
    runner.start(SingleRun(model, "A", side("sequential", LoadOptions(workers=2, cache="cold"))))
    pump(queue, lambda: bool(ends))
    (end,) = ends
    assert end.kind == "run" and end.error is None and not end.cancelled
    result = end.value.result
    assert result.status == "ok" and result.bytes == model.total_bytes
    start, record, running = seen
    assert isinstance(start, RunStart) and start.session.load.reads.bytes == model.total_bytes
    assert isinstance(record, RunRecord) and record.outcome is end.value
    assert running is False  # the job no longer runs when job_finished is emitted
    assert threads == {threading.get_ident()}  # delivered in the thread that drains the queue


def test_an_unknown_strategy_fails_in_one_line(small_model: Path):
    runner, queue, ends = runner_with_ends()
    records: list[RunRecord] = []
    runner.run_finished.connect(records.append)
    runner.start(SingleRun(open_model(small_model), "A", side("teleport", LoadOptions())))
    pump(queue, lambda: bool(ends))
    error = ends[0].error
    assert "unknown strategy 'teleport'" in error and "\n" not in error
    assert records and records[0].outcome is None and records[0].error == error


def test_refusing_a_load_larger_than_ram_becomes_failed(small_model: Path, monkeypatch):
    tiny = MemoryFacts(
        total=1 << 20,
        available=1 << 20,
        page_cache=0,
        cgroup_limit=None,
        cgroup_used=None,
        usable=1 << 20,
    )
    monkeypatch.setattr("modelmon.core.loading.preflight.memory_facts", lambda: tiny)
    runner, queue, ends = runner_with_ends()
    runner.start(SingleRun(open_model(small_model), "A", side("sequential", LoadOptions())))
    pump(queue, lambda: bool(ends))
    assert "would not fit" in ends[0].error and "\n" not in ends[0].error
    assert not runner.running


def test_an_ab_job_reports_each_run_by_side_and_pair(small_model: Path):
    runner, queue, ends = runner_with_ends()
    starts: list[RunStart] = []
    records: list[RunRecord] = []
    runner.run_started.connect(starts.append)
    runner.run_finished.connect(records.append)
    job = ABJob(
        open_model(small_model),
        StrategyConfig("sequential", LoadOptions(workers=2)),
        StrategyConfig("pread", LoadOptions(workers=2)),
        n=2,
        cache="cold",
    )
    runner.start(job)
    pump(queue, lambda: bool(ends))
    ab = ends[0].value
    assert isinstance(ab, ABResult), ends[0].error
    assert [(s.label, s.pair, s.pairs) for s in starts] == [
        ("A", 0, 2),
        ("B", 0, 2),
        ("A", 1, 2),
        ("B", 1, 2),
    ]
    assert [r.spec.split()[0] for r in records] == ["sequential", "pread"] * 2
    assert [r.result for r in records] == [result for _, result in ab.runs]


def test_shutdown_mid_load_stops_workers_and_thread(slow_model: Path):
    runner, queue, ends = runner_with_ends()
    starts: list[RunStart] = []
    runner.run_started.connect(starts.append)
    runner.start(SingleRun(open_model(slow_model), "A", side("sequential", SLOW_OPTIONS)))
    pump(queue, lambda: bool(starts) and starts[0].session.load.reads.bytes > 0)
    assert worker_processes()
    assert runner.shutdown()
    assert not runner.running
    assert worker_processes() == []
    queue.run_pending()  # what the job posted before it stopped is dropped
    assert ends == []


def test_a_new_job_may_start_from_the_last_jobs_end(small_model: Path):
    runner, queue, ends = runner_with_ends()
    model = open_model(small_model)

    def again(end: JobEnd) -> None:
        if len(ends) == 1:
            runner.start(SingleRun(model, "B", side("pread", LoadOptions(workers=1))))

    runner.job_finished.connect(again)
    runner.start(SingleRun(model, "A", side("sequential", LoadOptions(workers=1))))
    pump(queue, lambda: len(ends) == 2)
    assert [e.error for e in ends] == [None, None] and not runner.running
