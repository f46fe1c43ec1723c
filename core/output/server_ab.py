"""An A/B of two servers in words: each side's time to ready and its phases, the pairs, the
verdict, and where the difference comes from ("the weights 4.1 s → 1.2 s, the rest equal")."""

from __future__ import annotations

from modelmon.core.configuration import ProgramConfig
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


def render_server_ab(ab: ABResult, a: object = None, b: object = None) -> list[str]:
    """The A/B of two servers as the CLI prints it; ``a`` and ``b``, its configurations,
    say what a kept cache saves where they differ only in it."""
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
    saved = cache_words(a, b, ab)
    if saved is not None:
        lines.append(f"cache: {saved}")
    own = [s for s in ab.phases if s.name.startswith("line: ")]
    if own:
        lines.append(
            "its own lines: "
            + "; ".join(f"{phase_name(s.name)} {s.a_s:.2f} s → {s.b_s:.2f} s" for s in own)
        )
    return lines


def cache_words(a: object, b: object, ab: ABResult) -> str | None:
    """What keeping a cache saves, where the two sides are one server and differ only in it:
    "persisting its compile caches (VLLM_CACHE_ROOT) saves 41.2 s of 63.0 s to ready"; a
    pre-warmed node's page cache likewise. None where they differ otherwise."""
    if not (isinstance(a, ProgramConfig) and isinstance(b, ProgramConfig)):
        return None
    if a.command_words != b.command_words or a.readahead != b.readahead:
        return None
    differ = [
        name for name in ("page_cache", "compile_cache") if getattr(a, name) != getattr(b, name)
    ]
    if len(differ) != 1:
        return None
    kept = {"page_cache": "warm", "compile_cache": "kept"}[differ[0]]
    keeper = b if getattr(b, differ[0]) == kept else a
    keeping = ab.b if keeper is b else ab.a
    without = ab.a if keeper is b else ab.b
    what = (
        f"persisting its compile caches ({compile_variable(a)})"
        if differ[0] == "compile_cache"
        else "a pre-warmed node (the model in the page cache before it starts)"
    )
    before, after = without.median_ready_s or 0.0, keeping.median_ready_s or 0.0
    sooner = (keeper is b and ab.verdict.text == "B faster") or (
        keeper is a and ab.verdict.text == "A faster"
    )
    if not sooner:
        return f"{what} saves nothing beyond the noise here ({before:.1f} s vs {after:.1f} s)"
    return f"{what} saves {before - after:.1f} s of {before:.1f} s to ready"


def compile_variable(program: ProgramConfig) -> str:
    """The variable that names the engine's compile cache, as its users set it."""
    words = " ".join(program.command_words.argv if program.command_words else ())
    return "VLLM_CACHE_ROOT" if "vllm" in words else "TORCHINDUCTOR_CACHE_DIR"
