"""Every model file's page arrivals (``arrival.FileArrival``, one per file), scanned in
rounds: the arrivals each round found, the windows they fall in, and what the rounds cost
this process's CPU. A file that cannot be scanned is named, not fatal: its reason is kept.
"""

from __future__ import annotations

import time

from modelmon.core.watching.arrival import FileArrival
from modelmon.core.watching.files import ModelFile
from modelmon.core.watching.page_runs import Arrivals


class ArrivalTracker:
    """Every model file's arrivals, and what a scan round cost."""

    def __init__(self) -> None:
        self.files: dict[int, FileArrival] = {}
        self.windows: list[tuple[int, int, int]] = []  # (start_ns, end_ns, bytes) per scan
        # The same of pages seen for the first time: a page back after an eviction (DAMON's,
        # a memory limit's) is the model's bytes read again, not more of the model.
        self.first_windows: list[tuple[int, int, int]] = []
        self.cpu_ns = 0  # of all scans
        self.last_round_cpu_ns = 0
        self.failed: dict[int, str] = {}  # file -> why it cannot be watched

    def add(self, model_file: ModelFile, now_ns: int) -> None:
        try:
            tracked = FileArrival(model_file)
        except OSError as error:
            self.failed[model_file.index] = f"cannot scan {model_file.path}: {error.strerror}"
            return
        try:
            tracked.baseline(now_ns)
        except OSError as error:
            tracked.close()
            self.failed[model_file.index] = f"cannot scan {model_file.path}: {error.strerror}"
            return
        self.files[model_file.index] = tracked

    def round(self, everything: bool = False) -> list[Arrivals]:
        started = time.thread_time_ns()
        found: list[Arrivals] = []
        for tracked in self.files.values():
            try:
                arrivals = tracked.scan(everything)
            except OSError as error:  # the file went away under the program
                self.failed[tracked.file.index] = f"cannot scan {tracked.file.path}: {error}"
                continue
            if arrivals is not None:
                found.append(arrivals)
        total = sum(a.bytes for a in found)
        if total:
            start, end = min(a.start_ns for a in found), max(a.end_ns for a in found)
            self.windows.append((start, end, total))
            fresh = sum(a.first_bytes for a in found)
            if fresh:
                self.first_windows.append((start, end, fresh))
        self.last_round_cpu_ns = time.thread_time_ns() - started
        self.cpu_ns += self.last_round_cpu_ns
        return found

    def arrived_bytes(self) -> int:
        return sum(f.arrived_bytes for f in self.files.values())

    def close(self) -> None:
        for tracked in self.files.values():
            tracked.close()
