"""A recommendation as the window shows it: the ranking with each candidate against the pick,
and the apply snippets marked measured or not. Qt-free.

The ranking is also the regret-style comparison: "vs the pick" is what a user loses (or, for
a peer beaten on paper, gains) by loading with that candidate instead of the pick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelmon.core import Candidate, Recommendation
from modelmon.core.output import (
    Answer,
    answered,
    apart_text,
    in_loader_rounds,
    loader_snippets,
    paired_verdict,
    pick_speedup,
    search_memory_text,
    servers_left_out,
    spread_words,
    times_text,
    weighed_against,
    why_not_picked,
)
from modelmon.core.output import recommendation_answer as answer
from modelmon.core.output import recommendation_snippets as snippets
from modelmon.gui.state.formatting import rate_text

RANKING_COLUMNS = (
    "#",
    "candidate",
    "runs",
    "median",
    "spread (min–max)",
    "vs the pick",
    "paired with the pick",
    "how it ended",
)
SNIPPET_COLUMNS = ("tool", "how to apply it", "measured here")


@dataclass(frozen=True, slots=True)
class RankingRow:
    cells: tuple[str, ...]  # in RANKING_COLUMNS order
    picked: bool
    in_config: bool  # the modelmon configuration the written file holds


PICK = "the pick"
SEARCH_BEST = "modelmon's best (search)"  # the search's pick beside the answer of a loader


def versus_pick(candidate: Candidate, pick: Candidate, name: str = PICK, tied: bool = False) -> str:
    """ "the pick", "−54 % (the pick is 2.18× faster)", "+2 %"; "–" unmeasured. Against the
    finalist it was paired with, the pairs' median ("+48 % by the median pair"): the figure
    the explanation gives. ``name``:
    what the pick is called; ``tied``: the search found the two within noise, which is said
    instead of a gain."""
    if candidate is pick:
        return name
    if pick.median_mbps <= 0 or not (candidate.results or candidate.stopped_below_mbps):
        return "–"
    speedup = pick_speedup(pick, candidate) if candidate.results else None
    if speedup is None:  # stopped before a run completed: its bound against the pick's median
        speedup = pick.median_mbps / (candidate.stopped_below_mbps or pick.median_mbps)
    bound = "under " if not candidate.results else ""
    change = bound + percent_change((1 / speedup - 1) * 100)
    if candidate.results and paired_verdict(candidate) is not None:
        # The pairs' median, not the ratio of the medians shown in the rate column: said so.
        change += " by the median pair"
    if tied:
        return f"{change} (within noise of {name})"
    if speedup > 1:  # of a run cut early, a bound: "at least", as the explanation says
        least = "at least " if bound else ""
        return f"{change} ({name} is {least}{times_text(speedup)} faster)"
    return change


def percent_change(percent: float) -> str:
    """ "+2 %", "−41 %"; a change under half a percent keeps a decimal ("−0.3 %"), so that
    no figure reads as a signed zero, and none at all is "0 %"."""
    if round(percent, 1) == 0:
        return "0 %"
    text = f"{percent:+.0f} %" if abs(percent) >= 0.5 else f"{percent:+.1f} %"
    return text.replace("-", "−")


def paired_text(candidate: Candidate, name: str = PICK) -> str:
    """Its paired runs against the pick (the finals; or against what ``name`` says) in
    words: who was faster, by the pairs' median, how far the pairs ranged and how many of
    them agree."""
    verdict = candidate.verdict
    if verdict is None:
        return "–"
    ratio = verdict.median_ratio  # this / the pick, pair by pair
    low, high = verdict.min_ratio, verdict.max_ratio
    if ratio <= 0:
        return "–"
    who, gain, low, high = (
        (name, 1 / ratio, 1 / high, 1 / low) if ratio < 1 else ("this one", ratio, low, high)
    )
    verdicts = {"A faster": f"{name} faster", "B faster": "this one faster"}
    said = verdicts.get(verdict.text, verdict.text)
    if verdict.pairs < 2:
        # One pair estimates no noise: the search weighed all their runs, whose figure "vs
        # the pick" gives (as the explanation); the pair's own ratio would be a second one.
        return "one pair: too few to estimate the pairs' noise, so all their runs decided"
    return (
        f"{said}: {who} {times_text(gain)} by the median pair (pairs "
        f"{low:.2f}–{high:.2f}×, {spread_words(verdict.noise, verdict.pairs)})"
    )


def ended_text(candidate: Candidate) -> str:
    """ "cut early: 4× behind the leader; failure mode": how, why, and its role."""
    ended, reason = candidate.ended, candidate.reason
    parts = [reason if reason.startswith(ended) else ended]
    if reason and not reason.startswith(ended):
        parts.append(reason)
    if candidate.role:
        parts.append(candidate.role)
    return "; ".join(parts)


def median_text(c: Candidate) -> str:
    if not c.results and c.stopped_below_mbps is not None:  # stopped before any byte
        bound = c.stopped_below_mbps
        return f"under {rate_text(bound)}" if bound > 0 else "nothing loaded"
    return rate_text(c.median_mbps) if c.results else "–"


def not_first_words(rec: Recommendation, name: str = PICK) -> str:
    """Why the pick (called ``name``) leads the ranking though a higher median follows it."""
    duel = rec.duel
    # No pair fitted the budget, or one (which estimates no noise): all their runs decided.
    if duel is not None and duel.tie and (duel.verdict is None or duel.pairs < 2):
        if duel.noise is None:
            return f"their runs are within twice their noise, and {name} is the simpler"
        # Their ratio beside the one their noise allows, as the answer and the why say it.
        ratio = pick_speedup(rec.used, duel.other) or 0.0
        weighed = weighed_against(duel.noise, ratio)
        return f"their runs are {apart_text(ratio)}, {weighed}, and {name} is the simpler"
    if duel is not None and duel.tie:
        return f"paired runs did not separate them, and {name} is the simpler"
    if duel is not None and duel.verdict is not None:
        return f"paired runs, in alternation, put {name} ahead"
    return "its runs decided against theirs on their spread"


def spread_cell(candidate: Candidate) -> str:
    """The "spread (min–max)" cell: its runs' lowest and highest rates; "–" of one run,
    whose rate is the median's (a range of one value says nothing)."""
    spread = candidate.spread_mbps
    if spread is None or len(candidate.results) < 2:
        return "–"
    return f"{rate_text(spread[0])}–{rate_text(spread[1])}"


def loader_rows(advice: Any) -> list[RankingRow]:
    """The user's loader's rounds (``LoaderAdvice``): the answer first (the change picked,
    modelmon's best, or the loader as it is), then the loader as it is, each change of it
    (the engine's knobs, its environment, the device's readahead) against its baseline,
    measured before unmeasured, and modelmon's best in the same rounds."""
    loader, chosen = advice.loader, answered(advice)
    order = [loader, *advice.changes, advice.modelmon]
    order.sort(key=lambda c: (c is not chosen, c is not loader, not c.results))
    rows = []
    for c in order:
        if c is loader:
            versus, paired = "your loader as it is", "–"
            versus += ": the answer, keep it" if chosen is loader else ""
        elif not c.results:  # why it has no figure, where the eye looks for one
            versus, paired = c.reason or c.ended or "not measured", "–"
        else:
            base = advice.loader if c is advice.modelmon else advice.baseline_of(c)
            gain = advice.gain(c)
            named = "your loader" if base is loader else base.spec
            versus = f"{times_text(gain)} {named} as it is" if gain else "–"
            paired = paired_text(c, "its baseline") if c.verdict else "–"
            versus += ": the answer" if c is chosen else ""
        named = "yours" if c is loader else "modelmon" if c is advice.modelmon else "change"
        spec = f"{c.spec} (in your loader's rounds)" if c is advice.modelmon else c.spec
        rows.append(
            RankingRow(
                (
                    named,
                    spec,
                    str(len(c.results)),
                    median_text(c),
                    spread_cell(c),
                    versus,
                    paired,
                    ended_text(c),
                ),
                c is chosen,
                False,
            )
        )
    return rows


def ranking_rows(rec: Recommendation, advice: Any = None) -> list[RankingRow]:
    """Every candidate, modelmon's and the peers', best first; the unmeasured last. With the
    user's loader (``advice``), its rounds lead (``loader_rows``), and the answer is one of
    theirs: the search's pick is modelmon's best, measured in the search's own rounds."""
    pick = rec.used
    answer_is_search = advice is None or answered(advice) is None
    # The pick is one of the loader's rounds (above) where the answer is the loader's.
    name = PICK if answer_is_search else SEARCH_BEST
    why = not_first_words(rec, name)
    others = sorted((*rec.ranked, *rec.peers), key=lambda c: c.median_mbps, reverse=True)
    # The pick leads; a higher median below it says why it is not the pick.
    measured = [pick, *(c for c in others if c is not pick)]
    faster = [c for c in others if c.results and c.median_mbps > pick.median_mbps]
    rows = loader_rows(advice) if advice is not None else []
    for rank, c in enumerate((*measured, *rec.unranked), 1):
        median = median_text(c)
        ended = ended_text(c)
        if c is pick and faster:
            # Its duel explains it only where its other finalist is among the faster.
            raced = rec.duel is not None and rec.duel.other in faster
            said = why if raced else f"each row with a higher median says why it is not {name}"
            ended = f"{name}: {said}; {ended}"
        elif c in faster:  # why this one is not the pick: its own record, as the file says
            ended = f"not picked: {why_not_picked(rec, c, pick, name)}; {ended}"
        tied = rec.duel is not None and rec.duel.other is c and rec.duel.tie
        versus, paired = versus_pick(c, pick, name, tied), paired_text(c, name)
        if not c.results and versus == "–":  # why it has no figure, where one is looked for
            versus = c.reason or c.ended or "not measured"
        rows.append(
            RankingRow(
                (
                    str(rank) if c in measured else "",
                    c.spec,
                    str(len(c.results)),
                    median,
                    spread_cell(c),
                    versus,
                    paired,
                    ended,
                ),
                c is pick and answer_is_search,
                c is rec.winner,
            )
        )
    return rows


def snippet_rows(
    rec: Recommendation,
    config_name: str,
    advice: Any = None,
    apply_tools: tuple[str, ...] = (),
) -> list[tuple[str, str, str]]:
    """(tool, snippet, measured here as … / not measured here) for each loader people use.
    With the user's loader (``advice``), its engine's lines lead, measured (or translated),
    and the general lines they replace are left out (the config's [apply]: ``apply_tools``)."""
    mine = loader_snippets(advice, rec.model) if advice is not None else []
    general = snippets(rec.model, rec.winner, rec.ranked, config_name, rec.peers, rec.duel)
    if advice is not None:
        general = in_loader_rounds(general, advice)  # the answer's figure of modelmon's
        shown = {s.tool for s in mine}
        general = [s for s in general if s.tool in apply_tools and s.tool not in shown]
    rows = []
    for s in (*mine, *general):
        rows.append((s.tool, s.text, s.evidence()))
    return rows


def left_out_text(rec: Recommendation, rows: list[tuple[str, str, str]]) -> str:
    """Why a loader people use has no row among ``rows`` (``snippet_rows``): the config's
    [apply_left_out]; "" where none is left out."""
    return servers_left_out(rec.model, [tool for tool, _, _ in rows])


def recommendation_stopped(
    cancelled: bool, error: str, previous: bool = False
) -> tuple[str, str, str]:
    """(progress bar, Recommendation tab, message) of a search that ended without a
    recommendation. A cancel says so once: the engine's own "recommendation cancelled" is
    not appended to "cancelled". With ``previous`` (an earlier answer stays shown), the
    tab's words head that answer and say it is the earlier one."""
    if cancelled:
        said = "Recommendation cancelled"
        if previous:
            return (
                said,
                "The new recommendation was cancelled: the answer below is the previous one "
                "(File ▸ Export recommended configuration… still writes it).",
                "No new recommendation: cancelled; the previous answer stays",
            )
        return said, f"{said}: nothing to export.", "No recommendation: cancelled"
    if previous:
        return (
            "Recommendation failed",
            f"The new recommendation failed ({error}): the answer below is the previous one.",
            f"No new recommendation: {error}; the previous answer stays",
        )
    return (
        "Recommendation failed",
        f"Recommendation failed: {error}",
        f"No recommendation: {error}",
    )


def where_words(exported_to: str | None, kept_to: str | None) -> str:
    """Where the answer's config file is: exported, kept by the app, or neither yet."""
    if exported_to:
        return f"Exported to {exported_to}."
    if kept_to:
        return (
            f"Its config file is kept at {kept_to}; File ▸ Export recommended configuration… "
            "writes it where you want it."
        )
    return "File ▸ Export recommended configuration… writes it as a config file."


def summary_text(
    rec: Recommendation,
    exported_to: str | None = None,
    advice: Any = None,
    config_name: str = "modelmon.toml",
    found: Answer | None = None,
    kept_to: str | None = None,
) -> str:
    """The headline: the one answer (what to do, and what it gains against what the user
    runs now), then how long the search took, its memory, and where its config file is.
    ``found``: that answer, when the caller has it already."""
    found = found if found is not None else answer(rec, config_name, advice)
    head = f"{found.action} {found.gain}"
    where = where_words(exported_to, kept_to)
    memory = search_memory_text(rec)
    took, given = rec.budget.elapsed_s, rec.budget.given_s
    searched = (
        f"modelmon's own search took {took:.0f} s (its share of the budget: {given:.0f} s; "
        "your loader's rounds had the rest)"
        if advice is not None
        else f"The search took {took:.0f} s; the budget was {given:.0f} s"
    )
    return f"{head}\n{searched}. {memory[0].upper()}{memory[1:]}. {where}"


def answer_texts(
    rec: Recommendation,
    exported_to: str | None,
    advice: Any,
    config_name: str,
    kept_to: str | None = None,
) -> tuple[str, str, str]:
    """(the headline, the line to paste, what measured it) of one answer; the line and its
    evidence are "" when there is nothing to change."""
    found = answer(rec, config_name, advice)
    headline = summary_text(rec, exported_to, advice, config_name, found, kept_to)
    if found.paste is None:
        return headline, "", ""
    return headline, found.paste.text, f"{found.paste.tool}: {found.paste.evidence()}"
