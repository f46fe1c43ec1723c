"""A ranks A/B in words (``modelmon bench --ranks N``): per side its mode, its slowest rank's
time (the server's), the node's memory at its peak and held, what the node read in all; then
the pairs and the verdict, as every A/B's report ends."""

from __future__ import annotations

from modelmon.core.measuring.ranks_ab import RanksAB
from modelmon.core.measuring.ranks_records import NodeMemory, RanksResult
from modelmon.core.output.verdict import pairs_lines
from modelmon.core.system.memory_limit import ram_text
from modelmon.core.units import human_bytes, rate_text

__all__ = ["ranks_run_line", "render_ranks_ab"]


def _times(low: float, high: float, runs: int) -> str:
    """A side's slowest-rank times from ``low`` to ``high``; "–" of one run (no range)."""
    return f"{low:.3f}–{high:.3f}" if runs > 1 else "–"


def _of_model(count: int | None, model_bytes: int) -> str:
    if count is None:
        return "–"
    return f"{ram_text(count)} ({count / max(1, model_bytes):.1f}×)"


def render_ranks_ab(ab: RanksAB) -> str:
    model_bytes = ab.runs[0][1].model_bytes if ab.runs else 0
    rows = [
        (
            "side",
            "mode",
            "configuration",
            "slowest rank s",
            "min–max s",
            "model at",
            "node peak (× model)",
            "held",
            "read in all",
        )
    ]
    for label, summary, mode, node in zip(
        ("A", "B"), (ab.a, ab.b), ab.modes, ab.nodes, strict=True
    ):
        rows.append(
            (
                label,
                mode,
                summary.spec,
                f"{summary.median_seconds:.3f}",
                _times(summary.min_seconds, summary.max_seconds, summary.runs),
                rate_text(summary.median_mbps),
                _of_model(node.peak_bytes if node else None, model_bytes),
                _of_model(node.held_peak_bytes if node else None, model_bytes),
                human_bytes(ab.read_bytes(label)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"{ab.ranks} ranks a side, each run from a {ab.cache} cache"]
    lines += [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines += pairs_lines(ab.ratios, ab.verdict, min(ab.a.runs, ab.b.runs))
    lines.append(
        "node peak: the node's memory cgroup, page cache and shared memory included; held: "
        "its anonymous and shared memory at their peak, what no reclaim frees (each the "
        "highest of the side's runs)"
    )
    for label, node in zip(("A", "B"), ab.nodes, strict=True):
        lines += _limit_lines(label, node)
    lines += [f"note: {note}" for note in ab.notes]
    return "\n".join(lines)


def _limit_lines(label: str, node: NodeMemory | None) -> list[str]:
    if node is None:
        return []
    if not node.measured:
        return [f"{label}: the ranks' own peaks summed (no cgroup held them): no held figure"]
    if node.limit is not None:
        return [f"{label} limit: {node.limit.line()}"]
    return []


def ranks_run_line(result: RanksResult, state: str) -> str:
    """One ranks run of an A/B as it ends: its slowest rank's time, the node's memory."""
    node = result.node
    memory = ""
    if node is not None:
        held = node.held_peak_bytes
        memory = f"; node peak {ram_text(node.peak_bytes)}" + (
            f", held {ram_text(held)}" if held is not None else ""
        )
    read = human_bytes(result.read_bytes)
    return f"slowest rank {result.seconds:.3f} s, read {read} ({state}{memory})"
