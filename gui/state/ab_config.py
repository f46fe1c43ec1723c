"""The faster side of an A/B as a config file, in the format of ``modelmon recommend``. Qt-free."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from modelmon.core import ABResult, Candidate, Ceilings, Model
from modelmon.core.configuration import program_kind
from modelmon.core.options import parse_spec
from modelmon.core.output import build_document, shared_fd_caveat
from modelmon.core.system import memory_facts
from modelmon.gui.state.formatting import ab_cache_words, ab_side_line, verdict_text


@dataclass(frozen=True, slots=True)
class ABPick:
    side: str  # "A" | "B"
    decided: bool  # False: within noise, picked on the higher median only


def pick(ab: ABResult) -> ABPick:
    """The faster side: the verdict's, or the higher median when the verdict is "within
    noise" (said so in the file's explanation)."""
    if ab.verdict.text == "A faster":
        return ABPick("A", True)
    if ab.verdict.text == "B faster":
        return ABPick("B", True)
    if ab.by == "ready":  # servers: the one ready sooner by its median
        return ABPick(
            "B" if (ab.b.median_ready_s or 0) < (ab.a.median_ready_s or 0) else "A", False
        )
    return ABPick("B" if ab.b.median_mbps > ab.a.median_mbps else "A", False)


def program_winner(ab: ABResult, chosen: ABPick) -> str | None:
    """Why the faster side cannot be exported as a config file (it is a command or an
    engine, not one of modelmon's strategies), or None."""
    spec = (ab.a if chosen.side == "A" else ab.b).spec
    if program_kind(spec) is None:
        return None
    return (
        f"The faster side, {chosen.side} ({spec}), is a program, not one of modelmon's "
        "strategies: a config file holds a strategy. Run ▸ Recommend… with your loader "
        "measures what to change in it."
    )


def measured_side(ab: ABResult, side: str) -> Candidate:
    """One side of the A/B as a measured configuration: its spec and its completed runs."""
    strategy, options = parse_spec((ab.a if side == "A" else ab.b).spec)
    results = [result for s, result in ab.runs if s == side and result.status == "ok"]
    # The A/B set the cache state of every run; a loader applies none ("keep"), as in
    # the candidates recommend() writes.
    return Candidate.of(strategy, options.with_(cache="keep"), results=results)


def explain_ab(ab: ABResult, chosen: ABPick) -> list[str]:
    pairs = min(ab.a.runs, ab.b.runs)
    start = (
        "with nothing cached locally (object storage)"
        if ab_cache_words(ab).startswith("nothing")
        else f"from a verified {ab.cache} page cache"
    )
    lines = [f"A/B × {pairs} {start}, A and B alternating: {verdict_text(ab.verdict, pairs)}."]
    for side, summary in (("A", ab.a), ("B", ab.b)):
        lines.append(f"{ab_side_line(side, summary)}.")
    lines += _gain_of_pairs(ab)
    if not chosen.decided:
        lines.append(
            f"The difference is within noise, so either is fine; this file names "
            f"{chosen.side}, whose median was higher."
        )
    caveat = shared_fd_note(ab, chosen)
    if caveat:
        lines.append(f"Caveat: {caveat}.")
    return lines


def _gain_of_pairs(ab: ABResult) -> list[str]:
    """Where the verdict's figure (the median of the pairs' ratios) and the ratio of the two
    sides' medians (the lines above it) differ by more than 5 %, which figure is which."""
    pairs = ab.verdict.median_ratio
    if ab.by == "ready":  # servers' ratios are A's time to ready over B's
        a, b = ab.b.median_ready_s or 0.0, ab.a.median_ready_s or 0.0
    else:
        a, b = ab.a.median_mbps, ab.b.median_mbps
    if pairs <= 0 or a <= 0 or b <= 0:
        return []
    medians = b / a
    if abs(math.log(pairs / medians)) <= math.log(1.05):
        return []
    return [
        f"The verdict's figure is the median of the pairs' B/A ratios ({pairs:.2f}), each of "
        "two runs made back to back; the sides' medians, of all their runs, are "
        f"{medians:.2f} B/A."
    ]


def shared_fd_note(ab: ABResult, chosen: ABPick) -> str:
    """The recommendation's caveat, when the exported side maps one shared descriptor."""
    spec = (ab.a if chosen.side == "A" else ab.b).spec
    strategy, _ = parse_spec(spec)
    return shared_fd_caveat(spec) if strategy == "mmap-shared-fd" else ""


def ab_document(
    model: Model, ab: ABResult, ceilings: Ceilings | None, config_name: str
) -> dict[str, Any]:
    """The TOML document for the A/B's faster side (touches the model's files: fingerprint)."""
    chosen = pick(ab)
    winner = measured_side(ab, chosen.side)
    loser = measured_side(ab, "B" if chosen.side == "A" else "A")
    return build_document(
        model,
        winner,
        (winner, loser),
        ceilings,
        explain_ab(ab, chosen),
        config_name=config_name,
        cache=ab.cache,
        usable_ram=memory_facts().usable,
    )
