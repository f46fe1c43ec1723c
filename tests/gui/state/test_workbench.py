"""The app's state without Qt: its parts say when they change, in order; work that blocks
(a load, discovery, opening a model) runs in other threads and comes back through the
state's queue; opening, the pages, the A/B banner and the kept ceilings follow the user."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import cast

import pytest

from modelmon.core import ABResult, Ceiling, Discovery, discover_models
from modelmon.core.options import LoadOptions
from modelmon.gui.state.ab_session import ABState
from modelmon.gui.state.app_state import AppState
from modelmon.gui.state.ceilings_state import CeilingsState, MemoryStore, storage_key
from modelmon.gui.state.events import CallQueue, Event
from modelmon.gui.state.model_info import gather

from ..conftest import SLOW_OPTIONS, pump


def recorder(*events: tuple[str, Event]) -> list[tuple[str, tuple[object, ...]]]:
    """(name, args) of every emission of ``events``, in order."""
    seen: list[tuple[str, tuple[object, ...]]] = []
    for name, event in events:
        event.connect(lambda *args, name=name: seen.append((name, args)))
    return seen


def test_a_run_changes_the_parts_in_order(small_model: Path):
    queue = CallQueue()
    state = AppState(queue, discover=lambda: Discovery((), (), (), 0, False))
    bench = state.bench
    state.open_path(str(small_model))
    pump(queue, lambda: bench.info is not None)
    assert state.page == "model"
    seen = recorder(
        ("running", bench.running_changed),
        ("started", bench.live.started),
        ("added", bench.runs.added),
        ("ended", bench.run_ended),
        ("status", bench.status.changed),
    )
    bench.configs.set("A", "sequential", LoadOptions(workers=2))
    bench.run("A")
    pump(queue, lambda: not bench.running)
    names = [name for name, _ in seen]
    assert names[0] == "status" and seen[0][1][0].text == "starting…"  # the old words go
    assert names[1:3] == ["running", "started"]
    assert names[-4:] == ["added", "ended", "status", "running"]
    assert seen[-1][1] == (False,)
    (record,) = bench.records
    assert record.status == "ok" and record.spec.startswith("sequential workers=2")
    assert seen[-2][1][0].text.startswith("Run A: ") and seen[-2][1][0].ended
    assert bench.shown_runs == {"A": record}
    assert bench.live.workers_qt_free


def test_opening_while_a_job_runs_needs_a_yes_unless_it_is_the_model_open(
    small_model: Path, slow_model: Path
):
    queue = CallQueue()
    state = AppState(queue, discover=lambda: Discovery((), (), (), 0, False))
    bench = state.bench
    state.open_path(str(slow_model))
    pump(queue, lambda: bench.info is not None)
    bench.configs.set("A", "sequential", SLOW_OPTIONS)
    bench.run("A")
    state.show_page("start")
    assert state.open_path(str(slow_model)) and bench.running  # just shown again
    assert state.page == "model"
    assert not state.open_path(str(small_model))  # another: the user must agree first
    state.stop_and_open(str(small_model))
    pump(queue, lambda: bench.info is not None and bench.info.path == str(small_model))
    assert not bench.running and [r.status for r in bench.sessions.take(str(slow_model)).records]
    assert bench.records == []  # the new model's own results: none yet


def test_discovery_runs_in_a_thread_and_says_when_it_is_done(tmp_path: Path):
    queue = CallQueue()
    threads: list[int] = []

    def discover() -> Discovery:
        threads.append(threading.get_ident())
        return discover_models(environ={"HOME": str(tmp_path)})

    state = AppState(queue, discover=discover)
    seen = recorder(("changed", state.discovery.changed))
    state.discovery.refresh()
    assert state.discovery.searching and seen == [("changed", ())]
    pump(queue, lambda: not state.discovery.searching)
    assert threads and threads[0] != threading.get_ident()
    assert state.discovery.discovery is not None and state.discovery.rows == []
    assert len(seen) == 2

    def broken() -> Discovery:
        raise OSError(13, "Permission denied", str(tmp_path))

    state.discovery.discover = broken
    state.discovery.refresh()
    pump(queue, lambda: not state.discovery.searching)
    assert state.discovery.error == f"{tmp_path}: Permission denied"


def test_only_the_newest_model_asked_for_opens(small_model: Path, slow_model: Path):
    queue = CallQueue()
    state = AppState(queue, discover=lambda: Discovery((), (), (), 0, False))
    opened = recorder(("loaded", state.opener.loaded))
    state.open_path(str(slow_model))
    state.open_path(str(small_model))  # asked for since: the first one's result is dropped
    pump(queue, lambda: state.bench.info is not None)
    pump(queue, lambda: not state.opener.tasks.running)
    queue.run_pending()
    assert [args[0].path for _, args in opened] == [str(small_model)]
    assert state.bench.info.path == str(small_model)


def test_a_models_ab_numbers_go_on_after_another_model_was_open(
    small_model: Path, slow_model: Path
):
    """Two A/Bs on a model, another model, the first again: its next A/B is the third, not
    a second "A/B 1", and its verdict keeps its session's name."""
    queue = CallQueue()
    state = AppState(queue, discover=lambda: Discovery((), (), (), 0, False))
    bench = state.bench
    bench.open(gather(str(small_model)))
    history = bench.ab.history
    history.start("10:00:00")
    verdict = cast(ABResult, object())
    history.finish(verdict)
    history.start("10:05:00")  # cancelled: no verdict
    bench.open(gather(str(slow_model)))
    assert history.start("10:10:00") == "A/B 1 at 10:10:00"  # the other model's first
    bench.open(gather(str(small_model)))
    assert bench.ab.history.verdict == ("A/B 1 at 10:00:00", verdict)
    assert bench.ab.history.start("10:20:00") == "A/B 3 at 10:20:00"


def test_the_ab_banner_keeps_a_verdict_through_other_jobs_and_drops_a_failure():
    ab = ABState()
    seen = recorder(("changed", ab.changed))
    ab.start("12:00:00", 2)
    assert ab.banner.kind == "running" and ab.banner.text == "A/B × 2 running…"
    ab.run_ended()
    ab.run_ended()
    ab.pair_done(0)
    ab.stopped(cancelled=True)  # between two runs: the runs it left are the two that ended
    assert ab.banner.text == (
        "A/B cancelled after 1 of 2 pairs: no verdict · its 2 runs stay in the results"
    )
    ab.start("12:01:00", 2)
    ab.stopped(cancelled=True)  # before its first run
    assert ab.banner.text == "A/B cancelled after 0 of 2 pairs: no verdict · no run had started"
    ab.other_job_started()
    assert ab.banner.kind == "none" and ab.result is None
    assert [args[0].kind for _, args in seen] == [
        "running",
        "failure",
        "running",
        "failure",
        "none",
    ]
    ab.set_pairs(500)
    assert ab.pairs == 50  # the most the compare bar offers


def test_ceilings_are_kept_per_model_and_storage(small_model: Path, slow_model: Path):
    store = MemoryStore()
    info = gather(str(small_model))
    first = CeilingsState(store)
    seen = recorder(("changed", first.changed))
    first.open(info)
    assert first.current is None
    ceiling = Ceiling("sequential_read", 480.0, (470.0, 480.0, 490.0), "cold", True, 1e9, 0.5)
    first.add(ceiling)
    assert first.current is not None and first.current.items == (ceiling,)
    assert [args[0] for _, args in seen] == [None, first.current]
    assert list(store.texts) == [storage_key(info)]
    again = CeilingsState(store)  # the next session
    again.open(gather(str(small_model)))
    assert again.current is not None and again.current.items == (ceiling,)
    again.open(gather(str(slow_model)))
    assert again.current is None  # another model: its own
    store.texts[storage_key(info)] = "{not json"  # written by something else
    again.open(info)
    assert again.current is None


@pytest.mark.parametrize("pairs", [0, 3])
def test_pairs_are_a_state_the_compare_bar_follows(pairs: int):
    ab = ABState()
    seen = recorder(("pairs", ab.pairs_changed))
    ab.set_pairs(pairs)
    assert ab.pairs == max(1, pairs)
    assert seen == ([("pairs", (1,))] if pairs == 0 else [])  # 3 is already the default
