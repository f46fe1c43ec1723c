"""The results table's columns: one row per finished run, as text and tooltips. Qt-free."""

from __future__ import annotations

from collections.abc import Sequence

from modelmon.core import Ceilings, WatchResult
from modelmon.core.measuring import beyond_spread
from modelmon.core.output import limit_text, memory_text, primed_text, ram_text, rate_text
from modelmon.gui.state.formatting import (
    CEILING_NAMES,
    cache_state_text,
    cache_tip,
    human_bytes,
    requests_tip,
    requests_words,
)
from modelmon.gui.state.records import WATCH_LABEL, RunRecord, ceiling_for

MAPPED_SHARE = 0.10  # of the workers' peak: a mapped share said in the Peak RSS cell
COLUMNS = (
    ("Run", "Which configuration ran (and which pair, in an A/B)."),
    ("Strategy", "The strategy and every option that differs from the defaults."),
    ("Cache before", "Page-cache state measured just before the load started (verified)."),
    ("Seconds", "Wall time from the go signal until the last worker finished."),
    ("Rate", "Tensor bytes loaded per second (decimal: MB/s, kB/s under 1 MB/s)."),
    (
        "% of bound",
        "The rate as a share of the bound that applies to the run, measured on this model by plain "
        "readers (Run ▸ Measure ceilings): the storage for a load that discards or maps its "
        "bytes, the lower of the storage and the memory fill for one that keeps them, the warm "
        "read for a warm run. Above its bound by more than the bound's spread is no efficiency: "
        "such a run says so instead of a percentage.",
    ),
    (
        "Peak RSS",
        "Peak resident memory of the load's workers together, and of all of modelmon's "
        "processes (this app and the workers; free memory primed before the load is not in "
        "it: the cache tip says it). Summed over processes: a page several of them map (a "
        "library, the model's pages under mmap) counts in each. \"mapped\": of the workers' "
        "peak, the file pages they map (the model's under mmap, libraries' code), page cache "
        "a memory limit reclaims, unlike the load's own copies. Under a memory limit, the "
        "cgroup's peak comes first: it counts such a page once, page cache included: what "
        "the limit holds.",
    ),
    (
        "Limit",
        "The memory limit the run ran under: its memory cgroup's size, as --memory-limit or "
        "Run ▸ Memory limit… set it (– where it ran without one).",
    ),
    (
        "Status",
        "ok, cancelled, or failed with the reason; with verify on, the model checksum.",
    ),
)
RUN, STRATEGY, CACHE, SECONDS, MBPS, CEILING_COLUMN, PEAK_RSS, LIMIT, STATUS = range(len(COLUMNS))
NUMERIC = range(SECONDS, LIMIT + 1)
# The columns of words that may be narrower than their text when the table is (their cells end
# in "…", the whole text in their tooltips); the figures, the limit and the status never are.
ELASTIC = (RUN, STRATEGY, CACHE, PEAK_RSS)


def fitted_widths(natural: Sequence[int], room: int, least: int) -> list[int]:
    """The widths of the columns before the last (``natural``: each as wide as its text) in
    ``room`` px: where they are wider, the widest of the ``ELASTIC`` columns are narrowed to
    one width, never below ``least`` px, so that every other column keeps its own. Narrower
    than ``room`` even then, the table scrolls sideways."""
    widths = list(natural)
    elastic = [column for column in ELASTIC if column < len(widths)]
    if sum(widths) <= room or not elastic:
        return widths
    # The widest width every elastic column may keep: what the others leave, shared out
    # from the narrowest up (one narrower than its share gives the rest to the others).
    left = room - sum(width for column, width in enumerate(widths) if column not in elastic)
    sizes = sorted(widths[column] for column in elastic)
    cap = sizes[-1]
    for index, size in enumerate(sizes):
        share = left // (len(sizes) - index)
        if size > share:
            cap = share
            break
        left -= size
    cap = max(cap, least)
    for column in elastic:
        widths[column] = min(widths[column], cap)
    return widths


def cache_unmet(record: RunRecord) -> bool:
    """The run asked for a cold or warm cache and did not start from one."""
    if record.result is None:
        return False
    cache = record.result.cache
    return (cache.requested == "cold" and not cache.cold) or (
        cache.requested == "warm" and not cache.warm
    )


def limit_cell(record: RunRecord) -> str:
    """The Limit column: the memory limit the run ran under, as it was given ("512 MiB")."""
    limited = record.memory_limit
    return limit_text(limited.limit_bytes) if limited is not None else "–"


def cell_text(record: RunRecord, column: int, ceilings: Ceilings | None = None) -> str:
    if column == LIMIT:
        return limit_cell(record)
    if record.watched is not None or record.label == WATCH_LABEL:
        return watched_cell_text(record, column, ceilings)
    result = record.result
    if column == RUN:
        return record.run_name
    if column == STRATEGY:
        return record.spec
    if column == STATUS:
        checksum = f" · checksum {result.checksum}" if result and result.checksum else ""
        # A bucket's load: its requests, what a disk's reads have no word for.
        reads = result.object_reads if result is not None else None
        requests = f" · {requests_words(reads)}" if reads is not None else ""
        message = f": {record.message}" if record.message else ""
        return record.status + checksum + requests + message
    if column == PEAK_RSS:
        rss = record.peak_rss()
        tree = result.process_tree_peak_rss if result is not None else None
        text = ram_text(rss[0]) if rss is not None else "–"
        mapped = record.peak_mapped() if rss is not None else None
        # Page cache the workers map (a limit reclaims it, a copy it cannot), said where it is
        # a share of the peak worth the room: a tenth is more than libraries' code.
        if rss is not None and mapped and mapped >= rss[0] * MAPPED_SHARE:
            # In the peak's unit, said once: a short cell, in a column narrowed at 1000×700.
            number, _, unit = ram_text(mapped).partition(" ")
            share = number if text.endswith(f" {unit}") else f"{number} {unit}"
            text += f" ({share} mapped)"
        if record.memory_limit is not None:
            return _with_cgroup(record, text)
        return text + (f" · all {ram_text(tree)}" if tree is not None else "")
    if result is None:
        return "–"
    if column == CACHE:
        return cache_state_text(result.cache)
    if not record.measured:
        return "–"
    if column == SECONDS:
        return f"{result.seconds:.3f}"
    if column == MBPS:
        return rate_text(result.mbps, grouped=True)
    share = ceiling_for(record, ceilings)
    if share is None:
        return "–"
    # Past its bound beyond the bound's spread the fraction is no efficiency: it is marked.
    return "above its bound" if above_bound(share, ceilings) else f"{share[0]:.0%}"


def above_bound(share: tuple[float, str], ceilings: Ceilings | None) -> bool:
    """Above its bound by more than the bound's spread (2 % at least): not an efficiency,
    but reads that a cache this machine cannot drop served, a throttle on the disk let
    through faster than the bound's plain reads, or a bound measured apart."""
    bound = ceilings.get(share[1]) if ceilings is not None else None
    return bound is not None and beyond_spread(share[0], bound)


def cell_tip(record: RunRecord, column: int, ceilings: Ceilings | None = None) -> str | None:
    """A cell's tooltip; a cell of words starts with its whole text, which a narrow table
    ends in "…"."""
    tip = column_tip(record, column, ceilings)
    if column not in ELASTIC:
        return tip
    text = cell_text(record, column, ceilings)
    if text == "–" or (tip is not None and tip.startswith(text)):
        return tip
    return f"{text}\n{tip}" if tip else text


def column_tip(record: RunRecord, column: int, ceilings: Ceilings | None = None) -> str | None:
    """What a cell's tooltip says beside its text."""
    if record.watched is not None and column in (STATUS, MBPS, CACHE):
        return watched_cell_tip(record, column)
    result = record.result
    if column == CACHE and result is not None:
        cache = result.cache
        tip = cache_tip(cache)
        primed = primed_text(cache.primed)
        return tip + (f"\n{cache.note}" if cache.note else "") + (f"\n{primed}" if primed else "")
    if column == MBPS and result is not None:
        return f"{result.bytes:,} bytes of tensors"
    if column == CEILING_COLUMN:
        share = ceiling_for(record, ceilings)
        if share is not None and ceilings is not None:
            ceiling = ceilings.get(share[1])
            name = CEILING_NAMES.get(share[1], share[1])
            if ceiling is None:
                return None
            bound = rate_text(ceiling.mbps, grouped=True)
            tip = f"of the {name} bound, {bound} ({ceiling.spec})"
            if above_bound(share, ceilings):
                above = (
                    f"this run read {share[0]:.2f}× that, above it by more than its spread, "
                    "so not an efficiency"
                )
                again = "measured at another time: Measure ceilings again, beside the runs."
                if ceiling.throttle:  # the spec's throttle is named in the reason
                    return (
                        f"of the {name} bound, {bound}: {above}: "
                        f"{ceiling.throttle_reason()}. Or the bound was {again}"
                    )
                return (
                    f"{tip}: {above}. A cache this machine cannot drop (a VM host's) served "
                    f"some reads, or the bound was {again}"
                )
            return f"{tip}; a rate above it by more than its spread would not be an efficiency"
        return "Measure the ceilings (Run ▸ Measure ceilings) to see this."
    if column == LIMIT:
        limited = record.memory_limit
        return f"Its {limited.line()}." if limited is not None else COLUMNS[column][1]
    if column == PEAK_RSS:
        rss = record.peak_rss()
        mapped = record.peak_mapped() if rss is not None else None
        of_it = (
            f" Of it, {mapped:,} bytes were file pages they mapped (page cache: the model's "
            "under mmap, libraries' code), which a memory limit reclaims."
            if mapped
            else ""
        )
        # A load stopped before the sampler looked says how it ended, as its status does.
        stopped = {"cancelled": "was cancelled", "failed": "failed"}.get(record.status)
        if rss is not None:
            workers = f"Workers: {rss[0]:,} bytes, {rss[1]}.{of_it}"
        elif stopped is not None:
            workers = (
                f"No sample of the workers' memory: the load {stopped} before the sampler looked."
            )
        else:
            workers = (
                "No sample of the workers' memory: the load was over before the sampler "
                "looked (View ▸ Sample metrics every sets how often it looks)."
            )
        memory = memory_text(result) if result is not None else ""
        limited = result.memory_limit if result is not None else None
        under = f"\nIts {limited.line()}." if limited is not None else ""
        return workers + (f"\nAll of modelmon: {memory}." if memory else "") + under
    if column == STATUS:
        notes = "\n".join(result.notes) if result is not None else ""
        checksum = (
            f"Model checksum {result.checksum}: crc32 of every tensor, the same for every "
            "strategy that loaded the same bytes."
            if result is not None and result.checksum
            else ""
        )
        reads = result.object_reads if result is not None else None
        requests = requests_tip(reads) if reads is not None else ""
        return "\n".join(t for t in (record.message, checksum, requests, notes) if t) or None
    return COLUMNS[column][1]


def _with_cgroup(record: RunRecord, rss: str) -> str:
    """A Peak RSS cell: ``rss`` and, under a memory limit, the cgroup's peak before it: what
    the limit counts, each page once, first, so a narrow column cuts the summed RSS, never
    the figure that the limit holds (walk 16 read "4.1 GiB (2.1 mapped) · c…")."""
    limited = record.memory_limit
    return f"cgroup {ram_text(limited.peak_bytes)} · {rss}" if limited is not None else rss


def watched_cell_text(record: RunRecord, column: int, ceilings: Ceilings | None) -> str:
    """A watched program's row: its command, the bytes that really arrived, how fast, what
    was found."""
    watched = record.watched
    if column == RUN:
        return record.run_name
    if column == STRATEGY:
        return record.spec
    if watched is None:
        return (
            record.status + (f": {record.message}" if record.message else "")
            if column == STATUS
            else "–"
        )
    if column == CACHE:
        return cache_state_text(record.cache) if record.cache is not None else "as found"
    if column == SECONDS:
        return f"{record.seconds:.3f}" if record.seconds is not None else "–"
    if column == MBPS:
        return rate_text(record.mbps, grouped=True) if record.mbps is not None else "–"
    if column == CEILING_COLUMN:  # as a load's: past its bound's spread, no efficiency
        share = ceiling_for(record, ceilings)
        if share is None:
            return "–"
        return "above its bound" if above_bound(share, ceilings) else f"{share[0]:.0%}"
    if column == PEAK_RSS:
        return _with_cgroup(record, ram_text(watched.peak_rss) if watched.peak_rss else "–")
    arrived = f"{human_bytes(watched.bytes_read)} arrived"
    found = findings_words(watched)
    words = [record.status, arrived, *([f"found: {found}"] if found else [])]
    if record.message:
        words.append(record.message)
    return " · ".join(words)


def findings_words(watched: WatchResult) -> str:
    """The findings in a few words each: "shared descriptor (pids 1, 2, 3); partial read
    (12 % of the model)"."""
    words = []
    for finding in watched.findings:
        name = finding.code.replace("-", " ")
        pids = finding.evidence.get("pids")
        fraction = finding.evidence.get("fraction")
        if isinstance(pids, list | tuple) and pids:
            name += f" (pids {', '.join(map(str, pids))})"
        elif isinstance(fraction, float) and finding.code == "partial-read":
            name += f" ({fraction:.0%} of the model)"
        words.append(name)
    return "; ".join(words)


def watched_cell_tip(record: RunRecord, column: int) -> str | None:
    watched = record.watched
    if watched is None:
        return None
    if column == MBPS:
        return (
            f"{watched.bytes_read:,} bytes of the model arrived (pages that came into the page "
            f"cache, or were read, while it was watched), in {watched.seconds or 0:.3f} s from "
            "the first byte to the last"
        )
    if column == CACHE:
        cache = watched.cache
        if cache is None:
            return "The cache was not prepared: attached to a running process, it is as found."
        return cache_tip(cache) + (f"\n{cache.note}" if cache.unseen else "")
    lines = [f"{record.spec}: {watched.status} after {watched.wall_seconds:.2f} s"]
    lines += [f"{f.text} Fix: {f.fix}" for f in watched.findings]
    lines += list(watched.notes)
    return "\n".join(lines)
