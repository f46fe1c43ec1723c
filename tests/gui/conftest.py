"""Models and a window for the GUI tests (pytest-qt; Qt runs offscreen, see tests/conftest.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from modelmon.core import Model, ModelFile, TensorExtent, write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.gui.state.events import CallQueue

if TYPE_CHECKING:  # imported by the fixtures that need them: tests/gui/state runs without Qt
    from PySide6.QtCore import QSettings

    from modelmon.gui.main_window import MainWindow

# Qt converts large images (the first paint of a big window) on its own GUI thread pool,
# whose idle threads hold eventfds for 30 s: the leak check would blame whichever test
# painted first. They are Qt's, not ours; without the pool Qt converts in the GUI thread.
# Read once, when the pool is first wanted: this runs before any QApplication exists.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")

# A load that takes seconds even on a fast disk: 4 KiB reads from a cold cache, told to the
# kernel as random so it doesn't read ahead, streaming through bounded buffers; one reader
# thread per worker (the default is four).
SLOW_OPTIONS = LoadOptions(
    workers=2, threads=1, chunk=4096, fadvise="random", cache="cold", discard=True
)
# On slow_model, a few tenths of a second: long enough for several 100 ms metric samples.
MEDIUM_OPTIONS = SLOW_OPTIONS.with_(chunk=64 << 10)


@pytest.fixture
def two_file_model() -> Model:
    """A model that exists only as records (no files): two shards of one fp16 tensor each."""
    files = (ModelFile("/m/a.safetensors", 2_000_000), ModelFile("/m/b.safetensors", 3_000_000))
    extents = (
        TensorExtent(
            "x", files[0].path, 8, 1_999_992, "F16", (999_996,), "other", "<f2", (999_996,)
        ),
        TensorExtent(
            "y", files[1].path, 8, 2_999_992, "F16", (1_499_996,), "other", "<f2", (1_499_996,)
        ),
    )
    return Model("/m", "safetensors", files, extents)


@pytest.fixture(scope="session")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~8 MB, 2 shards and an index: loads in a few hundred ms with worker start-up."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("small"), layers=4, hidden=256, vocab=1024, shards=2
    )


@pytest.fixture(scope="session")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~117 MB in one file: with SLOW_OPTIONS a load runs for a couple of seconds."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("slow"), layers=2, hidden=1024, vocab=16000
    )


@pytest.fixture
def malformed_file(tmp_path: Path) -> Path:
    path = tmp_path / "broken.safetensors"
    path.write_bytes(b"this is not a safetensors file, only plain bytes\n" * 20)
    return path


@pytest.fixture
def settings(tmp_path: Path) -> QSettings:
    """Settings in tmp_path, so tests never touch the user's recent files."""
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "modelmon.ini"), QSettings.Format.IniFormat)


def empty_home_discovery(home: Path):
    """Discovery in an empty home: the window's start page never searches the real one."""
    from modelmon.core import discover_models

    return lambda: discover_models(environ={"HOME": str(home)})


@pytest.fixture
def window(qtbot, settings: QSettings, tmp_path: Path) -> Iterator[MainWindow]:
    from modelmon.gui.main_window import MainWindow

    main_window = MainWindow(settings=settings, discover=empty_home_discovery(tmp_path / "home"))
    qtbot.addWidget(main_window)
    main_window.show()
    yield main_window
    main_window.close()  # stops any load: the leak check runs after this


def open_model(qtbot, window: MainWindow, path: Path) -> None:
    window.open_path(str(path))
    qtbot.waitUntil(
        lambda: window.bench.info is not None and window.state.is_open(str(path)),
        timeout=10_000,
    )


def wait_idle(qtbot, window: MainWindow, timeout_ms: int = 30_000) -> None:
    """Until the running job (a load, an A/B, the ceilings...) has ended."""
    qtbot.waitUntil(lambda: not window.bench.running, timeout=timeout_ms)


def wait_loading(qtbot, workspace, timeout_ms: int = 20_000) -> None:
    """Until the window has shown bytes of the running load (its workers are reading)."""

    def loading() -> bool:
        update = workspace.bench.live.last_update
        return update is not None and update.phase == "loading" and update.bytes_done > 0

    qtbot.waitUntil(loading, timeout=timeout_ms)


def start_slow_ab(qtbot, workspace, pairs: int) -> None:
    """An A/B of the slow load on both sides, running: its workers are reading."""
    for label in ("A", "B"):
        workspace.bench.configs.set(label, "sequential", SLOW_OPTIONS)
    workspace.bench.run_ab(pairs)
    wait_loading(qtbot, workspace)


def pump(queue: CallQueue, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Run what the state's queue holds until ``condition`` holds (the Qt-free tests' event
    loop); a test that waits too long fails rather than hanging."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the state never got there")
        queue.run_pending(wait_s=0.05)


def worker_processes() -> list[psutil.Process]:
    """Live children started by multiprocessing's spawn (workers; not the resource tracker)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "spawn_main" in " ".join(child.cmdline()) and child.status() != "zombie":
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(autouse=True)
def gc_in_gui_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """As in the app (``create_application``): cyclic garbage holding Qt objects is freed in
    the GUI thread only. An automatic collection in an export thread once freed an earlier
    test's window menus there and froze the suite (Qt's lock against the GIL)."""
    if "qtbot" not in request.fixturenames:  # tests/gui/state: no Qt
        yield
        return
    request.getfixturevalue("qapp")
    from modelmon.gui.collector import GuiThreadCollector

    collector = GuiThreadCollector()
    yield
    collector.stop()  # after the window is closed: its garbage is collected here
