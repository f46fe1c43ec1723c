"""Bytes by the reads' own times: the throughput plot's bins and the load's own MB/s in each
sample interval."""

from __future__ import annotations

import numpy as np
import pytest

from modelmon.core.metrics.read_bins import ReadBins, load_mbps_over


def test_a_read_spanning_bins_spreads_its_bytes_by_time_overlap():
    bins = ReadBins(bin_s=0.01)
    # 3000 bytes from 5 ms to 35 ms: 5 ms in bin 0, 10 ms in bins 1 and 2, 5 ms in bin 3.
    bins.add(np.array([0.005]), np.array([0.035]), np.array([3000]))
    mbps = bins.mbps(until_s=0.04, width_s=0.01)
    assert mbps * 0.01 * 1e6 == pytest.approx([500, 1000, 1000, 500])


def test_bins_keep_every_byte_and_coarser_bins_sum_finer_ones():
    rng = np.random.default_rng(1)
    starts = rng.uniform(0, 2, 5000)
    ends = starts + rng.uniform(0, 0.05, 5000)
    lengths = rng.integers(4096, 1 << 20, 5000)
    bins = ReadBins(bin_s=0.01)
    bins.add(starts, ends, lengths)
    for width in (0.01, 0.05, 0.1):
        total = bins.mbps(until_s=2.1, width_s=width).sum() * width * 1e6
        assert total == pytest.approx(lengths.sum())


def test_a_sample_interval_gets_the_bytes_read_in_it_whatever_its_edges():
    """Reads of 1 MB every 10 ms (100 MB/s) with a 5 MB warm-up read beside them; intervals
    whose edges fall inside bins, as a sampler's do."""
    starts = np.arange(100) * 0.01
    reads = {
        "start": np.append(starts, 0.0),
        "end": np.append(starts + 0.01, 0.5),
        "length": np.append(np.full(100, 1_000_000), 5_000_000),
        "prefetch": np.append(np.zeros(100, dtype=bool), True),
    }
    edges = np.array([0.0003, 0.1007, 0.2501, 0.9999])
    rates = load_mbps_over(reads, edges[:-1], edges[1:])
    assert rates == pytest.approx([100.0, 100.0, 100.0], rel=1e-9)
    # Before the load and after it nothing was read; an interval of no length has no rate.
    rates = load_mbps_over(reads, np.array([-1.0, 1.0, 0.5]), np.array([0.0, 2.0, 0.5]))
    assert rates[:2] == pytest.approx([0.0, 0.0]) and np.isnan(rates[2])
