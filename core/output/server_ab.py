"""An A/B of two servers in words: each side's time to ready and its phases, the pairs, the
verdict, and where the difference comes from ("the weights 4.1 s → 1.2 s, the rest equal")."""

from __future__ import annotations

from modelmon.core.measuring.ab import ABResult, SideSummary
from modelmon.core.output.verdict import pairs_lines, phase_name, shift_words
from modelmon.core.units import rate_text

WATCHED_PHASES = ("before", "weights", "after")


def _side_row(side: str, summary: SideSummary) -> tuple[str, ...]:
    ready = summary.median_ready_s or 0.0
    spread = (
        f"{summary.min_ready_s:.2f}–{summary.max_ready_s:.2f} s"
        if summary.runs > 1 and summary.min_ready_s is not None
        else "–"
    )
    phases = [f"{summary.phases.get(name, 0.0):.2f}" for name in WATCHED_PHASES]
    # The weights' own rate, where bytes were seen arriving (none from a warm cache).
    rate = rate_text(summary.median_mbps) if summary.median_mbps > 0 else "–"
    return (side, summary.spec, f"{ready:.2f} s", spread, *phases, rate)


def render_server_ab(ab: ABResult) -> list[str]:
    """The A/B of two servers as the CLI prints it."""
    rows = [
        ("side", "configuration", "ready", "min–max", "before", "weights", "after", "weights MB/s"),
        _side_row("A", ab.a),
        _side_row("B", ab.b),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines += pairs_lines(ab.ratios, ab.verdict, min(ab.a.runs, ab.b.runs))
    lines.append(f"where: {shift_words(ab.phases)}")
    own = [s for s in ab.phases if s.name.startswith("line: ")]
    if own:
        lines.append(
            "its own lines: "
            + "; ".join(f"{phase_name(s.name)} {s.a_s:.2f} s → {s.b_s:.2f} s" for s in own)
        )
    return lines
