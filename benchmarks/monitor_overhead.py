"""Monitoring overhead: the same cold load with and without the sampler, in alternating pairs.

    .venv/bin/python -m benchmarks.monitor_overhead [MODEL] [-n PAIRS] [--strategy S] [--workers W]

Two numbers, because one alone means little here:

* the median of per-pair throughput ratios (monitored / unmonitored), each pair two cold loads
  back to back, monitored first in every other pair. On a shared 2-core machine the ratios
  spread by tens of percent from pair to pair (other processes, disk state), far more than a
  3 % effect: the median is reported with its spread, as evidence, not as the verdict;
* the sampler thread's own CPU from the first sample to the last (beside the load, not its
  baselines before nor its final sample after), as a share of one core. The sampler can slow
  the load only by taking CPU (or disk time, which it does not: it reads /proc and asks
  cachestat about the page cache), so this is a direct upper bound on the overhead even when
  every loader were waiting on the one core the sampler uses.

The overhead target (≤ 3 %) is judged on the direct bound; the sampler's own target (≤ 1 % of
one core at the default 10 Hz) on the same number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.codec import to_json
from benchmarks.records import OverheadResult
from modelmon.core import write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.runs import Session, SessionResult

OVERHEAD_TARGET = 0.03  # of load throughput, judged on the sampler's CPU (the bound)
SAMPLER_TARGET = 0.01  # of one core, at the default interval
INTERVAL_S = 0.1  # the default rate


def _load(
    model: Path, strategy: str, options: LoadOptions, monitor: bool
) -> tuple[Session, SessionResult]:
    session = Session(model, strategy, options, monitor=monitor, interval_s=INTERVAL_S)
    outcome = session.run()
    if outcome.result.status != "ok" or not outcome.result.cache.cold:
        raise RuntimeError(f"a {'monitored' if monitor else 'plain'} load was not a cold ok load")
    return session, outcome


def measure(model: Path, pairs: int, strategy: str, workers: int) -> OverheadResult:
    options = LoadOptions(workers=workers, cache="cold", discard=True)
    started = time.monotonic()
    ratios: list[float] = []
    on_mbps: list[float] = []
    off_mbps: list[float] = []
    shares: list[float] = []  # sampler CPU beside the load, share of one core
    whole_shares: list[float] = []  # the whole thread (baselines, final round) / load time
    source_cpu: dict[str, float] = {}  # CPU seconds summed over the monitored loads
    samples = 0
    for pair in range(pairs):
        # Alternate which goes first, so drift within a pair doesn't favour one side.
        order = (True, False) if pair % 2 == 0 else (False, True)
        speeds: dict[bool, float] = {}
        for monitor in order:
            session, outcome = _load(model, strategy, options, monitor)
            speeds[monitor] = outcome.result.mbps
            if monitor and session.sampler is not None:
                shares.append(session.sampler.sampling_cpu_share)
                whole_shares.append(outcome.sampler_cpu_seconds / outcome.result.seconds)
                samples += outcome.samples_taken
                for name, seconds in session.sampler.source_seconds.items():
                    source_cpu[name] = source_cpu.get(name, 0.0) + seconds
        ratios.append(speeds[True] / speeds[False])
        on_mbps.append(speeds[True])
        off_mbps.append(speeds[False])
    median_ratio = statistics.median(ratios)
    bound = statistics.median(shares)
    return OverheadResult(
        model=str(model),
        strategy=strategy,
        workers=workers,
        pairs=pairs,
        seconds=round(time.monotonic() - started, 1),
        median_mbps_monitored=statistics.median(on_mbps),
        median_mbps_unmonitored=statistics.median(off_mbps),
        ratios=tuple(round(r, 4) for r in ratios),
        median_ratio=round(median_ratio, 4),
        overhead=round(1 - median_ratio, 4),  # measured; noisy (see ratios)
        # The direct bound: CPU the sampler took while the load ran, share of one core.
        sampler_core_share_median=round(bound, 4),
        sampler_core_shares=tuple(round(s, 4) for s in shares),
        # The thread's whole life (baselines before the load, final sample and residency
        # round after it) over the load's time: an upper bound, beside the direct one.
        sampler_thread_share_median=round(statistics.median(whole_shares), 4),
        source_cpu_us_per_sample={
            name: round(seconds / max(1, samples) * 1e6, 1) for name, seconds in source_cpu.items()
        },
        overhead_target=OVERHEAD_TARGET,
        sampler_target=SAMPLER_TARGET,
        target_met=bound <= OVERHEAD_TARGET and bound <= SAMPLER_TARGET,
    )


def default_model(folder: Path) -> Path:
    """~1.2 GB fp16 in 2 shards: 11 layers of TinyLlama's shapes. Loads of about a second
    locally (≥ 10 samples each), so 9 pairs take about a minute."""
    return write_safetensors_model(
        folder, layers=11, hidden=2048, intermediate=5632, vocab=32000, shards=2
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", nargs="?", help="default: a generated ~1.2 GB fp16 model")
    parser.add_argument("-n", type=int, default=9, help="pairs (default 9)")
    parser.add_argument("--strategy", default="sequential")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as scratch:
        model = Path(args.model) if args.model else default_model(Path(scratch))
        print(json.dumps(to_json(measure(model, args.n, args.strategy, args.workers)), indent=2))


if __name__ == "__main__":
    main()
