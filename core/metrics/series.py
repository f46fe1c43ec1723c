"""Time series sampled together: the sampler appends a row from its thread, the GUI copies
columns from its own."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np


class RingTable:
    """The newest ``capacity`` rows of the named series (t_ns int64, one float64 value per
    series); the oldest rows are dropped first.

    The series of one sampler share their sample times, so a sample is one row: one lock and
    one write however many series there are. Memory is allocated once (8 bytes a point plus
    8 a row), so an hour at 10 Hz costs 288 KB a series however long the run goes on.
    """

    def __init__(self, names: Sequence[str], capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a series needs room for at least one point, not {capacity}")
        self.names = tuple(names)
        self._times = np.zeros(capacity, dtype=np.int64)
        self._values = np.full((capacity, len(self.names)), np.nan, dtype=np.float64)
        self._appended = 0  # ever, so the write position is appended % capacity
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return len(self._times)

    @property
    def dropped(self) -> int:
        """Rows pushed out because the table was full."""
        with self._lock:
            return max(0, self._appended - self.capacity)

    def __len__(self) -> int:
        with self._lock:
            return min(self._appended, self.capacity)

    def append(self, t_ns: int, row: Sequence[float]) -> None:
        """One value per name, in the order of ``names``."""
        with self._lock:
            position = self._appended % self.capacity
            self._times[position] = t_ns
            self._values[position] = row
            self._appended += 1

    def arrays(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Name -> copies of (times, values), oldest first."""
        with self._lock:
            if self._appended <= self.capacity:
                count = self._appended
                times, values = self._times[:count].copy(), self._values[:count].copy()
            else:
                split = self._appended % self.capacity  # the oldest row is at the write position
                times = np.concatenate((self._times[split:], self._times[:split]))
                values = np.concatenate((self._values[split:], self._values[:split]))
        return {
            name: (times.copy(), np.ascontiguousarray(values[:, column]))
            for column, name in enumerate(self.names)
        }
