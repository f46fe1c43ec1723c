"""The job thread's reports (Qt-free): in order, and a run's end delivered with what follows."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from modelmon.core import StrategyConfig, open_model, write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.runs import LoadRun, ReadBatch
from modelmon.gui.state.jobs import ABJob, JobEnd, RunStart, SingleRun
from modelmon.gui.state.records import RunRecord


def side(strategy: str, options: LoadOptions) -> StrategyConfig:
    return StrategyConfig(strategy, options)


def test_the_last_runs_end_and_the_jobs_end_are_one_delivery(sharded_model: Path):
    deliveries: list[tuple[object, ...]] = []
    SingleRun(open_model(sharded_model), "A", side("teleport", LoadOptions())).run(
        deliveries.append
    )
    (delivery,) = deliveries  # the run could not start: no RunStart
    record, end = delivery
    assert isinstance(record, RunRecord) and record.outcome is None and record.result is None
    assert isinstance(end, JobEnd) and end.error == record.error
    assert "unknown strategy 'teleport'" in end.error and record.status == "failed"


def test_an_ab_tells_each_run_its_side_and_pair(sharded_model: Path):
    deliveries: list[tuple[object, ...]] = []
    job = ABJob(
        open_model(sharded_model),
        StrategyConfig("sequential", LoadOptions(workers=1)),
        StrategyConfig("pread", LoadOptions(workers=1)),
        n=2,
        cache="keep",
    )
    job.run(deliveries.append)
    kinds = [[type(event).__name__ for event in delivery] for delivery in deliveries]
    # Each run's end travels with the next run's start; the last with the job's end.
    assert kinds == [
        ["RunStart"],
        ["RunRecord", "RunStart"],
        ["RunRecord", "RunStart"],
        ["RunRecord", "RunStart"],
        ["RunRecord", "JobEnd"],
    ]
    events = [event for delivery in deliveries for event in delivery]
    starts = [e for e in events if isinstance(e, RunStart)]
    records = [e for e in events if isinstance(e, RunRecord)]
    assert [(s.label, s.pair, s.pairs) for s in starts] == [
        ("A", 0, 2),
        ("B", 0, 2),
        ("A", 1, 2),
        ("B", 1, 2),
    ]
    assert [(r.run_name, r.spec.split()[0]) for r in records] == [
        ("A · pair 1", "sequential"),
        ("B · pair 1", "pread"),
        ("A · pair 2", "sequential"),
        ("B · pair 2", "pread"),
    ]
    ab = events[-1].value
    assert [r.result for r in records] == [result for _, result in ab.runs]
    assert all(s.session.load is not None for s in starts)


def test_a_worker_killed_mid_load_ends_the_job_with_the_run_failed(tmp_path: Path):
    """The app's load is a LoadRun under a Session: a worker SIGKILLed while it reads ends
    the job at once, its run failed with the worker and signal named (the leak fixture
    checks that no worker is left)."""
    model = write_safetensors_model(tmp_path, layers=4, hidden=1024, vocab=4096, dtype="F16")
    options = LoadOptions(workers=2, chunk=4096, discard=True, cache="keep")
    deliveries: list[tuple[object, ...]] = []
    killed: list[tuple[int, float]] = []

    def killer(load: LoadRun) -> Callable[[object], None]:
        def kill_when_reading(message: object) -> None:
            if isinstance(message, ReadBatch) and not killed:
                pid = load.worker_pids()[1]
                os.kill(pid, signal.SIGKILL)
                killed.append((pid, time.monotonic()))

        return kill_when_reading

    def report(events: tuple[object, ...]) -> None:
        deliveries.append(events)
        for event in events:
            if isinstance(event, RunStart):  # before the load starts: watch its reads
                event.session.load.on_message = killer(event.session.load)

    SingleRun(open_model(model), "A", side("sequential", options)).run(report)
    ended = time.monotonic()
    events = [event for delivery in deliveries for event in delivery]
    record = next(e for e in events if isinstance(e, RunRecord))
    end = events[-1]
    assert isinstance(end, JobEnd) and killed
    pid, at = killed[0]
    assert ended - at < 2.0
    assert record.status == "failed" and record.result is not None
    assert (record.result.error or "").startswith(f"worker 1 (pid {pid}) was killed by SIGKILL")
