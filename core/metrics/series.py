"""Time series sampled together: the sampler appends a row from its thread, the GUI copies
columns from its own.

Each row is one sample and records the interval it covers, (start, end]: a rate is what
happened over that interval, a level (memory, residency) is the state at its end. Where a
value is placed on a time axis follows from that (``Sampled.placed``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

INTERVAL = "interval"  # the value covers the sample's interval (a rate, a share of time)
INSTANT = "instant"  # the value is the state at the end of the sample's interval
PLACEMENT = (
    "A series 'over' an 'interval' gives, for each sample, what happened in (t_start, t_end] "
    "(a rate, a share of time), placed at t, the middle of that interval; an 'instant' series "
    "gives the state when it was measured, at t. Times in seconds after the load started."
)


@dataclass(frozen=True, slots=True)
class Sampled:
    """The rows of a table at one moment: each sample's interval and every series' values."""

    starts: np.ndarray  # int64 ns: where each sample's interval begins
    ends: np.ndarray  # int64 ns: where it ends, when the sample was taken
    values: dict[str, np.ndarray]  # name -> float64, one value per row

    def placed(self, over: Mapping[str, str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Name -> (time, values): a series over intervals at each interval's middle, an
        instant series at the end of each interval (when it was measured). ``over`` gives
        each name's kind (INTERVAL or INSTANT); a name it lacks is an instant."""
        middles = self.starts + (self.ends - self.starts) // 2
        return {
            name: ((middles if over.get(name) == INTERVAL else self.ends).copy(), values)
            for name, values in self.values.items()
        }


class RingTable:
    """The newest ``capacity`` rows of the named series (start and end ns int64, one float64
    value per series); the oldest rows are dropped first.

    The series of one sampler share their sample times, so a sample is one row: one lock and
    one write however many series there are. Memory is allocated once (8 bytes a point plus
    16 a row), so an hour at 10 Hz costs 288 KB a series however long the run goes on.
    """

    def __init__(self, names: Sequence[str], capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a series needs room for at least one point, not {capacity}")
        self.names = tuple(names)
        self._starts = np.zeros(capacity, dtype=np.int64)
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

    def append(self, t_ns: int, row: Sequence[float], start_ns: int | None = None) -> None:
        """One value per name, in the order of ``names``, for the interval (start_ns, t_ns]
        (``start_ns`` None: an instant, start = end)."""
        with self._lock:
            position = self._appended % self.capacity
            self._starts[position] = t_ns if start_ns is None else start_ns
            self._times[position] = t_ns
            self._values[position] = row
            self._appended += 1

    def last(self) -> tuple[int, int, list[float]] | None:
        """The newest row: (start ns, end ns, values); None while there is none."""
        with self._lock:
            if not self._appended:
                return None
            position = (self._appended - 1) % self.capacity
            return (
                int(self._starts[position]),
                int(self._times[position]),
                [float(v) for v in self._values[position]],
            )

    def replace_last(self, t_ns: int, row: Sequence[float], start_ns: int) -> None:
        """Rewrite the newest row (a sample folded into the one before it)."""
        with self._lock:
            if not self._appended:
                raise ValueError("no row to replace")
            position = (self._appended - 1) % self.capacity
            self._starts[position] = start_ns
            self._times[position] = t_ns
            self._values[position] = row

    def sampled(self) -> Sampled:
        """Copies of every row, oldest first."""
        with self._lock:
            if self._appended <= self.capacity:
                count = self._appended
                starts, times = self._starts[:count].copy(), self._times[:count].copy()
                values = self._values[:count].copy()
            else:
                split = self._appended % self.capacity  # the oldest row is at the write position
                starts = np.concatenate((self._starts[split:], self._starts[:split]))
                times = np.concatenate((self._times[split:], self._times[:split]))
                values = np.concatenate((self._values[split:], self._values[:split]))
        return Sampled(
            starts,
            times,
            {
                name: np.ascontiguousarray(values[:, column])
                for column, name in enumerate(self.names)
            },
        )

    def arrays(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Name -> copies of (end times, values), oldest first."""
        rows = self.sampled()
        return {name: (rows.ends.copy(), values) for name, values in rows.values.items()}


def merged(
    first: tuple[int, int, Sequence[float]],
    second: tuple[int, int, Sequence[float]],
    kinds: Sequence[str],
) -> tuple[int, int, list[float]]:
    """Two consecutive samples as one over both intervals: a series over intervals averages
    them weighted by time (a gap counts for nothing), an instant series keeps the later."""
    start, middle, end = first[0], first[1], second[1]
    weights = (middle - start, end - middle)
    row = []
    for kind, a, b in zip(kinds, first[2], second[2], strict=True):
        if kind != INTERVAL:
            row.append(b)
            continue
        known = [(w, v) for w, v in zip(weights, (a, b), strict=True) if math.isfinite(v)]
        total = sum(w for w, _ in known)
        if not known:
            row.append(math.nan)
        elif total <= 0:
            row.append(known[-1][1])
        else:
            row.append(sum(w * v for w, v in known) / total)
    return start, end, row


class Described(Protocol):
    """What the JSON says of a series (``MetricSpec``)."""

    @property
    def unit(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def over(self) -> str: ...


def floats(values: np.ndarray) -> list[float | None]:
    """JSON has no NaN: a gap in a series becomes null."""
    return [None if math.isnan(x) else round(float(x), 6) for x in values]


def series_document(
    specs: Mapping[str, Described],
    series: Mapping[str, tuple[np.ndarray, np.ndarray]],
    spans: tuple[np.ndarray, np.ndarray] | None,
) -> dict[str, Any]:
    """The series as JSON: unit, description, what the values cover ('over'), times ``t``
    as placed (``PLACEMENT``), and for a series over intervals each interval's ends. ``spans``
    (start, end seconds of each sample) must match the series' rows; None: not recorded."""
    document: dict[str, Any] = {}
    for name, (t, v) in series.items():
        spec = specs.get(name)
        if spec is None:
            continue
        entry: dict[str, Any] = {
            "unit": spec.unit,
            "description": spec.description,
            "over": spec.over,
            "t": floats(t),
            "v": floats(v),
        }
        if spec.over == INTERVAL and spans is not None and len(spans[0]) == len(t):
            entry["t_start"], entry["t_end"] = floats(spans[0]), floats(spans[1])
        document[name] = entry
    return document
