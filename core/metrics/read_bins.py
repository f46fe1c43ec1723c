"""Bytes by the reads' own times: what a load read in each moment, however late its workers
reported it.

A worker reports its reads in batches (every 50 ms, forwarded by the runner), so a count of
the bytes reported in a sampler's interval is the reports' rhythm, not the load's: a report
that arrives late lands whole in one short interval, as a rate the load never read at (a
0.1 s spike of several times its true rate). ``ReadBins`` counts each read's bytes
where it happened instead, spread over its span; the throughput plot bins them, and the
sampled series of the load's own bytes (``load_mbps``) is read off them per sample interval.
"""

from __future__ import annotations

import numpy as np

MB = 1e6  # decimal, like MB/s
# Fine enough that a sample interval's edges, placed inside a bin, move its bytes by a
# thousandth of a second's worth at most: under 1 % of a 100 ms interval.
RATE_BIN_S = 0.001


class ReadBins:
    """Bytes per fixed time bin (seconds after the load started); a read spanning bins
    spreads its bytes by time overlap."""

    def __init__(self, bin_s: float = RATE_BIN_S) -> None:
        self.bin_s = bin_s
        self._bytes = np.zeros(1024, dtype=np.float64)
        self.used = 0  # one past the last bin that holds any bytes

    def add(self, starts_s: np.ndarray, ends_s: np.ndarray, lengths: np.ndarray) -> None:
        if not len(lengths):
            return
        starts_s = np.maximum(starts_s, 0.0)
        ends_s = np.maximum(ends_s, starts_s)
        first = (starts_s // self.bin_s).astype(np.int64)
        last = (ends_s // self.bin_s).astype(np.int64)
        self._reserve(int(last.max()) + 1)
        one = first == last  # nearly every read: it fits in one bin
        self._bytes += np.bincount(
            first[one], weights=lengths[one].astype(np.float64), minlength=len(self._bytes)
        )
        many = np.flatnonzero(~one)
        if len(many):
            self._spread(
                first[many],
                last[many],
                starts_s[many],
                ends_s[many],
                lengths[many].astype(np.float64),
            )

    def _spread(
        self,
        first: np.ndarray,
        last: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        spans = last - first + 1
        read = np.repeat(np.arange(len(first)), spans)
        bins = first[read] + (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans))
        lo = np.maximum(starts[read], bins * self.bin_s)
        hi = np.minimum(ends[read], (bins + 1) * self.bin_s)
        share = (hi - lo) / (ends[read] - starts[read])
        np.add.at(self._bytes, bins, lengths[read] * share)

    def _reserve(self, bins: int) -> None:
        if bins > len(self._bytes):
            grown = np.zeros(max(bins, 2 * len(self._bytes)), dtype=np.float64)
            grown[: len(self._bytes)] = self._bytes
            self._bytes = grown
        self.used = max(self.used, bins)

    def mbps(self, until_s: float, width_s: float, end_s: float | None = None) -> np.ndarray:
        """MB/s in bins of ``width_s`` (a multiple of ``bin_s``) up to ``until_s``; a copy.

        With ``end_s`` (when the reads ended), the last bin counts only the time until then,
        so a load that ends early in a bin doesn't show a fake drop at its end.
        """
        factor = max(1, round(width_s / self.bin_s))
        width_s = factor * self.bin_s
        shown = max(0, int(until_s / width_s + 1e-9))
        self._reserve(shown * factor)
        rates: np.ndarray = (
            self._bytes[: shown * factor].reshape(shown, factor).sum(axis=1) / width_s / MB
        )
        if end_s is not None and shown:
            covered = end_s - (shown - 1) * width_s
            if shown > 1 and 0 < covered < width_s / 2:
                # A sliver of a bin: its rate is noise. Fold it into the bin before.
                merged = (rates[-2] + rates[-1]) * width_s / (width_s + covered)
                rates = rates[:-1]
                rates[-1] = merged
            elif 0 < covered < width_s:
                rates[-1] *= width_s / covered
        return rates

    def read_by(self, times_s: np.ndarray) -> np.ndarray:
        """Bytes read by each of ``times_s``: whole bins before it, and the share of its own
        bin that the time has passed (the bin's bytes taken as even across it)."""
        cumulative = np.concatenate([[0.0], np.cumsum(self._bytes[: self.used])])
        at = np.clip(np.asarray(times_s, dtype=np.float64), 0.0, self.used * self.bin_s)
        whole = np.minimum((at // self.bin_s).astype(np.int64), self.used)
        inside = at - whole * self.bin_s
        own = np.where(whole < self.used, self._bytes[np.minimum(whole, len(self._bytes) - 1)], 0)
        read: np.ndarray = cumulative[whole] + own * inside / self.bin_s
        return read

    def mbps_over(self, starts_s: np.ndarray, ends_s: np.ndarray) -> np.ndarray:
        """MB/s read in each interval (start, end] (seconds after the load started); NaN for
        an interval of no length."""
        spans = np.asarray(ends_s, dtype=np.float64) - np.asarray(starts_s, dtype=np.float64)
        read = self.read_by(ends_s) - self.read_by(starts_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(spans > 0, read / spans / MB, np.nan)


def load_mbps_over(
    reads: dict[str, np.ndarray], starts_s: np.ndarray, ends_s: np.ndarray
) -> np.ndarray:
    """The load's own MB/s in each interval (start, end], by its reads' own times (``reads``
    as a session keeps them: seconds after the load started); warm-up prefetch reads are
    not the load's, as its byte count leaves them out."""
    load = ~reads["prefetch"].astype(bool)
    bins = ReadBins()
    bins.add(reads["start"][load], reads["end"][load], reads["length"][load])
    return bins.mbps_over(starts_s, ends_s)
