"""The app on SIGTERM and SIGHUP, as a session's end or a closed terminal sends them, and on
Ctrl+C: the running load is stopped cleanly (its workers ended, the device's readahead put
back, its restore record gone) and the app exits (128 + the signal's number; 0 for Ctrl+C).

The app runs offscreen in a child process (``_APP``: the window and ``StopSignals`` as
``run_app`` makes them) and starts a load with a readahead set, from a slow FUSE mount so
that the load lasts far longer than the test; the signal is sent once its workers are reading
and the readahead's restore record exists (states, not time).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model
from modelmon.core.system import locate_readahead

from ..fuse import mounted_or_skip

SLOW_NETWORK = ("--bwlimit", "1M", "--buffer-size", "0")  # the ~18 MB model: ~18 s to load
READAHEAD_STEP_KIB = 512

_APP = """
import json, os, sys
from multiprocessing import resource_tracker
from PySide6.QtCore import QSettings, QTimer
from modelmon.core import discover_models
from modelmon.core.options import LoadOptions
from modelmon.gui.app import StopSignals, create_application, show_unexpected_errors
from modelmon.gui.main_window import MainWindow

path, home, readahead = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = create_application()
settings = QSettings(os.path.join(home, "modelmon.ini"), QSettings.Format.IniFormat)
window = MainWindow(settings=settings, discover=lambda: discover_models(environ={"HOME": home}))
show_unexpected_errors(window)
window.show()
window.open_path(path)
options = LoadOptions(
    workers=2, threads=1, chunk=64 << 10, discard=True, cache="keep", readahead=readahead
)

def start_once_open():
    if window.bench.info is None:
        return
    poll.stop()
    window.bench.configs.set("A", "sequential", options)
    window.bench.run("A")

poll = QTimer()
poll.timeout.connect(start_once_open)
poll.start(20)
signals = StopSignals(app, window)
code = app.exec()
signals.stop()
children = []
for tid in os.listdir("/proc/self/task"):
    try:
        with open(f"/proc/self/task/{tid}/children") as kids:
            children += [int(kid) for kid in kids.read().split()]
    except OSError:  # a thread that ended meanwhile
        continue
tracker = resource_tracker._resource_tracker._pid
print(json.dumps({"code": code, "children": [c for c in children if c != tracker]}))
sys.exit(code)
"""


@pytest.fixture
def slow_model(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to set a FUSE mount's readahead")
    source = write_safetensors_model(tmp_path / "source", layers=2, hidden=512, vocab=2048)
    with mounted_or_skip(source.parent, tmp_path / "mnt", mount_flags=SLOW_NETWORK) as mounted:
        yield mounted / source.name


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as kids:
                    new = [int(kid) for kid in kids.read().split()]
            except OSError:
                continue
            found += new
            todo += new
    return found


def _reading(pid: int, path: Path) -> bool:
    try:
        return any(
            os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd")
        )
    except OSError:
        return False


# The signal, and the app's exit code: Ctrl+C in its terminal is the user quitting.
EXITS = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGHUP: 128 + signal.SIGHUP, signal.SIGINT: 0}


@pytest.mark.parametrize("number", list(EXITS))
def test_a_stop_signal_stops_the_load_and_puts_the_readahead_back(
    slow_model: Path, tmp_path: Path, number: int
) -> None:
    knob = locate_readahead(slow_model)
    assert knob is not None
    before = knob.read_kb()
    records = tmp_path / "records"
    records.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", MODELMON_RECORD_DIR=str(records))
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    app = subprocess.Popen(
        [sys.executable, "-c", _APP, str(slow_model), str(home), str(before + READAHEAD_STEP_KIB)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (
            any(_reading(pid, slow_model) for pid in _descendants(app.pid))
            and any(records.iterdir())
        ):
            assert app.poll() is None, app.communicate()
            assert time.monotonic() < deadline, "the app's load never started reading"
            time.sleep(0.02)
        assert knob.read_kb() == before + READAHEAD_STEP_KIB  # set for the load
        app.send_signal(number)
        out, err = app.communicate(timeout=60)
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate()
    assert app.returncode == EXITS[number], err
    outcome = json.loads(out)
    assert outcome == {"code": EXITS[number], "children": []}, err  # no worker outlived it
    assert knob.read_kb() == before
    assert list(records.iterdir()) == []  # the restore record went with the value's restore
