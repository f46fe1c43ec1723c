"""What a watch under a memory limit found (``Watch(memory_limit=...)``): the page cache took
most of the limit, reclaim made the loader read the same bytes again, or the OOM killer ended
a process of it; each with the figures and the fix in the loader's terms, and by how much a
bigger limit would do.

The rules read the watch's ``memory_limit`` record (``system.memory_limit.MemoryLimit``) and
give nothing without one.
"""

from __future__ import annotations

from modelmon.core.options import MiB
from modelmon.core.system.memory_limit import ram_text, size_text
from modelmon.core.units import human_bytes
from modelmon.core.watching.loaders import fix
from modelmon.core.watching.result import Finding, WatchResult

CACHE_SHARE = 0.5  # of the limit, held by the page cache at its peak: worth a word
REREAD_SHARE = 0.02  # of the model, read again after reclaim: worth a word
HEADROOM = 64 * MiB  # above what a load held at once, for a limit said to hold it


def _limit_ask(needed: int) -> str:
    """'a limit of 1.6 GiB (--memory-limit 1664Mi)': ``needed`` rounded up to 64 MiB."""
    rounded = -(-(needed + HEADROOM) // HEADROOM) * HEADROOM
    return f"a limit of {ram_text(rounded)} (--memory-limit {rounded // MiB}Mi)"


def cache_charged(result: WatchResult) -> Finding | None:
    limited = result.memory_limit
    if limited is None or limited.cache_share < CACHE_SHARE:
        return None
    text = (
        f"The page cache took {ram_text(limited.cache_peak_bytes)} of the "
        f"{size_text(limited.limit_bytes)} memory limit ({limited.cache_share:.0%}) at its "
        "peak: the model's pages read through the cache are charged to the limit as the "
        "program's own memory is, and a container's memory.current counts them, though the "
        "kernel can reclaim them before it OOM-kills."
    )
    evidence = {
        "cache_peak_bytes": limited.cache_peak_bytes,
        "limit_bytes": limited.limit_bytes,
        "anon_peak_bytes": limited.anon_peak_bytes,
    }
    return Finding("cache-charged", text, evidence, fix("cache-charged", result.loader))


def re_read(result: WatchResult) -> Finding | None:
    limited = result.memory_limit
    if limited is None or result.model_bytes <= 0:
        return None
    share = limited.reread_bytes / result.model_bytes
    if share < REREAD_SHARE:
        return None
    needed = limited.anon_peak_bytes + result.model_bytes
    text = (
        f"Reclaim under the {size_text(limited.limit_bytes)} memory limit made the program "
        f"read {human_bytes(limited.reread_bytes)} of the model again ({share:.0%} of its "
        f"{human_bytes(result.model_bytes)}): pages it had read were dropped to make room and "
        "read once more, so the load took the limit's time, not the storage's."
    )
    evidence = {
        "reread_bytes": limited.reread_bytes,
        "model_bytes": result.model_bytes,
        "limit_bytes": limited.limit_bytes,
        "anon_peak_bytes": limited.anon_peak_bytes,
    }
    # A mapped model is faulted in again; one read whole loses readahead before it is copied.
    mapped = any(f.mapped for f in result.files)
    words = fix("re-read" if mapped else "cache-charged", result.loader)
    words += f"; or {_limit_ask(needed)} holds it all"
    return Finding("re-read", text, evidence, words)


def oom_killed(result: WatchResult) -> Finding | None:
    limited = result.memory_limit
    if limited is None or not limited.oom_killed:
        return None
    named = f": {result.oom_victims_text()}" if result.oom_victims else ""
    text = (
        f"The kernel's OOM killer killed {limited.oom_kills} process(es) of the program"
        f"{named}, at the memory limit of {size_text(limited.limit_bytes)} "
        f"({limited.held_text()}): the tree's anonymous memory (arrays, the copies of the "
        "weights it keeps) outgrew the limit, which reclaiming the page cache cannot make "
        "room for."
    )
    evidence = {
        "oom_kills": limited.oom_kills,
        "limit_bytes": limited.limit_bytes,
        "peak_bytes": limited.peak_bytes,
        "anon_peak_bytes": limited.anon_peak_bytes,
        "cache_peak_bytes": limited.cache_peak_bytes,
        "victims": [{"pid": pid, "name": name} for pid, name in result.oom_victims],
    }
    # How much more it needed is not known (it was killed on its way): what it reached is.
    words = fix("oom-killed", result.loader) + (
        f"; or a limit above {size_text(limited.limit_bytes)}: "
        f"{ram_text(limited.anon_peak_bytes)} of anonymous memory was not enough to load the "
        f"{human_bytes(result.model_bytes)} model"
    )
    return Finding("oom-killed", text, evidence, words)
