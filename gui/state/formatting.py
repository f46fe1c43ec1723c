"""Numbers as the window shows them. Qt-free; decimal units like the engine (1 MB = 10^6 B)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from modelmon.core import ABResult, CacheState, Ceilings, ReadStats, Verdict
from modelmon.core.measuring import SideSummary
from modelmon.core.output import counted, human_bytes, median_words, shift_words, verdict_words
from modelmon.core.output import rate_text as engine_rate_text
from modelmon.core.runs import BlockTiming, blocks_ready_s, half_blocks_ready_s

__all__ = [
    "ab_detail_lines",
    "ab_side_line",
    "cache_state_text",
    "ceilings_text",
    "duration_text",
    "human_bytes",
    "nice_ceiling",
    "percent_text",
    "rate_text",
    "short_block_name",
    "verdict_text",
]

CEILING_NAMES = {
    "storage": "storage",
    "memory_fill": "memory fill",
    "sequential_read": "sequential",
    "parallel_read": "parallel",
    "parallel_read_warm": "warm",
    "memcpy": "memcpy",
    "keeping_read": "keeping",
}


def percent_text(fraction: float) -> str:
    if math.isnan(fraction):
        return "? %"
    value = fraction * 100
    return f"{value:.1f} %" if value < 10 else f"{value:.0f} %"


def cache_state_text(cache: CacheState) -> str:
    """The verified page-cache state a run started from: "cold ✓ 0.0 %", "NOT cold 37 %"..."""
    if cache.method == "none":
        return "not measured"
    if cache.nothing_local:
        return "nothing cached locally"
    if cache.unseen:  # the kernel hides it from this user: nothing is known
        return (
            "as found, unknown" if cache.requested == "keep" else f"{cache.requested}, unverified"
        )
    resident = percent_text(cache.resident_before)
    if cache.requested == "cold":
        if cache.cold:
            return f"cold ✓ {resident}"
        return f"NOT cold {resident}"
    if cache.requested == "warm":
        return "warm ✓" if cache.warm else f"NOT warm {resident}"
    return f"as found, {resident} cached"


def cache_tip(cache: CacheState) -> str:
    """A cache cell's tip: what was asked, and what was measured (or that nothing could be)."""
    if cache.unseen:
        return f"requested {cache.requested}; its page cache is hidden from this user"
    return (
        f"requested {cache.requested}; {cache.resident_before:.1%} resident before, "
        f"{cache.resident_after:.1%} after ({cache.method})"
    )


def requests_words(stats: ReadStats) -> str:
    """A bucket load's GETs in a few words: "24 GETs · first byte 2.1 ms median, 8.0 ms p99
    · 0 retries · 0 throttled"."""

    def ms(seconds: float) -> str:
        return "?" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"

    return (
        f"{stats.requests} GET{'s' if stats.requests != 1 else ''} · first byte "
        f"{ms(stats.ttfb_median_s)} median, {ms(stats.ttfb_p99_s)} p99 · "
        f"{stats.retries} retr{'y' if stats.retries == 1 else 'ies'} · "
        f"{stats.throttles} throttled"
    )


def requests_tip(stats: ReadStats) -> str:
    """Each connection's share: what one connection carried, and how fast while busy; how
    the bucket's throttles paced the reads, where they did."""
    lines = [
        f"{stats.requests} ranged GETs, {stats.bytes:,} bytes; {stats.retries} retried "
        f"({stats.resumed} resumed mid-body), {stats.throttles} throttled (503 SlowDown, 429)"
    ]
    lines += [
        f"connection {c.connection}: {c.requests} GETs, {human_bytes(c.bytes)}, "
        f"{engine_rate_text(c.throughput / 1e6, grouped=True)} while busy"
        for c in stats.connections
        if c.requests
    ]
    if stats.adapted:  # the bucket's throttles moved the pace
        first, last = stats.pace[0], stats.pace[-1]
        fewest = min(point.connections for point in stats.pace)
        largest = max(point.part for point in stats.pace) / (1 << 20)
        lines.append(
            f"paced by the throttles: {first.connections} connections × "
            f"{first.part / (1 << 20):g} MiB at the start, {fewest} at the fewest, parts up "
            f"to {largest:g} MiB; {last.connections} × {last.part / (1 << 20):g} MiB at the end"
        )
    return "\n".join(lines)


def rate_text(mbps: float) -> str:
    """The window's rates: from 10 GB/s (a page cache's) in GB/s, else the engine's words
    (``modelmon.core.output.rate_text``: kB/s under 1 MB/s)."""
    if mbps >= 10_000:
        return f"{mbps / 1000:.1f} GB/s"
    return engine_rate_text(mbps)


def duration_text(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "–"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def verdict_text(verdict: Verdict, pairs: int) -> str:
    """The verdict in words (see ``core.output.verdict``), as a label's sentence."""
    words = verdict_words(verdict, pairs)
    return words[0].upper() + words[1:]


def ab_side_line(side: str, summary: SideSummary) -> str:
    """ "A: sequential: 480 MB/s (median of 3 runs, 470 MB/s–490 MB/s)"; "(1 run)" of one; a
    server's: "A: cmd: vllm serve …: ready in 41.2 s (median of 3 runs, 40.9–42.0 s)"."""
    if summary.median_ready_s is not None:
        span = f"{summary.min_ready_s or 0:.1f}–{summary.max_ready_s or 0:.1f} s"
        runs = median_words(counted(summary.runs, "run"), summary.runs, span)
        return f"{side}: {summary.spec}: ready in {summary.median_ready_s:.1f} s ({runs})"
    span = f"{rate_text(summary.min_mbps)}–{rate_text(summary.max_mbps)}"
    runs = median_words(counted(summary.runs, "run"), summary.runs, span)
    return f"{side}: {summary.spec}: {rate_text(summary.median_mbps)} ({runs})"


def ab_detail_lines(ab: ABResult) -> list[str]:
    """Each side's median and range, and the pairs' ratios: what the verdict was made from."""
    sides = [ab_side_line(side, summary) for side, summary in (("A", ab.a), ("B", ab.b))]
    if ab.by == "ready":
        ratios = ", ".join(f"{r:.2f}" for r in ab.ratios)
        return [
            *sides,
            f"pairs, A's time to ready over B's: {ratios}; {ab_cache_words(ab)}",
            f"where: {shift_words(ab.phases)}",
        ]
    return [*sides, f"pairs B/A: {', '.join(f'{r:.2f}' for r in ab.ratios)}; {ab_cache_words(ab)}"]


def ab_cache_words(ab: ABResult) -> str:
    """The state the A/B's runs started from: "cache: cold", or, for a bucket, that there
    is no local cache to speak of."""
    loads = [result for _side, result in ab.runs]
    if loads and all(result.cache.nothing_local for result in loads):
        return "nothing cached locally (object storage)"
    return f"cache: {ab.cache}"


def ceilings_text(ceilings: Ceilings) -> str:
    """ "ceilings: storage 1,300 MB/s · memory fill 2,100 MB/s · sequential 480 MB/s · …": the
    bounds loads are judged against first, then the rest in one order whatever order they
    came in."""
    order = list(CEILING_NAMES)
    items = sorted(ceilings.items, key=lambda c: order.index(c.name) if c.name in order else 99)
    parts = [
        f"{CEILING_NAMES.get(c.name, c.name)} {engine_rate_text(c.mbps, grouped=True)}"
        for c in items
    ]
    return "ceilings: " + " · ".join(parts) if parts else "no ceilings measured"


BOUNDS = ("storage", "memory_fill")  # the ceilings a load is held against


def ceilings_forms(ceilings: Ceilings, when: str) -> list[str]:
    """The ceilings in words, longest first, for a label to show the first that fits: all
    of them and ``when`` ("measured 14:02"), then the bounds a load is held against with how
    many more there are ("storage 1,300 MB/s · memory fill 2,100 MB/s · +4 more"), then the
    bounds alone, their unit said once."""
    full = f"{ceilings_text(ceilings)} ({when})"
    bounds = [c for name in BOUNDS for c in ceilings.items if c.name == name]
    bounds = bounds or list(ceilings.items[:1])
    if not bounds:
        return [full]
    names = [CEILING_NAMES.get(c.name, c.name) for c in bounds]
    rates = [engine_rate_text(c.mbps, grouped=True) for c in bounds]
    named = " · ".join(f"{name} {rate}" for name, rate in zip(names, rates, strict=True))
    more = len(ceilings.items) - len(bounds)
    forms = [full]
    if more:
        forms += [f"{named} · +{more} more ({when})", f"{named} · +{more} more"]
    forms += [f"{named} ({when})", named]
    if all(rate.endswith(" MB/s") for rate in rates):
        bare = [rate.removesuffix(" MB/s") for rate in rates]
        forms.append(" · ".join(f"{n} {r}" for n, r in zip(names, bare, strict=True)) + " MB/s")
    return list(dict.fromkeys(forms))  # one ceiling: its bare form is its named one


# The live plots' ranges grow in these steps (plots.style.RangeFollower): the axes change a
# few times per run instead of with every point.
NICE_STEPS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def ceiling_label(group: Sequence[tuple[str, float]], fits: Callable[[str], bool]) -> str:
    """The words beside a group of ceiling lines (name, MB/s; the highest line carries
    them), the longest that ``fits``: names and rates, ceilings of one rate named together
    ("storage · sequential 908 MB/s · parallel 950 MB/s"), the rates ("908 · 950 MB/s"), the
    highest ("950 MB/s +2"). A number is never cut; the line's tooltip names each ceiling."""
    rates: dict[str, list[str]] = {}  # each rate's text, highest first, and its names
    for name, mbps in sorted(group, key=lambda item: -item[1]):
        rates.setdefault(rate_text(mbps), []).append(name)
    if len(group) == 1:
        ((rate, (name,)),) = rates.items()
        forms = [f"{name} ceiling {rate}", f"{name} {rate}", rate]
    else:
        named = " · ".join(f"{' · '.join(names)} {rate}" for rate, names in rates.items())
        numbers = " · ".join(rates)
        if all(rate.endswith(" MB/s") for rate in rates):  # one unit, said once
            numbers = " · ".join(rate.removesuffix(" MB/s") for rate in rates) + " MB/s"
        forms = [named, numbers, f"{next(iter(rates))} +{len(group) - 1}"]
    return next((text for text in forms if fits(text)), forms[-1])


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 × 10^k at or above ``value`` (> 0)."""
    if not math.isfinite(value) or value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    # Divide by a power of ten (exact for negative exponents) rather than multiply by its
    # inverse: 0.15, not 0.15000000000000002, on the axis.
    steps = [m * 10.0**exponent if exponent >= 0 else m / 10.0**-exponent for m in NICE_STEPS]
    return next(step for step in steps if step >= value * (1 - 1e-9))


def blocks_ready_text(blocks: tuple[BlockTiming, ...]) -> str:
    """ "first block 0.120 s, half 0.480 s": when a streaming loader could start; "" if none."""
    first, half = blocks_ready_s(blocks, 1), half_blocks_ready_s(blocks)
    if first is None or half is None:
        return ""
    return f"first block {first:.3f} s, half {half:.3f} s"


def short_block_name(name: str) -> str:
    """ "model.layers.12" → "layers.12": the prefix is the same on every row."""
    return name.removeprefix("model.")


def bar_text(text: str) -> str:
    """``text`` for a QProgressBar's format, shown as written. The bar replaces %p, %v and %m
    and shows "%%" as two signs; an invisible word joiner after each % keeps it literal."""
    return text.replace("%", "%\u2060")
