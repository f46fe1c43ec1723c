"""The user's loader in words: the sentences that lead a recommendation made with
``--loader`` / ``--engine``, the snippets for the user's engine marked measured with their
MB/s and runs (or translated, and said not measured, for an engine that cannot run here),
and the config file's ``[loader]`` table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from modelmon.core.loaders.registry import get_engine
from modelmon.core.measuring.advice import LoaderAdvice, clearly_gains
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import MIN_GAIN
from modelmon.core.model.records import Model
from modelmon.core.output.comparison import times_text
from modelmon.core.output.readahead_words import permanent_readahead
from modelmon.core.output.run_words import counted, median_words, runs_of
from modelmon.core.output.snippets import OWN_TOOLS, Snippet
from modelmon.core.units import rate_figure, rate_text


def change_words(change: Candidate, base: Candidate) -> str:
    """What to change, in the loader's own terms."""
    program, before = change.program, base.program
    if program is None or before is None:
        return change.spec
    if program.readahead != before.readahead and program.readahead is not None:
        return f"raise the device's readahead to {program.readahead} KiB"
    if program.kind == "engine" and program.engine is not None:
        engine = get_engine(program.engine)  # the knobs that differ; the Paste line does it
        had = before.settings if before.engine == program.engine else {}
        changed = [f"{k}={v}" for k, v in program.settings.items() if had.get(k) != v]
        return f"{engine.label} with {', '.join(changed)}" if changed else engine.label
    now = program.command_words.env if program.command_words else ()
    was = before.command_words.env if before.command_words else ()
    added = [f"{name}={value}" for name, value in now if (name, value) not in was]
    return "set " + " ".join(added) + " in your loader's environment"


def _pairs(change: Candidate) -> str:
    """What its gain (``LoaderAdvice.gain``) is of: the ratio of the medians unpaired, else
    its paired rounds' median, said as such."""
    verdict = change.verdict
    if verdict is None:
        return "by their medians, unpaired"
    count = len(change.results)
    if count == 1:
        return "1 paired cold round"
    agree = verdict.min_ratio > 1 or verdict.max_ratio < 1  # on which side is faster
    agreeing = "every pair agreeing" if agree else "the pairs disagreeing"
    return f"by the median of {count} paired cold rounds, {agreeing}"


def _by(candidate: Candidate) -> str:
    """What a gain of ``LoaderAdvice.gain`` is of, said beside it: the median of its paired
    rounds where they were judged, else the ratio of the two medians."""
    verdict = candidate.verdict
    if verdict is None:
        return " by their medians"
    rounds = verdict.pairs or len(candidate.results)
    if rounds == 1:
        return " in their one paired round"
    return f" by the median of their {rounds} paired rounds"


def _against_baseline(advice: LoaderAdvice, change: Candidate) -> str:
    gain, verdict = advice.gain(change), change.verdict
    if gain is None or verdict is None:
        return "ran once, unpaired"
    count = len(change.results)
    pairs = f"{gain:.2f}× its baseline ({median_words(counted(count, 'paired cold round'), count)}"
    if verdict.text == "A faster":
        return f"ran {pairs}): slower"
    rounds = len(advice.baseline_of(change).results)
    if verdict.text == "B faster" and count < rounds:
        return (
            f"ran {pairs}): faster, but it completed {count} of the {rounds} rounds its "
            "baseline did"
        )
    if verdict.text == "B faster":
        return f"ran {pairs}): faster, but by less than the {MIN_GAIN - 1:.0%} worth a change"
    spread = f"{verdict.min_ratio:.2f}× to {verdict.max_ratio:.2f}×"
    if verdict.within_timing:
        return (
            f"ran {pairs}, from {spread}): within what the watch times on loads this short "
            f"(±{verdict.resolution:.0%} on a ratio)"
        )
    return f"ran {pairs}, from {spread}): the pairs disagree, so it is within noise"


def loader_explanation(advice: LoaderAdvice) -> list[str]:
    """The sentences that lead the explanation: the best change, its gain over the loader
    as it is, modelmon's best in the same rounds, what the watch saw of the loader."""
    loader, pick = advice.loader, advice.pick
    lines: list[str] = []
    if advice.for_engine is not None:
        engine = get_engine(advice.for_engine)
        lines.append(
            f"{engine.not_here}: its advice is translated from {loader.spec}, measured here."
        )
    if not loader.results:
        lines.append(f"Your loader ({loader.spec}) {loader.reason or 'did not complete'}.")
    elif pick is not None:
        base = advice.baseline_of(pick)
        gain = advice.gain(pick) or 0.0
        through = ""
        if base is not loader:  # an engine setting, measured on modelmon's run of the engine
            through = (
                f" (measured on {base.spec}, {rate_text(base.median_mbps)} as it is; your "
                f"loader as it is: {rate_text(loader.median_mbps)})"
            )
        lines.append(
            f"Change your loader: {change_words(pick, base)}. Measured here: "
            f"{rate_text(pick.median_mbps)} against {rate_text(base.median_mbps)} as it is, "
            f"{gain:.2f}× ({_pairs(pick)}){through}."
        )
    else:
        tried = [c for c in advice.changes if c.results]
        best = tried[0] if tried else None
        if best is None:
            lines.append(
                f"Your loader as it is: {rate_text(loader.median_mbps)} ({runs_of(loader)}); no "
                "setting of it was measured."
            )
        else:
            # The answer may still be modelmon's best (below): this is of the loader's settings.
            lines.append(
                f"No setting of your loader was measured clearly faster than it is "
                f"({rate_text(loader.median_mbps)}, {runs_of(loader)}): the best tried, "
                f"{best.spec}, {_against_baseline(advice, best)}."
            )
    best = advice.modelmon
    if best.results and loader.results:
        ratio = advice.gain(best) or 0.0  # the answer's and the ranking's figure
        lines.append(
            f"modelmon's best ({best.spec}) loaded it at {rate_text(best.median_mbps)} in the "
            f"same rounds: {times_text(ratio)} your loader as it is{_by(best)} "
            "(modelmon.core.load(path, "
            "config=...) applies it)" + _why_kept(advice, best, ratio) + "."
        )
    runs = [r for c in (loader, *advice.changes) for r in c.results]
    if any(r.coarse_timing for r in runs):
        lines.append(
            "Some of these loads lasted only a few of the watch's samples: their rates are "
            "known to a sample, not finer; a larger model or slower storage times them well."
        )
    watch = advice.watch
    if watch is not None and watch.findings:
        finding = watch.findings[0]
        # Where a change or modelmon's best was measured clearly faster, the answer is the
        # fix; the watch's own advice, never run here, is said as such only without one.
        measured = any(clearly_gains(c, loader) for c in (*advice.changes, advice.modelmon))
        fix = "" if measured else f" What it usually takes, not measured here: {finding.fix}"
        lines.append(_sentence(f"What the watch saw of your loader: {finding.text}{fix}"))
    lines += [_sentence(note) for note in advice.notes]
    return lines


def _sentence(text: str) -> str:
    """``text`` as a sentence of the explanation: its first letter a capital, a full stop
    at its end (the rounds' notes are written as clauses)."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _snippet(tool: str, text: str, model: Model, candidate: Candidate, note: str = "") -> Snippet:
    return Snippet.of(tool, text, model, candidate, runs=True, note=note)


def loader_snippets(advice: LoaderAdvice, model: Model) -> list[Snippet]:
    """The user's engine's lines: for the change picked (or the loader as it is, when
    nothing beat it), measured; for an engine that cannot run here, translated."""
    chosen = advice.pick or advice.loader
    if not chosen.results:
        return []
    program = chosen.program
    out: list[Snippet] = []
    if program is None:
        return out
    if program.readahead is not None:
        commands = permanent_readahead(model, program.readahead)
        if commands:
            others = f"  (or: {'; '.join(commands[1:])})" if commands[1:] else ""
            out.append(_snippet("readahead-device", commands[0] + others, model, chosen))
    if program.kind == "cmd":
        assert program.command_words is not None
        # The user's own command, as they wrote it: nothing in it is a placeholder.
        words = program.command_words.text
        runs = len(chosen.results)
        out.append(Snippet("your-loader", words, chosen.spec, chosen.median_mbps, runs))
        return out
    engine = get_engine(str(program.engine))
    settings = program.settings
    out.append(_snippet(engine.name, engine.snippet(settings), model, chosen))
    for tool, line in engine.also:
        out.append(_snippet(tool, line(settings), model, chosen, "the same loader"))
    if advice.for_engine is not None:
        target = get_engine(advice.for_engine)
        gain = advice.gain(chosen) if chosen is advice.pick else None
        versus = f", {gain:.2f}× its default here" if gain is not None else ""
        note = (
            f"{target.label} does not run here; translated from {chosen.spec} "
            f"({rate_text(chosen.median_mbps)}{versus})"
        )
        out.append(Snippet.of(target.name, target.snippet(settings), model, None, note=note))
    return out


def in_loader_rounds(lines: list[Snippet], advice: LoaderAdvice) -> list[Snippet]:
    """The general lines with modelmon's own measured by its runs in the user's loader's
    rounds (the answer's figure) instead of the search's runs of the same configuration."""
    best = advice.modelmon
    if not best.results:
        return lines
    return [
        replace(
            line,
            measured_as=f"{best.spec} in your loader's rounds",
            mbps=best.median_mbps,
            runs=len(best.results),
        )
        if line.tool in OWN_TOOLS and line.measured_as == best.spec
        else line
        for line in lines
    ]


# The general snippets (``output.snippets``) that the user's engine's measured lines replace:
# they say the same thing, unmeasured or measured as a modelmon strategy.
SUPERSEDED = {
    "llamacpp": ("llama.cpp-no-mmap", "llama.cpp-direct-io"),
    "safetensors": ("safetensors-read",),
    "runai": ("vllm-runai_streamer",),
    "fastsafetensors": ("vllm-fastsafetensors",),
    "vllm": ("vllm-eager", "vllm-lazy", "vllm-prefetch"),
}


def superseded(advice: LoaderAdvice) -> tuple[str, ...]:
    """The general snippets the loader's own lines replace."""
    engines = [e for e in (advice.engine, advice.for_engine) if e is not None]
    return tuple(tool for engine in engines for tool in SUPERSEDED.get(engine, ()))


def loader_table(advice: LoaderAdvice) -> dict[str, Any]:
    """The config file's ``[loader]`` table (TOML has no null: absent keys are unknown)."""
    loader, pick, best = advice.loader, advice.pick, advice.modelmon

    def figures(prefix: str, candidate: Candidate) -> dict[str, Any]:
        if not candidate.results:
            return {f"{prefix}_ended": candidate.reason or candidate.ended}
        return {
            f"{prefix}_mbps": rate_figure(candidate.median_mbps),
            f"{prefix}_runs": len(candidate.results),
            # Each run, in the order run: the spread behind the median, to compare with the
            # same configuration run again.
            f"{prefix}_run_mbps": [rate_figure(r.mbps) for r in candidate.results],
        }

    table: dict[str, Any] = {"as_is": loader.spec, **figures("as_is", loader)}
    if advice.engine is not None:
        table["engine"] = advice.engine
        if advice.engine_found:
            table["engine_found"] = advice.engine_found
    if advice.for_engine is not None:
        table["for_engine"] = advice.for_engine
    if pick is not None:
        table["change"] = pick.spec
        table |= figures("change", pick)
        table["baseline"] = advice.baseline_of(pick).spec
        gain = advice.gain(pick)
        if gain is not None:
            table["gain"] = round(gain, 3)
    table["modelmon"] = best.spec
    table |= figures("modelmon", best)
    table["rounds"] = advice.rounds
    return table


def _why_kept(advice: LoaderAdvice, best: Candidate, ratio: float) -> str:
    """Why modelmon's best, faster by ``ratio`` in the rounds, is not the answer where the
    answer keeps the loader ("" where it is the answer, or where it is not faster): the rule
    a change is picked by (``clearly_gains``) does not hold of it against the loader."""
    verdict, loader = best.verdict, advice.loader
    if advice.pick is not None or ratio < MIN_GAIN or clearly_gains(best, loader):
        return ""
    if verdict is None:
        return ", yet not the answer: no round paired it with your loader"
    if verdict.within_timing:
        return (
            f", yet not the answer: its loads are timed to the watch's samples, "
            f"±{verdict.resolution * 100:.0f} % on a ratio"
        )
    if verdict.text == "B faster" and verdict.median_ratio < MIN_GAIN:
        return (
            f", yet not the answer: pair by pair it was {verdict.median_ratio:.2f}× your loader, "
            f"less than the {MIN_GAIN - 1:.0%} worth a change"
        )
    if verdict.text == "B faster":
        return (
            f", yet not the answer: it completed {verdict.pairs} of the "
            f"{len(loader.results)} rounds your loader did"
        )
    return (
        f", yet not the answer: round by round it was {verdict.min_ratio:.2f}–"
        f"{verdict.max_ratio:.2f}× your loader, so the gain is not certain (a longer budget "
        "runs more rounds)"
    )
