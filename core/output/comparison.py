"""One candidate against another, in the words every output uses: how many times faster
(one figure wherever it appears), and why the more robust of two was picked."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from modelmon.core.measuring.ab import BEYOND_NOISE, Verdict
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import MIN_PAIRS
from modelmon.core.measuring.noise import SEARCH, THEIRS, Noise, unpaired_noise, usual_noise
from modelmon.core.options import MiB

if TYPE_CHECKING:
    from modelmon.core.measuring.recommend import Recommendation

# Why a fast mmap-shared-fd is still not advised: the recommendation never picks it, and a
# config that holds it (an exported A/B winner) says this beside it.
SHARED_FD_CAVEAT = (
    "this storage does not punish the pattern, but network and FUSE mounts do, so it is "
    "not recommended"
)


def shared_fd_caveat(spec: str) -> str:
    """The caveat of a configuration that maps one shared descriptor (``spec``)."""
    return f"{spec} has every worker map one shared descriptor: {SHARED_FD_CAVEAT}"


# Why one candidate is more robust than another, by the first element of
# ``Candidate.robustness`` where they differ.
ROBUSTNESS_REASONS = (
    "it gives every reader its own descriptor (one shared descriptor is the FUSE/NFS failure mode)",
    "it uses buffered reads (O_DIRECT falls back, or fails, on some filesystems)",
    "it needs no extra library, and the config file applies it",
    "it leaves the device's readahead as it is (no change to the machine)",
    "it reads with planned reads, not through a memory mapping (whose reads are page faults "
    "paced by the kernel's mapping readahead, and whose copies hold the mapped pages and the "
    "copies at once: about twice the model's bytes at peak)",
    "it uses fewer concurrent readers ({a} against {b}): less memory, fewer descriptors, "
    "kinder to neighbours",
    "it needs no hints and no warm-up pass",
    "it is the simpler strategy",
)


def spec_words(candidate: Candidate) -> str:
    """Its spec, and for a bucket's ranged reads what its settings are there: "ranged
    threads=4 chunk=16MiB (4 connections, 16 MiB GETs)" (a thread of a ranged load is a
    connection to the endpoint)."""
    if not candidate.strategy.startswith("ranged"):
        return candidate.spec
    options = candidate.options
    count = options.workers * options.threads
    part = f"{options.chunk // MiB} MiB" if options.chunk % MiB == 0 else f"{options.chunk} B"
    return f"{candidate.spec} ({count} connection{'s' if count != 1 else ''}, {part} GETs)"


def times_text(ratio: float) -> str:
    """A speed ratio as every sentence and table says it: "2.18×"."""
    return f"{ratio:.2f}×"


def paired_verdict(other: Candidate) -> Verdict | None:
    """The verdict of ``other``'s alternating pairs with the pick where they are enough to
    decide (``MIN_PAIRS``), as the search's ``decide`` takes them; None where they are fewer
    (one pair estimates no noise: all the runs of the two decide) or there were none."""
    verdict = other.verdict
    if verdict is None or verdict.pairs < MIN_PAIRS or verdict.median_ratio <= 0:
        return None
    return verdict


def pick_speedup(pick: Candidate, other: Candidate) -> float | None:
    """How many times faster ``pick`` is than ``other`` (below 1: slower). When the two ran
    in alternation (the finals) in enough pairs to decide, the median of those pairs, else
    the ratio of their medians, as the search decided it: one comparison, one figure, in
    the answer, the explanation and the ranking alike. None when either has no rate."""
    verdict = paired_verdict(other)
    if verdict is not None:  # other / pick, pair by pair
        return 1 / verdict.median_ratio
    if other.median_mbps > 0 and pick.median_mbps > 0:
        return pick.median_mbps / other.median_mbps
    return None


def robustness_reason(chosen: Candidate, other: Candidate) -> str:
    mine, theirs = chosen.robustness(), other.robustness()
    index = next((i for i, (x, y) in enumerate(zip(mine, theirs, strict=True)) if x != y), None)
    if index is None:
        return "neither is simpler: the higher median decided"
    return ROBUSTNESS_REASONS[index].format(a=chosen.readers, b=other.readers)


# Each format's own reader: what a user who changes nothing loads it with.
FORMAT_READERS = {"safetensors": "safetensors get_tensor", "gguf": "gguf reader"}


def library_read(model_format: str, *, start: bool = False) -> str:
    """The library's own read of a model of ``model_format``, naming that format's reader
    alone ("the library's own read (safetensors get_tensor)"); ``start``: capitalised, to
    begin a sentence."""
    reader = FORMAT_READERS.get(model_format)
    words = f"the library's own read ({reader})" if reader else "the library's own read"
    return words[0].upper() + words[1:] if start else words


def noise_words(noise: Noise) -> str:
    """The noise runs not in pairs were weighed against, and whose, as one figure: "the ±27%
    their runs spread", "a bucket's usual ±22% run-to-run noise" (where it stands in for a
    few runs' smaller deviation, that is not said: beside the runs' range, a user reads a
    deviation as a wrong figure, and beside a gap, as the gap's measure)."""
    return "".join(_noise_parts(noise))


def _noise_parts(noise: Noise) -> tuple[str, str]:
    """``noise_words`` as its figure and what follows it (": no configuration here ran
    twice"), so that the ratio twice the figure allows is said beside the figure."""
    if not noise.known:
        return "a noise no configuration had run twice to tell", ""
    spread = f"±{math.expm1(noise.log):.0%}"
    if noise.of == THEIRS:
        return f"the {spread} their runs spread", ""
    if noise.of == SEARCH:
        return f"the {spread} this search's repeated runs spread", ""
    usual = f"{noise.of} {spread} run-to-run noise"
    if math.isfinite(noise.measured):  # a few runs' smaller deviation: no second figure
        return usual, ""
    return usual, ": no configuration here ran twice"


def within_twice(ratio: float, log_noise: float) -> bool:
    """Whether two rates ``ratio`` apart (either way round) are within ``BEYOND_NOISE`` ×
    ``log_noise``: the noise half of the rule that weighs them (``judging``)."""
    return ratio > 0 and abs(math.log(ratio)) <= BEYOND_NOISE * log_noise


def twice_bound(ratio: float, log_noise: float, said: Callable[[float], str] = times_text) -> str:
    """The ratio twice a noise allows, as ``ratio`` stands to it: "up to 1.69×" (within),
    "over 1.22×" (beyond); "" where no noise is known. Twice is held in log space (twice
    ±30% is 1.30² = 1.69×, not 1.60×): a user reads "twice ±30%" as ±60%, so the ratio
    is said beside it (walk: "1.62×, within twice the ±30% their runs spread" read as a
    contradiction). ``said``: how the sentence says its own ratio ("18 %" of an A/B)."""
    if not math.isfinite(log_noise):
        return ""
    bound = said(math.exp(BEYOND_NOISE * log_noise))
    return f"up to {bound}" if within_twice(ratio, log_noise) else f"over {bound}"


def weighed_against(noise: Noise, ratio: float, said: Callable[[float], str] = times_text) -> str:
    """Two rates ``ratio`` apart against the noise they were weighed against, as every
    output says it: "within twice the ±30% their runs spread (up to 1.69×)", "beyond twice
    a file read's usual ±11% run-to-run noise (over 1.22×)" (``said``: as ``twice_bound``)."""
    within = "within" if within_twice(ratio, noise.log) else "beyond"
    bound = twice_bound(ratio, noise.log, said)
    figure, aside = _noise_parts(noise)
    return f"{within} twice {figure}" + (f" ({bound})" if bound else "") + aside


def apart_text(ratio: float) -> str:
    """How far apart two rates ``ratio`` apart are, either way round: "1.03× apart"."""
    return f"{times_text(max(ratio, 1 / ratio))} apart" if ratio > 0 else "∞× apart"


def counted_words(text: str) -> str:
    """A record's "1 connection(s)", "8 reader(s)" as a sentence says them: "1 connection",
    "8 readers" (the records keep their form: stored settings are parsed back by it)."""
    text = re.sub(r"\b1 (\w+)\(s\)", r"1 \1", text)
    return re.sub(r"\b(\d+) (\w+)\(s\)", r"\1 \2s", text)


def search_noise(rec: Recommendation, a: Candidate, b: Candidate) -> Noise:
    """``unpaired_noise`` of two of a search's candidates: every configuration of it that ran
    as the pool, the usual noise of its storage (a bucket's, or a file read's)."""
    remote = any(file.remote is not None for file in rec.model.files)
    pool = [c for c in (*rec.ranked, *rec.peers, *rec.unranked) if c.results]
    return unpaired_noise(a, b, pool, usual_noise(remote))
