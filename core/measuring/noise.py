"""The run-to-run noise that runs not in alternating pairs are told apart by: how far their
runs spread, and the storage's usual noise that stands for it, and is never undercut, where
few runs tell it (a file read's, a bucket's). ``judging.apart_unpaired`` is the rule that
weighs them.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from modelmon.core.measuring.candidate import Candidate


def run_noise(*candidates: Candidate) -> float:
    """The run-to-run noise of ``candidates``' runs, unpaired: the median absolute deviation
    of every run's log rate from its own candidate's median; infinite without two runs of
    one candidate to spread."""
    deviations = [
        abs(math.log(run.mbps / c.median_mbps))
        for c in candidates
        if len(c.results) > 1
        for run in c.results
        if run.mbps > 0
    ]
    return statistics.median(deviations) if deviations else math.inf


@dataclass(frozen=True)
class Noise:
    """The run-to-run noise that runs not in pairs are told apart by: the median absolute
    deviation of log rates (infinite where none is known), and ``of`` whose runs it is
    (``THEIRS``, ``SEARCH``, or the storage's usual noise). ``measured``: where the usual
    noise stands for a smaller spread a few runs showed, that spread (else infinite)."""

    log: float = math.inf
    of: str = ""
    measured: float = math.inf

    @property
    def known(self) -> bool:
        return math.isfinite(self.log)


THEIRS, SEARCH = "their runs", "this search's runs"
# A cold file read's usual distance from its configuration's median (the median absolute
# deviation of log rates). Cold loads of a 2.5 GB model here: 1,793, 1,864 and 2,280 MB/s
# of one configuration (deviations 0.04 and 0.20); 2,103, 1,745 and 2,194 of another.
# Runs not in pairs are told apart beyond twice this, never beyond twice less.
FILE_NOISE = Noise(0.10, "a file read's usual")
# A bucket run's usual distance from its configuration's median (the median absolute
# deviation of log rates). On loopback, 3 runs each of 8 configurations gave 1-13 %
# (docs/benchmarks/objects.md), but runs of a 2.5 GB model spread further between searches:
# a plain download at 837, 1,154 and 1,385 MB/s in three alternations (a deviation of 0.18),
# and one setting's median at 1,351 then 1,004 MB/s in two searches minutes apart. Runs not
# in pairs are told apart beyond twice this, never beyond twice less.
BUCKET_RUN_NOISE = 0.20
BUCKET_NOISE = Noise(BUCKET_RUN_NOISE, "a bucket's usual")


def usual_noise(remote: bool) -> Noise:
    """The storage's usual noise: a bucket's (``remote``), else a file read's."""
    return BUCKET_NOISE if remote else FILE_NOISE


def unpaired_noise(a: Candidate, b: Candidate, pool: list[Candidate], usual: Noise) -> Noise:
    """The noise two candidates' unpaired runs are weighed against: their own runs' spread;
    where neither ran twice, that of every configuration of the search that did (the same
    storage in the same minutes); where none did, the storage's ``usual``. Never less than
    the usual: a spread of two or three runs is itself a guess, and a storage drifts between
    runs that are not paired more than runs in a row show."""
    own = run_noise(a, b)
    found = Noise(own, THEIRS) if math.isfinite(own) else Noise(run_noise(*pool), SEARCH)
    if not found.known:
        return usual
    if usual.known and usual.log > found.log:
        return dataclasses.replace(usual, measured=found.log)
    return found
