"""A server's own phase lines, read from its output as it runs, placed on its cold start beside
what the watch measured, checked against the bytes, and the time in no line named. The server
is tests/serve_bed.py with --phase-lines: it reads its weights for real and prints, as vLLM
0.32 does, how long its own clock says they took."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from modelmon.core import ReadyCondition, Watch, WatchResult
from modelmon.core.output.watch import render_watch

from .test_cold_start import first, last, serve


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from modelmon.core import write_safetensors_model

    return write_safetensors_model(
        tmp_path_factory.mktemp("phase-lines"), layers=2, hidden=1024, vocab=4096, seed=22
    )


def codes(result: WatchResult) -> dict[str, str]:
    return {finding.code: finding.text for finding in result.findings}


def test_its_lines_are_placed_where_its_own_clock_put_them(model: Path, tmp_path: Path) -> None:
    result, said = serve(
        model, tmp_path, "--phase-lines", "--pace-mbps", "40", "--post-s", "1", "--idle-s", "2.5"
    )
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None
    spans = {line.name: line for line in cold.lines}
    weights, engine = spans["Loading weights"], spans["init engine"]
    # Each span ends where its line was read: after the server said it, before ready.
    assert first(said, "last-byte") - 0.1 <= weights.end_s <= engine.start_s + 0.1
    assert weights.stated_s == pytest.approx(weights.seconds)
    # Its CPU-bound step: a second of CPU, longer on the clock where the cores are busy.
    assert engine.stated_s is not None and engine.stated_s >= 0.99
    assert engine.end_s <= cold.ready_s
    # What the watch measured in each: the weights' bytes in the first, CPU in the second.
    assert weights.measured is not None and weights.measured.model_bytes > 0.8 * result.model_bytes
    assert engine.measured is not None and engine.measured.cores(engine.seconds) > 0.5
    # The wait before it listened is in no line: named, and said to be waiting.
    (gap,) = [g for g in cold.gaps if g.before == "ready"]
    assert gap.after == "'init engine'" and gap.seconds == pytest.approx(2.5, abs=0.5)
    assert "is in no line: waiting" in codes(result)["unlogged-time"]  # or short of CPU, too
    # Its clock of the weights agrees with the bytes: no finding says otherwise.
    assert "server-clock" not in codes(result)
    # --json keeps them; the text shows them on its timeline.
    document = result.to_dict()["cold_start"]
    assert [line["name"] for line in document["lines"]] == ["Loading weights", "init engine"]
    assert document["gaps"][-1]["before"] == "ready"
    text = render_watch(result)
    assert "server:   its own lines (vLLM)" in text and "in no line (2." in text
    assert last(said, "post-done") <= cold.ready_s + 0.1


def test_bytes_read_before_its_clock_started_are_said(model: Path, tmp_path: Path) -> None:
    """A prefetch before the server starts its clock (vLLM's prefetch strategy): its own line
    times the reading from the page cache, the watch the bytes' arrival."""
    result, _ = serve(model, tmp_path, "--phase-lines", "--prefetch", "--pace-mbps", "40")
    text = codes(result)["server-clock"]
    assert "the server says its weights took" in text
    assert "before it started its clock" in text, text
    cold = result.cold_start
    assert cold is not None
    weights = cold.phase("weights")
    assert weights is not None and weights.seconds > 1.0


def test_a_server_with_no_lines_has_no_gaps(model: Path, tmp_path: Path) -> None:
    result, _ = serve(model, tmp_path, "--post-s", "0.3")
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None
    assert cold.lines == () and cold.gaps == ()
    assert "unlogged-time" not in codes(result)


def test_a_catastrophic_ready_line_keeps_the_timeout(tmp_path: Path) -> None:
    """(a+)+$ on a line of 50,000 a's and a '!' backtracks for ever: each search is bounded,
    and the timeout ends the watch as asked; the notes say the expression was given up."""
    script = "import sys, time; print('a' * 50000 + '!', flush=True); time.sleep(60)"
    began = time.monotonic()
    with (tmp_path / "out").open("wb") as out:
        result = Watch(
            [sys.executable, "-c", script],
            ready=ReadyCondition(line="(a+)+$"),
            ready_timeout_s=3.0,
            stdout=out.fileno(),
        ).run()
    assert time.monotonic() - began < 15
    assert result.ended_by == "ready-timeout"
    assert any("searched no more" in note for note in result.notes), result.notes


# The end of a pre-forking server: two workers forked after the weights, as gunicorn
# --preload forks them, each listening on a port of its own.
FORKED_LISTENERS = """
for _ in range(2):
    if os.fork() == 0:
        server = socket.socket()
        server.bind(('127.0.0.1', 0))
        server.listen()
        time.sleep(60)
        os._exit(0)
time.sleep(60)
"""
PRE_FORK = (
    """
import mmap, os, socket, sys, time
with open(sys.argv[1], 'rb') as model:  # mapped and touched, kept mapped: safetensors' way
    weights = mmap.mmap(model.fileno(), 0, prot=mmap.PROT_READ)
touched = sum(weights[i] for i in range(0, len(weights), 4096))
time.sleep(1.0)  # apart from the weights by more than a page scan takes on a busy machine
"""
    + FORKED_LISTENERS
)


def test_a_pre_forking_servers_workers_are_its_ready(model: Path, tmp_path: Path) -> None:
    """The process that read the weights forks the workers that listen: they share what it
    read, and their listening is the server's ready."""
    with (tmp_path / "out").open("wb") as out:
        result = Watch(
            [sys.executable, "-c", PRE_FORK, str(model)],
            model=str(model),
            ready_timeout_s=30.0,
            stdout=out.fileno(),
        ).run()
    cold = result.cold_start
    assert cold is not None and result.ended_by == "ready", (result.ended_by, cold)
    assert cold.ready_by == "listen" and cold.ready_s is not None
    weights = cold.phase("weights")
    # Never before its weights: a scan window spanning both ends them no later than ready.
    assert weights is not None and cold.ready_s >= weights.end_s


def test_a_ready_port_held_before_the_start_is_refused_at_once(tmp_path: Path) -> None:
    import socket

    from modelmon.core.errors import OptionsError

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(OptionsError, match=f"--ready-port {port}: another process listens"):
            Watch(["sleep", "30"], ready=ReadyCondition(port=port), ready_timeout_s=5).run()


def test_a_ready_line_nested_too_deeply_is_one_line() -> None:
    from modelmon.core.errors import OptionsError

    with pytest.raises(OptionsError, match="nested too deeply"):
        ReadyCondition(line="(" * 400 + "a" + ")" * 400).check()


DIRECT = """
import mmap, os, socket, sys, time
size = os.path.getsize(sys.argv[1])
descriptor = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buffer = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT wants
done = 0
while done < size:
    got = os.preadv(descriptor, [buffer], done)
    if got <= 0:
        break
    done += got
    time.sleep(0.02)  # a pace the watch's looks see
os.close(descriptor)
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen()
time.sleep(60)
"""


def test_a_server_reading_past_the_page_cache_is_timed_by_its_block_reads(
    model: Path, tmp_path: Path
) -> None:
    """O_DIRECT (Run:ai's streamer, fastsafetensors) leaves no page in the cache to arrive:
    its weights' phase is the stretch of the tree's block reads, and it is no lazy server."""
    with (tmp_path / "out").open("wb") as out:
        result = Watch(
            [sys.executable, "-c", DIRECT, str(model)],
            model=str(model),
            ready_timeout_s=60.0,
            stdout=out.fileno(),
        ).run()
    cold = result.cold_start
    assert cold is not None and cold.ready_s is not None and not cold.lazy
    weights = cold.phase("weights")
    assert weights is not None and weights.seconds > 0.5
    assert result.read_bytes >= 0.9 * result.model_bytes
    assert weights.end_s <= cold.ready_s


def test_a_stopped_process_of_the_tree_is_said_as_the_watch_waits(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank stopped mid-load (SIGSTOP: a debugger, a freezer) holds the watch as long as
    it stays so: it is said as it happens, once, and kept in the result's notes."""
    import threading

    from modelmon.core.watching import watch as watching

    monkeypatch.setattr(watching, "STOPPED_SAY_S", 0.5)
    script = (
        "import os, signal, sys, time\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    open(sys.argv[1], 'rb').read(1 << 20)\n"
        "    os.kill(os.getpid(), signal.SIGSTOP)\n"
        "    os._exit(0)\n"
        "os.waitpid(child, 0)\n"
    )
    heard: list[str] = []
    with (tmp_path / "out").open("wb") as out:
        running = Watch(
            [sys.executable, "-c", script, str(model)],
            model=str(model),
            stdout=out.fileno(),
            on_notice=heard.append,
        )
        done: list[WatchResult] = []
        thread = threading.Thread(target=lambda: done.append(running.run()))
        thread.start()
        deadline = time.monotonic() + 30
        while not heard and time.monotonic() < deadline:
            time.sleep(0.05)
        running.cancel()
        thread.join(30)
    assert len(heard) == 1 and "is stopped (SIGSTOP: a debugger, a freezer?)" in heard[0]
    assert heard[0] in done[0].notes
