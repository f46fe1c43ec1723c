"""Proactive reclaim: a host that pages out memory nobody touched for a while, under no
memory pressure at all.

Hosts that pack many machines or jobs run it (DAMON-based reclaim, set up through
``/sys/kernel/mm/damon/admin``): a kernel thread samples which physical memory is accessed
and pages out regions idle for longer than a set age, at up to a set quota. For a model
load it means a warm page cache does not stay warm: the pages of a model read a minute ago
and not touched since go, a few MiB at a time, and a "warm" run finds part of the file gone
without any other program having needed the memory. modelmon says so next to the machine's
memory facts, so that a warm run's misses are not taken for the loader's.

Only DAMON's sysfs interface is read here (a scheme whose action is ``pageout`` in a
kdamond that is ``on``); the regions DAMON watches are approximate (whole regions of
physical memory, aged together), so freshly read pages that share a region with idle ones
can go earlier than the age says.
"""

from __future__ import annotations

from pathlib import Path

from modelmon.core.system.storage import read_text

DAMON_ADMIN = Path("/sys/kernel/mm/damon/admin")


def _read(path: Path) -> str | None:
    text = read_text(path)
    return text.strip() if text is not None else None


def _number(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _filters(scheme: Path) -> str:
    """What kinds of memory the scheme's filters let it take or keep away from it."""
    taken: list[str] = []
    kept: list[str] = []
    for folder in ("ops_filters", "filters", "core_filters"):
        for entry in sorted((scheme / folder).glob("[0-9]*")):
            kind = _read(entry / "type")
            if not kind:
                continue
            matching = _read(entry / "matching") != "N"
            allowed = _read(entry / "allow") == "Y"
            words = kind if matching else f"not {kind}"
            (taken if allowed else kept).append(words)
    parts = []
    if taken:
        parts.append(f"only {' or '.join(taken)} memory")
    if kept:
        parts.append(f"never {' or '.join(kept)} memory")
    return "; ".join(parts)


def _scheme_line(context: Path, scheme: Path) -> str:
    aggregate_us = _number(context / "monitoring_attrs" / "intervals" / "aggr_us")
    age = _number(scheme / "access_pattern" / "age" / "min")
    quota = _number(scheme / "quotas" / "bytes")
    reset_ms = _number(scheme / "quotas" / "reset_interval_ms")
    idle = (
        f"idle for about {age * aggregate_us / 1e6:.0f} s or more"
        if age is not None and aggregate_us
        else "found idle"
    )
    pace = (
        f", up to {quota / (1 << 20):.0f} MiB every {reset_ms / 1000:g} s"
        if quota and reset_ms
        else ""
    )
    which = _filters(scheme)
    return f"pages out memory {idle}{pace}" + (f" ({which})" if which else "")


def proactive_reclaim(admin: Path = DAMON_ADMIN) -> str | None:
    """One line saying how this host pages out idle memory without pressure, or None when
    it does not (no DAMON, no kdamond on, or none of its schemes pages out)."""
    lines = []
    for kdamond in sorted((admin / "kdamonds").glob("[0-9]*")):
        if _read(kdamond / "state") != "on":
            continue
        for context in sorted((kdamond / "contexts").glob("[0-9]*")):
            for scheme in sorted((context / "schemes").glob("[0-9]*")):
                if _read(scheme / "action") == "pageout":
                    lines.append(_scheme_line(context, scheme))
    if not lines:
        return None
    return (
        "this host reclaims memory proactively (DAMON): it "
        + "; and ".join(dict.fromkeys(lines))
        + ", so a warm page cache left untouched loses pages with no memory pressure"
    )
