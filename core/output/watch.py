"""A watch in words, for a terminal: what ran, what arrived how fast, then the findings."""

from __future__ import annotations

import math
import os
import shlex

from modelmon.core.system.memory_limit import ram_text, size_text
from modelmon.core.units import human_bytes, rate_text
from modelmon.core.watching.cold_findings import PHASE_WORDS, headline
from modelmon.core.watching.findings import readers_line
from modelmon.core.watching.result import WatchResult
from modelmon.core.watching.server_findings import gap_kind
from modelmon.core.watching.server_lines import LABELS


def _what(result: WatchResult) -> str:
    if result.command is not None:
        target = " ".join(shlex.join(result.command).split())  # a -c script on one line
        target = target if len(target) <= 100 else target[:97] + "..."
    else:
        target = f"pid {result.pid}"
    if result.status in ("exited", "killed"):
        ended = f"killed by {result.signal}" if result.signal else f"exited {result.exit_code}"
    elif result.status == "stopped" and result.ended_by == "ready":
        ended = "stopped once ready"
    elif result.status == "stopped" and result.ended_by == "ready-timeout":
        ended = "stopped: not ready in time"
    elif result.status == "stopped":
        ended = f"stopped after {result.quiet_s or 0:.1f} s of quiet"
    elif result.status == "cancelled":
        ended = "stopped (cancelled)"
    elif result.status == "gone":
        ended = "the process exited"
    else:
        ended = "detached"
    pid = f"pid {result.pid}; " if result.command is not None else ""
    return f"watched:  {target}  ({pid}{ended} after {result.wall_seconds:.2f} s)"


def _arrived(result: WatchResult) -> str:
    if not result.bytes_read:
        return "arrived:  no model byte was seen arriving or being read"
    if result.seconds is None or result.mbps is None:
        return f"read:     {human_bytes(result.bytes_read)} (warm: when is not known from outside)"
    line = (
        f"arrived:  {human_bytes(result.bytes_read)} in {result.seconds:.2f} s "
        f"(first byte at {result.first_byte_s or 0:.2f} s, last at {result.last_byte_s or 0:.2f} s)"
        f": {rate_text(result.mbps, grouped=True)}"
    )
    if result.ended_before_first_sample:
        line += f"  [the program ended within one sample ({result.interval_s * 1000:.0f} ms)]"
    return line


def _ranks(result: WatchResult) -> list[str]:
    """A table of the ranks (the processes that read the model), when there are several."""
    cold = result.cold_start
    if cold is None or len(cold.ranks) < 2:
        return []
    lines = [f"ranks:    {'rank':>4}  {'pid':>7}  {'read':>10}  {'held':>10}  reading (s)"]
    for rank in cold.ranks:
        reading = "-"
        if rank.start_s is not None and rank.end_s is not None:
            reading = f"{rank.start_s:.2f} → {rank.end_s:.2f} ({rank.end_s - rank.start_s:.2f})"
        lines.append(
            f"          {rank.rank:>4}  {rank.pid:>7}  {human_bytes(rank.model_bytes):>10}  "
            f"{ram_text(rank.held_bytes):>10}  {reading}"
            + ("" if rank.exited_s is None else f"  exited at {rank.exited_s:.2f}")
        )
    return lines


def _server_lines(result: WatchResult) -> list[str]:
    """The server's own phase lines on its timeline, what arrived and ran in each, and the
    stretches in none, in order of time."""
    cold = result.cold_start
    if cold is None or not cold.lines:
        return []
    rows: list[tuple[float, str]] = []
    for line in cold.lines:
        if line.mark:
            rows.append((line.start_s, f"{line.start_s:7.2f}            {line.text}"))
            continue
        said = f"{line.start_s:7.2f} → {line.end_s:7.2f}  {line.text}"
        window = line.measured
        if window is not None:
            said += (
                f"  [{human_bytes(window.model_bytes)} of the model arrived, "
                f"{window.cores(line.seconds):.1f} cores]"
            )
        rows.append((line.start_s, said))
    for gap in cold.gaps:
        rows.append(
            (
                gap.start_s,
                f"{gap.start_s:7.2f} → {gap.end_s:7.2f}  in no line ({gap.seconds:.1f} s): "
                f"{gap_kind(gap)}",
            )
        )
    engines = sorted({LABELS[line.engine] for line in cold.lines})
    head = f"server:   its own lines ({', '.join(engines)}), seconds since it started:"
    return [head, *(f"          {text}" for _, text in sorted(rows, key=lambda row: row[0]))]


def _limit_moment(result: WatchResult) -> str | None:
    cold = result.cold_start
    moment = cold.memory if cold is not None else None
    if moment is None:
        return None
    if moment.reached_s is not None:
        rank = f", rank {moment.reached_rank} growing" if moment.reached_rank is not None else ""
        phase = (
            f" {PHASE_WORDS.get(moment.reached_phase or '', '')}" if moment.reached_phase else ""
        )
        return f"limit:    reached at {moment.reached_s:.1f} s{phase}{rank}"
    if moment.headroom_bytes is not None:
        return (
            f"limit:    at ready {ram_text(moment.charged_at_ready or 0)} charged of "
            f"{size_text(moment.limit_bytes)}: {ram_text(moment.headroom_bytes)} headroom "
            f"({ram_text(moment.anon_at_ready or 0)} of it anonymous)"
        )
    return None


def render_watch(result: WatchResult) -> str:
    lines = []
    cold = result.cold_start
    if cold is not None and (cold.ready_s is not None or cold.asked):
        lines.append(f"cold start: {headline(cold)}")
    lines += [_what(result), f"loader:   {result.loader.label}"]
    if result.loader.evidence:
        lines[-1] += f"  ({result.loader.evidence[0]})"
    for model_file in result.files:
        path = model_file.path  # a bucket's prefix ends with "/": said as its last folder
        name = os.path.basename(path.rstrip("/")) + ("/" if path.endswith("/") else "")
        lines.append(
            f"file:     {name}  {human_bytes(model_file.size)}, "
            f"{model_file.storage}"
            + ("  [mapped]" if model_file.mapped else "")
            + ("  [opened]" if model_file.opened else "")
        )
    if not result.files:
        lines.append("file:     no model file was seen")
    cache = result.cache
    connections = result.connections
    if connections is not None:
        lines.append(
            f"network:  {connections.held_text()}, "
            f"{human_bytes(connections.received_bytes)} received over them"
        )
    if cache is not None and (cache.nothing_local or cache.unseen):
        lines.append(f"cache:    {cache.note}")
    elif cache is not None:
        state = "cold" if cache.cold else "warm" if cache.warm else "neither cold nor warm"
        verified = "verified" if cache.cold or cache.warm else "asked " + cache.requested
        lines.append(
            f"cache:    {state} ({verified}, {cache.resident_before:.1%} resident before)"
            + (f": {cache.note}" if cache.note else "")
        )
    lines.append(_arrived(result))
    if cold is not None and cold.ready_s is None and not cold.asked and result.saw_model:
        lines.append(f"phases:   {headline(cold)}")
    if result.mbps is not None:
        for reference in result.references:
            if reference.name == "bound" and reference.mbps > 0:
                lines.append(
                    f"compare:  your loader {rate_text(result.mbps, grouped=True)} is "
                    f"{result.mbps / reference.mbps:.0%} of the bound of a load that keeps its "
                    f"bytes here, {rate_text(reference.mbps, grouped=True)} ({reference.spec})"
                )
                continue
            lines.append(
                f"compare:  your loader {rate_text(result.mbps, grouped=True)}; {reference.name} "
                f"{rate_text(reference.mbps, grouped=True)} here ({reference.spec})"
            )
    exited = sum(1 for p in result.processes if p.exited_s is not None)
    lines.append(
        f"tree:     {len(result.processes)} process(es) ({exited} exited), "
        f"{result.major_faults:,} major faults, peak RSS {ram_text(result.peak_rss)} "
        f"(private {ram_text(result.peak_anon_rss)}), CPU {result.cpu_seconds:.1f} s"
    )
    lines += _ranks(result)
    lines += _server_lines(result)
    for description in result.descriptions:
        if description.shared:
            lines.append(
                f"shared:   one open file description of {os.path.basename(description.path)} "
                f"held by pids {', '.join(map(str, description.pids))}"
            )
    if result.other_readers:
        lines.append(f"others:   {readers_line(result.other_readers)}")
    if result.quiet_s is not None and math.isfinite(result.quiet_s):
        lines.append(f"quiet:    from {result.quiet_s:.1f} s")
    if result.memory_limit is not None:
        lines.append(f"limit:    {result.memory_limit.line()}")
        moment = _limit_moment(result)
        if moment is not None:
            lines.append(moment)
    if result.findings:
        lines.append("")
        lines.append("findings:")
        for finding in result.findings:
            lines.append(f"  [{finding.code}] {finding.text}")
            lines.append(f"      change: {finding.fix}")
    if result.notes:
        lines.append("")
        lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)
