"""The failure mode's lines of a recommendation's explanation: every reader mapping one shared
descriptor, which on FUSE and network mounts turns a load's reads into scattered faults.
Said as this storage showed it: slower (and how much), stopped before any byte, within the
noise of the pick (one run 1.22× slower is no failure seen), or not slower."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.output.comparison import (
    SHARED_FD_CAVEAT,
    paired_verdict,
    pick_speedup,
    search_noise,
    times_text,
    weighed_against,
    within_twice,
)
from modelmon.core.output.run_words import runs_of
from modelmon.core.output.verdict import spread_words
from modelmon.core.units import rate_text

if TYPE_CHECKING:
    from modelmon.core.measuring.recommend import Recommendation
    from modelmon.core.system.storage import StorageFacts


def failure_mode_lines(rec: Recommendation, best: float, facts: StorageFacts | None) -> list[str]:
    """What the search's run of one shared descriptor says about this storage, beside the
    ``best`` rate: slower here (and how much), stopped before any byte, within the noise of
    the pick, or not slower; [] where it was not run."""
    shared = next((c for c in rec.ranked if c.strategy == "mmap-shared-fd"), None)
    if shared is None:
        return []
    rate = shared.median_mbps
    bound = "under " if not shared.results else ""
    where = (
        "the FUSE failure mode (GCSFuse, s3fs, rclone)"
        if facts is not None and facts.is_fuse
        else "the network-filesystem failure mode"
        if facts is not None and facts.is_network
        else "the failure mode of FUSE and network mounts"
    )
    # What the read log saw: how many readers went through the one description.
    sharing = next((r.descriptor_sharing for r in shared.results if r.descriptor_sharing), None)
    who = sharing or f"{shared.readers} readers"
    if not shared.results and rate <= 0:  # stopped before one piece completed: no rate
        return [
            f"mmap with one shared descriptor ({who}) loaded nothing before it was stopped, "
            f"where the best ran at {rate_text(best)}: this is {where}. Give every reader its "
            "own descriptor." + (f" ({shared.reason})" if shared.ended == "ruled out" else "")
        ]
    if rate < best:
        speedup = pick_speedup(rec.used, shared) if shared.results else None
        ratio = speedup if speedup is not None else best / rate if rate > 0 else None
        slower = times_text(ratio) if ratio is not None else "∞×"
        unclear = _not_clearly_slower(rec, shared, speedup)
        if unclear is not None:
            return [
                f"mmap with one shared descriptor ({who}): {rate_text(rate)} here, {slower} "
                f"slower, {unclear}: not clearly slower on this storage, but it is {where}. "
                "Give every reader its own descriptor."
                + (f" ({shared.reason})" if shared.ended == "ruled out" else "")
            ]
        return [
            f"mmap with one shared descriptor ({who}): "
            f"{bound}{rate_text(rate)} here, {'at least ' if bound else ''}"
            f"{slower} slower: this is {where}. Give every reader its own "
            "descriptor." + (f" ({shared.reason})" if shared.ended == "ruled out" else "")
        ]
    return [
        f"Workers mapping one shared descriptor ({who}) were not slower here ({rate_text(rate)}, "
        f"{runs_of(shared)}): {SHARED_FD_CAVEAT}."
    ]


def _not_clearly_slower(
    rec: Recommendation, shared: Candidate, speedup: float | None
) -> str | None:
    """How the shared descriptor's gap to the pick stands to the noise where it is within
    it ("within twice a file read's usual ±11% run-to-run noise (up to 1.22×)", or the
    pairs' spread); None where it is clearly slower."""
    if speedup is None or speedup <= 0:
        return None
    verdict = paired_verdict(shared)
    if verdict is not None:
        if verdict.text != "within noise":
            return None
        return f"within the noise of their pairs ({spread_words(verdict.noise, verdict.pairs)})"
    noise = search_noise(rec, rec.used, shared)  # as the answer weighs runs not in pairs
    return weighed_against(noise, speedup) if within_twice(speedup, noise.log) else None
