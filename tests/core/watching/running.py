"""Watched programs run for real (benchmarks/watched_programs.py), the watch in a thread so a
test can wait on its state and then let the program go."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks.watched_programs import program

WAIT_S = 30.0


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@dataclass
class Running:
    """A watch running in a thread, and the watched program's files."""

    watch: Any
    folder: Path
    thread: threading.Thread
    outcome: dict[str, Any] = field(default_factory=dict)

    @property
    def hold(self) -> Path:
        return self.folder / "hold"

    def loaded(self) -> int:
        return len(list(self.hold.glob("loaded.*")))

    def release(self) -> None:
        (self.hold / "release").touch()

    def look_again(self, what: str) -> None:
        """Wait for a whole look of the watch after this moment (the one under way may have
        begun before the state the test waited for)."""
        looks = self.watch.progress().looks
        wait_until(lambda: self.watch.progress().looks > looks + 1, what)

    def result(self) -> Any:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the watch did not end"
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["result"]

    def program_report(self) -> dict[str, Any]:
        return json.loads((self.folder / "out.txt").read_text().strip().splitlines()[-1])


@contextlib.contextmanager
def watching(tmp_path: Path, make: Callable[[Path, int], Any]) -> Iterator[Running]:
    """Start ``make(folder, stdout_fd)``'s watch in a thread; release its program at the end."""
    (tmp_path / "hold").mkdir()
    with open(tmp_path / "out.txt", "w") as out:
        watch = make(tmp_path, out.fileno())
        running = Running(watch, tmp_path, threading.Thread(target=lambda: None))

        def run() -> None:
            try:
                running.outcome["result"] = watch.run()
            except BaseException as error:
                running.outcome["error"] = error

        running.thread = threading.Thread(target=run, name="test-watch")
        running.thread.start()
        try:
            yield running
        finally:
            running.release()
            if running.thread.is_alive():
                watch.cancel()
            running.thread.join(WAIT_S)


__all__ = ["program", "wait_until", "watching"]
