"""A ranks recommendation in words and as a config file: the answer first (the way that holds
and is fastest, its time, the node's memory, the smallest limit it holds at, the line to
paste), then each way measured with what it needs of the node; or, when nothing fits, what
would."""

from __future__ import annotations

import os
import shlex
from typing import Any

from modelmon.core.measuring.ranks_records import RANKS_MODE_WORDS
from modelmon.core.measuring.ranks_search import NOISE, REPEATS, RanksRecommendation, WayMeasured
from modelmon.core.output.config import fingerprint, recommended_table
from modelmon.core.output.config_text import render
from modelmon.core.output.paste import modelmon_command
from modelmon.core.output.run_words import counted, median_words, not_certain
from modelmon.core.system.memory_limit import ram_text, size_text


def _limit_flag(count: int) -> str:
    """A limit as --memory-limit takes it: whole MiB, or GiB when it is whole GiB."""
    mib = -(-count // 2**20)
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def paste_lines(found: RanksRecommendation, config_path: str | None) -> dict[str, str]:
    """The lines to paste for the pick, with absolute paths, by tool."""
    pick = found.pick
    if pick is None:
        return {}
    model = os.path.abspath(found.model) if "://" not in found.model else found.model
    config = f" --config {os.path.abspath(config_path)}" if config_path else ""
    # The limit the runs held under: the smallest one where a run under it held, else the
    # one asked for.
    held = found.holds_at if found.holds_verified else found.memory_limit
    limit = f" --memory-limit {_limit_flag(held)}" if held else ""
    lines = {
        "modelmon": f"{modelmon_command()} load {shlex.quote(model)} --ranks {found.ranks} "
        f"--ranks-mode {pick.way.mode}{config}{limit}",
    }
    called = f"config={os.path.abspath(config_path)!r}, " if config_path else ""
    if pick.way.mode == "slice":
        lines["python"] = (
            f"import modelmon.core; tensors = modelmon.core.load({model!r}, {called}rank=(RANK, "
            f"{found.ranks}))  # in each "
            "rank (RANK: its number): its part of every tensor, as numpy arrays "
            "(torch.from_numpy: no copy)"
        )
    elif pick.way.mode == "whole":
        lines["python"] = (
            f"import modelmon.core; tensors = modelmon.core.load({model!r}, "
            f"{called.rstrip(', ')})  # in each rank: every "
            "tensor, then keep its part"
        )
    else:
        lines["engines"] = (
            "one reader for the node: Run:ai's streamer with RUNAI_STREAMER_DIST=1 (one "
            "reads, the ranks get it over torch.distributed), or one process copying the "
            "weights to /dev/shm that every rank maps"
        )
    return lines


def same_speed(way: WayMeasured, pick: WayMeasured) -> bool:
    """Whether ``way``'s slowest rank is within ``NOISE`` of the pick's: the same speed, as
    the search takes it (the one that holds less is picked among such)."""
    if way is pick or way.seconds is None or pick.seconds is None or pick.seconds <= 0:
        return False
    return way.seconds <= pick.seconds * (1 + NOISE)


def same_speed_words(found: RanksRecommendation) -> str:
    """The ways within ``NOISE`` of the pick, said as one sentence ("" where none): a "+2 %
    slower" beside it is no difference the runs can tell."""
    pick = found.pick
    if pick is None:
        return ""
    close = [w for w in found.ways if w.fits and same_speed(w, pick)]
    if not close:
        return ""
    named = "; ".join(
        f"{w.way.spec} ({w.seconds or 0:.2f} s, {ram_text(w.held_bytes or 0)} held)" for w in close
    )
    peak = pick.peak_bytes or 0
    cache = (
        f"; its node peak of {ram_text(peak)} is mostly page cache, which a limit reclaims"
        if peak > (pick.held_bytes or 0) * 1.25
        else ""
    )
    return (
        f"Within {NOISE:.0%} of the pick's {pick.seconds or 0:.2f} s (ways this close are the "
        f"same speed to the search): {named}; among such the search takes the one that holds "
        f"the least, what a memory limit cannot reclaim: {ram_text(pick.held_bytes or 0)} "
        f"held by the pick{cache}."
    )


def _way_line(way: WayMeasured, ranks: int) -> str:
    name = f"{way.way.spec:<44}"
    if way.refused is not None:
        return f"  {name} does NOT fit: {way.refused}"
    if way.failure is not None:
        return f"  {name} did NOT hold: {way.failure}"
    if way.seconds is None:
        return f"  {name} not measured (the budget ran out)"
    peak = f"node peak {ram_text(way.peak_bytes)}" if way.peak_bytes else "node peak unknown"
    held = f", {ram_text(way.held_bytes)} held" if way.held_bytes else ""
    runs = median_words(counted(len(way.ok_runs), "run"), len(way.ok_runs))
    return f"  {name} slowest rank {way.seconds:.2f} s ({runs}), {peak}{held}"


def render_ranks_answer(found: RanksRecommendation, config_path: str | None) -> str:
    """The answer in words, first line first."""
    limit = f" within {size_text(found.memory_limit)}" if found.memory_limit else ""
    lines = []
    pick = found.pick
    if pick is None:
        least = found.least_needed()
        ran = [w for w in found.ways if w.refused is None and w.runs]
        lines.append(
            f"Does not fit{limit}: {found.ranks} ranks of this model hold more than "
            f"{ram_text(least)} of weights in the least of its ways, and their processes "
            "more beside; none held."
        )
        if ran and found.memory_limit:
            lines.append(
                f"What would fit: more than {size_text(found.memory_limit)} (the "
                f"{len(ran)} way(s) that ran under it did not hold), or fewer ranks per node."
            )
        else:
            lines.append(
                f"What would fit: a limit well above {ram_text(least)}, with room for the "
                f"ranks' {found.ranks} processes, or fewer ranks per node (each one-reader or "
                "slice rank adds little beyond one copy)."
            )
    else:
        holds = (
            (
                f"; it held under a {ram_text(found.holds_at)} limit"
                if found.holds_verified
                else f"; a {ram_text(found.holds_at)} limit should hold it (not run at it)"
            )
            if found.holds_at
            else ""
        )
        runs = len(pick.ok_runs)
        hedge = not_certain(counted(runs, "run")) if runs < REPEATS else ""
        lines.append(
            f"Load the {found.ranks} ranks {pick.way.mode} ({RANKS_MODE_WORDS[pick.way.mode]}) "
            f"with {pick.way.strategy}{limit}: the slowest rank has its weights in "
            f"{pick.seconds or 0:.2f} s, the node peaks at "
            f"{ram_text(pick.peak_bytes or 0)}{holds}.{hedge}"
        )
        for tool, line in paste_lines(found, config_path).items():
            lines.append(f"Paste ({tool}): {line}")
        close = same_speed_words(found)
        if close:
            lines.append(close)
    lines.append("")
    lines.append(f"Ways measured ({found.seconds:.0f} s of a {found.budget_s:.0f} s budget):")
    lines += [_way_line(way, found.ranks) for way in found.ways]
    return "\n".join(lines)


def ranks_document(found: RanksRecommendation, config_name: str) -> dict[str, Any]:
    """The config file of a ranks recommendation (``render`` writes it as TOML); its
    [recommended] table is the pick's strategy, so `load --config` applies it to each rank."""
    from modelmon.core.loading.config_file import FORMAT_VERSION
    from modelmon.core.loading.identity import model_identity
    from modelmon.core.model.formats import open_model

    model = open_model(found.model)
    document: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "model": {
            "path": found.model,
            "bytes": found.model_bytes,
            "format": model.format,
            "files": len(model.files),
            "fingerprint": fingerprint(model),
        },
        # What it was measured on: applied to another model, a load says so in one line.
        "identity": model_identity(model),
    }
    pick = found.pick
    ranks: dict[str, Any] = {"ranks": found.ranks, "fits": pick is not None}
    if found.memory_limit is not None:
        ranks["memory_limit_bytes"] = found.memory_limit
    if pick is not None:
        # keep, as recommend's own file: every run measured was made cold, but a load that
        # applies the file leaves the page cache as it finds it (a warm restart stays warm).
        options = pick.way.options.with_(cache="keep")
        document["recommended"] = recommended_table(pick.way.strategy, options)
        ranks |= {
            "mode": pick.way.mode,
            "slowest_rank_seconds": round(pick.seconds or 0.0, 4),
            "runs": len(pick.ok_runs),
            "node_peak_bytes": pick.peak_bytes or 0,
            "node_held_bytes": pick.held_bytes or 0,
        }
        if found.holds_at is not None:
            ranks["holds_at_bytes"] = found.holds_at
            ranks["holds_verified"] = found.holds_verified
        lines = paste_lines(found, config_name)
        document["apply"] = lines
        document["apply_evidence"] = {
            tool: (
                f"measured here: {len(pick.ok_runs)} runs of {found.ranks} ranks, {pick.way.spec}"
                if tool == "modelmon"
                else "the same reads in each rank's own process: not measured here as a call"
                if tool == "python"
                else "not measured here: what such engines do for one reader"
            )
            for tool in lines
        }
    else:
        ranks["least_needed_bytes"] = found.least_needed()
    document["ranks"] = ranks
    return document


def render_ranks_config(found: RanksRecommendation, config_name: str) -> str:
    return render(ranks_document(found, config_name))
