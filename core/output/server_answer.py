"""``recommend --server``'s answer in words: what to change and how much sooner the server is
ready with it, the line to paste, what its caches save, then the evidence: every variant's
starts against the server as it is's, and what was not measured, with why."""

from __future__ import annotations

import shlex

from modelmon.core.configuration import ProgramConfig
from modelmon.core.errors import redact_urls
from modelmon.core.measuring.server_advice import Measured, ServerAdvice
from modelmon.core.output.server_ab import compile_variable
from modelmon.core.output.verdict import shift_words, sooner_text

# Where the paste line keeps a compile cache: a folder that runs as printed for any user;
# the sentence beside it says to put it on a volume that outlives the pod.
KEPT_FOLDER = "$HOME/.cache/modelmon-kept-compile-cache"


def paste_line(program: ProgramConfig, path: str, env: dict[str, str] | None = None) -> str:
    """The command as a shell runs it, for the model at ``path``: its own environment words
    and ``env`` first (not quoted: ``$HOME`` is the shell's to expand)."""
    words = [f"{name}={shlex.quote(value)}" for name, value in program.environment(path).items()]
    words += [f"{name}={value}" for name, value in (env or {}).items()]
    words += [shlex.quote(word) for word in program.command(path)]
    return redact_urls(" ".join(words))


def judged_words(one: Measured) -> str:
    """A variant's rounds against the server as it is's, in words: "ready in 27 % less time:
    every one of the 3 rounds agrees (1.35–1.42×)"."""
    verdict = one.verdict
    if verdict is None:
        return one.failure or "–"
    ratio, rounds = verdict.median_ratio, verdict.pairs
    span = f"{verdict.min_ratio:.2f}–{verdict.max_ratio:.2f}× by round"
    if ratio >= 1:
        said = f"ready {sooner_text(ratio)}"
    else:
        said = f"ready later: as it is, it is ready {sooner_text(1 / ratio)}"
    if rounds < 2:
        return f"{said} in its one round (one round tells no noise)"
    if verdict.text in ("A faster", "B faster"):
        return f"{said}: every one of the {rounds} rounds agrees ({span})"
    return f"within noise: {said} by the median round ({span})"


def _cache_line(advice: ServerAdvice, change: str, path: str) -> str | None:
    one = advice.cache(change)
    if one is None or (not one.by_round and not one.failure):
        return None
    base = advice.as_is.ready_s or 0.0
    if not one.by_round:
        return f"{change}: {one.failure}"
    mine = one.ready_s or 0.0
    if not one.sooner:
        return f"{change} saves nothing beyond the noise here ({base:.1f} s vs {mine:.1f} s)"
    if one.variant.config.compile_cache == "kept":
        variable = compile_variable(advice.server)
        line = paste_line(advice.server, path, {variable: KEPT_FOLDER})
        return (
            f"persisting {variable} saves {base - mine:.1f} s of {base:.1f} s to ready: keep "
            f"that folder on a volume that outlives the pod\n        {line}"
        )
    files = " ".join(shlex.quote(f) for f in advice.files)
    line = f"cat {files} > /dev/null && {paste_line(advice.server, path)}"
    return (
        f"a pre-warmed page cache saves {base - mine:.1f} s of {base:.1f} s to ready: read "
        f"the model before the server starts (a node that kept it, or an init step)\n"
        f"        {line}"
    )


def render_server_answer(advice: ServerAdvice, path: str) -> list[str]:
    """The answer first, then the evidence; ``path``: what ``{path}`` stands for."""
    base = advice.as_is.ready_s or 0.0
    pick = advice.pick
    lines: list[str] = []
    if pick is not None and pick.verdict is not None:
        lines.append(
            f"answer: ready in {pick.ready_s or 0.0:.1f} s instead of {base:.1f} s with "
            f"{pick.variant.change} (ready {sooner_text(pick.verdict.median_ratio)}, by the "
            f"median of {pick.verdict.pairs} rounds)"
        )
        lines.append(f"paste:  {paste_line(pick.variant.config, path)}")
        lines.append(f"where:  {shift_words(pick.shifts)}")
    else:
        tried = [m for m in advice.variants if m.variant.kind != "cache" and m.by_round]
        lines.append(
            f"answer: keep it as it is (ready in {base:.1f} s): "
            + (
                "no change measured made it ready sooner beyond the noise"
                if tried
                else "no change of its command could be measured (see below)"
            )
        )
    for change in ("a kept compile cache", "a pre-warmed page cache"):
        said = _cache_line(advice, change, path)
        if said is not None:
            lines.append(f"cache:  {said}")
    lines.append("")
    lines.append(
        "Evidence: each start from a verified cold page cache and fresh compile caches (a new "
        f"pod's), {len(advice.as_is.runs)} of the server as it is, timed to ready:"
    )
    width = max(len(m.variant.change) for m in (advice.as_is, *advice.variants))
    lines.append(f"  {'change':<{width}}  {'ready':>8}  {'min–max':>13}  runs  against it as it is")
    for one in (advice.as_is, *advice.variants):
        if not one.by_round:
            continue
        low, high = one.spread_s or (0.0, 0.0)
        judged = "–" if one is advice.as_is else judged_words(one)
        lines.append(
            f"  {one.variant.change:<{width}}  {one.ready_s or 0.0:>6.2f} s  "
            f"{f'{low:.2f}–{high:.2f} s':>13}  {len(one.runs):>4}  {judged}"
        )
    failed = [m for m in advice.variants if not m.by_round and m.failure]
    left = [*((m.variant.change, m.failure) for m in failed)]
    left += [(x.change, x.why) for x in advice.left_out]
    if left:
        lines.append("Not measured, or failed:")
        lines += [f"  {change}: {why}" for change, why in left]
    lines += [f"note: {note}" for note in advice.notes]
    lines.append(
        f"time: {advice.elapsed_s:.0f} s of a {advice.budget_s:.0f} s budget, "
        f"{advice.rounds} round(s)"
    )
    return lines
