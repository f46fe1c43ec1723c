"""The config file: a measured configuration and its evidence, as a document built from the
runs (``build_document``, ``recommendation_document``). Rendered as TOML with the comments a
value needs, and written, by ``output.config_text``; its format, and reading it back, are
``loading.config_file``'s."""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelmon.core.loading.config_file import FORMAT_VERSION
from modelmon.core.loading.identity import model_identity
from modelmon.core.measuring.ceiling_records import keeps_bytes
from modelmon.core.model.formats.opening import open_model_file
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions, MiB
from modelmon.core.output.answer import answered
from modelmon.core.output.config_text import IN_RAM, NOTHING_CACHED
from modelmon.core.output.explain import explain
from modelmon.core.output.not_picked import PICK, why_not_picked
from modelmon.core.output.snippets import Snippet, matching, servers_left_out, snippets
from modelmon.core.output.told import as_told
from modelmon.core.system.memory import memory_facts
from modelmon.core.system.storage import RAM_FS_TYPES, storage_facts
from modelmon.core.units import rate_figure, rate_text

if TYPE_CHECKING:
    from modelmon.core.loading.result import LoadResult
    from modelmon.core.measuring.advice import LoaderAdvice
    from modelmon.core.measuring.candidate import Candidate
    from modelmon.core.measuring.ceiling_records import Ceilings
    from modelmon.core.measuring.judging import Duel
    from modelmon.core.measuring.recommend import Recommendation

OWN = "modelmon's best"  # the file's pick where another loader is the answer's
FINGERPRINT_BYTES = 1 << 20  # the head of each file: headers hold every name and offset


def fingerprint(model: Model) -> str:
    """Names, sizes and the head of every file: changes when the model does, cheap to take."""
    digest = hashlib.blake2b(digest_size=16)
    for file in model.files:
        digest.update(f"{Path(file.path).name}\0{file.size}\0".encode())
        if file.remote is not None:  # an object's ETag changes with its bytes
            digest.update(f"{file.remote.etag}\0{file.remote.last_modified}".encode())
            continue
        with open_model_file(file.path) as handle:  # a file swapped for a FIFO: no hang
            digest.update(handle.read(FINGERPRINT_BYTES))
    return digest.hexdigest()


def storage_table(model: Model) -> dict[str, Any]:
    """Where the model's bytes come from: the file system and device of a file, or the
    object storage of a bucket (endpoint, region, host kind; never a credential)."""
    remote = model.files[0].remote
    if remote is not None:
        described: dict[str, str | None] = {
            "storage": remote.storage,
            "endpoint": remote.endpoint,
            "region": remote.region,  # None for an http(s) server: TOML has no null
            "host_kind": remote.host_kind,
            "ranges": remote.ranges,
        }
        return {"object_storage": {k: v for k, v in described.items() if v is not None}}
    facts = storage_facts(model.files[0].path)
    table: dict[str, Any] = {
        "fs_type": facts.fs_type,
        "device": facts.block_device or facts.source,
        "network": facts.is_network,
        "fuse": facts.is_fuse,
    }
    if facts.rotational is not None:
        table["rotational"] = facts.rotational
    if facts.read_ahead_kb is not None:
        table["read_ahead_kb"] = facts.read_ahead_kb
    return table


def build_document(
    model: Model,
    winner: Candidate,
    ranked: Sequence[Candidate],
    ceilings: Ceilings | None,
    explanation: Sequence[str],
    *,
    config_name: str,
    cache: str,
    usable_ram: int,
    memory_limit: int | None = None,
    budget_s: float | None = None,
    peers: Sequence[Candidate] = (),
    pick: Candidate | None = None,
    evidence_lines: Callable[[list[Snippet]], list[Snippet]] | None = None,
    above: Callable[[Candidate], str] | None = None,
    duel: Duel | None = None,
) -> dict[str, Any]:
    """The config document for ``winner``, measured on ``model``.

    ``ranked``: every configuration measured, best first (``winner`` among them; the others
    become the alternatives). ``cache``: the verified page-cache state every run started
    from. ``usable_ram``/``memory_limit``: the RAM the search allowed (the limit only when
    one was set). ``budget_s``: the seconds of a budgeted search, or None (an A/B has none).
    ``peers``: other loaders measured beside modelmon, so their snippets carry their figures.
    ``pick``: the overall pick when it is not ``winner`` (a peer that beat modelmon's best).
    ``evidence_lines``: the [apply] lines as [apply_evidence] tells what measured them
    (modelmon's own by its runs in the user's loader's rounds, ``in_loader_rounds``).
    ``above``: why an alternative whose median is above ``winner``'s is not the pick
    (``not_picked.why_not_picked``), said in its note. ``duel``: how the pick was settled,
    whose other finalist a streamer is told for a one-connection pick. Reads the head of
    every model file for the fingerprint.
    """
    machine: dict[str, Any] = {
        "ram_bytes": memory_facts().total,
        "usable_ram_bytes": usable_ram,
        "cpus": os.cpu_count() or 1,
        "kernel": platform.release(),
    }
    machine |= storage_table(model)
    if memory_limit is not None:
        machine["memory_limit_bytes"] = memory_limit
    runs = winner.results
    ceiling_items = ceilings.items if ceilings is not None else ()
    evidence: dict[str, Any] = {
        "runs": len(runs),
        **cache_evidence(model, runs, cache),
        "median_mbps": rate_figure(winner.median_mbps),
        "min_mbps": rate_figure(min(r.mbps for r in runs)),
        "max_mbps": rate_figure(max(r.mbps for r in runs)),
        "median_seconds": round(sorted(r.seconds for r in runs)[len(runs) // 2], 4),
        "ceilings_mbps": {c.name: rate_figure(c.mbps) for c in ceiling_items},
    }
    if budget_s is not None:
        evidence["budget_seconds"] = budget_s
    # What its runs held: the load's own processes, and all of modelmon's.
    evidence["peak_rss_bytes"] = max(r.workers_peak_rss for r in runs)
    trees = [r.process_tree_peak_rss for r in runs]
    if all(tree is not None for tree in trees):
        evidence["process_tree_peak_rss_bytes"] = max(t for t in trees if t is not None)
    if ceilings is not None:
        evidence |= bound_evidence(ceilings, winner)
    chosen = pick or winner
    lines = snippets(model, winner, tuple(ranked), config_name, tuple(peers), duel)
    evidence_of = _evidence(evidence_lines(lines) if evidence_lines is not None else lines)
    if chosen is not winner:
        evidence_of["modelmon"] += (
            f"; modelmon's best: the overall pick is {chosen.spec} at "
            f"{rate_text(chosen.median_mbps)}, see [recommendation]"
        )
    matched = matching(lines, chosen)
    return {
        "format_version": FORMAT_VERSION,
        "model": {
            "path": model.path,
            "bytes": model.file_bytes,
            "format": model.format,
            "files": len(model.files),
            "fingerprint": fingerprint(model),
        },
        "machine": machine,
        "recommended": recommended_table(winner.strategy, winner.options),
        "evidence": evidence,
        "alternatives": [
            {
                "rank": rank,
                "strategy": c.strategy,
                "spec": c.spec,
                "median_mbps": rate_figure(c.median_mbps),
                "runs": len(c.results),
                **({"note": note} if (note := _note(c, above)) else {}),
            }
            # The pick is 1, as every ranking shows it (a simpler pick may have the lower
            # median: ``ranked`` is by median), the others after it in their order.
            for rank, c in enumerate((c for c in ranked if c is not winner), 2)
        ],
        "apply": {s.tool: s.text for s in lines},
        "apply_evidence": evidence_of,
        **_left_out(model, [s.tool for s in lines]),
        "explanation": list(explanation),
        "identity": model_identity(model),
        "recommendation": {
            "pick": chosen.spec,
            "loader": "modelmon" if chosen.own is not None else chosen.spec,
            "median_mbps": rate_figure(chosen.median_mbps),
            "runs": len(chosen.results),
            "in_config": chosen is winner,
            **({"apply": matched} if matched else {}),
        },
    }


def cache_evidence(model: Model, runs: Sequence[LoadResult], asked: str) -> dict[str, Any]:
    """[evidence]'s ``cache`` and ``all_runs_verified`` of ``runs`` of ``model`` that asked
    for ``asked`` (cold or warm): the state asked for where the runs could start from it,
    with whether every one was verified to; else what they started from, with nothing to
    verify (a bucket's) or unverified (a file in RAM): a state never reached is never named."""
    if runs and all(r.cache.nothing_local for r in runs):
        return {"cache": NOTHING_CACHED}
    in_ram = model.files[0].remote is None and storage_facts(model.files[0].path).fs_type in (
        RAM_FS_TYPES
    )
    if asked == "cold" and in_ram:
        return {"cache": IN_RAM, "all_runs_verified": False}
    verified = all(r.cache.warm if asked == "warm" else r.cache.cold for r in runs)
    return {"cache": asked, "all_runs_verified": verified}


def bound_evidence(ceilings: Ceilings, winner: Candidate) -> dict[str, Any]:
    """The evidence's bound: the storage's and the memory fill's rates, the bound of the
    winner's load (discard or mapped: the storage; keeping its bytes: the lower of both),
    its runs and their spread (none of one run: one read has no spread), what each was
    measured with, and the winner's fraction of it."""
    keeps = keeps_bytes(winner.strategy, winner.options.discard)
    efficiency = ceilings.efficiency(winner.median_mbps, keeps)
    if efficiency is None:
        return {}
    storage, fill = ceilings.get("storage"), ceilings.get("memory_fill")
    bound: dict[str, Any] = {
        "bound": efficiency.bound.name,
        "bound_mbps": rate_figure(efficiency.bound.mbps),
        "bound_runs": len(efficiency.bound.runs),
        "load_keeps_bytes": keeps,
    }
    if len(efficiency.bound.runs) > 1 or efficiency.bound.slack > 0:
        bound["spread"] = round(efficiency.bound.spread, 3)
    keeping = ceilings.get("keeping_read")
    for name, ceiling in (("storage", storage), ("memory_fill", fill), ("keeping_read", keeping)):
        if ceiling is not None:
            bound[f"{name}_mbps"] = rate_figure(ceiling.mbps)
            bound[f"{name}_measured_with"] = ceiling.spec
    return {
        "ceiling": efficiency.bound.name,
        "fraction_of_ceiling": round(efficiency.fraction, 3),
        "above_bound": efficiency.above,
        "bound": bound,
    }


def recommended_table(strategy: str, options: LoadOptions) -> dict[str, Any]:
    """The [recommended] table: the strategy and the options it uses (no others: a knob it
    ignores would read as if it mattered); a chunk of whole MiB as ``chunk_mib``."""
    from modelmon.core.loading.strategies import get_strategy

    uses = get_strategy(strategy).uses
    table: dict[str, Any] = {"strategy": strategy}
    for name, value in options.to_dict().items():
        if name not in uses:
            continue
        if name == "chunk" and value % MiB == 0:
            table["chunk_mib"] = value // MiB
        else:
            table[name] = value
    return table


def recommendation_document(
    rec: Recommendation,
    config_name: str,
    memory_limit: int | None = None,
    advice: LoaderAdvice | None = None,
    loader_note: str = "",
) -> dict[str, Any]:
    """The config document for the result of ``recommend`` (every run asked to start cold).
    ``advice``: the user's loader measured beside it (``recommend --loader/--engine``): its
    sentences lead the explanation, its engine's snippets are marked measured, and
    ``[loader]`` holds its figures; ``loader_note``: why the loader was not measured."""
    from modelmon.core.output.loader import (
        in_loader_rounds,
        loader_explanation,
        loader_snippets,
        loader_table,
        superseded,
    )

    rec = as_told(rec, advice)  # one record: the answer's figures in every section
    lead = loader_explanation(advice) if advice is not None else []
    lead += [loader_note] if loader_note else []
    rounds = (advice.loader, *advice.changes) if advice is not None else ()
    ran = frozenset(c.spec for c in rounds if c.results)  # in the loader's rounds
    document = build_document(
        rec.model,
        rec.winner,
        rec.ranked,
        rec.ceilings,
        [*lead, *explain(rec, measured=ran)],
        config_name=config_name,
        cache="cold",
        usable_ram=rec.usable_ram,
        memory_limit=memory_limit,
        budget_s=rec.budget.given_s,
        peers=rec.peers,
        pick=rec.used,
        evidence_lines=None if advice is None else (lambda lines: in_loader_rounds(lines, advice)),
        # The file's pick is rank 1; a peer that beat it is the answer's, not the file's.
        above=lambda c: why_not_picked(rec, c, rec.winner, PICK if rec.used is rec.winner else OWN),
        duel=rec.duel,
    )
    if advice is not None:
        lines = loader_snippets(advice, rec.model)
        mine = {s.tool: s.text for s in lines}
        dropped = {*mine, *superseded(advice)}
        for table, own in (("apply", mine), ("apply_evidence", _evidence(lines))):
            kept = {k: v for k, v in document[table].items() if k not in dropped}
            document[table] = own | kept
        document["recommendation"] = _answer_table(advice, lines, document["recommendation"])
        if not _left_out(rec.model, list(document["apply"])):  # the loader's own lines serve it
            document.pop("apply_left_out", None)
        document["loader"] = loader_table(advice)
    if rec.limit_probes is not None:
        document["evidence"]["memory_limit"] = rec.limit_probes.to_dict()
    return document


def _answer_table(
    advice: LoaderAdvice, lines: Sequence[Snippet], search: dict[str, Any]
) -> dict[str, Any]:
    """[recommendation] with the user's loader: what the answer says to run (the change,
    modelmon's best, or the loader as it is), its figures in the loader's rounds, and the
    [apply] line that does it."""
    chosen = answered(advice)
    if chosen is None:  # the loader did not complete: the search's pick is the answer
        return search
    own = chosen is advice.modelmon
    table: dict[str, Any] = {
        "pick": chosen.spec,
        "loader": "modelmon" if own else chosen.spec,
        "median_mbps": rate_figure(chosen.median_mbps),
        "runs": len(chosen.results),
        "in_config": own,
    }
    tool = "modelmon" if own else matching(list(lines), chosen) or (lines[0].tool if lines else "")
    return table | ({"apply": tool} if tool else {})


def _left_out(model: Model, tools: Sequence[str]) -> dict[str, Any]:
    """The [apply_left_out] table: why a loader people use has no line in [apply] (vLLM's
    and SGLang's, for weights they cannot serve); empty where nothing is left out."""
    servers = servers_left_out(model, tools)
    return {"apply_left_out": {"servers": servers}} if servers else {}


def _evidence(lines: Sequence[Snippet]) -> dict[str, str]:
    """The [apply_evidence] table: what stands behind each [apply] line, by tool."""
    return {s.tool: s.evidence() for s in lines}


def _note(candidate: Candidate, above: Callable[[Candidate], str] | None) -> str:
    """An alternative's note: its role, the bound of a run stopped early, and why one ranked
    above the pick by its median is not the pick (``above``)."""
    parts = [candidate.role] if candidate.role else []
    if not candidate.results and candidate.stopped_below_mbps is not None:
        # A rate of 0 bounds nothing: stopped before its first byte, it has no rate.
        said = (
            "median_mbps is the bound it stayed under"
            if candidate.stopped_below_mbps > 0
            else "stopped before any byte arrived, so median_mbps is no rate"
        )
        parts.append(f"{candidate.reason or 'stopped early'}: {said}")
    why = above(candidate) if above is not None else ""
    return "; ".join([*parts, why] if why else parts)
