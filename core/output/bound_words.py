"""Why a bucket's best load stays far below its storage bound, in the words the explanation
adds after its "Best:" line. The bound is plain GETs that discard their bytes; a load keeps
them. Where every setting measured, from one connection to many, ran near the pick's rate,
connections are not what the load lacks, and the answer says so instead of leaving a user to
read "16 connections reach 2,044 MB/s" as advice. Where the endpoint is this machine, its
server shares the load's CPUs, which also copy every byte into memory: that is said too.

And why a file's best load has a run above its bound while its median is within it: the bound
is a few plain reads of a storage whose runs vary more (``runs_above_bound``); and where a
file's best load that keeps its bytes stays under its bound, what plain readers that keep
theirs reach here (``keeping_cost``): faulting in fresh memory takes CPUs the reads, and a
FUSE mount's daemon, need too.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from typing import TYPE_CHECKING

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import BOUND_WORDS, Efficiency, beyond_spread
from modelmon.core.units import rate_text

if TYPE_CHECKING:
    from modelmon.core.measuring.recommend import Recommendation

# Under this share of its storage bound, a file's best load that keeps its bytes is set beside
# plain readers that keep theirs; those this far under the bound show what keeping costs here.
KEEPING_BELOW = 0.9
KEEPING_SHORT = 0.95

# Below this share of its bound, a bucket's best load is explained: a gap of a fifth or more
# is one a user asks about (why the bound's own setting, as a load, keeps less).
FAR_BELOW = 0.85


def is_loopback(endpoint: str) -> bool:
    """Whether requests to ``endpoint`` ("http://127.0.0.1:9000") stay on this machine."""
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def far_below_bound(
    rec: Recommendation, used: Candidate, efficiency: Efficiency | None
) -> list[str]:
    """The sentence on a bucket's best load far below its bound (none otherwise)."""
    endpoints = [f.remote.endpoint for f in rec.model.files if f.remote is not None]
    if efficiency is None or efficiency.fraction >= FAR_BELOW or efficiency.above or not endpoints:
        return []
    measured = [
        c
        for c in (*rec.ranked, *rec.unranked)
        if c.results and c.strategy.startswith("ranged") and c.role != "failure mode"
    ]
    counts = sorted({c.options.workers * c.options.threads for c in measured})
    if len(counts) < 2:  # one concurrency measured says nothing of the others
        return []
    rates = [c.median_mbps for c in measured]
    text = (
        f"The loads stayed at {rate_text(min(rates))}–{rate_text(max(rates))} ({len(measured)} "
        f"settings measured, {counts[0]} to {counts[-1]} connections), under the "
        f"{rate_text(efficiency.bound.mbps)} plain GETs reach by discarding their bytes: a "
        "load also copies every byte into memory as it reads, and more connections are not "
        "what it lacks here"
    )
    if all(is_loopback(endpoint) for endpoint in endpoints):
        text += "; the endpoint is this machine, whose server shares the load's CPUs"
    return [text + "."]


def runs_above_bound(
    rec: Recommendation, used: Candidate, efficiency: Efficiency | None
) -> list[str]:
    """Where the pick's median is within its bound but a run of it read beyond the bound's
    spread: the bound is one reading of a storage whose runs vary more (walk 24: a run of
    2246 MB/s beside "99% of the storage bound" of 1753 MB/s, nothing said). The runs under
    smaller memory limits are runs of the pick too (walk 25: "holds at ... 2512 MiB (2243
    MB/s ...)" beside a bound of 2144 MB/s). The median above the bound is said on the
    "Best:" line instead."""
    if efficiency is None or efficiency.above:
        return []
    bound = efficiency.bound
    if bound.name == "memory_fill" or bound.verified is None:  # a file storage's reads alone
        return []
    probes = rec.limit_probes.probes if rec.limit_probes is not None else ()
    probed = [p.mbps for p in probes if p.held and p.mbps]
    rates = [r.mbps for r in used.results] + probed
    over = [rate for rate in rates if beyond_spread(rate / bound.mbps, bound)]
    if not over:
        return []
    name = BOUND_WORDS.get(bound.name, bound.name.replace("_", " "))
    reads = "one read" if len(bound.runs) == 1 else f"the median of {len(bound.runs)} reads"
    # Which runs are counted, not which read faster (walk 27 read the limit's run as the fast one).
    searched = len(used.results)
    limits = f" (the search's {searched} and {len(probed)} under a smaller memory limit)"
    limits = limits if probed else ""
    return [
        f"{len(over)} of its {len(rates)} runs{limits} read faster than the {name} "
        f"({rate_text(max(over))} against {rate_text(bound.mbps)}, {reads}): this storage's "
        f"reads vary more than the bound's {reads} shows (the pick's own runs "
        f"{rate_text(min(rates))}–{rate_text(max(over))}), so the bound is a floor of what it "
        "gives; the app's Run ▸ Measure ceilings reads each setting 3 times for a firmer one."
    ]


def keeping_cost(rec: Recommendation, used: Candidate, efficiency: Efficiency | None) -> list[str]:
    """What holds a keeping best load under its storage bound, in one sentence with the
    figure that shows it (none where it is near the bound or plain keeping reads are)."""
    if efficiency is None or efficiency.above or not efficiency.keeps:
        return []
    keeping = rec.ceilings.get("keeping_read")
    bound = efficiency.bound
    if keeping is None or bound.name != "storage" or efficiency.fraction >= KEEPING_BELOW:
        return []
    if keeping.mbps >= KEEPING_SHORT * bound.mbps:
        return []
    endpoints = [f.remote.endpoint for f in rec.model.files if f.remote is not None]
    if endpoints:
        plain = "plain GETs that keep their bytes in fresh memory, as a load does, reach"
        on_this = all(is_loopback(endpoint) for endpoint in endpoints)
        sharing = "the endpoint's server, the GETs and" if on_this else "the GETs and"
    else:
        plain = "plain readers that keep their bytes in fresh memory, as a load does, read at"
        fuse = rec.storage is not None and rec.storage.is_fuse
        sharing = "the mount's FUSE daemon, the reads and" if fuse else "the reads and"
    ratio = used.median_mbps / keeping.mbps
    lead = "What holds the rest is this machine's" if ratio >= KEEPING_BELOW else "Keeping costs"
    return [
        f"{lead}: {plain} {rate_text(keeping.mbps)} here, {keeping.mbps / bound.mbps:.0%} of "
        f"the storage bound ({sharing} faulting in fresh memory share {os.cpu_count() or 1} "
        f"CPUs); the pick reads at {ratio:.2f}× that."
    ]
