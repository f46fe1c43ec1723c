"""Watching a program load the open model, in the state alone (no Qt): real programs (a
Python reader using os.read, cat, readers forked over one descriptor), the live frames while
they run, and the watched run they leave with the bytes that really arrived and what was
found. The tick is the test's, as the window's timer would give it."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytest

from modelmon.core import write_safetensors_model
from modelmon.core.errors import OptionsError
from modelmon.gui.state.events import CallQueue
from modelmon.gui.state.export_format import results_csv, results_json
from modelmon.gui.state.live_run import Frame
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.model_info import ModelInfo, gather
from modelmon.gui.state.process_list import ProcessEntry, filtered
from modelmon.gui.state.results_rows import STATUS, cell_text
from modelmon.gui.state.watch_job import WatchInput, command_line, watch_request
from modelmon.gui.state.watch_live import watch_snapshot
from modelmon.gui.state.workbench import Workbench

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks.watched_programs import program

from ...core.watching.test_findings import a_result, samples

WAIT_S = 60.0
# Reads the file named by argv[1] with os.read, 1 MiB a call, to its end; then says so
# (hold/loaded) and keeps its descriptor open until told to go (hold/release).
READER = """
import os, sys, time
path, hold = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY)
while os.read(fd, 1 << 20):
    pass
open(os.path.join(hold, "loaded"), "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(hold, "release")) and time.monotonic() < deadline:
    time.sleep(0.01)
"""
# Starts a child in its own process group's tree, writes both pids, then waits (bounded).
WAITER = """
import os, subprocess, sys, time
hold = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(os.path.join(hold, "pids"), "w") as out:
    out.write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


@pytest.fixture(scope="module")
def one_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~17 MB in one file."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("watched"), layers=2, hidden=512, vocab=2048
    )


class Watching:
    """A workbench with the test as its event loop and frame tick."""

    def __init__(self, model: Path) -> None:
        self.queue = CallQueue()
        self.bench = Workbench(self.queue)
        self.info: ModelInfo = gather(str(model))
        self.bench.open(self.info)
        self.frames: list[Frame] = []
        self.snapshots: list[MetricSnapshot] = []
        self.bench.live.frame.connect(self.frames.append)
        self.bench.live.metrics.connect(self.snapshots.append)

    def watch(self, given: WatchInput) -> None:
        self.bench.watch(watch_request(given, self.info.model))
        assert self.bench.running

    def until(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            assert time.monotonic() < deadline, f"the state never got there: {self.state()}"
            self.queue.run_pending(wait_s=0.02)
            if self.bench.live.active:
                self.bench.live.tick()

    def state(self) -> str:
        """What the test waited on, for a wait that timed out."""
        update, watch = self.bench.live.last_update, self.watch_object
        progress = watch.progress() if watch is not None else None
        reads = sum(len(f.reads) for f in self.frames)
        return (
            f"running {self.bench.running}, live {self.bench.live.active}, last update "
            f"{update and (update.phase, update.bytes_done, update.bytes_total)}, {progress}, "
            f"{len(self.frames)} frames with {reads} reads"
        )

    def idle(self) -> None:
        self.until(lambda: not self.bench.running)

    @property
    def watch_object(self):  # the running Watch: what it has seen so far
        job = self.bench.runner.job
        return getattr(job, "watch", None)


def running(pid: int) -> bool:
    """The process runs (a zombie has ended: only its parent has yet to reap it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def command(*words: str) -> WatchInput:
    return WatchInput(" ".join(words), None, "", "cold", None)


def quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_a_reader_using_os_read_is_watched_live_and_lands_as_a_watched_run(
    tmp_path: Path, one_file: Path
):
    hold = tmp_path / "hold"
    hold.mkdir()
    size = one_file.stat().st_size
    w = Watching(one_file)
    w.watch(command(sys.executable, "-c", quoted(READER), "{path}", str(hold)))
    # While it holds the file open: every byte has arrived, and the frames showed it.
    w.until(lambda: (hold / "loaded").exists())
    w.until(
        lambda: (
            w.bench.live.last_update is not None
            and w.bench.live.last_update.bytes_done == size
            and w.watch_object.progress().looks >= 2
            # The access pattern's segments: drawn on the pacer's next redraw (the bytes may
            # all arrive between two redraws).
            and sum(len(f.reads) for f in w.frames) > 0
        )
    )
    assert w.bench.running and w.bench.live.shown.watched
    assert w.frames[-1].update.bytes_total == size
    (hold / "release").touch()
    w.idle()
    (record,) = w.bench.records
    watched = record.watched
    assert watched is not None and record.status == "ok", record.message
    assert watched.bytes_read == watched.arrived_bytes == size
    assert watched.cache is not None and watched.cache.cold  # verified cold first
    assert watched.files[0].opened and watched.files[0].read_position_peak == size
    assert not {f.code for f in watched.findings} & {"partial-read", "shared-descriptor"}
    assert record.run_name == "watch 1" and record.spec.startswith(sys.executable)
    # The final frame and series: the page cache full, the tree's CPU and memory sampled.
    assert w.frames[-1].update.phase == "done"
    final = w.snapshots[-1]
    assert final.final and final.maps and final.maps[-1][1][str(one_file)].min() == 1.0
    assert "workers_rss" in final.series and "load_mbps" in final.series
    assert cell_text(record, STATUS).startswith(f"ok · {size / 1e6:.2f} MB arrived")
    # Exportable like any run: JSON with the watch's own document, a CSV row.
    document = json.loads(results_json(str(one_file), w.bench.records, None, None))
    (run,) = document["runs"]
    assert run["strategy"] == "watch" and run["bytes"] == size
    assert run["watch"]["bytes_read"] == size and "arrivals" not in run["watch"]["samples"]
    assert b"\nwatch 1,W,,watch," in results_csv(w.bench.records, None)


def test_cat_arrives_whole(one_file: Path):
    w = Watching(one_file)
    w.watch(command("cat", "{path}"))
    w.idle()
    (record,) = w.bench.records
    assert record.watched is not None and record.watched.exit_code == 0
    assert record.watched.bytes_read == one_file.stat().st_size
    assert record.watched.files[0].named  # named by its arguments: made cold before it ran


def test_readers_sharing_one_descriptor_are_found_with_their_pids(tmp_path: Path, one_file: Path):
    hold = tmp_path / "hold"
    hold.mkdir()
    readers = 3
    argv = program("forked-mapping", one_file, readers=readers, hold=hold)
    w = Watching(one_file)
    w.watch(command(*(quoted(word) for word in argv)))
    w.until(lambda: len(list(hold.glob("loaded.*"))) == readers)
    looks = w.watch_object.progress().looks
    w.until(lambda: w.watch_object.progress().looks > looks + 1)  # a look at them holding it
    assert len(w.watch_object.progress().shared_pids) == readers + 1
    (hold / "release").touch()
    w.idle()
    (record,) = w.bench.records
    finding = next(f for f in record.watched.findings if f.code == "shared-descriptor")
    pids = finding.evidence["pids"]
    assert len(pids) == readers + 1
    assert f"shared descriptor (pids {', '.join(map(str, pids))})" in cell_text(record, STATUS)
    assert record.watched.files[0].mapped


def test_cancel_stops_the_command_and_its_children(tmp_path: Path, one_file: Path):
    hold = tmp_path / "hold"
    hold.mkdir()
    w = Watching(one_file)
    w.watch(command(sys.executable, "-c", quoted(WAITER), str(hold)))
    w.until(lambda: (hold / "pids").exists() and bool((hold / "pids").read_text()))
    pids = [int(pid) for pid in (hold / "pids").read_text().split()]
    assert all(psutil.pid_exists(pid) for pid in pids)
    w.bench.cancel()
    w.idle()
    (record,) = w.bench.records
    assert record.status == "cancelled"
    assert not [pid for pid in pids if running(pid)]  # nothing is left behind
    assert not any(p.pid in pids for p in psutil.Process().children(recursive=True))


def test_what_can_be_watched_is_said_in_one_line(one_file: Path):
    model = gather(str(one_file)).model
    assert command_line("python load.py {path} --x 'a b'", model) == (
        ("python", "load.py", str(one_file), "--x", "a b"),
        {},
    )
    # Words, never a shell: a pipe or a variable is just an argument.
    assert command_line("cat {path} | head $HOME", model)[0][2:] == ("|", "head", "$HOME")
    # The one grammar of cmd: and watch -- : leading NAME=VALUE words are the environment,
    # {path} stands for the model's path in any word.
    argv, env = command_line("HF_HOME={path}.cache python load.py", model)
    assert argv == ("python", "load.py") and env == {"HF_HOME": f"{one_file}.cache"}
    for text, says in (
        ("", "type the command"),
        ("python 'unclosed", "does not split"),
    ):
        with pytest.raises(OptionsError, match=says):
            command_line(text, model)
    with pytest.raises(OptionsError, match="open one first"):
        command_line("cat {path}", None)
    with pytest.raises(OptionsError, match="pick the process"):
        watch_request(WatchInput(None, None, "", "keep", None), model)
    with pytest.raises(OptionsError, match="modelmon itself"):
        watch_request(WatchInput(None, os.getpid(), "", "keep", None), model)
    request = watch_request(command("cat", "{path}"), model)
    assert request.model == (str(one_file),) and request.cache == "cold"


def test_processes_are_filtered_by_every_word():
    entries = [
        ProcessEntry(10, "python serve.py --model /m/llama", "ana"),
        ProcessEntry(11, "llama-server -m /m/q.gguf", "bo"),
        ProcessEntry(12, "bash", "ana"),
    ]
    assert [e.pid for e in filtered(entries, "llama")] == [10, 11]
    assert [e.pid for e in filtered(entries, "ANA python")] == [10]
    assert [e.pid for e in filtered(entries, "12")] == [12]
    assert filtered(entries, "") == entries


def test_a_watch_over_or_cancelled_before_the_second_sample_says_which():
    """Its metric plots' note: a cancelled watch says it was cancelled, as its key in the
    throughput plot ("watch (cancelled)") does, not that it was over."""
    one_look = {"workers_rss": (np.array([0.05]), np.array([1e9]))}
    sampled = samples(one_look, 0.1)
    over = a_result(wall_seconds=0.05, samples=sampled)
    cancelled = a_result(status="cancelled", ended_by="cancel", wall_seconds=0.05, samples=sampled)
    said = {}
    for name, watched in (("over", over), ("cancelled", cancelled)):
        snapshot = watch_snapshot("W", watched, ["/mnt/fuse/m.gguf"])
        assert snapshot is not None
        said[name] = snapshot.too_short(["workers_rss"])
    assert said == {
        "over": "took 50 ms: over before the sampler's second look (one every 100 ms; "
        "View ▸ Sample metrics every)",
        "cancelled": "was cancelled before the sampler's second look (one every 100 ms)",
    }


def test_a_watched_command_reads_as_typed_and_still_runs() -> None:
    """Walk 20: a command typed with double quotes around a script holding 'weight_map' was
    shown as ``... ['"'"'weight_map'"'"'] ...``: shlex's quoting, runnable, unreadable. A
    word holding single quotes and nothing double quotes change is double quoted; every
    line still splits back into the words that ran."""
    import shlex

    from modelmon.gui.state.watch_job import shell_words

    script = "import json, sys; d = json.load(open(sys.argv[1]))['weight_map']"
    argv = ("/venv/bin/python", "-c", script, "/models/my model/index.json")
    line = shell_words(argv)
    assert line == f"/venv/bin/python -c \"{script}\" '/models/my model/index.json'"
    for words in (argv, ("echo", "it's $HOME"), ("printf", "a\"b'c"), ("x", "")):
        assert tuple(shlex.split(shell_words(words))) == words, shell_words(words)
