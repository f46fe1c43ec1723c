"""File ▸ Watch a command… / Watch a process… in the window: the dialog, the live plots the
loads have (throughput, access pattern, page cache, metrics) filling during the watch, the
watched run in the results table, Esc stopping the command, closing the window mid-watch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from modelmon.core import Ceiling, Ceilings, write_safetensors_model
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.results_rows import CEILING_COLUMN, MBPS, STATUS, cell_text
from modelmon.gui.widgets.watch_dialog import WatchDialog

from .conftest import empty_home_discovery, open_model, wait_idle

# Reads argv[1] with os.read to its end, then holds it open until hold/release appears.
READER = """
import os, sys, time
path, hold = sys.argv[1], sys.argv[2]
go = os.path.join(hold, "go")
deadline = time.monotonic() + 60
while len(sys.argv) > 3 and not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.01)
fd = os.open(path, os.O_RDONLY)
while os.read(fd, 1 << 20):
    pass
open(os.path.join(hold, "loaded"), "w").close()
while not os.path.exists(os.path.join(hold, "release")) and time.monotonic() < deadline:
    time.sleep(0.01)
"""


@pytest.fixture(scope="module")
def one_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(
        tmp_path_factory.mktemp("watched"), layers=2, hidden=512, vocab=2048
    )


def running(process: psutil.Process) -> bool:
    """It runs (a zombie has ended: only its parent has yet to reap it)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def answer_watch(monkeypatch, fill) -> list[WatchDialog]:
    """Answer File ▸ Watch…'s dialog with ``fill(dialog)``, then Watch."""
    shown: list[WatchDialog] = []

    def run(dialog: WatchDialog) -> int:
        shown.append(dialog)
        fill(dialog)
        dialog.accept()
        return dialog.result()

    monkeypatch.setattr(WatchDialog, "exec", run)
    return shown


def test_a_watched_command_fills_the_live_plots_and_the_results(
    qtbot, window: MainWindow, one_file: Path, tmp_path: Path, monkeypatch
):
    hold = tmp_path / "hold"
    hold.mkdir()
    open_model(qtbot, window, one_file)
    assert window.menus.watch_command_action.isEnabled()
    line = f"{sys.executable} -c {quoted(READER)} {{path}} {hold}"
    shown = answer_watch(monkeypatch, lambda dialog: dialog.command.setText(line))
    window.menus.watch_command_action.trigger()
    assert shown and window.bench.running
    workspace = window.workspace
    size = one_file.stat().st_size
    qtbot.waitUntil(lambda: (hold / "loaded").exists(), timeout=30_000)
    # During the watch, the plots a load has: bytes that arrived, where, the tree's metrics.
    qtbot.waitUntil(lambda: workspace.throughput.point_count("W") > 0, timeout=30_000)
    qtbot.waitUntil(lambda: workspace.access.segment_count > 0, timeout=30_000)
    window.show_model_tab(1)  # CPU & memory: the watched tree's
    qtbot.waitUntil(lambda: workspace.cpu.point_count("W") > 0, timeout=30_000)
    qtbot.waitUntil(lambda: workspace.memory.point_count("W") > 0, timeout=30_000)
    assert window.bench.running and "Watch: " in workspace.progress.bar.text()
    assert [name for name, _ in workspace.throughput.keys] == ["watch"]
    (hold / "release").touch()
    wait_idle(qtbot, window)
    (record,) = window.bench.records
    assert record.watched is not None and record.watched.bytes_read == size
    table = workspace.results.results
    assert table.rowCount() == 1
    assert table.cell_text(record, STATUS).startswith(f"ok · {size / 1e6:.2f} MB arrived")
    assert table.cell_text(record, MBPS) != "–"
    # Held against a bound it outran (a storage ceiling of 1 MB/s), a watch says so as a
    # load does, never "342 %".
    slow = Ceilings(str(one_file), (Ceiling("storage", 1.0, (1.0,), "a slow disk", True),))
    assert cell_text(record, CEILING_COLUMN, slow) == "above its bound"
    assert window.messages.message().startswith(f"{record.spec}: {size / 1e6:.2f} MB")
    assert window.menus.json_action.isEnabled()
    # Its blocks, from when their bytes arrived, in the Blocks tab, as a load's are.
    blocks = workspace.blocks
    assert blocks.run_labels == ["W"] and not blocks.note.text(), blocks.note.text()
    assert [b.name for b in record.arrivals] == blocks.order
    assert blocks.caption.text().startswith("watch: first block "), blocks.caption.text()
    window.show_model_tab(2)  # Disk & page cache: the model's pages as the last look saw them
    # (all in after the read, unless a host's proactive reclaim, as DAMON's here, took some
    # of the fresh pages before that look: the panel says what the look saw).
    samples = record.watched.samples
    assert samples is not None and samples.residency_maps
    (last,) = samples.residency_maps[-1][1].values()
    assert 0 < float(last.mean()) <= 1
    assert workspace.residency.title == f"Page cache — watch: {float(last.mean()):.0%} resident"
    path = tmp_path / "watched.json"
    with qtbot.waitSignal(workspace.exporter.finished, timeout=20_000) as done:
        workspace.exporter.export_results(str(path))
    assert done.args[0], done.args[1]
    assert '"strategy": "watch"' in path.read_text()
    # A plot of the watch: as PNG, the screen's picture; as SVG or PDF, drawn from what
    # the watch saw (tests/gui/test_run_kind_exports.py looks inside each file).
    for name in ("watched.png", "watched.svg", "watched.pdf"):
        with qtbot.waitSignal(workspace.exporter.finished, timeout=20_000) as done:
            workspace.exporter.export_plot("Throughput", str(tmp_path / name))
        assert done.args[0] and (tmp_path / name).stat().st_size > 0, done.args[1]


def test_a_bad_command_line_is_said_in_the_dialog(
    qtbot, window: MainWindow, one_file: Path, monkeypatch
):
    open_model(qtbot, window, one_file)
    problems: list[str] = []

    def run(dialog: WatchDialog) -> int:
        dialog.command.setText("python 'unclosed")
        dialog.accept()  # refused: the dialog stays, saying why
        problems.append(dialog.problem.text())
        dialog.reject()
        return dialog.result()

    monkeypatch.setattr(WatchDialog, "exec", run)
    window.menus.watch_command_action.trigger()
    assert problems and "does not split into words" in problems[0]
    assert not window.bench.running and window.bench.records == []


def test_a_process_is_picked_from_the_list_and_watched(
    qtbot, window: MainWindow, one_file: Path, tmp_path: Path, monkeypatch
):
    hold = tmp_path / "hold"
    hold.mkdir()
    open_model(qtbot, window, one_file)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(one_file), str(hold), "wait"],
        stdout=subprocess.DEVNULL,
    )
    try:

        def pick(dialog: WatchDialog) -> None:
            qtbot.waitUntil(lambda: bool(dialog.processes.entries), timeout=20_000)
            dialog.filter.setText(f"{reader.pid} {hold}")
            assert [entry.pid for entry in dialog.shown] == [reader.pid]
            assert not dialog.cache.isEnabled()  # attached: the cache is as found
            dialog.table.setCurrentCell(0, 0)

        answer_watch(monkeypatch, pick)
        window.menus.watch_process_action.trigger()
        assert window.bench.running

        def looks() -> int:
            watch = getattr(window.bench.runner.job, "watch", None)
            return watch.progress().looks if watch is not None else 0

        qtbot.waitUntil(lambda: looks() >= 1, timeout=20_000)
        (hold / "go").touch()
        qtbot.waitUntil(lambda: (hold / "loaded").exists(), timeout=30_000)
        # Attached, the cache is as found (this file may be cached already): the watch
        # counts what the program read by its descriptor's position, seen at a look.
        seen = looks()
        qtbot.waitUntil(lambda: looks() > seen + 1, timeout=20_000)
        (hold / "release").touch()
        wait_idle(qtbot, window)
    finally:
        for name in ("go", "release"):  # it ends whatever happened above
            (hold / name).touch()
        reader.wait(30)
    (record,) = window.bench.records
    watched = record.watched
    assert watched is not None and watched.attached and watched.pid == reader.pid
    assert watched.bytes_read == one_file.stat().st_size
    assert record.spec.startswith(f"pid {reader.pid} (")


def test_escape_stops_the_watched_command_and_closing_leaves_nothing(
    qtbot, settings, tmp_path: Path, one_file: Path, monkeypatch
):
    window = MainWindow(settings=settings, discover=empty_home_discovery(tmp_path))
    qtbot.addWidget(window)
    window.show()
    open_model(qtbot, window, one_file)
    hold = tmp_path / "hold"
    hold.mkdir()
    line = f"{sys.executable} -c {quoted(READER)} {{path}} {hold}"
    answer_watch(monkeypatch, lambda dialog: dialog.command.setText(line))
    window.watch()
    qtbot.waitUntil(lambda: (hold / "loaded").exists(), timeout=30_000)
    watched = [p for p in psutil.Process().children(recursive=True) if str(hold) in p.cmdline()]
    assert watched
    qtbot.keyClick(window, "\x1b")  # Esc: Run ▸ Cancel
    wait_idle(qtbot, window)
    (record,) = window.bench.records
    assert record.status == "cancelled"
    assert not [p for p in watched if running(p)]
    # Again, and this time the window closes mid-watch: the command goes with it.
    (hold / "loaded").unlink()
    window.watch()
    qtbot.waitUntil(lambda: (hold / "loaded").exists(), timeout=30_000)
    watched = [p for p in psutil.Process().children(recursive=True) if str(hold) in p.cmdline()]
    window.close()
    assert not window.bench.running
    assert not [p for p in watched if running(p)]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        # A failed command: why, and the last line it wrote to its errors.
        (
            f"{sys.executable} -c \"import sys; sys.exit('no model: ' + sys.argv[1])\" {{path}}",
            ": exited with 1; its last error line: no model: ",
        ),
        # A command that never opens the model: failed, as the CLI's exit 6.
        ("sleep 0.3", ": it never opened or mapped a file of the open model"),
    ],
    ids=["failed", "no model"],
)
def test_a_watch_that_fails_says_why_not_that_nothing_was_found(
    qtbot, window: MainWindow, one_file: Path, monkeypatch, line: str, said: str
):
    open_model(qtbot, window, one_file)
    answer_watch(monkeypatch, lambda dialog: dialog.command.setText(line))
    window.menus.watch_command_action.trigger()
    wait_idle(qtbot, window)
    (record,) = window.bench.records
    assert record.status == "failed"
    message = window.messages.message()
    assert said in message and "nothing to fix" not in message, message
    assert window.workspace.results.results.cell_text(record, STATUS).startswith("failed")


def test_a_watched_servers_cold_start_draws_its_ranks_and_phases(
    qtbot, window: MainWindow, tmp_path: Path, monkeypatch
):
    model = write_safetensors_model(tmp_path / "served", layers=2, hidden=512, vocab=4096)
    bed = Path(__file__).resolve().parents[1] / "serve_bed.py"
    open_model(qtbot, window, model)
    line = (
        f"{sys.executable} {quoted(str(bed))} {{path}} --ranks 2 --mode slice "
        "--pace-mbps 10 --post-s 0.3"
    )
    answer_watch(monkeypatch, lambda dialog: dialog.command.setText(line))
    window.menus.watch_command_action.trigger()
    wait_idle(qtbot, window)
    (record,) = window.bench.records
    cold = record.watched.cold_start if record.watched else None
    assert cold is not None and cold.ready_s is not None and len(cold.ranks) == 2
    plot = window.workspace.cold_start
    shown = plot.shown
    assert shown is not None and [lane.label.split(" ·")[0] for lane in shown.lanes] == [
        "rank 0",
        "rank 1",
    ]
    assert [name for name, _, _ in shown.phases] == ["before", "weights", "after"]
    assert shown.ready_s == cold.ready_s and shown.title.startswith("watch 1: ready in")
    assert plot.axis.names == [lane.label for lane in shown.lanes]
    assert plot.note.isHidden()
    window.bench.clear_run_plots()
    assert plot.shown is None and not plot.note.isHidden()
